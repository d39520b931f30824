// The greedy choice of a decoder on the device: per row, the index of its largest value (the first
// where several are equal), so a decoding step copies one index per sequence to the host instead of
// its logits (GPT-2's 50257 floats per sequence).
#include <cfloat>
#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {
namespace {

constexpr int kThreads = 256;

// Whether (v, i) ranks above (bv, bi): larger, or equal and earlier.
__device__ __forceinline__ bool better(float v, int64_t i, float bv, int64_t bi) {
  return v > bv || (v == bv && i < bi);
}

// One block per row: each thread its strided share, then the warps, then the block. NaNs never
// rank above anything, so they are passed over; the row's NaN flag goes to nan[r] where nan is
// given. With `ids`, the index also goes to ids[r] (int32 where ids32, else int64), and a row
// starting with a NaN gives 0 (std::max_element keeps its first value while none compares above
// it).
__global__ void row_argmax_kernel(const float* __restrict__ data, int64_t cols, int64_t stride,
                                  int64_t* __restrict__ index, int* __restrict__ nan,
                                  void* __restrict__ ids, bool ids32) {
  __shared__ float sv[kThreads / 32];
  __shared__ int64_t si[kThreads / 32];
  __shared__ int s_nan;
  const float* row = data + blockIdx.x * stride;
  if (threadIdx.x == 0) s_nan = 0;
  __syncthreads();
  float bv = -INFINITY;
  int64_t bi = cols;  // none yet
  bool saw_nan = false;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
    const float v = row[j];
    if (v != v) saw_nan = true;
    if (better(v, j, bv, bi)) {
      bv = v;
      bi = j;
    }
  }
  if (saw_nan) s_nan = 1;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (better(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w)
      if (better(sv[w], si[w], bv, bi)) {
        bv = sv[w];
        bi = si[w];
      }
    // A row of -inf only: the first index, as a sequential scan gives.
    int64_t at = bi == cols ? 0 : bi;
    if (ids != nullptr) {
      if (row[0] != row[0]) at = 0;
      if (ids32)
        static_cast<int32_t*>(ids)[blockIdx.x] = static_cast<int32_t>(at);
      else
        static_cast<int64_t*>(ids)[blockIdx.x] = at;
    }
    index[blockIdx.x] = at;
    if (nan != nullptr) nan[blockIdx.x] = s_nan;
  }
}

}  // namespace

void launch_row_argmax(const float* data, int64_t rows, int64_t cols, int64_t stride,
                       int64_t* index, int* nan, cudaStream_t stream) {
  if (rows == 0) return;
  row_argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(data, cols, stride, index,
                                                                          nan, nullptr, false);
}

void launch_row_argmax_into(const float* data, int64_t rows, int64_t cols, int64_t stride,
                            void* ids, bool ids32, int64_t* chosen, cudaStream_t stream) {
  if (rows == 0) return;
  row_argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      data, cols, stride, chosen, nullptr, ids, ids32);
}

}  // namespace lumen::cuda
