// Launchers of the CUDA kernels of ONNX Attention (attention_op.cu), in plain C++ types for the
// kernel class (attention_op.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// The largest head size (of Q/K and of V) the kernel takes.
inline constexpr int kAttentionOpMaxDepth = 128;

// Element strides of an operand seen as [batch, heads, sequence, depth] (depth contiguous).
struct AttnStrides {
  int64_t batch = 0, head = 0, row = 0;
};

// One Attention node's geometry (graph/schemas/attention.h's AttentionGeometry, flattened): query
// head h reads kv head h / group; key j < past_len is past's row j, later keys K's row j -
// past_len. Query i of a batch with nonpad n attends keys [lo, hi) (attention_key_range: causal
// frontier, window, nonpad, mask length) plus attn_mask: bool (mask_kind 1, bytes, 0 masks out)
// or added (mask_kind 2, the operands' storage), read at b * mask_b + h * mask_h + i * mask_r + j.
struct AttentionOpDesc {
  int64_t batch = 0, kv_heads = 0, group = 1, q_len = 0, past_len = 0, total_len = 0;
  int64_t depth = 0, depth_v = 0;
  AttnStrides q, k, v, y, past_k, past_v;
  float scale = 1.f, softcap = 0.f;
  bool causal = false, has_past = false, has_nonpad = false;
  int64_t left_window = -1, right_window = -1;
  int mask_kind = 0;
  int64_t mask_b = 0, mask_h = 0, mask_r = 0, mask_len = 0;
};

// Y = softmax(softcap(scale Q K^T) + bias) V, one warp per query row (fully masked rows: zeros).
void launch_attention_op(Storage st, const AttentionOpDesc& d, const void* q, const void* k,
                         const void* v, const void* mask, const void* past_k, const void* past_v,
                         const int64_t* nonpad, void* y, cudaStream_t stream);

// present [batch, kv_heads, total_len, depth] = past rows, then the new ones (of `cur` with
// strides cur_s; past with past_s), for present_key (depth = d.depth) or present_value.
void launch_attention_present(Storage st, const AttentionOpDesc& d, int64_t depth, const void* past,
                              AttnStrides past_s, const void* cur, AttnStrides cur_s, void* present,
                              cudaStream_t stream);

}  // namespace lumen::cuda
