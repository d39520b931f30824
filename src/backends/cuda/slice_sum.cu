// launch_slice_sum's and launch_slice_sum_norm's kernels (launch.h): the sum of a product's K
// slices with its epilogue, and with a LayerNormalization of each row after it (SlicedMatmul,
// sliced_matmul.h).
#include <cstdint>

#include "backends/cuda/any_types.cuh"
#include "backends/cuda/block_reduce.cuh"
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

// W consecutive floats at p (16-byte aligned where W is 4).
template <int W>
__device__ __forceinline__ void load_floats(const float* p, float* v) {
  if constexpr (W == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
  } else {
    v[0] = *p;
  }
}

template <int W>
__device__ __forceinline__ void store_floats(float* p, const float* v) {
  if constexpr (W == 4)
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  else
    *p = v[0];
}

// One block per row, one W-wide group of the row a thread (n <= W * 1024): the thread sums the
// slices into its group in slice order, adds residual and bias, applies the activation; the block
// then normalizes the row with its mean and centred variance (block sums through shared memory).
// BERT-base's 128 rows of 768 take 192 threads a row: 768 warps loading, where a warp a row left
// the loads of four slices one after another.
template <int W>
__global__ void slice_sum_norm_kernel(const float* __restrict__ partials, int slices, int64_t rows,
                                      int n, ConvEpilogue e, RowNorm norm, float* __restrict__ y) {
  __shared__ float sums[32];
  const int g = threadIdx.x;
  const bool active = g < n / W;
  const size_t plane = static_cast<size_t>(rows) * n;
  const size_t at = static_cast<size_t>(blockIdx.x) * n + static_cast<size_t>(g) * W;
  float v[W];
#pragma unroll
  for (int c = 0; c < W; ++c) v[c] = 0.f;
  float sum = 0.f;
  if (active) {
    load_floats<W>(partials + at, v);
#pragma unroll 4
    for (int s = 1; s < slices; ++s) {
      float p[W];
      load_floats<W>(partials + s * plane + at, p);
#pragma unroll
      for (int c = 0; c < W; ++c) v[c] += p[c];
    }
    float z[W], b[W];
#pragma unroll
    for (int c = 0; c < W; ++c) z[c] = b[c] = 0.f;
    if (e.residual != nullptr) load_floats<W>(static_cast<const float*>(e.residual) + at, z);
    if (e.bias != nullptr) load_floats<W>(static_cast<const float*>(e.bias) + g * W, b);
#pragma unroll
    for (int c = 0; c < W; ++c) {
      v[c] = apply_unary(e.op, v[c] + z[c] + b[c], e.alpha, e.beta);
      sum += v[c];
    }
  }
  const float mean = block_sum(sum, sums) / static_cast<float>(n);
  float q = 0.f;
  if (active) {
#pragma unroll
    for (int c = 0; c < W; ++c) q += (v[c] - mean) * (v[c] - mean);
  }
  const float inv = rsqrtf(block_sum(q, sums) / static_cast<float>(n) + norm.epsilon);
  if (!active) return;
  float w[W], b[W], out[W];
#pragma unroll
  for (int c = 0; c < W; ++c) b[c] = 0.f;
  load_floats<W>(static_cast<const float*>(norm.scale) + g * W, w);
  if (norm.bias != nullptr) load_floats<W>(static_cast<const float*>(norm.bias) + g * W, b);
#pragma unroll
  for (int c = 0; c < W; ++c) out[c] = (v[c] - mean) * inv * w[c] + b[c];
  store_floats<W>(y + at, out);
}

template <int W>
void launch_norm_rows(const float* partials, int slices, float* y, int64_t rows, int64_t n,
                      const ConvEpilogue& e, const RowNorm& norm, cudaStream_t stream) {
  const int64_t threads = (n / W + 31) / 32 * 32;
  slice_sum_norm_kernel<W>
      <<<static_cast<unsigned>(rows), static_cast<unsigned>(threads), 0, stream>>>(
          partials, slices, rows, static_cast<int>(n), e, norm, y);
}

}  // namespace

void launch_slice_sum_norm(const float* partials, int slices, float* y, int64_t rows, int64_t n,
                           const ConvEpilogue& epilogue, const RowNorm& norm, cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const bool by4 = n % 4 == 0 && aligned(partials) && aligned(y) && aligned(epilogue.residual) &&
                   aligned(epilogue.bias) && aligned(norm.scale) && aligned(norm.bias);
  if (by4)
    launch_norm_rows<4>(partials, slices, y, rows, n, epilogue, norm, stream);
  else
    launch_norm_rows<1>(partials, slices, y, rows, n, epilogue, norm, stream);
}

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
