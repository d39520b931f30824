// Independent references for ONNX's narrow types in tests, written from the formats' definitions
// (bit fields decoded by hand, rounding by search over every representable value), not from
// lumen's conversions: float8 E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ, float4 E2M1, float8 E8M0 and the
// 4- and 2-bit integers.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lumen/dtype.h"

namespace lumen::test {

// A small float's layout: exponent and mantissa widths, bias, and which patterns are special.
struct RefFloat {
  int exp_bits;
  int mant_bits;
  int bias;
  bool ieee;      // all-ones exponent: infinity (mantissa 0) or NaN (E5M2)
  bool fn;        // only the all-ones pattern is NaN, no infinity (E4M3FN)
  bool uz;        // 0x80 (sign bit alone) is the only NaN, no negative zero (FNUZ)
};

inline RefFloat ref_format(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return {4, 3, 7, false, true, false};
    case DType::kFloat8E4M3FNUZ:
      return {4, 3, 8, false, false, true};
    case DType::kFloat8E5M2:
      return {5, 2, 15, true, false, false};
    case DType::kFloat8E5M2FNUZ:
      return {5, 2, 16, false, false, true};
    default:  // float4e2m1: no specials
      return {2, 1, 1, false, false, false};
  }
}

inline int ref_bits(const RefFloat& f) {
  return 1 + f.exp_bits + f.mant_bits;
}

// The value of bit pattern p.
inline double ref_decode(uint32_t p, const RefFloat& f) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const uint32_t sign_mask = 1u << (f.exp_bits + f.mant_bits);
  const bool negative = (p & sign_mask) != 0;
  const uint32_t e = (p >> f.mant_bits) & ((1u << f.exp_bits) - 1);
  const uint32_t m = p & ((1u << f.mant_bits) - 1);
  const uint32_t all_e = (1u << f.exp_bits) - 1, all_m = (1u << f.mant_bits) - 1;
  if (f.uz && p == sign_mask) return nan;
  if (f.ieee && e == all_e) return m == 0 ? (negative ? -INFINITY : INFINITY) : nan;
  if (f.fn && e == all_e && m == all_m) return nan;
  double v = e == 0 ? std::ldexp(static_cast<double>(m), 1 - f.bias - f.mant_bits)
                    : std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.mant_bits),
                                 static_cast<int>(e) - f.bias);
  return negative ? -v : v;
}

// x rounded to nearest (ties to an even pattern) among f's finite values, with ONNX Cast's
// overflow rules: beyond the largest finite value (after rounding, as if the exponent were
// unbounded) or infinite, saturate gives +/- that value; otherwise infinity where the format has
// one, else NaN. Returns a pattern; NaN in gives a NaN pattern.
inline uint32_t ref_encode(double x, const RefFloat& f, bool saturate) {
  const uint32_t sign_mask = 1u << (f.exp_bits + f.mant_bits);
  const bool float4 = ref_bits(f) == 4;
  auto nan_pattern = [&](bool negative) -> uint32_t {
    if (f.uz) return sign_mask;
    if (f.ieee) return (negative ? sign_mask : 0) | (sign_mask - 1);
    if (float4) return sign_mask;  // float4 has no NaN: ONNX's reference gives 0x8
    return (negative ? sign_mask : 0) | (sign_mask - 1);
  };
  if (std::isnan(x)) return nan_pattern(std::signbit(x));
  const bool negative = std::signbit(x);
  const double a = std::fabs(x);
  // Non-negative finite patterns, in increasing order.
  uint32_t max_p = 0;
  double max_v = 0;
  for (uint32_t p = 0; p < sign_mask; ++p) {
    const double v = ref_decode(p, f);
    if (std::isfinite(v) && v > max_v) max_v = v, max_p = p;
  }
  // The next value past the largest, as if the exponent went on.
  const double ulp_max = std::ldexp(1.0, std::ilogb(max_v) - f.mant_bits);
  const double next_v = max_v + ulp_max;
  const uint32_t next_p = max_p + 1;
  uint32_t best = 0;
  double best_d = INFINITY;
  bool overflow = std::isinf(a) || a > next_v;
  if (!overflow) {
    for (uint32_t p = 0; p <= next_p; ++p) {
      const double v = p == next_p ? next_v : ref_decode(p, f);
      if (!std::isfinite(v)) continue;
      const double d = std::fabs(v - a);
      if (d < best_d || (d == best_d && (p & 1u) == 0)) best = p, best_d = d;
    }
    overflow = best == next_p;
  }
  uint32_t mag = best;
  if (overflow) {
    if (saturate || float4) {
      mag = max_p;
    } else if (f.ieee) {
      mag = ((1u << f.exp_bits) - 1) << f.mant_bits;  // infinity
    } else {
      return nan_pattern(negative);
    }
  }
  if (mag == 0 && f.uz) return 0;
  return (negative ? sign_mask : 0) | mag;
}

// float8e8m0 of positive normal (or zero) x: the power of two 2^(e-127) below or above it per
// `mode` ("up": the smallest at or above, "down": the largest at or below, "nearest": the nearer,
// ties up); past 2^127: 254 when saturating, else 255 (NaN). NaN and infinity give 255.
inline uint32_t ref_e8m0(double x, const char* mode, bool saturate) {
  if (!std::isfinite(x)) return 255;
  if (x == 0) return 0;
  int n = 0;
  const double frac = std::frexp(x, &n);  // x = frac * 2^n, frac in [0.5, 1)
  const int k = n - 1;                     // 2^k <= x < 2^(k+1)
  int e = k;
  const std::string m = mode;
  if (m == "up" && frac != 0.5) e = k + 1;
  if (m == "nearest" && x / std::ldexp(1.0, k) >= 1.5) e = k + 1;
  const int biased = e + 127;
  if (biased > 254) return saturate ? 254 : 255;
  return static_cast<uint32_t>(biased);
}

// v wrapped (two's complement) to `bits` bits, signed or not.
inline int64_t ref_wrap(int64_t v, int bits, bool is_signed) {
  const int64_t range = int64_t{1} << bits;
  int64_t w = ((v % range) + range) % range;
  if (is_signed && w >= range / 2) w -= range;
  return w;
}

}  // namespace lumen::test
