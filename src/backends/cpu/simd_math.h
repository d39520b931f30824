// AVX2 forms of e^x, the logistic function, erf and the epilogues' activations (activate8), for
// activations applied to outputs in bulk (convolutions and matrix products, in registers where the
// kernel allows): e^x takes about 18 instructions per 8 values where the
// portable exp_f of elementwise_math.h, vectorised by the compiler, takes about 45 (its clamps and
// two-step scaling are written as selects and integer arithmetic to stay exact at the edges of
// the float range). Here the argument is clamped to [-87.3, 88.3], where one scaling by 2^n is
// exact; on a sweep of that range e^x came within 1 ulp and the logistic function within 2 ulp of
// the correctly rounded value. Past the clamp the logistic function is 1 exactly, or 4.5e-39 for
// large negative x (true value below that). NaN in gives NaN out.
#pragma once

#include <immintrin.h>

#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {

// e^x for x in the clamp range (outside it, e^x at the nearest bound).
inline __m256 exp8(__m256 x) {
  // max(lo, x) and min(hi, .) return their second operand for NaN, so NaN passes through.
  x = _mm256_min_ps(_mm256_set1_ps(88.3f), _mm256_max_ps(_mm256_set1_ps(-87.3f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2 in two steps (Cephes' split of ln2), |r| <= ln2 / 2.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // Cephes' degree-6 polynomial for e^r: 1 + r + r^2 p(r).
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  // 2^n from the exponent bits: n in [-126, 127] here, a normal float.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// 1 / (1 + e^-x).
inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// erf on [-4, 4] (+-1 to float precision beyond): elementwise_math.h's erf_f, the odd rational
// approximation x P(x^2) / Q(x^2), absolute error at most 3.3e-7 against libm (simd_math_test).
// NaN in gives NaN out.
inline __m256 erf8(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(4.0f), _mm256_max_ps(_mm256_set1_ps(-4.0f), x));
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-2.72614225801306e-10f);
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(2.77068142495902e-08f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-2.10102402082508e-06f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-5.69250639462346e-05f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-7.34990630326855e-04f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-2.95459980854025e-03f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-1.60960333262415e-02f));
  __m256 q = _mm256_set1_ps(-1.45660718464996e-05f);
  q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-2.13374055278905e-04f));
  q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-1.68282697438203e-03f));
  q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-7.37332916720468e-03f));
  q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-1.42647390514189e-02f));
  return _mm256_div_ps(_mm256_mul_ps(x, p), q);
}

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
      return _mm256_mul_ps(v, sigmoid8(v));
    case GemmActivation::kGeluErf: {  // v / 2 (1 + erf(v / sqrt 2))
      const __m256 half = _mm256_mul_ps(v, _mm256_set1_ps(0.5f));
      return _mm256_fmadd_ps(half, erf8(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f))),
                             half);
    }
    case GemmActivation::kGeluTanh: {  // v / 2 (1 + tanh(u)) = v sigmoid(2u)
      // 2u = 2 sqrt(2 / pi) (v + 0.044715 v^3) = v (1.5957691 + 0.0713548 v^2)
      const __m256 two_u =
          _mm256_mul_ps(v, _mm256_fmadd_ps(_mm256_mul_ps(v, v), _mm256_set1_ps(0.0713548162726f),
                                           _mm256_set1_ps(1.59576912161f)));
      return _mm256_mul_ps(v, sigmoid8(two_u));
    }
    default:
      return v;
  }
}

}  // namespace lumen::cpu
