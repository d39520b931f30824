// launch_depthwise_staged's kernel (depthwise_staged.h).
#include "backends/cuda/depthwise_staged.h"

#include <cstdint>

#include "backends/cuda/storage.cuh"
#include "backends/cuda/unary_math.cuh"

namespace lumen::cuda {
namespace {

// Output rows per thread (a taller tile per block: less halo staged per output).
constexpr int kRows = 2;

// A block computes a blockDim.x-wide, kRows * blockDim.y-tall tile of one output plane
// (blockIdx.z: image * output channels + channel) from its input window staged in shared memory
// (zeros over the padding); the channel's K x K weights are held in registers.
template <typename T, int K>
__global__ void depthwise_staged_kernel(Conv2dDesc d, const T* __restrict__ x,
                                        const T* __restrict__ w, T* __restrict__ y,
                                        ConvEpilogue e) {
  extern __shared__ float tile[];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int bx = blockDim.x, by = blockDim.y;
  const int out_w = static_cast<int>(d.out_w), out_h = static_cast<int>(d.out_h);
  const int in_w = static_cast<int>(d.in_w), in_h = static_cast<int>(d.in_h);
  const int multiplier = static_cast<int>(d.multiplier);
  const int out_c = static_cast<int>(d.in_channels) * multiplier;
  const int plane = blockIdx.z, oc = plane % out_c, b = plane / out_c;
  const int ow0 = blockIdx.x * bx, oh0 = blockIdx.y * by * kRows;
  const int cols = bx + K - 1, rows = by * kRows + K - 1;
  const T* xp = x + (static_cast<int64_t>(b) * d.in_channels + oc / multiplier) * in_h * in_w;
  const int ih0 = oh0 - d.pad_h, iw0 = ow0 - d.pad_w;
  for (int i = ty * bx + tx; i < rows * cols; i += bx * by) {
    const int r = i / cols, c = i % cols;
    const int ih = ih0 + r, iw = iw0 + c;
    tile[i] = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w ? to_float(xp[ih * in_w + iw]) : 0.f;
  }
  float wr[K * K];
#pragma unroll
  for (int k = 0; k < K * K; ++k) wr[k] = to_float(w[oc * K * K + k]);
  __syncthreads();
  const int ow = ow0 + tx;
  if (ow >= out_w) return;
  const T* bias = static_cast<const T*>(e.bias);
  const T* residual = static_cast<const T*>(e.residual);
  const float b0 = bias != nullptr ? to_float(bias[oc]) : 0.f;
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int oh = oh0 + ty * kRows + j;
    if (oh >= out_h) return;
    // The same order as the per-output kernel: bias, then the window row by row.
    float acc = b0;
    const float* s = tile + (ty * kRows + j) * cols + tx;
#pragma unroll
    for (int kh = 0; kh < K; ++kh)
#pragma unroll
      for (int kw = 0; kw < K; ++kw) acc += s[kh * cols + kw] * wr[kh * K + kw];
    const int64_t i = (static_cast<int64_t>(plane) * out_h + oh) * out_w + ow;
    if (residual != nullptr) acc += to_float(residual[i]);
    y[i] = from_float<T>(apply_unary(e.op, acc, e.alpha, e.beta));
  }
}

}  // namespace

bool depthwise_staged_supports(const Conv2dDesc& d) {
  const bool window = d.k_h == d.k_w && (d.k_h == 3 || d.k_h == 5 || d.k_h == 7);
  return window && d.stride_h == 1 && d.stride_w == 1 && d.dil_h == 1 && d.dil_w == 1 &&
         d.batch * d.in_channels * d.multiplier <= 65535 && d.in_h * d.in_w < (int64_t{1} << 31) &&
         d.out_h * d.out_w < (int64_t{1} << 31) && d.out_h <= int64_t{65535} * 16;
}

void launch_depthwise_staged(Storage st, const Conv2dDesc& desc, const void* x, const void* w,
                             void* y, const ConvEpilogue& epilogue, cudaStream_t stream) {
  const int64_t planes = desc.batch * desc.in_channels * desc.multiplier;
  if (planes * desc.out_h * desc.out_w == 0) return;
  // Up to 32 columns wide and 256 threads, no larger than the plane needs (powers of two).
  unsigned bx = 1, by = 1;
  while (bx < 32 && bx < desc.out_w) bx *= 2;
  while (bx * by < 256 && by * kRows < desc.out_h) by *= 2;
  const dim3 block(bx, by);
  const dim3 grid(static_cast<unsigned>((desc.out_w + bx - 1) / bx),
                  static_cast<unsigned>((desc.out_h + by * kRows - 1) / (by * kRows)),
                  static_cast<unsigned>(planes));
  const size_t smem = (by * kRows + desc.k_h - 1) * (bx + desc.k_w - 1) * sizeof(float);
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tx = static_cast<const T*>(x);
    const T* tw = static_cast<const T*>(w);
    T* ty = static_cast<T*>(y);
    if (desc.k_h == 3)
      depthwise_staged_kernel<T, 3><<<grid, block, smem, stream>>>(desc, tx, tw, ty, epilogue);
    else if (desc.k_h == 5)
      depthwise_staged_kernel<T, 5><<<grid, block, smem, stream>>>(desc, tx, tw, ty, epilogue);
    else
      depthwise_staged_kernel<T, 7><<<grid, block, smem, stream>>>(desc, tx, tw, ty, epilogue);
  });
}

}  // namespace lumen::cuda
