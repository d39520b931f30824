// The CUDA kernels of QuantizeLinear and DequantizeLinear: one thread per element, its scale and
// zero point found through the layout's strides.
#include <limits>

#include "backends/cuda/any_types.cuh"
#include "backends/cuda/quant_linear.h"
#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

__device__ __forceinline__ int64_t param_index(const QuantLayout& l, int64_t k) {
  const int64_t row = k / l.inner, i = k - row * l.inner;
  const int64_t o = row / l.axis_len, d = row - o * l.axis_len;
  return o * l.p_outer + (d / l.block) * l.p_axis + i * l.p_inner;
}

// v rounded to T and back (the CPU's round_to).
template <typename T>
__device__ __forceinline__ float rounded(float v) {
  return to_float(from_float<T>(v));
}

template <typename T, typename Q>
__global__ void quantize_kernel(QuantLayout l, const T* x, const T* scale, const Q* zero_point,
                                Q* y, int64_t n, float lo, float hi) {
  ANY_GRID_LOOP(k, n) {
    const int64_t p = param_index(l, k);
    const float zp = zero_point != nullptr ? static_cast<float>(zero_point[p]) : 0.f;
    const float r = rintf(rounded<T>(__fdiv_rn(to_float(x[k]), to_float(scale[p]))));
    const float q = r != r ? zp : r + zp;  // NaN: the zero point
    y[k] = static_cast<Q>(static_cast<int32_t>(fminf(fmaxf(q, lo), hi)));
  }
}

template <typename T, typename Q>
__global__ void dequantize_kernel(QuantLayout l, const Q* x, const T* scale, const Q* zero_point,
                                  T* y, int64_t n) {
  ANY_GRID_LOOP(k, n) {
    const int64_t p = param_index(l, k);
    const int64_t zp = zero_point != nullptr ? static_cast<int64_t>(zero_point[p]) : 0;
    const float diff = rounded<T>(static_cast<float>(static_cast<int64_t>(x[k]) - zp));
    y[k] = from_float<T>(diff * to_float(scale[p]));
  }
}

template <typename F>
void with_integer(Elem q, F&& f) {
  switch (q) {
    case Elem::kI8:
      return f(int8_t{});
    case Elem::kU8:
      return f(uint8_t{});
    case Elem::kI16:
      return f(int16_t{});
    case Elem::kU16:
      return f(uint16_t{});
    default:
      return f(int32_t{});
  }
}

}  // namespace

void launch_quantize_linear(Storage st, Elem q, const QuantLayout& l, const void* x,
                            const void* scale, const void* zero_point, void* y, int64_t n,
                            cudaStream_t stream) {
  if (n == 0) return;
  with_storage(st, [&](auto t) {
    using T = decltype(t);
    with_integer(q, [&](auto qt) {
      using Q = decltype(qt);
      const float lo = static_cast<float>(std::numeric_limits<Q>::min());
      const float hi = static_cast<float>(std::numeric_limits<Q>::max());
      quantize_kernel<T, Q><<<any_blocks(n), kAnyThreads, 0, stream>>>(
          l, static_cast<const T*>(x), static_cast<const T*>(scale),
          static_cast<const Q*>(zero_point), static_cast<Q*>(y), n, lo, hi);
    });
  });
}

void launch_dequantize_linear(Storage st, Elem q, const QuantLayout& l, const void* x,
                              const void* scale, const void* zero_point, void* y, int64_t n,
                              cudaStream_t stream) {
  if (n == 0) return;
  with_storage(st, [&](auto t) {
    using T = decltype(t);
    with_integer(q, [&](auto qt) {
      using Q = decltype(qt);
      dequantize_kernel<T, Q><<<any_blocks(n), kAnyThreads, 0, stream>>>(
          l, static_cast<const Q*>(x), static_cast<const T*>(scale),
          static_cast<const Q*>(zero_point), static_cast<T*>(y), n);
    });
  });
}

}  // namespace lumen::cuda
