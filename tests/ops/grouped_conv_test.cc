// GroupedConv8 (src/backends/cpu/grouped_conv.h), 3x3 convolutions with 8 channels per group,
// against a double-precision direct convolution on random channels-last data: strides 1, 2 and
// 3 (rows), output rows of 1 to 40 pixels (blocks of every size up to 12, uneven cuts), no,
// one-sided and wide padding, two images, an odd number of groups, a residual and activations,
// every output checked. On arm64 the same cases check the NEON form.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/grouped_conv.h"
#include "ops/epilogue_reference.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

// Whether this CPU has a form of the kernel (AVX2 on x86, NEON on arm64).
bool has_kernel() {
  return cpu::grouped_conv8_applies(16, 16, 2, {3, 3}, {1, 1}, {1, 1});
}

TEST(GroupedConv8, MatchesDirectConvolution) {
  if (!has_kernel())
    GTEST_SKIP() << "GroupedConv8 has AVX2 and NEON forms, and the CPU level in use has neither";
  struct Case {
    int64_t batch, h, w, groups, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right;
    bool residual;
    cpu::GemmActivation act;
  };
  const Case cases[] = {
      {1, 14, 14, 26, 1, 1, 1, 1, 1, 1, false, cpu::GemmActivation::kRelu},
      {2, 9, 25, 3, 1, 1, 1, 1, 1, 1, true, cpu::GemmActivation::kNone},
      {1, 30, 30, 5, 2, 2, 1, 1, 1, 1, false, cpu::GemmActivation::kRelu},
      {1, 7, 7, 55, 1, 1, 1, 1, 1, 1, true, cpu::GemmActivation::kRelu},
      {1, 13, 11, 2, 2, 2, 0, 0, 0, 0, false, cpu::GemmActivation::kSigmoid},
      {1, 3, 3, 4, 1, 1, 1, 1, 1, 1, false, cpu::GemmActivation::kClip},
      {1, 1, 1, 6, 1, 1, 1, 1, 1, 1, true, cpu::GemmActivation::kNone},
      {2, 17, 40, 7, 3, 1, 2, 0, 1, 2, true, cpu::GemmActivation::kRelu},
      {1, 12, 23, 4, 1, 2, 2, 2, 2, 2, false, cpu::GemmActivation::kNone},
      // With those, blocks of every size from 1 to 12 pixels.
      {1, 4, 1, 3, 1, 1, 0, 1, 0, 1, false, cpu::GemmActivation::kNone},
      {1, 5, 6, 3, 1, 1, 1, 0, 1, 3, false, cpu::GemmActivation::kNone},
      {1, 5, 13, 3, 1, 1, 1, 1, 1, 1, false, cpu::GemmActivation::kNone},
      {1, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, cpu::GemmActivation::kNone},
      {1, 3, 4, 2, 1, 1, 1, 1, 1, 1, false, cpu::GemmActivation::kNone},
      {1, 3, 11, 2, 1, 1, 1, 1, 1, 1, false, cpu::GemmActivation::kNone},
  };
  uint64_t seed = 1700;
  for (const Case& t : cases) {
    SCOPED_TRACE(::testing::Message()
                 << t.batch << "x" << t.h << "x" << t.w << " groups " << t.groups << " strides "
                 << t.stride_h << "," << t.stride_w << " pads " << t.pad_top << "," << t.pad_left
                 << "," << t.pad_bottom << "," << t.pad_right);
    const int64_t c = t.groups * 8;
    const int64_t out_h = (t.h + t.pad_top + t.pad_bottom - 3) / t.stride_h + 1;
    const int64_t out_w = (t.w + t.pad_left + t.pad_right - 3) / t.stride_w + 1;
    std::vector<float> x = test::random_floats(t.batch * t.h * t.w * c, ++seed);
    std::vector<float> w = test::random_floats(c * 8 * 9, ++seed);
    std::vector<float> bias = test::random_floats(c, ++seed);
    std::vector<float> y = test::random_floats(t.batch * out_h * out_w * c, ++seed);
    const std::vector<float> residual = y;
    const cpu::GemmEpilogue e = test::conv_epilogue(bias.data(), t.residual, t.act);
    cpu::GroupedConv8 conv(w.data(), c);
    conv.run(x.data(), t.batch, t.h, t.w, t.stride_h, t.stride_w, t.pad_top, t.pad_left, out_h,
             out_w, y.data(), e);
    test::expect_conv_output(y, residual, t.batch, out_h, out_w, c, t.residual, t.act, 1e-5, 1e-5,
                             [&](int64_t n, int64_t oh, int64_t ow, int64_t o) {
                               const int64_t g = o / 8;
                               double acc = bias[o];
                               for (int64_t r = 0; r < 3; ++r)
                                 for (int64_t q = 0; q < 3; ++q) {
                                   const int64_t ih = oh * t.stride_h - t.pad_top + r;
                                   const int64_t iw = ow * t.stride_w - t.pad_left + q;
                                   if (ih < 0 || ih >= t.h || iw < 0 || iw >= t.w) continue;
                                   for (int64_t i = 0; i < 8; ++i)
                                     acc += double(x[((n * t.h + ih) * t.w + iw) * c + g * 8 + i]) *
                                            w[((o * 8 + i) * 3 + r) * 3 + q];
                                 }
                               return acc;
                             });
  }
}

// Which convolutions it takes, where the CPU level has a form of it.
TEST(GroupedConv8, AppliesToThreeByThreeWithEightChannelsPerGroup) {
  if (!has_kernel()) GTEST_SKIP() << "GroupedConv8: this CPU level has no AVX2 and no NEON";
  const std::vector<int64_t> k3 = {3, 3}, one = {1, 1}, two = {2, 2};
  EXPECT_TRUE(cpu::grouped_conv8_applies(208, 208, 26, k3, one, one));
  EXPECT_TRUE(cpu::grouped_conv8_applies(48, 48, 6, k3, two, one));
  EXPECT_TRUE(cpu::grouped_conv8_applies(48, 48, 6, k3, {3, 1}, one));
  EXPECT_FALSE(cpu::grouped_conv8_applies(48, 48, 6, k3, {1, 3}, one));   // width stride 3
  EXPECT_FALSE(cpu::grouped_conv8_applies(64, 64, 4, k3, one, one));      // 16 per group
  EXPECT_FALSE(cpu::grouped_conv8_applies(64, 128, 8, k3, one, one));     // 16 outputs per group
  EXPECT_FALSE(cpu::grouped_conv8_applies(64, 64, 64, k3, one, one));     // depthwise
  EXPECT_FALSE(cpu::grouped_conv8_applies(8, 8, 1, k3, one, one));        // not grouped
  EXPECT_FALSE(cpu::grouped_conv8_applies(48, 48, 6, {5, 5}, one, one));  // 5x5
  EXPECT_FALSE(cpu::grouped_conv8_applies(48, 48, 6, k3, one, two));      // dilated
  EXPECT_FALSE(cpu::grouped_conv8_applies(48, 48, 6, {3}, {1}, {1}));     // 1-D
}

}  // namespace
}  // namespace lumen
