// Winograd F(2x2, 3x3) and F(4x4, 3x3) (src/backends/cpu/winograd.h) against a double-precision
// direct convolution on random channels-last data: odd and even output sizes (partial blocks), no,
// one-sided and wide padding, two images, a residual and activations, few tiles (one pass over
// all tiles) and many (block by block), every output checked, at each x86 level this CPU has (the
// products then on packed_gemm's AVX2 and AVX-512 forms).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_choice.h"
#include "backends/cpu/winograd.h"
#include "ops/epilogue_reference.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

TEST(Winograd, MatchesDirectConvolution) {
  if (!cpu::lumen_kernel_candidate())
    GTEST_SKIP() << "WinogradConv is AVX2 code on x86, and the CPU level in use has no AVX2";
  struct Case {
    int64_t batch, h, w, c, o, pad_top, pad_left, pad_bottom, pad_right;
    bool residual;
    cpu::GemmActivation act;
  };
  const Case cases[] = {
      {1, 8, 8, 16, 16, 1, 1, 1, 1, false, cpu::GemmActivation::kNone},
      {2, 7, 9, 20, 33, 1, 1, 1, 1, true, cpu::GemmActivation::kRelu},
      {1, 11, 6, 64, 70, 0, 0, 0, 0, false, cpu::GemmActivation::kRelu},
      {1, 5, 5, 7, 9, 2, 0, 1, 2, true, cpu::GemmActivation::kNone},
      {1, 14, 13, 130, 64, 1, 1, 1, 1, true, cpu::GemmActivation::kClip},
      {1, 3, 3, 8, 8, 1, 1, 1, 1, false, cpu::GemmActivation::kSigmoid},
      // Many tiles: 450 over two images and 289, run block by block (the last block partial);
      // and blocks of 6 tiles (wide channels), 110 or 30 tiles.
      {2, 30, 30, 20, 33, 1, 1, 1, 1, true, cpu::GemmActivation::kRelu},
      {1, 33, 34, 64, 64, 1, 0, 1, 2, false, cpu::GemmActivation::kNone},
      {1, 20, 22, 130, 140, 1, 1, 1, 1, true, cpu::GemmActivation::kRelu},
  };
  test::at_each_kernel_level([&] {
    uint64_t seed = 900;
    for (const cpu::WinogradForm form : {cpu::WinogradForm::kF2x2, cpu::WinogradForm::kF4x4})
      for (const Case& t : cases) {
        SCOPED_TRACE(::testing::Message()
                     << (form == cpu::WinogradForm::kF4x4 ? "F(4x4, 3x3) " : "F(2x2, 3x3) ")
                     << t.batch << "x" << t.h << "x" << t.w << "x" << t.c << " -> " << t.o
                     << " pads " << t.pad_top << "," << t.pad_left << "," << t.pad_bottom << ","
                     << t.pad_right);
        const int64_t out_h = t.h + t.pad_top + t.pad_bottom - 2;
        const int64_t out_w = t.w + t.pad_left + t.pad_right - 2;
        std::vector<float> x = test::random_floats(t.batch * t.h * t.w * t.c, ++seed);
        std::vector<float> w = test::random_floats(t.o * t.c * 9, ++seed);
        std::vector<float> bias = test::random_floats(t.o, ++seed);
        std::vector<float> y = test::random_floats(t.batch * out_h * out_w * t.o, ++seed);
        const std::vector<float> residual = y;
        const cpu::GemmEpilogue e = test::conv_epilogue(bias.data(), t.residual, t.act);
        cpu::WinogradConv conv(w.data(), t.o, t.c, form);
        conv.run(x.data(), t.batch, t.h, t.w, t.pad_top, t.pad_left, out_h, out_w, y.data(), e);
        const double scale = std::sqrt(9.0 * double(t.c));
        test::expect_conv_output(
            y, residual, t.batch, out_h, out_w, t.o, t.residual, t.act, 2e-5 * scale, 1e-4,
            [&](int64_t n, int64_t oh, int64_t ow, int64_t o) {
              double acc = bias[o];
              for (int64_t r = 0; r < 3; ++r)
                for (int64_t q = 0; q < 3; ++q) {
                  const int64_t ih = oh - t.pad_top + r, iw = ow - t.pad_left + q;
                  if (ih < 0 || ih >= t.h || iw < 0 || iw >= t.w) continue;
                  for (int64_t i = 0; i < t.c; ++i)
                    acc += double(x[((n * t.h + ih) * t.w + iw) * t.c + i]) *
                           w[((o * t.c + i) * 3 + r) * 3 + q];
                }
              return acc;
            });
      }
  });
}

// Which layers take which form, where the CPU level has AVX2 (or on arm64).
TEST(Winograd, FormFollowsTheMeasuredThresholds) {
  if (!cpu::lumen_kernel_candidate())
    GTEST_SKIP() << "Winograd is AVX2 code on x86: this CPU level has no AVX2";
  using cpu::WinogradForm;
  EXPECT_EQ(cpu::winograd_form(56, 56, 64, 64), WinogradForm::kF4x4);
  EXPECT_EQ(cpu::winograd_form(28, 28, 128, 128), WinogradForm::kF4x4);
  EXPECT_EQ(cpu::winograd_form(14, 14, 256, 256), WinogradForm::kF2x2);
  EXPECT_EQ(cpu::winograd_form(7, 7, 512, 512), WinogradForm::kF2x2);
  EXPECT_EQ(cpu::winograd_form(56, 56, 128, 32), WinogradForm::kF4x4);
  EXPECT_EQ(cpu::winograd_form(28, 28, 128, 32), std::nullopt);
  EXPECT_EQ(cpu::winograd_form(55, 55, 16, 64), std::nullopt);
  EXPECT_EQ(cpu::winograd_form(6, 6, 512, 512), std::nullopt);
}

}  // namespace
}  // namespace lumen
