// AVX2 forms of e^x, the logistic function, erf and the epilogues' activations (activate8), for
// activations applied to outputs in bulk (convolutions and matrix products, in registers where the
// kernel allows): e^x takes about 18 instructions per 8 values where the
// portable exp_f of elementwise_math.h, vectorised by the compiler, takes about 45 (its clamps and
// two-step scaling are written as selects and integer arithmetic to stay exact at the edges of
// the float range). Here the argument is clamped to [-87.3, 88.3], where one scaling by 2^n is
// exact; on a sweep of that range e^x came within 1 ulp and the logistic function within 2 ulp of
// the correctly rounded value. Past the clamp the logistic function is 1 exactly, or 4.5e-39 for
// large negative x (true value below that). NaN in gives NaN out. AVX-512 forms (exp16, sigmoid16,
// erf16, activate16) follow.
#pragma once

#include <cstddef>
#include <iterator>

#include "backends/cpu/isa.h"
#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {

// Whether activate8 computes this activation (the others are finish_row()'s alone).
inline bool activates_in_registers(GemmActivation act) {
  switch (act) {
    case GemmActivation::kNone:
    case GemmActivation::kRelu:
    case GemmActivation::kLeakyRelu:
    case GemmActivation::kClip:
    case GemmActivation::kSigmoid:
    case GemmActivation::kHardSwish:
    case GemmActivation::kSwish:
    case GemmActivation::kGeluErf:
    case GemmActivation::kGeluTanh:
      return true;
    default:
      return false;
  }
}

// exp8's and exp16's constants: the clamp, ln 2 in Cephes' two parts, and the coefficients of
// q(r) (e^r = 1 + r + r^2 q(r)) from the lowest power up.
inline constexpr float kExpLow = -87.3f, kExpHigh = 88.3f;
inline constexpr float kLog2E = 1.44269504088896341f;
inline constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;
inline constexpr float kExpQ[] = {5.0000001201e-1f, 1.6666665459e-1f, 4.1665795894e-2f,
                                  8.3334519073e-3f, 1.3981999507e-3f, 1.9875691500e-4f};
// GELU: 1 / sqrt 2 (its erf form), and 2 sqrt(2 / pi) (1 + 0.044715 v^2) as A + B v^2 (its tanh
// form, written as v sigmoid(v (A + B v^2))).
inline constexpr float kInvSqrt2 = 0.70710678118654752f;
inline constexpr float kGeluTanhA = 1.59576912161f, kGeluTanhB = 0.0713548162726f;

// erf's odd rational approximation x P(x^2) / Q(x^2) (elementwise_math.h's erf_f): P's and Q's
// coefficients from the highest power down, for erf8 and erf16.
inline constexpr float kErfP[] = {
    -2.72614225801306e-10f, 2.77068142495902e-08f,  -2.10102402082508e-06f, -5.69250639462346e-05f,
    -7.34990630326855e-04f, -2.95459980854025e-03f, -1.60960333262415e-02f};
inline constexpr float kErfQ[] = {-1.45660718464996e-05f, -2.13374055278905e-04f,
                                  -1.68282697438203e-03f, -7.37332916720468e-03f,
                                  -1.42647390514189e-02f};

}  // namespace lumen::cpu

// Everything below is compiled for AVX2 (backends/cpu/isa.h): callers check has_avx2() first.
#if LUMEN_X86
#include <immintrin.h>

LUMEN_AVX2_BEGIN
namespace lumen::cpu {

// e^x for x in the clamp range (outside it, e^x at the nearest bound). Written for a short chain
// of dependent instructions, which bounds these functions' throughput where each value's chain is
// long (about 70 cycles with Horner's rule and a rounding instruction, so the core overlaps only a
// few vectors): n is rounded by adding 1.5 * 2^23 (its integer bits then hold n for 2^n), the
// polynomial is evaluated by Estrin's scheme, and 2^n multiplies in the final fused multiply-add.
// Over 4096 values on one core, 8 values of e^x took 2.87 ns with Horner and vroundps, 2.35 ns
// now; swish 4.07 and 3.55 ns.
inline __m256 exp8(__m256 x) {
  // max(lo, x) and min(hi, .) return their second operand for NaN, so NaN passes through.
  x = _mm256_min_ps(_mm256_set1_ps(kExpHigh), _mm256_max_ps(_mm256_set1_ps(kExpLow), x));
  const __m256 magic = _mm256_set1_ps(12582912.0f);  // 1.5 * 2^23: t's low bits hold n
  const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(kLog2E), magic);
  const __m256 n = _mm256_sub_ps(t, magic);
  // r = x - n ln2 in two steps (Cephes' split of ln2), |r| <= ln2 / 2.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2High), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Low), r);
  // Cephes' degree-6 polynomial for e^r: 1 + r + r^2 q(r), q of degree 5 by Estrin's scheme.
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 q01 = _mm256_fmadd_ps(_mm256_set1_ps(kExpQ[1]), r, _mm256_set1_ps(kExpQ[0]));
  const __m256 q23 = _mm256_fmadd_ps(_mm256_set1_ps(kExpQ[3]), r, _mm256_set1_ps(kExpQ[2]));
  const __m256 q45 = _mm256_fmadd_ps(_mm256_set1_ps(kExpQ[5]), r, _mm256_set1_ps(kExpQ[4]));
  const __m256 q = _mm256_fmadd_ps(r2, _mm256_fmadd_ps(r2, q45, q23), q01);
  const __m256 y = _mm256_fmadd_ps(r2, q, r);  // e^r - 1
  // 2^n from t's bits: n + 127 in [1, 254] shifted into the exponent field.
  const __m256 s = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(127)), 23));
  return _mm256_fmadd_ps(y, s, s);
}

// 1 / (1 + e^-x).
inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// x / (1 + e^-x): x times the logistic function in one division.
inline __m256 swish8(__m256 x) {
  return _mm256_div_ps(
      x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// erf on [-4, 4] (+-1 to float precision beyond): elementwise_math.h's erf_f, the odd rational
// approximation x P(x^2) / Q(x^2), absolute error at most 3.3e-7 against libm (simd_math_test).
// NaN in gives NaN out.
inline __m256 erf8(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(4.0f), _mm256_max_ps(_mm256_set1_ps(-4.0f), x));
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(kErfP[0]), q = _mm256_set1_ps(kErfQ[0]);
#pragma GCC unroll 8
  for (size_t k = 1; k < std::size(kErfP); ++k)
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(kErfP[k]));
#pragma GCC unroll 8
  for (size_t k = 1; k < std::size(kErfQ); ++k)
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(kErfQ[k]));
  return _mm256_div_ps(_mm256_mul_ps(x, p), q);
}

// The epilogue's activation on 8 values, for the activations activates_in_registers() names
// (others pass through unchanged). Comparisons keep finish_row()'s results, NaN included.
inline __m256 activate8(__m256 v, const GemmEpilogue& e) {
  switch (e.activation) {
    case GemmActivation::kRelu:  // v > 0 ? v : 0
      return _mm256_and_ps(v, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
    case GemmActivation::kLeakyRelu:  // v < 0 ? alpha v : v
      return _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(e.alpha)),
                              _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
    case GemmActivation::kClip: {  // min(max(v, alpha), beta), alpha and beta where v < or >
      const __m256 lo = _mm256_set1_ps(e.alpha), hi = _mm256_set1_ps(e.beta);
      v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
      return _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
    }
    case GemmActivation::kSigmoid:
      return sigmoid8(v);
    case GemmActivation::kHardSwish: {  // v * clamp(v / 6 + 1/2, 0, 1)
      __m256 g = _mm256_fmadd_ps(v, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
      g = _mm256_blendv_ps(g, _mm256_setzero_ps(),
                           _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ));
      g = _mm256_blendv_ps(g, _mm256_set1_ps(1.0f),
                           _mm256_cmp_ps(g, _mm256_set1_ps(1.0f), _CMP_GT_OQ));
      return _mm256_mul_ps(v, g);
    }
    case GemmActivation::kSwish:
      return swish8(v);
    case GemmActivation::kGeluErf: {  // v / 2 (1 + erf(v / sqrt 2))
      const __m256 half = _mm256_mul_ps(v, _mm256_set1_ps(0.5f));
      return _mm256_fmadd_ps(half, erf8(_mm256_mul_ps(v, _mm256_set1_ps(kInvSqrt2))), half);
    }
    case GemmActivation::kGeluTanh: {  // v / 2 (1 + tanh(u)) = v sigmoid(2u)
      // 2u = 2 sqrt(2 / pi) (v + 0.044715 v^3) = v (1.5957691 + 0.0713548 v^2)
      const __m256 two_u =
          _mm256_mul_ps(v, _mm256_fmadd_ps(_mm256_mul_ps(v, v), _mm256_set1_ps(kGeluTanhB),
                                           _mm256_set1_ps(kGeluTanhA)));
      return _mm256_mul_ps(v, sigmoid8(two_u));
    }
    default:
      return v;
  }
}

}  // namespace lumen::cpu
LUMEN_ISA_END

// The same functions 16 values wide, for AVX-512 code (callers check has_avx512() first). The
// logistic function multiplies by a reciprocal estimate refined by one Newton step instead of
// dividing; the sweep of simd_math_test keeps it within 2 ulp of the correctly rounded value, as
// the division is. On 2 Zen 5 cores the swish epilogue of a 12544 x 16 x 96 product (EfficientNet-
// B0's first expansion) cost 0.21 ms 8 wide with a division and 0.11 ms 16 wide, and the model ran
// in 5.00-5.06 ms instead of 5.32-5.42 (alternating, 3 rounds).
// GCC 12's AVX-512 intrinsics (_mm512_max_ps and others) pass an undefined register as the merge
// source of unmasked operations, which -Wmaybe-uninitialized reports where they are inlined; those
// lanes are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
LUMEN_AVX512_BEGIN
namespace lumen::cpu {

// exp8's steps, 16 wide.
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(kExpHigh), _mm512_max_ps(_mm512_set1_ps(kExpLow), x));
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(kLog2E), magic);
  const __m512 n = _mm512_sub_ps(t, magic);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2High), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Low), r);
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 q01 = _mm512_fmadd_ps(_mm512_set1_ps(kExpQ[1]), r, _mm512_set1_ps(kExpQ[0]));
  const __m512 q23 = _mm512_fmadd_ps(_mm512_set1_ps(kExpQ[3]), r, _mm512_set1_ps(kExpQ[2]));
  const __m512 q45 = _mm512_fmadd_ps(_mm512_set1_ps(kExpQ[5]), r, _mm512_set1_ps(kExpQ[4]));
  const __m512 q = _mm512_fmadd_ps(r2, _mm512_fmadd_ps(r2, q45, q23), q01);
  const __m512 y = _mm512_fmadd_ps(r2, q, r);
  const __m512 s = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(127)), 23));
  return _mm512_fmadd_ps(y, s, s);
}

// 1 / d for d in [1, 2^128): the 14-bit estimate and one Newton step.
inline __m512 reciprocal16(__m512 d) {
  const __m512 r = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f)), r);
}

// 1 / (1 + e^-x).
inline __m512 sigmoid16(__m512 x) {
  return reciprocal16(
      _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// erf8's rational approximation, 16 wide, dividing through reciprocal16's refined estimate (Q is
// negative and at least 1.4e-2 in magnitude on [-4, 4]).
inline __m512 erf16(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(4.0f), _mm512_max_ps(_mm512_set1_ps(-4.0f), x));
  const __m512 x2 = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(kErfP[0]), q = _mm512_set1_ps(kErfQ[0]);
#pragma GCC unroll 8
  for (size_t k = 1; k < std::size(kErfP); ++k)
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(kErfP[k]));
#pragma GCC unroll 8
  for (size_t k = 1; k < std::size(kErfQ); ++k)
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(kErfQ[k]));
  return _mm512_mul_ps(_mm512_mul_ps(x, p), reciprocal16(q));
}

// activate8 16 values wide; the activations it leaves unchanged pass through here too.
inline __m512 activate16(__m512 v, const GemmEpilogue& e) {
  const __m512 zero = _mm512_setzero_ps();
  switch (e.activation) {
    case GemmActivation::kRelu:
      return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), v);
    case GemmActivation::kLeakyRelu:
      return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v,
                                _mm512_set1_ps(e.alpha));
    case GemmActivation::kClip: {
      const __m512 lo = _mm512_set1_ps(e.alpha), hi = _mm512_set1_ps(e.beta);
      v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
      return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
    }
    case GemmActivation::kSigmoid:
      return sigmoid16(v);
    case GemmActivation::kHardSwish: {
      __m512 g = _mm512_fmadd_ps(v, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
      g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(g, zero, _CMP_LT_OQ), zero);
      g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(g, _mm512_set1_ps(1.0f), _CMP_GT_OQ),
                             _mm512_set1_ps(1.0f));
      return _mm512_mul_ps(v, g);
    }
    case GemmActivation::kSwish:
      return _mm512_mul_ps(v, sigmoid16(v));
    case GemmActivation::kGeluTanh: {
      const __m512 two_u =
          _mm512_mul_ps(v, _mm512_fmadd_ps(_mm512_mul_ps(v, v), _mm512_set1_ps(kGeluTanhB),
                                           _mm512_set1_ps(kGeluTanhA)));
      return _mm512_mul_ps(v, sigmoid16(two_u));
    }
    case GemmActivation::kGeluErf: {
      const __m512 half = _mm512_mul_ps(v, _mm512_set1_ps(0.5f));
      return _mm512_fmadd_ps(half, erf16(_mm512_mul_ps(v, _mm512_set1_ps(kInvSqrt2))), half);
    }
    default:
      return v;
  }
}

}  // namespace lumen::cpu
LUMEN_ISA_END
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // LUMEN_X86
