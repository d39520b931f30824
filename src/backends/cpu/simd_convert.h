// float32 <-> float16 rows through F16C (part of the AVX2 level), for the kernels that convert in
// bulk (Cast, Attention's float16 operands). Each returns how many leading elements it converted
// (n less n's remainder mod 8, or 0 below the AVX2 level): the caller converts the rest itself.
#pragma once

#include <cstdint>

#include "backends/cpu/isa.h"

#if LUMEN_X86
#include <immintrin.h>

LUMEN_AVX2_BEGIN
namespace lumen::cpu {

inline int64_t floats_to_halves_f16c_avx2(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  return i;
}

inline int64_t halves_to_floats_f16c_avx2(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  return i;
}

}  // namespace lumen::cpu
LUMEN_ISA_END
#endif  // LUMEN_X86

namespace lumen::cpu {

// d[i] = s[i] rounded to float16 (nearest even), for the first n - n % 8 elements where F16C runs.
inline int64_t floats_to_halves_f16c(const float* s, uint16_t* d, int64_t n) {
#if LUMEN_X86
  if (has_avx2()) return floats_to_halves_f16c_avx2(s, d, n);
#endif
  return 0;
}

// d[i] = float32 of float16 s[i], likewise.
inline int64_t halves_to_floats_f16c(const uint16_t* s, float* d, int64_t n) {
#if LUMEN_X86
  if (has_avx2()) return halves_to_floats_f16c_avx2(s, d, n);
#endif
  return 0;
}

}  // namespace lumen::cpu
