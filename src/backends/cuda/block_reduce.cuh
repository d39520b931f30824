// Sums and maxima across a warp and across a block by shuffles, shared by the kernels that reduce
// a row in registers (normalizations, the attention kernels' online softmax, the slice sum).
#pragma once

#include <cmath>

namespace lumen::cuda {

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `shared` holds 32 floats and may be passed to the next call at once.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  float total = lane < warps ? shared[lane] : 0.f;
  total = warp_sum(total);
  __syncthreads();  // shared may be reused right after
  return total;
}

}  // namespace lumen::cuda
