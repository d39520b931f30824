// Launchers of the CUDA kernels of the opset 18-28 normalisation and activation ops
// (norm_extra.cu): RMSNormalization, GroupNormalization, RotaryEmbedding, Swish, SwiGLU and
// MeanVarianceNormalization. Plain C++ types, so the kernel classes (norm_extra_ops.cc) need no
// CUDA C++. Tensors are `void*` in the node's storage (launch.h); every kernel computes in float32
// and rounds once on store.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/any_launch.h"
#include "backends/cuda/launch.h"

namespace lumen::cuda {

// RMSNormalization over `rows` contiguous rows of n: y = x / sqrt(mean(x^2) + epsilon) * scale,
// scale a dense row of n. A warp per row for rows up to 1024 values, else a block per row.
void launch_rms_norm(Storage st, const void* x, const void* scale, void* y, int64_t rows, int64_t n,
                     float epsilon, cudaStream_t stream);

// GroupNormalization of x (batch, channels, spatial) with per-channel scale and bias. Each group
// (channels / groups planes, contiguous) is split into `chunks` pieces of chunk_len values: one
// launch writes each piece's mean and sum of squared deviations to the workspace, a second
// combines a group's pieces (Chan et al.'s pairwise formula) and normalises its piece, so that
// even a batch of one with few groups fills the GPU.
struct GroupNormDesc {
  int64_t batch = 0, channels = 0, groups = 1, spatial = 1;
  int64_t chunks = 1, chunk_len = 0;
  float epsilon = 1e-5f;
};
// The descriptor of a group normalisation, with its split into chunks chosen.
GroupNormDesc group_norm_desc(int64_t batch, int64_t channels, int64_t groups, int64_t spatial,
                              float epsilon);
// The device workspace bytes launch_group_norm needs.
size_t group_norm_workspace_bytes(const GroupNormDesc& d);
void launch_group_norm(Storage st, const GroupNormDesc& d, const void* x, const void* scale,
                       const void* bias, void* y, void* workspace, cudaStream_t stream);

// RotaryEmbedding: x is (batch, heads, seq, head_size), or (batch, seq, heads, head_size) when
// three_d; cos and sin are rows of rotary_dim / 2, row position_ids[b * seq + s] (int64, null:
// row b * seq + s). A position outside [0, max_position) makes that token's rotated values NaN
// and is reported through `check` (index_check.h). y must not alias x (a thread reads its value's
// partner).
struct RotaryDesc {
  int64_t batch = 0, heads = 0, seq = 0, head_size = 0, rotary_dim = 0, max_position = 0;
  bool interleaved = false, three_d = false;
};
void launch_rotary_embedding(Storage st, const RotaryDesc& d, const void* x, const void* cos,
                             const void* sin, const int64_t* position_ids, void* y,
                             const IndexCheck& check, cudaStream_t stream);

// MeanVarianceNormalization: y = (x - mean) / (sqrt(variance) + 1e-9), population statistics in
// double over the reduced dims of `d` (any_launch.h's ReduceDesc: a group per kept index), as the
// CPU kernel; a block per group.
void launch_mvn(Storage st, const ReduceDesc& d, const void* x, void* y, cudaStream_t stream);

// y = a * sigmoid(alpha * a) (Swish), times b when b is not null (SwiGLU), over n values.
void launch_swish(Storage st, float alpha, const void* a, const void* b, void* y, int64_t n,
                  cudaStream_t stream);

}  // namespace lumen::cuda
