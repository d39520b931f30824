// Small math helpers shared by the normalisation, softmax and reduction kernels: a vectorisable
// exp and blocked, accurate float row sums.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace lumen::cpu {

// Element counts above which the norm/softmax/reduce kernels go parallel with OpenMP.
inline constexpr int64_t kNormParallelWork = 32768;

// Arguments of exp_in_range: exp(-104) rounds to 0 and exp(88.72) is about FLT_MAX.
inline constexpr float kExpMinArg = -104.0f;
inline constexpr float kExpMaxArg = 88.7228390f;

// Clamps an exp argument into [kExpMinArg, kExpMaxArg]; NaN stays NaN.
inline float clamp_exp_arg(float x) {
  float v = x < kExpMinArg ? kExpMinArg : x;
  return v > kExpMaxArg ? kExpMaxArg : v;
}

// exp(x) for x in [kExpMinArg, kExpMaxArg] (or NaN, which stays NaN), as plain arithmetic so that
// g++ vectorises loops that call it (glibc's expf is not vectorised without -ffast-math). Range
// reduction x = n*ln2 + r with |r| <= ln2/2, a degree-6 polynomial for e^r (the classic
// single-precision minimax coefficients), and 2^n applied as two normal powers of two so that
// results below FLT_MIN underflow gradually. Relative error about 2 ulp.
//
// Callers clamp in a separate loop (clamp_exp_arg): with the default -ftrapping-math, g++ turns a
// clamp to constants followed by arithmetic into branches, and a loop with branches around
// floating-point arithmetic is not vectorised. For the same reason there is no std::floor here.
inline float exp_in_range(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: (v + kRound) - kRound rounds v to integer
  float n = (x * kLog2e + kRound) - kRound;
  // A NaN x keeps n's integer conversion below defined (a select, so loops still vectorise);
  // r, and so the result, stay NaN.
  n = n == n ? n : 0.0f;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n is in [-150, 128]: split it into two halves that are each a normal exponent.
  int32_t ni = static_cast<int32_t>(n);
  int32_t half = ni >> 1;
  float s1 = std::bit_cast<float>((half + 127) << 23);
  float s2 = std::bit_cast<float>((ni - half + 127) << 23);
  return p * s1 * s2;
}

// Elements per chunk of exp_shifted_sum.
inline constexpr int64_t kExpChunk = 256;

// out[i] = exp(x[i] - shift) for n elements (out may equal x); returns the sum of the outputs.
inline float exp_shifted_sum(const float* x, float shift, float* out, int64_t n) {
  float t[kExpChunk];
  float sum = 0.0f;
  for (int64_t b = 0; b < n; b += kExpChunk) {
    const int64_t len = n - b < kExpChunk ? n - b : kExpChunk;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) t[j] = clamp_exp_arg(x[b + j] - shift);
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < len; ++j) {
      float e = exp_in_range(t[j]);
      out[b + j] = e;
      sum += e;
    }
  }
  return sum;
}

// Largest of n contiguous floats (-inf when n is 0; NaNs are skipped), with 16 independent lanes
// so that it vectorises (an OpenMP max reduction does not, for float, in g++ 12).
inline float max_floats(const float* p, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = -INFINITY;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) lanes[j] = p[i + j] > lanes[j] ? p[i + j] : lanes[j];
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] = p[i] > lanes[j] ? p[i] : lanes[j];
  float m = lanes[0];
  for (int j = 1; j < kLanes; ++j) m = lanes[j] > m ? lanes[j] : m;
  return m;
}

// Sum of n contiguous floats: vectorised float partial sums over blocks, added up in double, so
// long rows keep about float precision.
inline double sum_floats(const float* p, int64_t n) {
  constexpr int64_t kBlock = 256;
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t e = b + kBlock < n ? b + kBlock : n;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = b; i < e; ++i) s += p[i];
    total += s;
  }
  return total;
}

// Sums of d = p[i] - mean and of d^2 over n contiguous floats, blocked like sum_floats. With
// `mean` a first estimate, these give the corrected two-pass mean (mean + sum_d / n) and variance
// ((sum_d2 - sum_d^2 / n) / n), which stay accurate when the values sit far from zero.
inline void sum_deviations(const float* p, int64_t n, float mean, double* sum_d, double* sum_d2) {
  constexpr int64_t kBlock = 256;
  double total = 0.0;
  double total2 = 0.0;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t e = b + kBlock < n ? b + kBlock : n;
    float s = 0.0f;
    float s2 = 0.0f;
#pragma omp simd reduction(+ : s, s2)
    for (int64_t i = b; i < e; ++i) {
      float d = p[i] - mean;
      s += d;
      s2 += d * d;
    }
    total += s;
    total2 += s2;
  }
  *sum_d = total;
  *sum_d2 = total2;
}

// One LayerNormalization row: out = (in - mean) / sqrt(var + eps) * scale (+ bias, when not null)
// over n contiguous floats (out may equal in), the mean and variance by the corrected two-pass
// method above; the row's mean and 1 / sqrt(var + eps) go to *mean_out and *inv_out when not null.
// n == 0 gives NaN statistics (0/0), as a mean over nothing should.
inline void layer_norm_row(const float* in, float* out, int64_t n, const float* scale,
                           const float* bias, float eps, float* mean_out, float* inv_out) {
  const double dn = static_cast<double>(n);
  const float guess = static_cast<float>(sum_floats(in, n) / dn);
  double sum_d = 0.0, sum_d2 = 0.0;
  sum_deviations(in, n, guess, &sum_d, &sum_d2);
  const float mean = static_cast<float>(guess + sum_d / dn);
  double var = (sum_d2 - sum_d * sum_d / dn) / dn;
  var = var < 0.0 ? 0.0 : var;  // rounding can leave a tiny negative; NaN (n == 0) stays
  const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
  if (bias != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = (in[i] - mean) * inv * scale[i] + bias[i];
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = (in[i] - mean) * inv * scale[i];
  }
  if (mean_out != nullptr) *mean_out = mean;
  if (inv_out != nullptr) *inv_out = inv;
}

}  // namespace lumen::cpu
