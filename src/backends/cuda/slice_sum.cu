// launch_slice_sum's kernels (launch.h): the sum of a product's K slices with its epilogue
// (SlicedMatmul, sliced_matmul.h).
#include <cstdint>

#include "backends/cuda/any_types.cuh"
#include "backends/cuda/launch.h"
#include "backends/cuda/unary_math.cuh"

namespace lumen::cuda {
namespace {

// The sum of a product's K slices with the epilogue: four adjacent elements per thread (n a
// multiple of 4, every pointer 16-byte aligned), summed slice by slice in slice order.
template <typename I>
__global__ void slice_sum4_kernel(const float* __restrict__ partials, int slices, I n, I channels,
                                  I inner, ConvEpilogue e, float* __restrict__ y) {
  const auto* bias = static_cast<const float*>(e.bias);
  const auto* residual = static_cast<const float*>(e.residual);
  for (I q = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; q < n / 4;
       q += static_cast<I>(blockDim.x) * gridDim.x) {
    float4 v = reinterpret_cast<const float4*>(partials)[q];
    for (int s = 1; s < slices; ++s) {
      const float4 p = reinterpret_cast<const float4*>(partials + static_cast<size_t>(s) * n)[q];
      v.x += p.x;
      v.y += p.y;
      v.z += p.z;
      v.w += p.w;
    }
    float out[4] = {v.x, v.y, v.z, v.w};
    if (residual != nullptr) {
      const float4 r = reinterpret_cast<const float4*>(residual)[q];
      out[0] += r.x;
      out[1] += r.y;
      out[2] += r.z;
      out[3] += r.w;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const I i = q * 4 + j;
      const float b = bias != nullptr ? bias[(i / inner) % channels] : 0.f;
      out[j] = apply_unary(e.op, out[j] + b, e.alpha, e.beta);
    }
    reinterpret_cast<float4*>(y)[q] = make_float4(out[0], out[1], out[2], out[3]);
  }
}

template <typename I>
__global__ void slice_sum_kernel(const float* __restrict__ partials, int slices, I n, I channels,
                                 I inner, ConvEpilogue e, float* __restrict__ y) {
  const auto* bias = static_cast<const float*>(e.bias);
  const auto* residual = static_cast<const float*>(e.residual);
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<I>(blockDim.x) * gridDim.x) {
    float v = partials[i];
    for (int s = 1; s < slices; ++s) v += partials[static_cast<size_t>(s) * n + i];
    if (residual != nullptr) v += residual[i];
    if (bias != nullptr) v += bias[(i / inner) % channels];
    y[i] = apply_unary(e.op, v, e.alpha, e.beta);
  }
}

}  // namespace

void launch_slice_sum(const float* partials, int slices, float* y, int64_t outer, int64_t channels,
                      int64_t inner, const ConvEpilogue& epilogue, cudaStream_t stream) {
  const int64_t n = outer * channels * inner;
  if (n == 0) return;
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const bool by4 = n % 4 == 0 && aligned(partials) && aligned(y) && aligned(epilogue.residual);
  const bool narrow = n * slices < (int64_t{1} << 31);
  if (by4 && narrow)
    slice_sum4_kernel<<<any_blocks(n / 4), kAnyThreads, 0, stream>>>(
        partials, slices, static_cast<uint32_t>(n), static_cast<uint32_t>(channels),
        static_cast<uint32_t>(inner), epilogue, y);
  else if (by4)
    slice_sum4_kernel<<<any_blocks(n / 4), kAnyThreads, 0, stream>>>(partials, slices, n, channels,
                                                                     inner, epilogue, y);
  else if (narrow)
    slice_sum_kernel<<<any_blocks(n), kAnyThreads, 0, stream>>>(
        partials, slices, static_cast<uint32_t>(n), static_cast<uint32_t>(channels),
        static_cast<uint32_t>(inner), epilogue, y);
  else
    slice_sum_kernel<<<any_blocks(n), kAnyThreads, 0, stream>>>(partials, slices, n, channels,
                                                                inner, epilogue, y);
}

}  // namespace lumen::cuda
