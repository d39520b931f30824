// Im2colConv (src/backends/cpu/im2col_conv.h), strided convolutions as one packed GEMM per
// image, against a double-precision direct convolution on random channels-last data: 3x3 stride
// 2 with one-sided and full padding, unequal strides, 5x5 stride 3, 2x2 stride 2 without padding,
// two images, output channels that are not a multiple of 16, a residual and activations, every
// output checked.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/im2col_conv.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_choice.h"
#include "ops/epilogue_reference.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

TEST(Im2colConv, MatchesDirectConvolution) {
  if (!cpu::lumen_kernel_candidate())
    GTEST_SKIP() << "Im2colConv is AVX2 code on x86, and the CPU level in use has no AVX2";
  struct Case {
    int64_t batch, h, w, c, o, kh, kw, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right;
    bool residual;
    cpu::GemmActivation act;
  };
  const Case cases[] = {
      {1, 9, 9, 64, 24, 3, 3, 2, 2, 1, 1, 1, 1, false, cpu::GemmActivation::kRelu},
      {2, 8, 7, 72, 40, 3, 3, 2, 2, 0, 0, 1, 1, true, cpu::GemmActivation::kNone},
      {1, 10, 6, 64, 16, 3, 3, 2, 1, 1, 1, 1, 1, false, cpu::GemmActivation::kSigmoid},
      {1, 11, 12, 80, 33, 5, 5, 3, 3, 2, 2, 2, 2, true, cpu::GemmActivation::kRelu},
      {2, 6, 6, 64, 8, 2, 2, 2, 2, 0, 0, 0, 0, false, cpu::GemmActivation::kClip},
  };
  uint64_t seed = 2100;
  for (const Case& t : cases) {
    SCOPED_TRACE(::testing::Message()
                 << t.batch << "x" << t.h << "x" << t.w << "x" << t.c << " -> " << t.o << " kernel "
                 << t.kh << "x" << t.kw << " strides " << t.stride_h << "," << t.stride_w);
    const int64_t out_h = (t.h + t.pad_top + t.pad_bottom - t.kh) / t.stride_h + 1;
    const int64_t out_w = (t.w + t.pad_left + t.pad_right - t.kw) / t.stride_w + 1;
    std::vector<float> x = test::random_floats(t.batch * t.h * t.w * t.c, ++seed);
    std::vector<float> w = test::random_floats(t.o * t.c * t.kh * t.kw, ++seed);
    std::vector<float> bias = test::random_floats(t.o, ++seed);
    std::vector<float> y = test::random_floats(t.batch * out_h * out_w * t.o, ++seed);
    const std::vector<float> residual = y;
    const cpu::GemmEpilogue e = test::conv_epilogue(bias.data(), t.residual, t.act);
    cpu::Im2colConv conv(w.data(), t.o, t.c, t.kh, t.kw);
    conv.run(x.data(), t.batch, t.h, t.w, t.stride_h, t.stride_w, t.pad_top, t.pad_left, out_h,
             out_w, y.data(), e);
    test::expect_conv_output(y, residual, t.batch, out_h, out_w, t.o, t.residual, t.act, 1e-4, 1e-5,
                             [&](int64_t n, int64_t oh, int64_t ow, int64_t o) {
                               double acc = bias[o];
                               for (int64_t r = 0; r < t.kh; ++r)
                                 for (int64_t q = 0; q < t.kw; ++q) {
                                   const int64_t ih = oh * t.stride_h - t.pad_top + r;
                                   const int64_t iw = ow * t.stride_w - t.pad_left + q;
                                   if (ih < 0 || ih >= t.h || iw < 0 || iw >= t.w) continue;
                                   for (int64_t i = 0; i < t.c; ++i)
                                     acc += double(x[((n * t.h + ih) * t.w + iw) * t.c + i]) *
                                            w[((o * t.c + i) * t.kh + r) * t.kw + q];
                                 }
                               return acc;
                             });
  }
}

// Which convolutions it takes, where the CPU level has AVX2 (or on arm64).
TEST(Im2colConv, AppliesToStridedDenseConvolutions) {
  if (!cpu::lumen_kernel_candidate())
    GTEST_SKIP() << "Im2colConv is AVX2 code on x86: this CPU level has no AVX2";
  const std::vector<int64_t> k3 = {3, 3}, one = {1, 1}, two = {2, 2};
  EXPECT_TRUE(cpu::im2col_conv_applies(128, 1, k3, two, one));
  EXPECT_TRUE(cpu::im2col_conv_applies(64, 1, {7, 7}, {2, 1}, one));
  EXPECT_FALSE(cpu::im2col_conv_applies(128, 1, k3, one, one));      // stride 1: Winograd's
  EXPECT_FALSE(cpu::im2col_conv_applies(32, 1, k3, two, one));       // few channels
  EXPECT_FALSE(cpu::im2col_conv_applies(128, 2, k3, two, one));      // grouped
  EXPECT_FALSE(cpu::im2col_conv_applies(128, 1, {1, 1}, two, one));  // pointwise
  EXPECT_FALSE(cpu::im2col_conv_applies(128, 1, k3, two, two));      // dilated
  EXPECT_FALSE(cpu::im2col_conv_applies(128, 1, {3}, {2}, {1}));     // 1-D
}

}  // namespace
}  // namespace lumen
