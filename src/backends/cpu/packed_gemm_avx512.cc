// packed_gemm's AVX-512 form: the tiling of packed_gemm_tiles.inc over a micro-kernel of 6 rows by
// four 16-column panels (24 accumulators of 16 floats; per step of k, 4 loads of B and 6
// broadcasts of A feed 24 multiply-adds), every tile edge through masked loads and stores, the
// epilogue in registers.
// The B panels and the packed A panels are those of the AVX2 form, so the same PackedMatrix
// serves both.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/packed_gemm.h"
#include "backends/cpu/simd_math.h"
#include "backends/cpu/simd_transpose.h"

#if LUMEN_X86
#include <immintrin.h>

namespace lumen::cpu {
namespace {

constexpr int64_t kNr = kPackedPanelCols;  // one AVX-512 register
constexpr int64_t kParallelFlops = kGemmParallelFlops;

}  // namespace

LUMEN_AVX512_BEGIN
namespace {

constexpr int64_t kPanelStep = 4;  // a micro-kernel call covers four panels (64 columns)
// Rows of B per block: a step's four panels are then 128 KiB, read from L2 (on 2 Zen 5 cores, the
// products of BERT-base at 128 tokens ran at 320-350 GFLOP/s with 128 rows, 370-415 with 256 and
// 380-430 with 512, oneDNN's brgemm at 375-440 in the same runs).
constexpr int64_t kKc = 512;

#include "backends/cpu/packed_gemm_tiles.inc"

// The epilogue's bias and activation on one register of a row (columns `mask` of it).
inline __m512 finish16(__m512 v, const float* bias, __mmask16 mask, const GemmEpilogue& e) {
  if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, bias));
  return e.activation == GemmActivation::kNone ? v : activate16(v, e);
}

// The columns of `cols` (at most 16) that a mask keeps.
inline __mmask16 lane_mask(int64_t cols) {
  return cols >= kNr ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1);
}

// C (R rows, ldc apart; `cols` columns over P panels of 16) (+)= the sum over kk < kc of
// a[kk * a_step + r] x the panels' row kk (panel p at b + p * panel_stride), then the epilogue
// `fin` (bias at column col0) when given. With fewer than 8 chains of multiply-adds (the FMA
// units' latency times their count), even and odd steps of k go to two sets of sums. pf_lines
// lines of 16 floats of each of the next P panels (from pf) are prefetched, one every pf_every
// steps.
template <int R, int P>
inline void micro_kernel(const float* a, int64_t a_step, int64_t kc, const float* b,
                         int64_t panel_stride, float* c, int64_t ldc, int64_t cols, bool load_c,
                         const GemmEpilogue* fin, int64_t col0, const float* pf, int64_t pf_lines,
                         int64_t pf_every) {
  constexpr int kSets = R * P < 8 ? 2 : 1;
  __mmask16 mask[P];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) mask[p] = lane_mask(cols - p * kNr);
  __m512 acc[kSets][R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      acc[0][r][p] =
          load_c ? _mm512_maskz_loadu_ps(mask[p], c + r * ldc + p * kNr) : _mm512_setzero_ps();
      if constexpr (kSets == 2) acc[1][r][p] = _mm512_setzero_ps();
    }
  const auto step = [&](int set, int64_t kk) __attribute__((always_inline)) {
    __m512 v[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) v[p] = _mm512_loadu_ps(b + p * panel_stride + kk * kNr);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[kk * a_step + r]);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[set][r][p] = _mm512_fmadd_ps(av, v[p], acc[set][r][p]);
    }
  };
  const auto prefetch = [&](int64_t line) __attribute__((always_inline)) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      _mm_prefetch(reinterpret_cast<const char*>(pf + p * panel_stride + line * kNr), _MM_HINT_T0);
  };
  int64_t kk = 0, line = 0;
  if (pf_lines > 0 && kSets == 1)
    for (; line < pf_lines && kk + pf_every <= kc; ++line) {
      prefetch(line);
      for (const int64_t end = kk + pf_every; kk < end; ++kk) step(0, kk);
    }
  for (; line < pf_lines; ++line) prefetch(line);
  for (; kk + kSets <= kc; kk += kSets) {
#pragma GCC unroll 2
    for (int set = 0; set < kSets; ++set) step(set, kk + set);
  }
  if (kk < kc) step(0, kk);
  const float* bias = fin && fin->bias ? fin->bias + col0 : nullptr;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      __m512 v = acc[0][r][p];
      if constexpr (kSets == 2) v = _mm512_add_ps(v, acc[1][r][p]);
      if (fin) v = finish16(v, bias ? bias + p * kNr : nullptr, mask[p], *fin);
      _mm512_mask_storeu_ps(c + r * ldc + p * kNr, mask[p], v);
    }
}

template <int R>
inline void rows_kernel(const float* a, int64_t a_step, int64_t kc, const float* b,
                        int64_t panel_stride, float* c, int64_t ldc, int64_t cols, bool load_c,
                        const GemmEpilogue* fin, int64_t col0, const float* pf, int64_t pf_lines,
                        int64_t pf_every) {
  switch ((cols + kNr - 1) / kNr) {
    case 1:
      return micro_kernel<R, 1>(a, a_step, kc, b, panel_stride, c, ldc, cols, load_c, fin, col0, pf,
                                pf_lines, pf_every);
    case 2:
      return micro_kernel<R, 2>(a, a_step, kc, b, panel_stride, c, ldc, cols, load_c, fin, col0, pf,
                                pf_lines, pf_every);
    case 3:
      return micro_kernel<R, 3>(a, a_step, kc, b, panel_stride, c, ldc, cols, load_c, fin, col0, pf,
                                pf_lines, pf_every);
    default:
      return micro_kernel<R, kPanelStep>(a, a_step, kc, b, panel_stride, c, ldc, cols, load_c, fin,
                                         col0, pf, pf_lines, pf_every);
  }
}

inline bool tile_kernel(const float* a, int64_t kc, const float* b, int64_t panel_stride, float* c,
                        int64_t ldc, int64_t rows, int64_t cols, bool load_c,
                        const GemmEpilogue* fin, int64_t col0, const float* pf, int64_t pf_lines,
                        int64_t pf_every) {
  using Rows =
      void (*)(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, int64_t,
               bool, const GemmEpilogue*, int64_t, const float*, int64_t, int64_t);
  static constexpr Rows kRows[kMr + 1] = {nullptr,         &rows_kernel<1>, &rows_kernel<2>,
                                          &rows_kernel<3>, &rows_kernel<4>, &rows_kernel<5>,
                                          &rows_kernel<6>};
  if (rows == kMr && cols == kPanelStep * kNr)  // the common case, inlined
    micro_kernel<kMr, kPanelStep>(a, kMr, kc, b, panel_stride, c, ldc, cols, load_c, fin, col0, pf,
                                  pf_lines, pf_every);
  else
    kRows[rows](a, kMr, kc, b, panel_stride, c, ldc, cols, load_c, fin, col0, pf, pf_lines,
                pf_every);
  return fin != nullptr;
}

// One row of C over up to kPanelStep panels, four steps of k at a time into four sums per panel, B
// read as one stream per panel with kRowPrefetch floats of look-ahead (a matrix-vector product is
// bound by reading B; see the AVX2 row kernel).
inline void row_kernel(const float* a, int64_t a_step, int64_t kc, const float* b,
                       int64_t panel_stride, float* c, int64_t cols, bool load_c) {
  const int64_t panels = (cols + kNr - 1) / kNr;
  for (int64_t p = 0; p < panels; ++p) {
    const float* bp = b + p * panel_stride;
    __m512 acc[4];
    for (__m512& v : acc) v = _mm512_setzero_ps();
    int64_t kk = 0;
    for (; kk + 4 <= kc; kk += 4, bp += 4 * kNr) {
      for (int64_t l = 0; l < 4; ++l)
        _mm_prefetch(reinterpret_cast<const char*>(bp + kRowPrefetch + l * kNr), _MM_HINT_T0);
      for (int u = 0; u < 4; ++u)
        acc[u] = _mm512_fmadd_ps(_mm512_set1_ps(a[(kk + u) * a_step]),
                                 _mm512_loadu_ps(bp + u * kNr), acc[u]);
    }
    for (; kk < kc; ++kk, bp += kNr)
      acc[0] = _mm512_fmadd_ps(_mm512_set1_ps(a[kk * a_step]), _mm512_loadu_ps(bp), acc[0]);
    const __mmask16 mask = lane_mask(cols - p * kNr);
    __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    if (load_c) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mask, c + p * kNr));
    _mm512_mask_storeu_ps(c + p * kNr, mask, sum);
  }
}

// The epilogue of rows the micro-kernel did not finish (finish_row dispatches to its AVX2 copy).
void finish_row_isa(float* y, int64_t cols, int64_t col0, const GemmEpilogue& e) {
  finish_row(y, cols, col0, e);
}

}  // namespace

void packed_gemm_avx512(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                        int64_t ldc, const GemmEpilogue& e) {
  gemm_tiles(m, a, lda, b, c, ldc, e);
}

LUMEN_ISA_END

}  // namespace lumen::cpu
#endif  // LUMEN_X86
