// AxisLayerNorm on the GPU. A block of 256 threads takes kCols adjacent columns of one outer
// index: thread t reads column t % kCols at channels t / kCols, t / kCols + 256 / kCols, ... With
// 8 columns a warp reads 4 channels x 8 columns (four full 32-byte sectors) at each step; where
// the columns are too few for 8 per block to fill the device (ConvNeXt's later stages: 196 and 49
// columns of 384 and 768 channels), a block takes one column and its 256 threads split the
// channels. Up to 32 channels a thread, each thread keeps its values in registers (kPer of them),
// so the tile is read once with all its loads in flight; beyond that each pass reads it again.
// Sums are reduced over the lanes of a column by warp shuffles, then over the 8 warps in shared
// memory. The write goes back in x's layout, or with the axis moved last.
#include "backends/cuda/axis_layer_norm.h"

#include <type_traits>

#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Sums `v` over the threads of each of the block's kCols columns (thread t: column t % kCols);
// every thread gets its column's sum.
template <int kCols>
__device__ __forceinline__ float column_sum(float v, float (*partial)[kCols], float* total) {
  for (int offset = 16; offset >= kCols; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  if (lane < kCols) partial[warp][lane] = v;
  __syncthreads();
  if (threadIdx.x < kCols) {
    float s = 0.f;
    for (int w = 0; w < kWarps; ++w) s += partial[w][threadIdx.x];
    total[threadIdx.x] = s;
  }
  __syncthreads();
  return total[threadIdx.x % kCols];
}

// kPer > 0: at most kPer channels per thread, held in registers; 0: any number, read per pass.
template <typename T, int kCols, int kPer>
__global__ void axis_layer_norm_kernel(const T* x, const T* scale, const T* bias, T* y,
                                       int64_t channels, int64_t inner, float epsilon,
                                       bool axis_last) {
  constexpr int kGroups = kThreads / kCols;
  __shared__ float partial[kWarps][kCols];
  __shared__ float total[kCols];
  const int col = static_cast<int>(threadIdx.x) % kCols;
  const int group = static_cast<int>(threadIdx.x) / kCols;
  const int64_t o = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kCols + col;
  const bool live = i < inner;
  const T* xo = x + o * channels * inner + i;
  const float n = static_cast<float>(channels);
  float v[kPer > 0 ? kPer : 1];
  float sum = 0.f;
  if constexpr (kPer > 0) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t c = group + static_cast<int64_t>(k) * kGroups;
      v[k] = live && c < channels ? to_float(xo[c * inner]) : 0.f;
      sum += v[k];
    }
  } else if (live) {
    for (int64_t c = group; c < channels; c += kGroups) sum += to_float(xo[c * inner]);
  }
  const float mean = column_sum<kCols>(sum, partial, total) / n;
  float dev = 0.f;
  if constexpr (kPer > 0) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const float d = v[k] - mean;
      dev += live && group + static_cast<int64_t>(k) * kGroups < channels ? d * d : 0.f;
    }
  } else if (live) {
    for (int64_t c = group; c < channels; c += kGroups) {
      const float d = to_float(xo[c * inner]) - mean;
      dev += d * d;
    }
  }
  const float inv = rsqrtf(column_sum<kCols>(dev, partial, total) / n + epsilon);
  if (!live) return;
  auto store = [&](int64_t c, float value) {
    const float b = bias == nullptr ? 0.f : to_float(bias[c]);
    const float out = (value - mean) * inv * to_float(scale[c]) + b;
    if (axis_last)
      y[(o * inner + i) * channels + c] = from_float<T>(out);
    else
      y[(o * channels + c) * inner + i] = from_float<T>(out);
  };
  if constexpr (kPer > 0) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t c = group + static_cast<int64_t>(k) * kGroups;
      if (c < channels) store(c, v[k]);
    }
  } else {
    for (int64_t c = group; c < channels; c += kGroups) store(c, to_float(xo[c * inner]));
  }
}

template <typename T, int kCols, int kPer>
void launch_typed(int64_t outer, const void* x, const void* scale, const void* bias, void* y,
                  int64_t channels, int64_t inner, float epsilon, bool axis_last,
                  cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((inner + kCols - 1) / kCols), static_cast<unsigned>(outer));
  axis_layer_norm_kernel<T, kCols, kPer><<<grid, kThreads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias),
      static_cast<T*>(y), channels, inner, epsilon, axis_last);
}

// The smallest register count that holds a thread's share of `channels` (0: more than 32).
template <typename T, int kCols>
void launch_columns(int64_t outer, const void* x, const void* scale, const void* bias, void* y,
                    int64_t channels, int64_t inner, float epsilon, bool axis_last,
                    cudaStream_t stream) {
  constexpr int64_t kGroups = kThreads / kCols;
  if (channels <= 4 * kGroups)
    launch_typed<T, kCols, 4>(outer, x, scale, bias, y, channels, inner, epsilon, axis_last,
                              stream);
  else if (channels <= 8 * kGroups)
    launch_typed<T, kCols, 8>(outer, x, scale, bias, y, channels, inner, epsilon, axis_last,
                              stream);
  else if (channels <= 16 * kGroups)
    launch_typed<T, kCols, 16>(outer, x, scale, bias, y, channels, inner, epsilon, axis_last,
                               stream);
  else if (channels <= 32 * kGroups)
    launch_typed<T, kCols, 32>(outer, x, scale, bias, y, channels, inner, epsilon, axis_last,
                               stream);
  else
    launch_typed<T, kCols, 0>(outer, x, scale, bias, y, channels, inner, epsilon, axis_last,
                              stream);
}

}  // namespace

void launch_axis_layer_norm(Storage st, const void* x, const void* scale, const void* bias, void* y,
                            int64_t outer, int64_t channels, int64_t inner, float epsilon,
                            bool axis_last, cudaStream_t stream) {
  if (outer == 0 || inner == 0 || channels == 0) return;
  // 8 columns a block while that makes two blocks per SM or more (132 SMs on an H100/H200), else
  // one column a block. Written in x's layout (strided by the columns: a block of one column
  // stores each channel's value in a sector of its own), 4 or 2 columns a block where that still
  // makes about a block per SM or half of one (ConvNeXt's 28 x 28 and 14 x 14 stages).
  const auto blocks = [&](int64_t cols) { return (inner + cols - 1) / cols * outer; };
  const int cols = blocks(8) >= 256   ? 8
                   : axis_last        ? 1
                   : blocks(4) >= 128 ? 4
                   : blocks(2) >= 64  ? 2
                                      : 1;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    auto run = [&](auto cols_tag) {
      constexpr int kCols = decltype(cols_tag)::value;
      launch_columns<T, kCols>(outer, x, scale, bias, y, channels, inner, epsilon, axis_last,
                               stream);
    };
    if (cols == 8)
      run(std::integral_constant<int, 8>{});
    else if (cols == 4)
      run(std::integral_constant<int, 4>{});
    else if (cols == 2)
      run(std::integral_constant<int, 2>{});
    else
      run(std::integral_constant<int, 1>{});
  });
}

}  // namespace lumen::cuda
