// Lumen's packed GEMM (src/backends/cpu/packed_gemm.h) against double-precision references on
// random data: matrix products of every edge shape (rows and columns that are not multiples of the
// micro-kernel's 6 x 16, k across its 256-row blocks, strided and transposed operands) with each
// epilogue, every output element checked, at every level up to the one in use: the AVX-512 form,
// the AVX2 form and the portable form (the only one below AVX2, in the `_baseline_isa` run of this
// program, and on arm64).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "backends/cpu/packed_gemm.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using cpu::GemmActivation;
using cpu::GemmEpilogue;
using cpu::PackedMatrix;

double activate(double v, GemmActivation a, double alpha, double beta) {
  switch (a) {
    case GemmActivation::kNone:
      return v;
    case GemmActivation::kRelu:
      return std::max(v, 0.0);
    case GemmActivation::kLeakyRelu:
      return v < 0 ? alpha * v : v;
    case GemmActivation::kClip:
      return std::min(std::max(v, alpha), beta);
    case GemmActivation::kSigmoid:
      return 1.0 / (1.0 + std::exp(-v));
    case GemmActivation::kTanh:
      return std::tanh(v);
    case GemmActivation::kHardSwish:
      return v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0);
    case GemmActivation::kSwish:
      return v / (1.0 + std::exp(-v));
    case GemmActivation::kGeluErf:
      return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case GemmActivation::kGeluTanh:
      return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  return v;
}

// Every element of got (rows x cols, rows ldc apart) against want (rows x cols, dense).
void expect_matrix(const std::vector<float>& got, int64_t ldc, const std::vector<double>& want,
                   int64_t rows, int64_t cols, double scale) {
  int64_t bad = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const double w = want[i * cols + j], g = got[i * ldc + j];
      if (!(std::fabs(g - w) <= 2e-5 * scale + 1e-4 * std::fabs(w)) && ++bad <= 5)
        ADD_FAILURE() << "(" << i << ", " << j << "): got " << g << ", want " << w;
    }
  EXPECT_EQ(bad, 0);
}

// The CPU levels up to the one in use, each set as the limit in turn (restored after).
std::vector<CpuIsa> levels_in_use() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (isa <= cpu_isa()) out.push_back(isa);
  return out;
}

// The products up to this many multiply-adds run every epilogue in MatchesReferenceOnEdgeShapes.
constexpr int64_t kEveryEpilogueWork = int64_t{1} << 20;

// The epilogues the larger shapes run: none, ReLU with bias, Swish with residual, GELU (tanh) with
// both.
bool is_large_shape_epilogue(GemmActivation act, bool with_bias, bool accumulate) {
  return (act == GemmActivation::kNone && !with_bias && !accumulate) ||
         (act == GemmActivation::kRelu && with_bias && !accumulate) ||
         (act == GemmActivation::kSwish && !with_bias && accumulate) ||
         (act == GemmActivation::kGeluTanh && with_bias && accumulate);
}

TEST(PackedGemm, MatchesReferenceOnEdgeShapes) {
  const CpuIsa in_use = cpu_isa();
  struct Shape3 {
    int64_t m, k, n;
  };
  // 853 x 61 x 64: nine 96-row tiles of one column share, spread over ten tiles for two threads
  // (uneven heights), and a depth that is not a multiple of the 8-column packing step.
  // 70 x 300 x 260 and 1 x 700 x 300: several column shares (A packed once for all of them, in
  // two blocks of k; or one row read straight). 8 and 9 rows (with 5, 13, 70 and 131) end on
  // a row panel of 2 to 5 rows, the partial-panel kernels'; 8 x 301 and 15 x 77 end on 2 and 3
  // rows with an odd depth (those kernels take steps of k in pairs, the last one alone).
  // 96 x 20 x 11000: so wide that column shares are cut to 256 KB of C each (42 panels).
  // 6 x 40 x 48 and 12 x 33 x 80: an odd count of panels, the AVX-512 form's last step one panel.
  // 1 x 1100 x 1000 and 1 x 600 x 3000: matrix-vector products over the threads (63 and 188
  // panels, shared out in tiles that are not whole steps of panels).
  const Shape3 shapes[] = {{1, 1, 1},      {5, 3, 15},      {6, 256, 16},    {7, 257, 17},
                           {13, 600, 40},  {100, 70, 33},   {131, 512, 100}, {853, 61, 64},
                           {70, 300, 260}, {1, 700, 300},   {8, 300, 48},    {9, 520, 32},
                           {8, 301, 32},   {15, 77, 48},    {96, 20, 11000}, {6, 40, 48},
                           {12, 33, 80},   {1, 1100, 1000}, {1, 600, 3000}};
  for (CpuIsa level : levels_in_use()) {
    set_cpu_isa_limit(level);
    SCOPED_TRACE(::testing::Message() << "cpu level " << cpu_isa_name(level));
    uint64_t seed = 100;
    for (const Shape3& s : shapes)
      for (int variant = 0; variant < 4; ++variant) {
        const bool trans_b = variant & 1, strided = variant & 2;
        SCOPED_TRACE(::testing::Message()
                     << s.m << "x" << s.k << "x" << s.n << (trans_b ? " B transposed" : "")
                     << (strided ? " strided" : ""));
        const int64_t lda = s.k + (strided ? 3 : 0), ldc = s.n + (strided ? 5 : 0);
        std::vector<float> a = test::random_floats(s.m * lda, ++seed);
        std::vector<float> b = test::random_floats(s.k * s.n, ++seed);
        std::vector<float> bias = test::random_floats(s.n, ++seed);
        std::vector<float> residual = test::random_floats(s.m * ldc, ++seed);
        PackedMatrix packed = trans_b ? PackedMatrix(b.data(), s.k, s.n, 1, s.k)
                                      : PackedMatrix(b.data(), s.k, s.n, s.n, 1);
        // The product in double, once per operand set; each epilogue is applied to it below.
        std::vector<double> product(s.m * s.n, 0.0);
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t q = 0; q < s.k; ++q) {
            const double aiq = a[i * lda + q];
            for (int64_t j = 0; j < s.n; ++j)
              product[i * s.n + j] += aiq * (trans_b ? b[j * s.k + q] : b[q * s.n + j]);
          }
        // Every epilogue on the small shapes (whose tails reach every partial-tile kernel); the
        // large ones, which test the tiling and the sharing out, take four that cover bias,
        // residual and a cheap and a costly activation (the rest cost minutes under ASan).
        const bool every_epilogue = s.m * s.k * s.n <= kEveryEpilogueWork;
        for (GemmActivation act :
             {GemmActivation::kNone, GemmActivation::kRelu, GemmActivation::kLeakyRelu,
              GemmActivation::kClip, GemmActivation::kSigmoid, GemmActivation::kTanh,
              GemmActivation::kHardSwish, GemmActivation::kSwish, GemmActivation::kGeluErf,
              GemmActivation::kGeluTanh})
          for (bool with_bias : {false, true})
            for (bool accumulate : {false, true}) {
              if (!every_epilogue && !is_large_shape_epilogue(act, with_bias, accumulate)) continue;
              SCOPED_TRACE(::testing::Message()
                           << "activation " << static_cast<int>(act) << (with_bias ? " bias" : "")
                           << (accumulate ? " residual" : ""));
              GemmEpilogue e;
              e.activation = act;
              e.alpha = act == GemmActivation::kClip ? -0.3f : 0.1f;
              e.beta = 0.4f;
              e.bias = with_bias ? bias.data() : nullptr;
              e.accumulate = accumulate;
              std::vector<float> c = accumulate ? residual : std::vector<float>(s.m * ldc, 7.0f);
              cpu::packed_gemm(s.m, a.data(), lda, packed, c.data(), ldc, e);
              std::vector<double> want(s.m * s.n);
              for (int64_t i = 0; i < s.m; ++i)
                for (int64_t j = 0; j < s.n; ++j) {
                  double acc = product[i * s.n + j] + (with_bias ? bias[j] : 0.0);
                  if (accumulate) acc += residual[i * ldc + j];
                  want[i * s.n + j] = activate(acc, act, e.alpha, e.beta);
                }
              expect_matrix(c, ldc, want, s.m, s.n, std::sqrt(double(s.k)));
              if (strided)  // the gaps between C's rows are left alone
                for (int64_t i = 0; i < s.m; ++i)
                  EXPECT_EQ(c[i * ldc + s.n], accumulate ? residual[i * ldc + s.n] : 7.0f);
            }
      }
  }
  set_cpu_isa_limit(in_use);
}

// A's columns scaled as A is packed (GemmEpilogue::a_scale): one row (the matrix-vector form,
// which scales a copy), full and partial row panels, depths across the 8-column packing step and
// the blocks of k, strided A, A packed once for several column shares; with bias and residual.
TEST(PackedGemm, ScalesAColumnsAsItPacksThem) {
  const CpuIsa in_use = cpu_isa();
  struct Shape3 {
    int64_t m, k, n;
  };
  const Shape3 shapes[] = {{1, 37, 40}, {6, 16, 16}, {7, 19, 33}, {100, 96, 24}, {70, 300, 260}};
  for (CpuIsa level : levels_in_use()) {
    set_cpu_isa_limit(level);
    SCOPED_TRACE(::testing::Message() << "cpu level " << cpu_isa_name(level));
    uint64_t seed = 900;
    for (const Shape3& s : shapes) {
      SCOPED_TRACE(::testing::Message() << s.m << "x" << s.k << "x" << s.n);
      const int64_t lda = s.k + 3, ldc = s.n;
      std::vector<float> a = test::random_floats(s.m * lda, ++seed);
      std::vector<float> b = test::random_floats(s.k * s.n, ++seed);
      std::vector<float> scale = test::random_floats(s.k, ++seed);
      std::vector<float> bias = test::random_floats(s.n, ++seed);
      std::vector<float> c = test::random_floats(s.m * ldc, ++seed);
      const std::vector<float> residual = c;
      PackedMatrix packed(b.data(), s.k, s.n, s.n, 1);
      GemmEpilogue e;
      e.a_scale = scale.data();
      e.bias = bias.data();
      e.accumulate = true;
      e.activation = GemmActivation::kRelu;
      cpu::packed_gemm(s.m, a.data(), lda, packed, c.data(), ldc, e);
      std::vector<double> want(s.m * s.n);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double acc = double(bias[j]) + residual[i * ldc + j];
          for (int64_t q = 0; q < s.k; ++q)
            acc += double(a[i * lda + q]) * scale[q] * b[q * s.n + j];
          want[i * s.n + j] = std::max(acc, 0.0);
        }
      expect_matrix(c, ldc, want, s.m, s.n, std::sqrt(double(s.k)));
    }
  }
  set_cpu_isa_limit(in_use);
}

TEST(PackedGemm, ZeroDepthGivesTheEpilogueOfZero) {
  const CpuIsa in_use = cpu_isa();
  for (CpuIsa level : levels_in_use()) {
    set_cpu_isa_limit(level);
    std::vector<float> bias = test::random_floats(20, 7), c(3 * 20, 5.0f);
    PackedMatrix packed(nullptr, 0, 20, 20, 1);
    GemmEpilogue e;
    e.bias = bias.data();
    e.activation = GemmActivation::kRelu;
    cpu::packed_gemm(3, nullptr, 0, packed, c.data(), 20, e);
    std::vector<double> want(3 * 20);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 20; ++j) want[i * 20 + j] = std::max(0.0, double(bias[j]));
    expect_matrix(c, 20, want, 3, 20, 1.0);
  }
  set_cpu_isa_limit(in_use);
}

}  // namespace
}  // namespace lumen
