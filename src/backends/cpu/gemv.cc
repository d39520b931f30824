// matrix_vector: blocked dot products over OpenMP threads.
#include "backends/cpu/gemv.h"

#include <omp.h>

#include <algorithm>

#include "backends/cpu/isa.h"

namespace lumen::cpu {
namespace {

// Below this many multiply-adds one thread does the whole product.
constexpr int64_t kParallelMin = int64_t{1} << 15;
// The fewest columns of a row one thread takes when rows are split.
constexpr int64_t kMinColumns = 4096;
// The most partial sums of split rows (on the stack: no allocation per call).
constexpr int64_t kMaxPartials = 1024;

// sum a[j] * x[j] for j < n, in 16 independent lanes (two AVX2 vectors of FMAs).
float dot(const float* a, const float* x, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[j + l] * x[j + l];
  float sum = 0;
  for (; j < n; ++j) sum += a[j] * x[j];
  for (float v : acc) sum += v;
  return sum;
}

// dot, vectorised 8 wide where the CPU has AVX2.
float dot_for_isa(const float* a, const float* x, int64_t n) {
  const auto f = [](const float* a, const float* x, int64_t n) { return dot(a, x, n); };
  return isa_call(f, a, x, n);
}

}  // namespace

void matrix_vector(int64_t m, int64_t k, const float* a, int64_t lda, const float* x, float* y) {
  if (m <= 0) return;
  const int64_t threads = m * k < kParallelMin ? 1 : omp_get_max_threads();
  // Each row in `parts` column ranges, so that rows x parts covers the threads.
  const int64_t parts =
      std::max<int64_t>(1, std::min({(threads + m - 1) / m, k / kMinColumns, kMaxPartials / m}));
  if (parts == 1) {
#pragma omp parallel for schedule(static) if (threads > 1)
    for (int64_t i = 0; i < m; ++i) y[i] = dot_for_isa(a + i * lda, x, k);
    return;
  }
  const int64_t width = (k + parts - 1) / parts;
  float partial[kMaxPartials];
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < m * parts; ++t) {
    const int64_t i = t / parts, j0 = (t % parts) * width;
    partial[t] =
        dot_for_isa(a + i * lda + j0, x + j0, std::max<int64_t>(0, std::min(width, k - j0)));
  }
  for (int64_t i = 0; i < m; ++i) {
    float sum = 0;
    for (int64_t p = 0; p < parts; ++p) sum += partial[i * parts + p];
    y[i] = sum;
  }
}

}  // namespace lumen::cpu
