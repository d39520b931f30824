// Helpers shared by the CPU quantization kernels: reading scales and zero points (per tensor or
// per axis) and rounding a real value to an 8-bit integer the ONNX way (ties to even, saturated).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/isa.h"
#include "lumen/tensor.h"

#if LUMEN_X86
#include <immintrin.h>
#endif

namespace lumen::cpu {

// Element i of an int8, uint8 or int32 tensor as int32.
inline int32_t int_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kInt8:
      return t.data<int8_t>()[i];
    case DType::kUInt8:
      return t.data<uint8_t>()[i];
    default:
      return t.data<int32_t>()[i];
  }
}

// `n` zero points from an optional tensor: all 0 when undefined, the single value repeated when
// it has one element, else its n values.
inline std::vector<int32_t> zero_points(const Tensor& t, int64_t n) {
  std::vector<int32_t> out(static_cast<size_t>(n), 0);
  if (!t.defined()) return out;
  for (int64_t i = 0; i < n; ++i) out[i] = int_at(t, t.numel() == 1 ? 0 : i);
  return out;
}

// `n` float32 scales, the single value repeated when the tensor has one element.
inline std::vector<float> scales(const Tensor& t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  const float* s = t.data<float>();
  for (int64_t i = 0; i < n; ++i) out[i] = s[t.numel() == 1 ? 0 : i];
  return out;
}

// The range of an 8-bit dtype: [0, 255] for uint8, [-128, 127] for int8.
inline int32_t quant_min(DType t) {
  return t == DType::kUInt8 ? 0 : -128;
}
inline int32_t quant_max(DType t) {
  return t == DType::kUInt8 ? 255 : 127;
}

// round(v) (ties to even) + zero_point, saturated to [lo, hi]; NaN becomes zero_point.
inline int32_t quantize_value(float v, int32_t zero_point, int32_t lo, int32_t hi) {
  const float r = std::nearbyint(v);
  if (std::isnan(r)) return std::clamp(zero_point, lo, hi);
  const float q = r + static_cast<float>(zero_point);
  if (q <= static_cast<float>(lo)) return lo;
  if (q >= static_cast<float>(hi)) return hi;
  return static_cast<int32_t>(q);
}

// Writes an 8-bit value to element i of an int8 or uint8 tensor's data.
inline void store_8bit(void* data, DType t, int64_t i, int32_t v) {
  if (t == DType::kUInt8)
    static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v);
  else
    static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v);
}

// Reads element i of an int8 or uint8 buffer as int32.
inline int32_t load_8bit(const void* data, DType t, int64_t i) {
  return t == DType::kUInt8 ? static_cast<const uint8_t*>(data)[i]
                            : static_cast<const int8_t*>(data)[i];
}

#if LUMEN_X86
LUMEN_AVX2_BEGIN
// dot_i16's AVX2 form, for the first n - n % 16 elements.
inline int32_t dot_i16_avx2(const int16_t* a, const int16_t* b, int64_t n) {
  int64_t i = 0;
  __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
  for (; i + 32 <= n; i += 32) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i + 16));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i + 16));
    acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(a0, b0));
    acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(a1, b1));
  }
  for (; i + 16 <= n; i += 16) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(a0, b0));
  }
  acc0 = _mm256_add_epi32(acc0, acc1);
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(acc0), _mm256_extracti128_si256(acc0, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}
LUMEN_ISA_END
#endif

// sum_i a[i] * b[i] in int32, exact for operands in [-255, 255] (pairs of products fit int32).
inline int32_t dot_i16(const int16_t* a, const int16_t* b, int64_t n) {
  int64_t i = 0;
  int32_t sum = 0;
#if LUMEN_X86
  if (has_avx2()) {
    sum = dot_i16_avx2(a, b, n);
    i = n - n % 16;
  }
#endif
  for (; i < n; ++i) sum += static_cast<int32_t>(a[i]) * b[i];
  return sum;
}

}  // namespace lumen::cpu
