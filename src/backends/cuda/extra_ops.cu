// Smaller CUDA kernels: CumProd (a thread per column), LpNormalization (a thread per column, two
// passes), LRN (a thread per element, summing its channel window), ReverseSequence (a thread
// per element) and Det (a block per matrix).
#include "backends/cuda/any_types.cuh"
#include "backends/cuda/extra_ops.h"
#include "backends/cuda/index_check.cuh"

namespace lumen::cuda {
namespace {

// Products of integers wrap as the type does; floats multiply in their math type.
template <typename T>
using prod_t = std::conditional_t<kIsFloat<T>, math_t<T>, T>;

template <typename T>
__global__ void cum_prod_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                                bool exclusive, bool reverse) {
  using A = prod_t<T>;
  ANY_GRID_LOOP(o, outer * inner) {
    const int64_t base = (o / inner) * n * inner + o % inner;
    A acc = A(1);
    for (int64_t s = 0; s < n; ++s) {
      const int64_t j = reverse ? n - 1 - s : s;
      const A v = static_cast<A>(load(x, base + j * inner));
      if (!exclusive) acc = static_cast<A>(acc * v);
      y[base + j * inner] = store_as<T>(acc);
      if (exclusive) acc = static_cast<A>(acc * v);
    }
  }
}

template <typename T>
__global__ void lp_norm_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, int p) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  ANY_GRID_LOOP(o, outer * inner) {
    const int64_t base = (o / inner) * n * inner + o % inner;
    A norm = 0;
    for (int64_t j = 0; j < n; ++j) {
      const A v = static_cast<A>(load(x, base + j * inner));
      norm += p == 1 ? (v < 0 ? -v : v) : v * v;
    }
    if (p != 1) norm = sqrt(norm);
    for (int64_t j = 0; j < n; ++j) {
      const A v = static_cast<A>(load(x, base + j * inner));
      y[base + j * inner] = store_as<T>(norm == A(0) ? A(0) : v / norm);
    }
  }
}

__global__ void lrn_kernel(const float* x, float* y, int64_t batch, int64_t channels, int64_t plane,
                           int64_t before, int64_t after, float scale, float beta, float bias) {
  ANY_GRID_LOOP(i, batch * channels * plane) {
    const int64_t p = i % plane, c = (i / plane) % channels, b = i / (plane * channels);
    const int64_t lo = c - before > 0 ? c - before : 0;
    const int64_t hi = c + after < channels - 1 ? c + after : channels - 1;
    float sum = 0.f;
    for (int64_t k = lo; k <= hi; ++k) {
      const float v = x[(b * channels + k) * plane + p];
      sum += v * v;
    }
    y[i] = x[i] / powf(bias + scale * sum, beta);
  }
}

template <typename T>
__global__ void reverse_sequence_kernel(const T* x, T* y, const int64_t* lens, int64_t d0,
                                        int64_t d1, int64_t inner, bool batch_first,
                                        IndexCheck check) {
  const int64_t time = batch_first ? d1 : d0;
  ANY_GRID_LOOP(i, d0 * d1 * inner) {
    const int64_t e = i % inner, row = i / inner;
    const int64_t i0 = row / d1, i1 = row % d1;
    const int64_t b = batch_first ? i0 : i1, t = batch_first ? i1 : i0;
    int64_t len = lens[b];
    if (len < 0 || len > time) {
      if (t == 0 && e == 0) report_bad_index(check, len, 0, time + 1);
      len = 0;
    }
    const int64_t src_t = t < len ? len - 1 - t : t;
    const int64_t s0 = batch_first ? i0 : src_t, s1 = batch_first ? src_t : i1;
    y[i] = x[(s0 * d1 + s1) * inner + e];
  }
}

// One block per matrix: thread 0 picks the pivot and keeps the determinant, all threads eliminate
// the rows below it.
__global__ void det_kernel(const float* x, float* y, int64_t m) {
  extern __shared__ double a[];
  __shared__ double det;
  __shared__ int64_t pivot;
  const float* src = x + blockIdx.x * m * m;
  for (int64_t i = threadIdx.x; i < m * m; i += blockDim.x) a[i] = src[i];
  if (threadIdx.x == 0) det = 1.0;
  __syncthreads();
  for (int64_t c = 0; c < m; ++c) {
    if (threadIdx.x == 0) {
      int64_t p = c;
      for (int64_t r = c + 1; r < m; ++r)
        if (fabs(a[r * m + c]) > fabs(a[p * m + c])) p = r;
      pivot = p;
      if (a[p * m + c] == 0.0) det = 0.0;
    }
    __syncthreads();
    if (det == 0.0) break;
    const int64_t p = pivot;
    if (p != c)
      for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
        const double t = a[c * m + k];
        a[c * m + k] = a[p * m + k];
        a[p * m + k] = t;
      }
    __syncthreads();
    if (threadIdx.x == 0) det = (p != c ? -det : det) * a[c * m + c];
    const double diag = a[c * m + c];
    const int64_t rows = m - c - 1, cols = m - c;
    for (int64_t i = threadIdx.x; i < rows * cols; i += blockDim.x) {
      const int64_t r = c + 1 + i / cols, k = c + i % cols;
      // The multiplier from the row's column c as it was before this step's updates.
      const double f = a[r * m + c] / diag;
      if (k != c) a[r * m + k] -= f * a[c * m + k];
    }
    __syncthreads();
    for (int64_t r = c + 1 + threadIdx.x; r < m; r += blockDim.x) a[r * m + c] = 0.0;
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = static_cast<float>(det);
}

}  // namespace

void launch_reverse_sequence(int elem_bytes, const void* x, void* y, const int64_t* lens,
                             int64_t d0, int64_t d1, int64_t inner, bool batch_first,
                             const IndexCheck& check, cudaStream_t stream) {
  const int64_t count = d0 * d1 * inner;
  if (count == 0) return;
  auto go = [&](auto tag) {
    using T = decltype(tag);
    reverse_sequence_kernel<T><<<any_blocks(count), kAnyThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), lens, d0, d1, inner, batch_first, check);
  };
  if (elem_bytes == 1)
    go(uint8_t{});
  else if (elem_bytes == 2)
    go(uint16_t{});
  else if (elem_bytes == 4)
    go(uint32_t{});
  else
    go(uint64_t{});
}

void launch_cum_prod(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                     bool exclusive, bool reverse, cudaStream_t stream) {
  const int64_t count = outer * inner;
  if (count == 0 || n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      cum_prod_kernel<T><<<any_blocks(count), kAnyThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), outer, n, inner, exclusive, reverse);
  });
}

void launch_lp_norm(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, int p,
                    cudaStream_t stream) {
  const int64_t count = outer * inner;
  if (count == 0 || n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloat<T>)
      lp_norm_kernel<T><<<any_blocks(count), kAnyThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), outer, n, inner, p);
  });
}

void launch_lrn(const float* x, float* y, int64_t batch, int64_t channels, int64_t plane,
                int64_t size, float alpha, float beta, float bias, cudaStream_t stream) {
  const int64_t count = batch * channels * plane;
  if (count == 0) return;
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  lrn_kernel<<<any_blocks(count), kAnyThreads, 0, stream>>>(
      x, y, batch, channels, plane, before, after, alpha / static_cast<float>(size), beta, bias);
}

void launch_det(const float* x, float* y, int64_t count, int64_t m, cudaStream_t stream) {
  if (count == 0) return;
  const size_t shared = static_cast<size_t>(m * m) * sizeof(double);
  det_kernel<<<static_cast<unsigned>(count), 128, shared, stream>>>(x, y, m);
}

}  // namespace lumen::cuda
