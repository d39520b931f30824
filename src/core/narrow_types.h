// Conversions between float32 and ONNX's narrow types as lumen stores them (one byte per element):
// the float8 variants (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ), float8 E8M0, float4 E2M1 (its 4-bit
// pattern in the low bits) and the 4- and 2-bit integers (int4/int2 sign-extended to int8,
// uint4/uint2 zero-extended). Also the packing of 4- and 2-bit values into bytes that ONNX files
// use (the first element in the lowest bits).
//
// Float to float8/float4 rounds to nearest even and follows ONNX Cast's tables (opset 24 on):
// saturate maps values beyond the largest finite one (and infinities) to +/- that value;
// otherwise they become infinity (E5M2) or NaN (the rest). The FNUZ types have no negative zero.
// Float4 has no infinity or NaN: it always saturates, and NaN becomes 0x8 (as ONNX's reference
// implementation and its test data have it).
#pragma once

#include <cstdint>
#include <cstring>

#include "lumen/dtype.h"

namespace lumen {

// Rounding of float to float8e8m0 (Cast's round_mode): kUp rounds away from zero (any fraction
// goes to the next power of two), kDown truncates, kNearest rounds to the nearer power of two
// with ties up.
enum class E8M0Rounding : uint8_t { kUp, kDown, kNearest };

namespace narrow_detail {

// Layout of a small float: `mant` mantissa bits, exponent bias, the largest finite magnitude's
// bit pattern, and the sign bit's mask.
struct MiniFloat {
  int mant;
  int bias;
  uint32_t max_mag;
  uint8_t sign;
};

inline constexpr MiniFloat kE4M3FN{3, 7, 0x7E, 0x80};
inline constexpr MiniFloat kE4M3FNUZ{3, 8, 0x7F, 0x80};
inline constexpr MiniFloat kE5M2{2, 15, 0x7B, 0x80};
inline constexpr MiniFloat kE5M2FNUZ{2, 16, 0x7F, 0x80};
inline constexpr MiniFloat kE2M1{1, 1, 0x7, 0x08};

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// 2^e for -126 <= e <= 127.
inline float pow2(int e) {
  return bits_to_float(static_cast<uint32_t>(e + 127) << 23);
}

// The value of a finite magnitude pattern (sign bit clear) of format f.
inline float decode_magnitude(uint32_t mag, const MiniFloat& f) {
  const uint32_t exp = mag >> f.mant, frac = mag & ((1u << f.mant) - 1);
  if (exp == 0) return static_cast<float>(frac) * pow2(1 - f.bias - f.mant);
  return static_cast<float>(frac | (1u << f.mant)) * pow2(static_cast<int>(exp) - f.bias - f.mant);
}

// |x| (finite, as float32 bits without the sign) rounded to nearest even in format f; the result
// is a magnitude pattern that may exceed f.max_mag (the caller handles overflow).
inline uint32_t round_magnitude(uint32_t a, const MiniFloat& f) {
  const int biased = static_cast<int>(a >> 23);
  uint32_t sig = a & 0x7FFFFF;
  int e = -126;  // float32 subnormals: no implicit bit
  if (biased != 0) {
    sig |= 0x800000;
    e = biased - 127;
  }
  // x = sig * 2^(e - 23); the target's unit in the last place at this magnitude is 2^q.
  const int emin = 1 - f.bias;
  const int q = (e > emin ? e : emin) - f.mant;
  const int shift = q - (e - 23);  // at least 23 - mant
  uint32_t n = 0;
  if (shift <= 24) {
    n = sig >> shift;
    const uint32_t rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (n & 1u))) ++n;
  }
  // n counts units of 2^q; the pattern of n * 2^q is ((q + mant + bias - 1) << mant) + n, which
  // also covers the subnormal range and a carry into the next binade.
  const int64_t mag = (static_cast<int64_t>(q + f.mant + f.bias - 1) << f.mant) + n;
  return mag > 0xFF ? 0x100u : static_cast<uint32_t>(mag);
}

}  // namespace narrow_detail

// --- float8 and float4 to float32 (exact) ---

inline float float8e4m3fn_to_float(uint8_t b) {
  const uint32_t mag = b & 0x7Fu;
  if (mag == 0x7F) return narrow_detail::bits_to_float(0x7FC00000u | (b & 0x80u) << 24);
  const float v = narrow_detail::decode_magnitude(mag, narrow_detail::kE4M3FN);
  return (b & 0x80) ? -v : v;
}

inline float float8e4m3fnuz_to_float(uint8_t b) {
  if (b == 0x80) return narrow_detail::bits_to_float(0x7FC00000u);
  const float v = narrow_detail::decode_magnitude(b & 0x7Fu, narrow_detail::kE4M3FNUZ);
  return (b & 0x80) ? -v : v;
}

inline float float8e5m2_to_float(uint8_t b) {
  const uint32_t mag = b & 0x7Fu, sign = (b & 0x80u) << 24;
  if (mag == 0x7C) return narrow_detail::bits_to_float(0x7F800000u | sign);
  if (mag > 0x7C) return narrow_detail::bits_to_float(0x7FC00000u | sign);
  const float v = narrow_detail::decode_magnitude(mag, narrow_detail::kE5M2);
  return sign ? -v : v;
}

inline float float8e5m2fnuz_to_float(uint8_t b) {
  if (b == 0x80) return narrow_detail::bits_to_float(0x7FC00000u);
  const float v = narrow_detail::decode_magnitude(b & 0x7Fu, narrow_detail::kE5M2FNUZ);
  return (b & 0x80) ? -v : v;
}

// 2^(b - 127); 0xFF is NaN.
inline float float8e8m0_to_float(uint8_t b) {
  if (b == 0xFF) return narrow_detail::bits_to_float(0x7FC00000u);
  if (b == 0) return narrow_detail::bits_to_float(0x00400000u);  // 2^-127, a float32 subnormal
  return narrow_detail::bits_to_float(static_cast<uint32_t>(b) << 23);
}

// The low 4 bits of b are the float4 pattern.
inline float float4e2m1_to_float(uint8_t b) {
  const float v = narrow_detail::decode_magnitude(b & 0x7u, narrow_detail::kE2M1);
  return (b & 0x8) ? -v : v;
}

// --- float32 to float8 and float4 ---

namespace narrow_detail {

// Rounds x to the float8 format f. The formats differ only in what NaN and an overflow without
// saturation become (`nan`, `overflow`: signed patterns, or with `fnuz` the one unsigned 0x80)
// and in fnuz's single, unsigned zero. Saturation gives the largest finite magnitude.
inline uint8_t float_to_float8(float x, const MiniFloat& f, uint8_t nan, uint8_t overflow,
                               bool fnuz, bool saturate) {
  const uint32_t u = float_to_bits(x), a = u & 0x7FFFFFFFu;
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  if (a > 0x7F800000u) return fnuz ? nan : sign | nan;
  const uint32_t mag = a == 0x7F800000u ? 0x100u : round_magnitude(a, f);
  if (mag > f.max_mag) {
    if (saturate) return sign | static_cast<uint8_t>(f.max_mag);
    return fnuz ? overflow : sign | overflow;
  }
  if (fnuz && mag == 0) return 0;
  return sign | static_cast<uint8_t>(mag);
}

}  // namespace narrow_detail

inline uint8_t float_to_float8e4m3fn(float x, bool saturate = true) {
  return narrow_detail::float_to_float8(x, narrow_detail::kE4M3FN, 0x7F, 0x7F, false, saturate);
}

inline uint8_t float_to_float8e4m3fnuz(float x, bool saturate = true) {
  return narrow_detail::float_to_float8(x, narrow_detail::kE4M3FNUZ, 0x80, 0x80, true, saturate);
}

inline uint8_t float_to_float8e5m2(float x, bool saturate = true) {
  return narrow_detail::float_to_float8(x, narrow_detail::kE5M2, 0x7E, 0x7C, false, saturate);
}

inline uint8_t float_to_float8e5m2fnuz(float x, bool saturate = true) {
  return narrow_detail::float_to_float8(x, narrow_detail::kE5M2FNUZ, 0x80, 0x80, true, saturate);
}

// Always saturates (float4 has no infinity); NaN becomes 0x8.
inline uint8_t float_to_float4e2m1(float x) {
  using namespace narrow_detail;
  const uint32_t u = float_to_bits(x), a = u & 0x7FFFFFFFu;
  const uint8_t sign = static_cast<uint8_t>((u >> 28) & 0x8u);
  if (a > 0x7F800000u) return 0x8;
  const uint32_t mag = a == 0x7F800000u ? 0x100u : round_magnitude(a, kE2M1);
  return sign | static_cast<uint8_t>(mag > kE2M1.max_mag ? kE2M1.max_mag : mag);
}

// The exponent of |x| (its sign is ignored: ONNX leaves negative inputs unspecified), rounded per
// `mode` on float32's bits: NaN and infinity give 0xFF (NaN); a result past 2^127 gives 0xFE
// (2^127) when saturating, else 0xFF. Zero gives 0 (2^-127) under kUp and kDown.
inline uint8_t float_to_float8e8m0(float x, bool saturate = true,
                                   E8M0Rounding mode = E8M0Rounding::kUp) {
  const uint32_t u = narrow_detail::float_to_bits(x);
  uint32_t exp = (u >> 23) & 0xFF;
  if (exp == 0xFF) return 0xFF;
  const uint32_t frac = u & 0x7FFFFF;
  bool up = false;
  if (mode == E8M0Rounding::kUp) {
    up = frac != 0;
  } else if (mode == E8M0Rounding::kNearest) {
    // At least half way to the next power of two (the guard bit); a subnormal (exponent 0)
    // needs more than half.
    const bool guard = (frac & 0x400000) != 0, rest = (frac & 0x3FFFFF) != 0;
    up = guard && (rest || exp > 0);
  }
  if (up) {
    if (exp == 0xFE) return saturate ? 0xFE : 0xFF;
    ++exp;
  }
  return static_cast<uint8_t>(exp);
}

// --- 4- and 2-bit integers: the stored byte of a wider integer, wrapped (two's complement) ---

inline int8_t wrap_int4(int64_t v) {
  return static_cast<int8_t>(static_cast<int>((v & 0xF) ^ 0x8) - 8);
}
inline uint8_t wrap_uint4(int64_t v) {
  return static_cast<uint8_t>(v & 0xF);
}
inline int8_t wrap_int2(int64_t v) {
  return static_cast<int8_t>(static_cast<int>((v & 0x3) ^ 0x2) - 2);
}
inline uint8_t wrap_uint2(int64_t v) {
  return static_cast<uint8_t>(v & 0x3);
}

// --- Any narrow dtype ---

// True for the 4- and 2-bit integers.
inline bool is_sub_byte_int(DType t) {
  return t == DType::kInt4 || t == DType::kUInt4 || t == DType::kInt2 || t == DType::kUInt2;
}

// True for every dtype of ONNX's narrow set (the narrow floats and the 4- and 2-bit integers).
inline bool is_narrow(DType t) {
  return is_narrow_float(t) || is_sub_byte_int(t);
}

// Bits per element in ONNX files: 4 for int4/uint4/float4e2m1, 2 for int2/uint2, else 0 (whole
// bytes).
inline int packed_bits(DType t) {
  switch (t) {
    case DType::kInt4:
    case DType::kUInt4:
    case DType::kFloat4E2M1:
      return 4;
    case DType::kInt2:
    case DType::kUInt2:
      return 2;
    default:
      return 0;
  }
}

// The value of one stored element of a narrow dtype `t` (is_narrow(t)) as float32; exact.
inline float narrow_to_float(DType t, uint8_t b) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return float8e4m3fn_to_float(b);
    case DType::kFloat8E4M3FNUZ:
      return float8e4m3fnuz_to_float(b);
    case DType::kFloat8E5M2:
      return float8e5m2_to_float(b);
    case DType::kFloat8E5M2FNUZ:
      return float8e5m2fnuz_to_float(b);
    case DType::kFloat8E8M0:
      return float8e8m0_to_float(b);
    case DType::kFloat4E2M1:
      return float4e2m1_to_float(b);
    case DType::kInt4:
    case DType::kInt2:
      return static_cast<float>(static_cast<int8_t>(b));
    default:  // uint4, uint2
      return static_cast<float>(b);
  }
}

// x as a narrow floating dtype `t` (is_narrow_float(t)); `saturate` as Cast's attribute (float4
// always saturates), `mode` for float8e8m0.
inline uint8_t float_to_narrow_float(DType t, float x, bool saturate,
                                     E8M0Rounding mode = E8M0Rounding::kUp) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return float_to_float8e4m3fn(x, saturate);
    case DType::kFloat8E4M3FNUZ:
      return float_to_float8e4m3fnuz(x, saturate);
    case DType::kFloat8E5M2:
      return float_to_float8e5m2(x, saturate);
    case DType::kFloat8E5M2FNUZ:
      return float_to_float8e5m2fnuz(x, saturate);
    case DType::kFloat8E8M0:
      return float_to_float8e8m0(x, saturate, mode);
    default:
      return float_to_float4e2m1(x);
  }
}

// An integer as a 4- or 2-bit dtype `t` (is_sub_byte_int(t)), wrapped to its width.
inline uint8_t wrap_sub_byte(DType t, int64_t v) {
  switch (t) {
    case DType::kInt4:
      return static_cast<uint8_t>(wrap_int4(v));
    case DType::kUInt4:
      return wrap_uint4(v);
    case DType::kInt2:
      return static_cast<uint8_t>(wrap_int2(v));
    default:
      return wrap_uint2(v);
  }
}

// Packs n stored elements of a 4- or 2-bit dtype (packed_bits(t) > 0) into
// ceil(n * bits / 8) bytes, the first element in the lowest bits, unused high bits zero.
inline void pack_sub_byte(DType t, const uint8_t* src, int64_t n, uint8_t* dst) {
  const int bits = packed_bits(t), per_byte = 8 / bits;
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  const int64_t bytes = (n + per_byte - 1) / per_byte;
  for (int64_t i = 0; i < bytes; ++i) dst[i] = 0;
  for (int64_t i = 0; i < n; ++i)
    dst[i / per_byte] |= static_cast<uint8_t>((src[i] & mask) << (bits * (i % per_byte)));
}

// The inverse of pack_sub_byte: n elements from packed bytes, int4 and int2 sign-extended.
inline void unpack_sub_byte(DType t, const uint8_t* src, int64_t n, uint8_t* dst) {
  const int bits = packed_bits(t), per_byte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const bool is_signed = t == DType::kInt4 || t == DType::kInt2;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t v = (static_cast<uint32_t>(src[i / per_byte]) >> (bits * (i % per_byte))) & mask;
    dst[i] = is_signed ? static_cast<uint8_t>(t == DType::kInt4 ? wrap_int4(v) : wrap_int2(v))
                       : static_cast<uint8_t>(v);
  }
}

}  // namespace lumen
