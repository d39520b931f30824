// The CUDA kernel of Einsum: a thread per output element where the summed space is short, a warp
// per output element (its lanes splitting the summed space, then a shuffle reduction) where it is
// long.
#include "backends/cuda/any_types.cuh"
#include "backends/cuda/einsum.h"

namespace lumen::cuda {
namespace {

// The type a product of T is summed in.
template <typename T>
using acc_t =
    std::conditional_t<kIsFloat<T>, std::conditional_t<std::is_same_v<T, double>, double, float>,
                       long long>;

// Per operand, the element offset of output element o.
__device__ __forceinline__ void output_offsets(const EinsumDesc& d, int64_t o, int64_t* base) {
  for (int k = 0; k < d.operands; ++k) base[k] = 0;
  for (int a = d.out_rank - 1; a >= 0; --a) {
    const int64_t i = o % d.out_dims[a];
    o /= d.out_dims[a];
    for (int k = 0; k < d.operands; ++k) base[k] += i * d.out_strides[k][a];
  }
}

template <typename T>
__device__ __forceinline__ acc_t<T> product_at(const EinsumDesc& d, const EinsumOperands& x,
                                               const int64_t* off) {
  acc_t<T> p = static_cast<acc_t<T>>(load(static_cast<const T*>(x.data[0]), off[0]));
  for (int k = 1; k < d.operands; ++k)
    p *= static_cast<acc_t<T>>(load(static_cast<const T*>(x.data[k]), off[k]));
  return p;
}

// A thread per output element; the summed space walked as an odometer.
template <typename T>
__global__ void einsum_thread_kernel(EinsumDesc d, EinsumOperands x, T* y) {
  ANY_GRID_LOOP(o, d.out_numel) {
    int64_t off[kEinsumMaxOperands], idx[kEinsumMaxLabels];
    output_offsets(d, o, off);
    for (int a = 0; a < d.sum_rank; ++a) idx[a] = 0;
    acc_t<T> acc = 0;
    for (int64_t s = 0; s < d.sum_count; ++s) {
      acc += product_at<T>(d, x, off);
      for (int a = d.sum_rank - 1; a >= 0; --a) {  // next summed index
        for (int k = 0; k < d.operands; ++k) off[k] += d.sum_strides[k][a];
        if (++idx[a] < d.sum_dims[a]) break;
        for (int k = 0; k < d.operands; ++k) off[k] -= d.sum_strides[k][a] * d.sum_dims[a];
        idx[a] = 0;
      }
    }
    y[o] = store_as<T>(acc);
  }
}

template <typename V>
__device__ __forceinline__ V warp_total(V v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// A warp per output element: lane l sums the summed indices l, l + 32, ...
template <typename T>
__global__ void einsum_warp_kernel(EinsumDesc d, EinsumOperands x, T* y) {
  const int lane = threadIdx.x & 31;
  const int64_t first = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int64_t step = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t o = first; o < d.out_numel; o += step) {
    int64_t base[kEinsumMaxOperands], off[kEinsumMaxOperands];
    output_offsets(d, o, base);
    acc_t<T> acc = 0;
    for (int64_t s = lane; s < d.sum_count; s += 32) {
      for (int k = 0; k < d.operands; ++k) off[k] = base[k];
      int64_t rest = s;
      for (int a = d.sum_rank - 1; a >= 0; --a) {
        const int64_t i = rest % d.sum_dims[a];
        rest /= d.sum_dims[a];
        for (int k = 0; k < d.operands; ++k) off[k] += i * d.sum_strides[k][a];
      }
      acc += product_at<T>(d, x, off);
    }
    acc = warp_total(acc);
    if (lane == 0) y[o] = store_as<T>(acc);
  }
}

constexpr int64_t kWarpSumAt = 128;  // summed elements from which a warp shares an output

}  // namespace

void launch_einsum(Elem t, const EinsumDesc& d, const EinsumOperands& x, void* y,
                   cudaStream_t stream) {
  if (d.out_numel == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return;  // Einsum takes numeric types only (the kernel's check refuses bool)
    } else if (d.sum_count >= kWarpSumAt) {
      const int64_t warps_per_block = kAnyThreads / 32;
      int64_t blocks = (d.out_numel + warps_per_block - 1) / warps_per_block;
      blocks = blocks < 65535 * 8 ? blocks : 65535 * 8;
      einsum_warp_kernel<T>
          <<<static_cast<int>(blocks), kAnyThreads, 0, stream>>>(d, x, static_cast<T*>(y));
    } else {
      einsum_thread_kernel<T>
          <<<any_blocks(d.out_numel), kAnyThreads, 0, stream>>>(d, x, static_cast<T*>(y));
    }
  });
}

}  // namespace lumen::cuda
