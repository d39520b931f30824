// exp8, sigmoid8 and erf8 (src/backends/cpu/simd_math.h) against double-precision libm over a sweep
// of the float range they cover (every 4093rd float magnitude below 88, both signs: about 520 000
// values, each checked), and at the edges: past the clamp, infinities and NaN; their AVX-512 forms
// (exp16, sigmoid16, erf16) the same way, and activate16 against activate8 for every activation.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "backends/cpu/isa.h"
#include "backends/cpu/simd_math.h"

namespace lumen {
namespace {

// Distance in units in the last place between got and the float nearest to want.
int64_t ulps(float got, double want) {
  const auto bits = [](float f) {
    const int32_t b = std::bit_cast<int32_t>(f);
    return b < 0 ? int64_t{INT32_MIN} - b : int64_t{b};  // monotonic across zero
  };
  return std::llabs(bits(got) - bits(static_cast<float>(want)));
}

float lane0(__m256 v) {
  return _mm256_cvtss_f32(v);
}

TEST(SimdMath, ExpAndSigmoidWithinTwoUlpOverTheirRange) {
  if (!cpu::has_avx2()) GTEST_SKIP() << "exp8 is AVX2 code, and the CPU level in use has no AVX2";
  int64_t checked = 0, worst_exp = 0, worst_sigmoid = 0;
  const uint32_t top = std::bit_cast<uint32_t>(88.0f);
  for (uint32_t magnitude = 0; magnitude < top; magnitude += 4093)
    for (const float x : {std::bit_cast<float>(magnitude), -std::bit_cast<float>(magnitude)}) {
      if (x < -87.0f) continue;
      const __m256 v = _mm256_set1_ps(x);
      worst_exp = std::max(worst_exp, ulps(lane0(cpu::exp8(v)), std::exp(double(x))));
      worst_sigmoid =
          std::max(worst_sigmoid, ulps(lane0(cpu::sigmoid8(v)), 1 / (1 + std::exp(-double(x)))));
      ++checked;
    }
  EXPECT_GT(checked, 400000);
  EXPECT_LE(worst_exp, 2);
  EXPECT_LE(worst_sigmoid, 2);
}

// erf8 against libm's erf in double, every 1e-4 over [-6, 6]: within 5e-7 absolute (the rational
// approximation's error, 3.3e-7 at most here; beyond +-4 erf is +-1 to float precision).
TEST(SimdMath, ErfWithinFiveTenMillionthsOnMinusSixToSix) {
  if (!cpu::has_avx2()) GTEST_SKIP() << "erf8 is AVX2 code, and the CPU level in use has no AVX2";
  double worst = 0;
  for (int i = -60000; i <= 60000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;
    worst = std::max(worst, std::fabs(lane0(cpu::erf8(_mm256_set1_ps(x))) - std::erf(double(x))));
  }
  EXPECT_LE(worst, 5e-7);
  EXPECT_TRUE(
      std::isnan(lane0(cpu::erf8(_mm256_set1_ps(std::numeric_limits<float>::quiet_NaN())))));
}

TEST(SimdMath, EdgesAndNaN) {
  if (!cpu::has_avx2()) GTEST_SKIP() << "exp8 is AVX2 code, and the CPU level in use has no AVX2";
  const float inf = std::numeric_limits<float>::infinity();
  alignas(32) float in[8] = {-1000.0f, 1000.0f, -inf,  inf,
                             0.0f,     -90.0f,  90.0f, std::numeric_limits<float>::quiet_NaN()};
  alignas(32) float e[8], s[8];
  _mm256_store_ps(e, cpu::exp8(_mm256_load_ps(in)));
  _mm256_store_ps(s, cpu::sigmoid8(_mm256_load_ps(in)));
  for (int i = 0; i < 7; ++i) {
    SCOPED_TRACE(in[i]);
    EXPECT_TRUE(std::isfinite(e[i]));
    EXPECT_GE(s[i], 0.0f);
    EXPECT_LE(s[i], 1.0f);
  }
  EXPECT_EQ(e[4], 1.0f);
  EXPECT_EQ(s[4], 0.5f);
  EXPECT_EQ(s[1], 1.0f);
  EXPECT_EQ(s[3], 1.0f);
  EXPECT_LT(s[0], 1e-38f);
  EXPECT_LT(s[2], 1e-38f);
  EXPECT_LT(e[0], 2e-38f);
  EXPECT_GT(e[1], 1e38f);
  EXPECT_TRUE(std::isnan(e[7]));
  EXPECT_TRUE(std::isnan(s[7]));
}

// The AVX-512 forms, from functions compiled for AVX-512 (this file is built for x86-64-v3).
LUMEN_TARGET_AVX512 float exp16_at(float x) {
  return _mm512_cvtss_f32(cpu::exp16(_mm512_set1_ps(x)));
}
LUMEN_TARGET_AVX512 float sigmoid16_at(float x) {
  return _mm512_cvtss_f32(cpu::sigmoid16(_mm512_set1_ps(x)));
}
LUMEN_TARGET_AVX512 float erf16_at(float x) {
  return _mm512_cvtss_f32(cpu::erf16(_mm512_set1_ps(x)));
}
LUMEN_TARGET_AVX512 void sigmoid16_of(const float* in, float* out) {
  _mm512_storeu_ps(out, cpu::sigmoid16(_mm512_loadu_ps(in)));
}
LUMEN_TARGET_AVX512 void activate16_of(const float* in, float* out, const cpu::GemmEpilogue& e) {
  _mm512_storeu_ps(out, cpu::activate16(_mm512_loadu_ps(in), e));
}

TEST(SimdMath, SixteenWideExpAndSigmoidWithinTwoUlpOverTheirRange) {
  if (!cpu::has_avx512())
    GTEST_SKIP() << "exp16 is AVX-512 code, and the CPU level in use has no AVX-512";
  int64_t checked = 0, worst_exp = 0, worst_sigmoid = 0;
  const uint32_t top = std::bit_cast<uint32_t>(88.0f);
  for (uint32_t magnitude = 0; magnitude < top; magnitude += 4093)
    for (const float x : {std::bit_cast<float>(magnitude), -std::bit_cast<float>(magnitude)}) {
      if (x < -87.0f) continue;
      worst_exp = std::max(worst_exp, ulps(exp16_at(x), std::exp(double(x))));
      worst_sigmoid =
          std::max(worst_sigmoid, ulps(sigmoid16_at(x), 1 / (1 + std::exp(-double(x)))));
      ++checked;
    }
  EXPECT_GT(checked, 400000);
  EXPECT_LE(worst_exp, 2);
  EXPECT_LE(worst_sigmoid, 2);
}

// erf16 as erf8 is checked: every 1e-4 over [-6, 6], within 5e-7 of libm's erf.
TEST(SimdMath, SixteenWideErfWithinFiveTenMillionthsOnMinusSixToSix) {
  if (!cpu::has_avx512())
    GTEST_SKIP() << "erf16 is AVX-512 code, and the CPU level in use has no AVX-512";
  double worst = 0;
  for (int i = -60000; i <= 60000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;
    worst = std::max(worst, std::fabs(erf16_at(x) - std::erf(double(x))));
  }
  EXPECT_LE(worst, 5e-7);
  EXPECT_TRUE(std::isnan(erf16_at(std::numeric_limits<float>::quiet_NaN())));
}

TEST(SimdMath, SixteenWideEdgesAndNaN) {
  if (!cpu::has_avx512())
    GTEST_SKIP() << "sigmoid16 is AVX-512 code, and the CPU level in use has no AVX-512";
  const float inf = std::numeric_limits<float>::infinity();
  alignas(64) float in[16] = {-1000.0f, 1000.0f, -inf,  inf,
                              0.0f,     -90.0f,  90.0f, std::numeric_limits<float>::quiet_NaN()};
  float s[16];
  sigmoid16_of(in, s);
  for (int i = 0; i < 7; ++i) {
    SCOPED_TRACE(in[i]);
    EXPECT_GE(s[i], 0.0f);
    EXPECT_LE(s[i], 1.0f);
  }
  EXPECT_EQ(s[4], 0.5f);
  EXPECT_EQ(s[1], 1.0f);
  EXPECT_EQ(s[3], 1.0f);
  EXPECT_LT(s[0], 1e-38f);
  EXPECT_LT(s[2], 1e-38f);
  EXPECT_TRUE(std::isnan(s[7]));
}

// activate16 against activate8 (itself checked against the reference epilogues by the GEMM and
// convolution tests) on random values in [-12, 12]: within 2e-7 of the larger magnitude (and
// the erf approximations' own error for GELU).
TEST(SimdMath, SixteenWideActivationsMatchEightWide) {
  if (!cpu::has_avx512())
    GTEST_SKIP() << "activate16 is AVX-512 code, and the CPU level in use has no AVX-512";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
  for (const cpu::GemmActivation act :
       {cpu::GemmActivation::kRelu, cpu::GemmActivation::kLeakyRelu, cpu::GemmActivation::kClip,
        cpu::GemmActivation::kSigmoid, cpu::GemmActivation::kHardSwish, cpu::GemmActivation::kSwish,
        cpu::GemmActivation::kGeluErf, cpu::GemmActivation::kGeluTanh}) {
    SCOPED_TRACE(static_cast<int>(act));
    cpu::GemmEpilogue e;
    e.activation = act;
    e.alpha = act == cpu::GemmActivation::kClip ? -2.5f : 0.125f;
    e.beta = 3.0f;
    for (int round = 0; round < 2000; ++round) {
      alignas(64) float x[16], wide[16], narrow[16];
      for (float& v : x) v = dist(rng);
      activate16_of(x, wide, e);
      _mm256_store_ps(narrow, cpu::activate8(_mm256_load_ps(x), e));
      _mm256_store_ps(narrow + 8, cpu::activate8(_mm256_load_ps(x + 8), e));
      for (int i = 0; i < 16; ++i) {
        // GELU's erf form: each form's erf is within 5e-7 of erf's value (absolute), scaled by
        // |x| / 2 in the result, so the two may differ by up to |x| 5e-7 where erf is near -1.
        const float erf_slack = act == cpu::GemmActivation::kGeluErf ? 5e-7f * std::fabs(x[i]) : 0;
        ASSERT_NEAR(wide[i], narrow[i], 2e-7f * std::max(1.0f, std::fabs(narrow[i])) + erf_slack)
            << x[i];
      }
    }
  }
}

}  // namespace
}  // namespace lumen
