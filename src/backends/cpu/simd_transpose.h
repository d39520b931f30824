// An 8x8 transpose of 32-bit lanes held in AVX2 registers, for the kernels that repack data
// (Transpose's plane tiles, packed_gemm's A panels). Pure shuffles: any 32-bit bits pass through.
// Compiled for AVX2 (backends/cpu/isa.h): only AVX2 code calls it. transpose_rows8, below, is the
// form any code may call.
#pragma once

#include <cstdint>

#include "backends/cpu/isa.h"

#if LUMEN_X86
#include <immintrin.h>

LUMEN_AVX2_BEGIN
namespace lumen::cpu {

// On return, m[k] holds lane k of each of the eight input rows m[0..8), in order.
[[gnu::always_inline]] inline void transpose_8x8(__m256 m[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(m[0], m[1]), t1 = _mm256_unpackhi_ps(m[0], m[1]);
  const __m256 t2 = _mm256_unpacklo_ps(m[2], m[3]), t3 = _mm256_unpackhi_ps(m[2], m[3]);
  const __m256 t4 = _mm256_unpacklo_ps(m[4], m[5]), t5 = _mm256_unpackhi_ps(m[4], m[5]);
  const __m256 t6 = _mm256_unpacklo_ps(m[6], m[7]), t7 = _mm256_unpackhi_ps(m[6], m[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  m[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  m[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  m[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  m[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  m[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  m[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  m[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  m[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

}  // namespace lumen::cpu
LUMEN_ISA_END
#endif  // LUMEN_X86

namespace lumen::cpu {

#if LUMEN_X86
LUMEN_AVX2_BEGIN
inline void transpose_rows8_avx2(const float* const rows[8], int64_t depth8, float* dst,
                                 int64_t ldd) {
  for (int64_t d = 0; d < depth8; d += 8) {
    __m256 m[8];
    for (int r = 0; r < 8; ++r) m[r] = _mm256_loadu_ps(rows[r] + d);
    transpose_8x8(m);
    for (int r = 0; r < 8; ++r) _mm256_storeu_ps(dst + (d + r) * ldd, m[r]);
  }
}
LUMEN_ISA_END
#endif

// dst[d * ldd + r] = rows[r][d] for r < 8 and d < depth: eight rows become eight columns (8x8
// tiles in AVX2 registers where the CPU has them).
inline void transpose_rows8(const float* const rows[8], int64_t depth, float* dst, int64_t ldd) {
  int64_t d0 = 0;
#if LUMEN_X86
  if (has_avx2()) {
    d0 = depth / 8 * 8;
    transpose_rows8_avx2(rows, d0, dst, ldd);
  }
#endif
  for (int64_t d = d0; d < depth; ++d)
    for (int r = 0; r < 8; ++r) dst[d * ldd + r] = rows[r][d];
}

}  // namespace lumen::cpu
