// The warp-level pieces of the attention kernels' online softmax (Milakov and Gimelshein, 2018),
// shared by FusedAttention's kernels (attention.cu) and ONNX Attention's (attention_op.cu).
#pragma once

#include <cmath>

#include "backends/cuda/block_reduce.cuh"

namespace lumen::cuda {

// Folds one tile of scores (one per lane, -inf for a lane without a live key) into a warp's running
// maximum m and sum l and rescales its output accumulator; returns this lane's weight
// exp(s - m). A row masked out so far (every score -inf) keeps zero weight instead of exp(nan).
template <int kCols>
__device__ __forceinline__ float online_softmax_step(float s, float& m, float& l,
                                                     float (&acc)[kCols]) {
  const float m_new = fmaxf(m, warp_max(s));
  const float p = m_new == -INFINITY ? 0.f : expf(s - m_new);
  const float correction = m_new == -INFINITY ? 1.f : expf(m - m_new);
  l = l * correction + warp_sum(p);
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] *= correction;
  m = m_new;
  return p;
}

}  // namespace lumen::cuda
