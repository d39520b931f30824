// Dtype-generic reductions: Reduce* over any set of axes (one block per output for long
// reductions, one thread per output for short ones), ArgMax/ArgMin, CumSum, Hardmax, and
// LayerNormalization with its Mean and InvStdDev outputs.
#include <cfloat>
#include <cmath>

#include "backends/cuda/any_launch.h"
#include "backends/cuda/any_types.cuh"
#include "backends/cuda/index_check.cuh"
#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

// The accumulator of a reduction over T: float32 for the float types but float64, 64-bit for
// integers.
template <typename T>
using acc_t = std::conditional_t<
    kIsFloat<T>, std::conditional_t<std::is_same_v<T, double>, double, float>,
    std::conditional_t<std::is_unsigned_v<T> && !std::is_same_v<T, bool>, uint64_t, int64_t>>;

template <typename A>
__device__ __forceinline__ A lowest() {
  if constexpr (std::is_floating_point_v<A>)
    return -INFINITY;
  else if constexpr (std::is_unsigned_v<A>)
    return A(0);
  else
    return static_cast<A>(-static_cast<A>(~static_cast<std::make_unsigned_t<A>>(0) >> 1) - 1);
}
template <typename A>
__device__ __forceinline__ A highest() {
  if constexpr (std::is_floating_point_v<A>)
    return INFINITY;
  else if constexpr (std::is_unsigned_v<A>)
    return ~A(0);
  else
    return static_cast<A>(~static_cast<std::make_unsigned_t<A>>(0) >> 1);
}

template <typename A>
__device__ __forceinline__ bool is_nan_value(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return v != v;
  else
    return false;
}

// How each element enters the accumulator, how two accumulators combine, and the result.
template <typename A>
struct Reducer {
  ReduceKind op;
  A shift;  // LogSumExp: the maximum, subtracted before exp

  __device__ A init() const {
    switch (op) {
      case ReduceKind::kMax:
        return lowest<A>();
      case ReduceKind::kMin:
        return highest<A>();
      case ReduceKind::kProd:
        return A(1);
      default:
        return A(0);
    }
  }
  __device__ A map(A v) const {
    switch (op) {
      case ReduceKind::kSumSquare:
      case ReduceKind::kL2:
        return v * v;
      case ReduceKind::kL1:
        if constexpr (std::is_signed_v<A>) return v < A(0) ? A(0) - v : v;
        return v;
      case ReduceKind::kLogSumExp:
        if constexpr (std::is_floating_point_v<A>) return exp(v - shift);
        return v;
      default:
        return v;
    }
  }
  __device__ A combine(A a, A b) const {
    switch (op) {
      case ReduceKind::kMax:
        return (b > a || is_nan_value(b)) && !is_nan_value(a) ? b : a;
      case ReduceKind::kMin:
        return (b < a || is_nan_value(b)) && !is_nan_value(a) ? b : a;
      case ReduceKind::kProd:
        return a * b;
      default:
        return a + b;
    }
  }
  __device__ A finish(A a, int64_t n) const {
    if constexpr (std::is_floating_point_v<A>) {
      switch (op) {
        case ReduceKind::kMean:
          return a / static_cast<A>(n);
        case ReduceKind::kL2:
          return sqrt(a);
        case ReduceKind::kLogSum:
          return log(a);
        case ReduceKind::kLogSumExp:
          return isinf(shift) ? shift : shift + log(a);
        default:
          return a;
      }
    } else {
      if (op == ReduceKind::kMean) return n > 0 ? static_cast<A>(a / static_cast<A>(n)) : A(0);
      return a;
    }
  }
};

__device__ __forceinline__ int64_t reduced_offset(int64_t r, const ReduceDesc& d) {
  return strided_offset(r, d.red_rank, d.red_dims, d.red_strides);
}

// The sum (max) of v over the block; every thread gets it. `scratch` holds 32 accumulators.
template <typename A>
__device__ A block_combine(const Reducer<A>& red, A v, A* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = red.combine(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // scratch may still be read from an earlier call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  // Only warp 0 reads the partials, so thread 0's write of the total races with no reader.
  if (warp == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    v = lane < warps ? scratch[lane] : red.init();
    for (int o = 16; o > 0; o >>= 1) v = red.combine(v, __shfl_down_sync(0xffffffffu, v, o));
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

// One block per output element.
template <typename T>
__global__ void reduce_block_kernel(ReduceKind op, const T* x, T* y, ReduceDesc d) {
  using A = acc_t<T>;
  __shared__ A scratch[32];
  for (int64_t o = blockIdx.x; o < d.out_n; o += gridDim.x) {
    const int64_t base = strided_offset(o, d.out_rank, d.out_dims, d.out_strides);
    A shift = A(0);
    if (op == ReduceKind::kLogSumExp) {
      Reducer<A> mx{ReduceKind::kMax, A(0)};
      A m = mx.init();
      for (int64_t r = threadIdx.x; r < d.red_n; r += blockDim.x)
        m = mx.combine(m, static_cast<A>(load(x, base + reduced_offset(r, d))));
      shift = block_combine(mx, m, scratch);
    }
    Reducer<A> red{op, shift};
    A acc = red.init();
    for (int64_t r = threadIdx.x; r < d.red_n; r += blockDim.x)
      acc = red.combine(acc, red.map(static_cast<A>(load(x, base + reduced_offset(r, d)))));
    acc = block_combine(red, acc, scratch);
    if (threadIdx.x == 0) y[o] = store_as<T>(red.finish(acc, d.red_n));
  }
}

// One thread per output element (short reductions: neighbouring threads read neighbouring kept
// elements).
template <typename T>
__global__ void reduce_thread_kernel(ReduceKind op, const T* x, T* y, ReduceDesc d) {
  using A = acc_t<T>;
  ANY_GRID_LOOP(o, d.out_n) {
    const int64_t base = strided_offset(o, d.out_rank, d.out_dims, d.out_strides);
    A shift = A(0);
    if (op == ReduceKind::kLogSumExp) {
      Reducer<A> mx{ReduceKind::kMax, A(0)};
      A m = mx.init();
      for (int64_t r = 0; r < d.red_n; ++r)
        m = mx.combine(m, static_cast<A>(load(x, base + reduced_offset(r, d))));
      shift = m;
    }
    Reducer<A> red{op, shift};
    A acc = red.init();
    for (int64_t r = 0; r < d.red_n; ++r)
      acc = red.combine(acc, red.map(static_cast<A>(load(x, base + reduced_offset(r, d)))));
    y[o] = store_as<T>(red.finish(acc, d.red_n));
  }
}

template <typename T>
__global__ void arg_reduce_kernel(bool want_min, bool last, const T* x, int64_t* y, int64_t outer,
                                  int64_t n, int64_t inner) {
  using V = math_t<T>;
  ANY_GRID_LOOP(o, outer * inner) {
    const int64_t base = (o / inner) * n * inner + o % inner;
    int64_t best_i = 0;
    V best = n > 0 ? load(x, base) : V(0);
    for (int64_t j = 1; j < n; ++j) {
      const V v = load(x, base + j * inner);
      if (is_nan_value(best)) break;  // the first NaN wins
      const bool better = is_nan_value(v) || (want_min ? (last ? v <= best : v < best)
                                                       : (last ? v >= best : v > best));
      if (better) {
        best = v;
        best_i = j;
      }
    }
    y[o] = best_i;
  }
}

// a < b with NaN above every number (NaNs equal to each other).
template <typename V>
__device__ __forceinline__ bool nan_less(V a, V b) {
  if (is_nan_value(a)) return false;
  if (is_nan_value(b)) return true;
  return a < b;
}

template <typename T>
__global__ void top_k_kernel(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n,
                             int64_t inner, int64_t k, bool largest) {
  using V = math_t<T>;
  ANY_GRID_LOOP(line, outer * inner) {
    const int64_t o = line / inner, j = line % inner;
    const T* in = x + o * n * inner + j;
    // Whether element a comes before element b in the output order.
    auto before = [&](int64_t a, int64_t b) {
      const V va = load(in, a * inner), vb = load(in, b * inner);
      const bool a_lt_b = nan_less(va, vb), b_lt_a = nan_less(vb, va);
      if (a_lt_b == b_lt_a) return a < b;
      return largest ? b_lt_a : a_lt_b;
    };
    int64_t prev = -1;
    for (int64_t r = 0; r < k; ++r) {
      int64_t best = -1;
      for (int64_t c = 0; c < n; ++c) {
        if (prev >= 0 && !before(prev, c)) continue;
        if (best < 0 || before(c, best)) best = c;
      }
      const int64_t at = (o * k + r) * inner + j;
      values[at] = in[best * inner];
      if (indices != nullptr) indices[at] = best;
      prev = best;
    }
  }
}

template <typename T>
__global__ void cumsum_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                              bool exclusive, bool reverse) {
  using A = acc_t<T>;
  ANY_GRID_LOOP(o, outer * inner) {
    const int64_t base = (o / inner) * n * inner + o % inner;
    A acc = A(0);
    for (int64_t s = 0; s < n; ++s) {
      const int64_t j = reverse ? n - 1 - s : s;
      const A v = static_cast<A>(load(x, base + j * inner));
      if (!exclusive) acc += v;
      y[base + j * inner] = store_as<T>(acc);
      if (exclusive) acc += v;
    }
  }
}

template <typename T>
__global__ void hardmax_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using V = math_t<T>;
  ANY_GRID_LOOP(o, outer * inner) {
    const int64_t base = (o / inner) * n * inner + o % inner;
    int64_t best_i = 0;
    V best = n > 0 ? load(x, base) : V(0);
    for (int64_t j = 1; j < n; ++j) {
      const V v = load(x, base + j * inner);
      if (v > best) {
        best = v;
        best_i = j;
      }
    }
    for (int64_t j = 0; j < n; ++j) y[base + j * inner] = store_as<T>(j == best_i ? 1 : 0);
  }
}

// One block per row: the mean, then the variance about it (two passes over the row, in float).
template <typename T, typename S>
__global__ void layer_norm_stats_kernel(const T* x, const T* scale, const T* bias, T* y,
                                        S* mean_out, S* inv_out, int64_t rows, int64_t n,
                                        float eps) {
  __shared__ float scratch[32];
  Reducer<float> sum{ReduceKind::kSum, 0.f};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += to_float(xr[j]);
    const float mean = block_combine(sum, s, scratch) / static_cast<float>(n);
    float q = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float c = to_float(xr[j]) - mean;
      q += c * c;
    }
    const float inv = rsqrtf(block_combine(sum, q, scratch) / static_cast<float>(n) + eps);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      float v = (to_float(xr[j]) - mean) * inv * to_float(scale[j]);
      if (bias != nullptr) v += to_float(bias[j]);
      y[row * n + j] = from_float<T>(v);
    }
    if (threadIdx.x == 0) {
      if (mean_out != nullptr) mean_out[row] = from_float<S>(mean);
      if (inv_out != nullptr) inv_out[row] = from_float<S>(inv);
    }
  }
}

// One block per (image, channel) row; scale and bias per channel.
template <typename T>
__global__ void instance_norm_kernel(const T* x, const T* scale, const T* bias, T* y, int64_t rows,
                                     int64_t channels, int64_t n, float eps) {
  __shared__ float scratch[32];
  Reducer<float> sum{ReduceKind::kSum, 0.f};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += to_float(xr[j]);
    const float mean = block_combine(sum, s, scratch) / static_cast<float>(n);
    float q = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float c = to_float(xr[j]) - mean;
      q += c * c;
    }
    const float inv = rsqrtf(block_combine(sum, q, scratch) / static_cast<float>(n) + eps);
    const float g = to_float(scale[row % channels]) * inv, b = to_float(bias[row % channels]);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      y[row * n + j] = from_float<T>((to_float(xr[j]) - mean) * g + b);
  }
}

// Row r = (image, position) of a loss: its loss and weight (log_prob written when not null); a
// target out of range is reported and counts as an ignored row.
template <typename T>
__device__ void loss_row(const LossDesc& d, const T* x, const void* target, const T* weight,
                         T* log_prob, int64_t r, float* loss, float* w, const IndexCheck& check) {
  const int64_t img = r / d.inner, pos = r % d.inner;
  const T* row = x + img * d.c * d.inner + pos;
  float shift = 0.f;  // log-softmax: max + log(sum exp(x - max))
  if (d.softmax) {
    float m = -INFINITY;
    for (int64_t k = 0; k < d.c; ++k) m = fmaxf(m, to_float(row[k * d.inner]));
    if (m != m) {
      shift = m;
    } else {
      const float base = isinf(m) ? 0.f : m;
      float sum = 0.f;
      for (int64_t k = 0; k < d.c; ++k) sum += expf(to_float(row[k * d.inner]) - base);
      shift = base + logf(sum);
    }
    if (log_prob != nullptr)
      for (int64_t k = 0; k < d.c; ++k)
        log_prob[(img * d.c + k) * d.inner + pos] = from_float<T>(to_float(row[k * d.inner]) - shift);
  }
  const int64_t t = d.target_int64 ? static_cast<const int64_t*>(target)[r]
                                   : static_cast<const int32_t*>(target)[r];
  if (d.has_ignore && t == d.ignore) {
    *loss = 0.f;
    *w = 0.f;
  } else if (t < 0 || t >= d.c) {
    *loss = 0.f;
    *w = 0.f;
    report_bad_index(check, t, 0, d.c);
  } else {
    *w = weight != nullptr ? to_float(weight[t]) : 1.f;
    *loss = -(to_float(row[t * d.inner]) - shift) * *w;
  }
}

template <typename T>
__global__ void loss_rows_kernel(LossDesc d, const T* x, const void* target, const T* weight, T* y,
                                 T* log_prob, IndexCheck check) {
  ANY_GRID_LOOP(r, d.n * d.inner) {
    float loss = 0.f, w = 0.f;
    loss_row(d, x, target, weight, log_prob, r, &loss, &w, check);
    y[r] = from_float<T>(loss);
  }
}

// One block: the sum of the rows' losses (and weights, for the mean).
template <typename T>
__global__ void loss_total_kernel(LossDesc d, const T* x, const void* target, const T* weight, T* y,
                                  T* log_prob, IndexCheck check) {
  __shared__ float scratch[32];
  Reducer<float> sum{ReduceKind::kSum, 0.f};
  float total = 0.f, weights = 0.f;
  for (int64_t r = threadIdx.x; r < d.n * d.inner; r += blockDim.x) {
    float loss = 0.f, w = 0.f;
    loss_row(d, x, target, weight, log_prob, r, &loss, &w, check);
    total += loss;
    weights += w;
  }
  total = block_combine(sum, total, scratch);
  weights = block_combine(sum, weights, scratch);
  if (threadIdx.x == 0) y[0] = from_float<T>(d.reduction == 2 ? total / weights : total);
}

int grid_of(int64_t n) {
  return static_cast<int>(n < 65535 * 8 ? (n > 0 ? n : 1) : 65535 * 8);
}

}  // namespace

void launch_reduce(Elem t, ReduceKind op, const void* x, void* y, const ReduceDesc& desc,
                   cudaStream_t stream) {
  if (desc.out_n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x);
    T* py = static_cast<T*>(y);
    // A block per output where the reduction is long enough to fill one, or outputs are few.
    if (desc.red_n >= 128 || (desc.red_n >= 16 && desc.out_n < 1024))
      reduce_block_kernel<T><<<grid_of(desc.out_n), kAnyThreads, 0, stream>>>(op, px, py, desc);
    else
      reduce_thread_kernel<T><<<any_blocks(desc.out_n), kAnyThreads, 0, stream>>>(op, px, py,
                                                                                  desc);
  });
}

void launch_arg_reduce(Elem t, bool min, bool select_last, const void* x, int64_t* y,
                       int64_t outer, int64_t n, int64_t inner, cudaStream_t stream) {
  const int64_t count = outer * inner;
  if (count == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    arg_reduce_kernel<T><<<any_blocks(count), kAnyThreads, 0, stream>>>(
        min, select_last, static_cast<const T*>(x), y, outer, n, inner);
  });
}

void launch_top_k(Elem t, const void* x, void* values, int64_t* indices, int64_t outer, int64_t n,
                  int64_t inner, int64_t k, bool largest, cudaStream_t stream) {
  const int64_t lines = outer * inner;
  if (lines == 0 || k == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    top_k_kernel<T><<<any_blocks(lines), kAnyThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(values), indices, outer, n, inner, k, largest);
  });
}

void launch_cumsum(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                   bool exclusive, bool reverse, cudaStream_t stream) {
  const int64_t count = outer * inner;
  if (count == 0 || n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    cumsum_kernel<T><<<any_blocks(count), kAnyThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), outer, n, inner, exclusive, reverse);
  });
}

void launch_hardmax(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                    cudaStream_t stream) {
  const int64_t count = outer * inner;
  if (count == 0 || n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    hardmax_kernel<T><<<any_blocks(count), kAnyThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), outer, n, inner);
  });
}

void launch_layer_norm_stats(Storage st, const void* x, const void* scale, const void* bias,
                             void* y, Storage stat_st, void* mean, void* inv_std_dev, int64_t rows,
                             int64_t n, float epsilon, cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    with_storage(stat_st, [&](auto stat_tag) {
      using S = decltype(stat_tag);
      layer_norm_stats_kernel<T, S><<<grid_of(rows), kAnyThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias),
          static_cast<T*>(y), static_cast<S*>(mean), static_cast<S*>(inv_std_dev), rows, n,
          epsilon);
    });
  });
}

void launch_instance_norm(Storage st, const void* x, const void* scale, const void* bias, void* y,
                          int64_t rows, int64_t channels, int64_t n, float epsilon,
                          cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    instance_norm_kernel<T><<<grid_of(rows), kAnyThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias),
        static_cast<T*>(y), rows, channels, n, epsilon);
  });
}

void launch_loss(Storage st, const LossDesc& desc, const void* x, const void* target,
                 const void* weight, void* y, void* log_prob, const IndexCheck& check,
                 cudaStream_t stream) {
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x);
    const T* pw = static_cast<const T*>(weight);
    if (desc.reduction == 0) {
      if (desc.n * desc.inner == 0) return;
      loss_rows_kernel<T><<<any_blocks(desc.n * desc.inner), kAnyThreads, 0, stream>>>(
          desc, px, target, pw, static_cast<T*>(y), static_cast<T*>(log_prob), check);
    } else {
      loss_total_kernel<T><<<1, kAnyThreads * 4, 0, stream>>>(
          desc, px, target, pw, static_cast<T*>(y), static_cast<T*>(log_prob), check);
    }
  });
}

}  // namespace lumen::cuda
