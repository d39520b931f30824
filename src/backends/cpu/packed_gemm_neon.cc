// packed_gemm's NEON form (arm64): a micro-kernel of 6 rows of A by one 16-column panel of B, 24
// accumulators of 4 floats (of aarch64's 32 vector registers); per step of k, 4 loads of B and 6
// broadcasts of A feed 24 multiply-adds, where the portable form's one row made it a load per
// multiply-add. Tiles (a block of rows by a panel) are shared out over the threads; the epilogue
// follows per row through finish_row.
#include "backends/cpu/packed_gemm.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <omp.h>

#include <algorithm>

namespace lumen::cpu {
namespace {

constexpr int64_t kNr = kPackedPanelCols;
constexpr int64_t kMr = 6;

// out[r][0..16) = sum over kk < k of a[r * lda + kk] * panel[kk * 16 + 0..16), for r < kRows.
template <int kRows>
void tile(const float* a, int64_t lda, const float* panel, int64_t k, float* out) {
  float32x4_t acc[kRows][4];
  for (int r = 0; r < kRows; ++r)
    for (int q = 0; q < 4; ++q) acc[r][q] = vdupq_n_f32(0.0f);
  const float* w = panel;
  for (int64_t kk = 0; kk < k; ++kk, w += kNr) {
    const float32x4_t b0 = vld1q_f32(w), b1 = vld1q_f32(w + 4), b2 = vld1q_f32(w + 8),
                      b3 = vld1q_f32(w + 12);
    for (int r = 0; r < kRows; ++r) {
      const float32x4_t x = vld1q_dup_f32(a + r * lda + kk);
      acc[r][0] = vfmaq_f32(acc[r][0], b0, x);
      acc[r][1] = vfmaq_f32(acc[r][1], b1, x);
      acc[r][2] = vfmaq_f32(acc[r][2], b2, x);
      acc[r][3] = vfmaq_f32(acc[r][3], b3, x);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int q = 0; q < 4; ++q) vst1q_f32(out + r * kNr + q * 4, acc[r][q]);
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*);
constexpr TileFn kTiles[kMr + 1] = {nullptr,  &tile<1>, &tile<2>, &tile<3>,
                                    &tile<4>, &tile<5>, &tile<6>};

}  // namespace

void packed_gemm_neon(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                      int64_t ldc, const GemmEpilogue& e) {
  const int64_t n = b.n(), k = b.k(), panels = (n + kNr - 1) / kNr;
  const int64_t blocks = (m + kMr - 1) / kMr;
  const bool parallel = 2 * m * n * k > kGemmParallelFlops && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
#pragma omp for schedule(static)
    for (int64_t t = 0; t < blocks * panels; ++t) {
      const int64_t i0 = (t / panels) * kMr, jp = t % panels;
      const int64_t rows = std::min(kMr, m - i0), cols = std::min(kNr, n - jp * kNr);
      float out[kMr * kNr];
      kTiles[rows](a + i0 * lda, lda, b.panel(0, jp), k, out);
      for (int64_t r = 0; r < rows; ++r) {
        float* dst = c + (i0 + r) * ldc + jp * kNr;
        const float* src = out + r * kNr;
        if (e.accumulate) {
          for (int64_t j = 0; j < cols; ++j) dst[j] += src[j];
        } else {
          std::copy(src, src + cols, dst);
        }
      }
    }
    if (e.bias != nullptr || e.activation != GemmActivation::kNone) {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < m; ++i) finish_row(c + i * ldc, n, 0, e);
    }
  }
}

}  // namespace lumen::cpu
#endif
