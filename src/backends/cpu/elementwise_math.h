// Branch-free float32 exp, tanh, sigmoid and erf for the element-wise kernels. libm's expf,
// tanhf and erff are opaque calls that stop g++ from vectorising a loop (glibc's vector variants
// are only used under -ffast-math), so, like ONNX Runtime's MLAS and Eigen, we evaluate our own
// range reductions and polynomials: plain arithmetic and selects that become AVX2 code when
// inlined into a contiguous loop. Accuracy is a few ulp over the whole float range; NaN in gives
// NaN out, and overflow gives inf as libm does.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace lumen::cpu {

// cond ? a : b as a bitwise blend. Without -fno-trapping-math g++ does not if-convert a float
// ternary whose condition is a float comparison (the comparison may raise FE_INVALID), which
// leaves a branch in the loop and stops vectorisation; integer bit operations never trap, so this
// form becomes a compare and a blend.
inline float select(bool cond, float a, float b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) |
                              (std::bit_cast<uint32_t>(b) & ~mask));
}

// e^x. Cephes' reduction x = n ln2 + r, |r| <= ln2/2, and its degree-6 polynomial for e^r; the
// scale 2^n is applied in two halves so that results near the overflow and underflow edges
// (including denormals) come out right. e^89 overflows float, e^-104 underflows to 0, so x is
// clamped to that range: once with NaN sent to a bound (for n, which is converted to an integer)
// and once with NaN kept (for r, so that NaN flows through to the result).
inline float exp_f(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting rounds to integer
  constexpr float kLo = -104.0f, kHi = 89.0f;
  float xn = select(x > kLo, x, kLo);
  xn = select(xn < kHi, xn, kHi);
  float xr = select(x < kLo, kLo, x);
  xr = select(xr > kHi, kHi, xr);
  const float n = (xn * kLog2e + kRound) - kRound;
  float r = std::fma(n, -kLn2Hi, xr);
  r = std::fma(n, -kLn2Lo, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r) + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1;
  const int32_t n2 = ni - n1;
  const float s1 = std::bit_cast<float>((n1 + 127) << 23);
  const float s2 = std::bit_cast<float>((n2 + 127) << 23);
  return (p * s1) * s2;
}

// 1 / (1 + e^-x): exact limits 0 and 1 for large |x|.
inline float sigmoid_f(float x) {
  return 1.0f / (1.0f + exp_f(-x));
}

// tanh: Cephes' odd polynomial for |x| < 0.625, else 1 - 2 / (e^2|x| + 1) with x's sign.
inline float tanh_f(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = std::fma(p, z, 2.06390887954e-2f);
  p = std::fma(p, z, -5.37397155531e-2f);
  p = std::fma(p, z, 1.33314422036e-1f);
  p = std::fma(p, z, -3.33332819422e-1f);
  const float small = std::fma(p * z, x, x);
  const float big = 1.0f - 2.0f / (exp_f(2.0f * ax) + 1.0f);
  return select(ax < 0.625f, small, std::copysign(big, x));
}

// erf: the odd rational approximation x P(x^2) / Q(x^2) on [-4, 4] (erf is +-1 to float
// precision beyond), maximum absolute error about 1e-7.
inline float erf_f(float x) {
  float xc = select(x < -4.0f, -4.0f, x);  // NaN stays NaN
  xc = select(xc > 4.0f, 4.0f, xc);
  const float x2 = xc * xc;
  float p = -2.72614225801306e-10f;
  p = std::fma(p, x2, 2.77068142495902e-08f);
  p = std::fma(p, x2, -2.10102402082508e-06f);
  p = std::fma(p, x2, -5.69250639462346e-05f);
  p = std::fma(p, x2, -7.34990630326855e-04f);
  p = std::fma(p, x2, -2.95459980854025e-03f);
  p = std::fma(p, x2, -1.60960333262415e-02f);
  float q = -1.45660718464996e-05f;
  q = std::fma(q, x2, -2.13374055278905e-04f);
  q = std::fma(q, x2, -1.68282697438203e-03f);
  q = std::fma(q, x2, -7.37332916720468e-03f);
  q = std::fma(q, x2, -1.42647390514189e-02f);
  return xc * p / q;
}

}  // namespace lumen::cpu
