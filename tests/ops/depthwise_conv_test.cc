// DepthwiseConv (src/backends/cpu/depthwise_conv.h), channels-last depthwise convolutions,
// against a double-precision direct convolution on random data: 3x3, 5x5 and 7x7 kernels (the
// register strips) and 3x5 (pixel by pixel), strides 1 and 2 and unequal ones, full, one-sided
// and no padding, widths that leave strips of 8, 4 and 2 and single pixels, channel counts with
// whole blocks of vectors, single vectors and a partial one (masked lanes), two images, few rows
// (channel ranges as tasks), a residual and activations in registers (Swish, ReLU, Clip,
// HardSwish) and after (Tanh); every output checked, at each x86 level this CPU has (the AVX2 and
// AVX-512 forms). On arm64 the same cases check the NEON form.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/depthwise_conv.h"
#include "ops/epilogue_reference.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

// Whether this CPU has a form of the kernel (AVX2 on x86, NEON on arm64).
bool has_kernel() {
  return cpu::depthwise_conv_applies(8, 8, 8, {3, 3}, {1, 1});
}

struct Case {
  int64_t batch, h, w, c, kh, kw, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right;
  bool residual;
  cpu::GemmActivation act;
};

void check_cases() {
  const Case cases[] = {
      {1, 9, 31, 40, 3, 3, 1, 1, 1, 1, 1, 1, false, cpu::GemmActivation::kSwish},
      {2, 8, 23, 32, 3, 3, 2, 2, 0, 0, 1, 1, true, cpu::GemmActivation::kNone},
      {1, 7, 19, 13, 5, 5, 1, 1, 2, 2, 2, 2, false, cpu::GemmActivation::kTanh},
      {1, 11, 26, 72, 5, 5, 2, 2, 2, 2, 2, 2, true, cpu::GemmActivation::kRelu},
      {1, 14, 14, 24, 7, 7, 1, 1, 3, 3, 3, 3, false, cpu::GemmActivation::kClip},
      {1, 9, 21, 16, 7, 7, 2, 2, 3, 3, 3, 3, false, cpu::GemmActivation::kSwish},
      {1, 6, 17, 8, 3, 5, 1, 2, 1, 2, 1, 2, true, cpu::GemmActivation::kSigmoid},
      {1, 2, 9, 520, 3, 3, 1, 1, 1, 1, 1, 1, false, cpu::GemmActivation::kSwish},
      {2, 5, 5, 9, 3, 3, 1, 1, 0, 0, 0, 0, false, cpu::GemmActivation::kNone},
      {1, 10, 30, 56, 3, 3, 1, 1, 1, 1, 1, 1, true, cpu::GemmActivation::kHardSwish},
  };
  uint64_t seed = 3100;
  for (const Case& t : cases) {
    SCOPED_TRACE(::testing::Message()
                 << t.batch << "x" << t.h << "x" << t.w << "x" << t.c << " kernel " << t.kh << "x"
                 << t.kw << " strides " << t.stride_h << "," << t.stride_w);
    const int64_t out_h = (t.h + t.pad_top + t.pad_bottom - t.kh) / t.stride_h + 1;
    const int64_t out_w = (t.w + t.pad_left + t.pad_right - t.kw) / t.stride_w + 1;
    std::vector<float> x = test::random_floats(t.batch * t.h * t.w * t.c, ++seed);
    std::vector<float> w = test::random_floats(t.c * t.kh * t.kw, ++seed);
    std::vector<float> bias = test::random_floats(t.c, ++seed);
    std::vector<float> y = test::random_floats(t.batch * out_h * out_w * t.c, ++seed);
    const std::vector<float> residual = y;
    const cpu::GemmEpilogue e = test::conv_epilogue(bias.data(), t.residual, t.act);
    cpu::DepthwiseConv conv(w.data(), t.c, t.kh, t.kw);
    conv.run(x.data(), t.batch, t.h, t.w, t.stride_h, t.stride_w, t.pad_top, t.pad_left, out_h,
             out_w, y.data(), e);
    test::expect_conv_output(y, residual, t.batch, out_h, out_w, t.c, t.residual, t.act, 1e-4, 1e-5,
                             [&](int64_t n, int64_t oh, int64_t ow, int64_t c) {
                               double acc = bias[c];
                               for (int64_t r = 0; r < t.kh; ++r)
                                 for (int64_t q = 0; q < t.kw; ++q) {
                                   const int64_t ih = oh * t.stride_h - t.pad_top + r;
                                   const int64_t iw = ow * t.stride_w - t.pad_left + q;
                                   if (ih < 0 || ih >= t.h || iw < 0 || iw >= t.w) continue;
                                   acc += double(x[((n * t.h + ih) * t.w + iw) * t.c + c]) *
                                          w[(c * t.kh + r) * t.kw + q];
                                 }
                               return acc;
                             });
  }
}

TEST(DepthwiseConv, MatchesDirectConvolution) {
  if (!has_kernel())
    GTEST_SKIP() << "DepthwiseConv has AVX2 and NEON forms, and the CPU level in use has neither";
  test::at_each_kernel_level(check_cases);
}

// Which convolutions it takes, where the CPU level has a form of it.
TEST(DepthwiseConv, AppliesToDepthwiseConvolutions) {
  if (!has_kernel()) GTEST_SKIP() << "DepthwiseConv: this CPU level has no AVX2 and no NEON";
  const std::vector<int64_t> k3 = {3, 3}, one = {1, 1};
  EXPECT_TRUE(cpu::depthwise_conv_applies(32, 32, 32, k3, one));
  EXPECT_TRUE(cpu::depthwise_conv_applies(13, 13, 13, {5, 7}, one));
  EXPECT_FALSE(cpu::depthwise_conv_applies(32, 64, 32, k3, one));     // two outputs per group
  EXPECT_FALSE(cpu::depthwise_conv_applies(32, 32, 16, k3, one));     // two channels per group
  EXPECT_FALSE(cpu::depthwise_conv_applies(32, 32, 1, k3, one));      // dense
  EXPECT_FALSE(cpu::depthwise_conv_applies(32, 32, 32, k3, {2, 2}));  // dilated
  EXPECT_FALSE(cpu::depthwise_conv_applies(32, 32, 32, {3, 3, 3}, {1, 1, 1}));  // 3-D
}

}  // namespace
}  // namespace lumen
