// The machine's float32 FMA peak, measured: every core runs independent chains of AVX-512 (or
// AVX2) fused multiply-adds from registers, so nothing but the FMA units limits it. The matmul
// benchmark reports its GFLOP/s against this number.
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>

namespace {

constexpr int kChains = 12;  // enough independent FMAs to cover latency x pipes
constexpr long kIters = 200'000'000 / kChains;

__attribute__((target("avx512f"))) float run_avx512() {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * c);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < kIters; ++i)
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) float run_avx2() {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(0.001f * c);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < kIters; ++i)
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  float out[8];
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  _mm256_storeu_ps(out, sum);
  return out[0];
}

}  // namespace

int main() {
  bool avx512 = __builtin_cpu_supports("avx512f");
  int lanes = avx512 ? 16 : 8;
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    float sink = 0;
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : sink)
    sink += avx512 ? run_avx512() : run_avx2();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double flop = 2.0 * lanes * kChains * static_cast<double>(kIters) * omp_get_max_threads();
    if (flop / s > best) best = flop / s;
    if (sink == 12345.0f) std::puts("");  // keeps the result alive
  }
  std::printf("%s %d threads %.1f GFLOP/s\n", avx512 ? "avx512" : "avx2", omp_get_max_threads(),
              best / 1e9);
  return 0;
}
