// How close Lumen's CPU GEMM comes to what this machine's cores can do, and to OpenBLAS.
//
// 1. In-cache rate: packed_gemm on a 96 x 256 x 384 product whose operands stay in L1/L2, on one
//    thread alone, then on every thread at once (each with its own operands). The second number
//    is the most a multi-threaded GEMM can reach here: on a VM whose virtual cores share
//    physical resources it is well below the FMA-only peak of lumen_fma_peak.
// 2. The products of the zoo's transformers and MLP (rows x inner x columns), on all threads:
//    packed_gemm at the CPU's level, its AVX2 form where that level is AVX-512, oneDNN's matmul
//    (weights packed once, as the MatMul kernels use it) and OpenBLAS's cblas_sgemm (loaded at run
//    time from libopenblas.so.0 when it is there), interleaved, the median of many runs each.
// Prints one line per measurement, "key value ..." (bench/gemm_ceiling.py reads them).
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backends/cpu/dnnl_matmul.h"
#include "backends/cpu/packed_gemm.h"
#include "lumen/cpu_isa.h"

namespace {

using lumen::cpu::GemmEpilogue;
using lumen::cpu::PackedMatrix;
using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                       float, float*, int);
constexpr int kRowMajor = 101, kNoTrans = 111;

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<float> random_matrix(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// GFLOP/s of packed_gemm on one thread over an in-cache product, the best of 5 rounds.
double in_cache_rate() {
  const int64_t m = 96, k = 256, n = 384;
  const std::vector<float> a = random_matrix(m * k, 1), b = random_matrix(k * n, 2);
  std::vector<float> c(static_cast<size_t>(m * n));
  const PackedMatrix packed(b.data(), k, n, n, 1);
  constexpr int kReps = 400;
  double best = 0.0;
  for (int round = 0; round < 5; ++round) {
    const double t0 = seconds();
    for (int r = 0; r < kReps; ++r)
      lumen::cpu::packed_gemm(m, a.data(), k, packed, c.data(), n, {});
    best = std::max(best, 2.0 * m * n * k * kReps / (seconds() - t0) * 1e-9);
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  const int threads = omp_get_max_threads();
  std::printf("threads %d level %s\n", threads,
              std::string(lumen::cpu_isa_name(lumen::cpu_isa())).c_str());
  std::printf("in_cache_one_thread %.1f\n", in_cache_rate());
  std::vector<double> rates(static_cast<size_t>(threads));
#pragma omp parallel
  rates[static_cast<size_t>(omp_get_thread_num())] = in_cache_rate();
  double sum = 0.0;
  for (double r : rates) sum += r;
  std::printf("in_cache_all_threads %.1f per_thread %.1f\n", sum, sum / threads);

  Sgemm sgemm = nullptr;
  if (void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL))
    sgemm = reinterpret_cast<Sgemm>(dlsym(lib, "cblas_sgemm"));
  const int64_t shapes[][3] = {
      {128, 768, 768},  {128, 768, 3072}, {128, 3072, 768},   {197, 768, 2304}, {197, 768, 3072},
      {197, 3072, 768}, {64, 1024, 1024}, {1024, 1024, 1024}, {1, 1024, 1024},  {7, 512, 512}};
  const lumen::CpuIsa level = lumen::cpu_isa();
  const bool avx2_too = level == lumen::CpuIsa::kAvx512;
  for (const auto& s : shapes) {
    const int64_t m = s[0], k = s[1], n = s[2];
    const std::vector<float> a = random_matrix(m * k, 3), b = random_matrix(k * n, 4);
    std::vector<float> c(static_cast<size_t>(m * n)), c_ref(c.size());
    const PackedMatrix packed(b.data(), k, n, n, 1);
    lumen::Tensor b_tensor = lumen::Tensor::empty(lumen::Shape{k, n}, lumen::DType::kFloat32);
    std::copy(b.begin(), b.end(), b_tensor.data<float>());
    lumen::cpu::DnnlMatmul onednn;
    onednn.init(lumen::cpu::plain_md({m, k}), lumen::cpu::plain_md({k, n}), nullptr,
                lumen::cpu::plain_md({m, n}), {}, &b_tensor);
    const double flop = 2.0 * m * n * k;
    const int runs = std::max(5, static_cast<int>(4e9 / flop));
    std::vector<double> ours, ours_avx2, dnnl, theirs;
    for (int r = 0; r < runs; ++r) {
      double t0 = seconds();
      lumen::cpu::packed_gemm(m, a.data(), k, packed, c.data(), n, GemmEpilogue{});
      ours.push_back(seconds() - t0);
      if (avx2_too) {
        lumen::set_cpu_isa_limit(lumen::CpuIsa::kAvx2);
        t0 = seconds();
        lumen::cpu::packed_gemm(m, a.data(), k, packed, c.data(), n, GemmEpilogue{});
        ours_avx2.push_back(seconds() - t0);
        lumen::set_cpu_isa_limit(level);
      }
      t0 = seconds();
      onednn.execute(a.data(), b.data(), nullptr, c_ref.data());
      dnnl.push_back(seconds() - t0);
      if (!sgemm) continue;
      t0 = seconds();
      sgemm(kRowMajor, kNoTrans, kNoTrans, static_cast<int>(m), static_cast<int>(n),
            static_cast<int>(k), 1.0f, a.data(), static_cast<int>(k), b.data(), static_cast<int>(n),
            0.0f, c_ref.data(), static_cast<int>(n));
      theirs.push_back(seconds() - t0);
    }
    double diff = 0.0;
    for (size_t i = 0; sgemm && i < c.size(); ++i)
      diff = std::max(diff, static_cast<double>(std::fabs(c[i] - c_ref[i])));
    std::printf(
        "gemm %lld %lld %lld lumen %.1f lumen_avx2 %.1f onednn %.1f openblas %.1f max_diff %.1e\n",
        static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
        flop / median(ours) * 1e-9, avx2_too ? flop / median(ours_avx2) * 1e-9 : 0.0,
        flop / median(dnnl) * 1e-9, sgemm ? flop / median(theirs) * 1e-9 : 0.0, diff);
  }
  return 0;
}
