// Launchers of the CUDA kernels of LinearAttention and CausalConvWithState (linear_attention.cu),
// in plain C++ types for the kernel classes (linear_attention.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// State rows each thread of the LinearAttention kernel holds in registers, and the most rows
// (d_k) it takes: 16 row groups of them.
inline constexpr int kLinearAttentionRows = 16;
inline constexpr int64_t kLinearAttentionMaxDk = 16 * kLinearAttentionRows;

// LinearAttention's geometry (graph/schemas/linear_attention.h): query (B, T, Hq*dk), key
// (B, T, Hkv*dk), value (B, T, Hkv*dv), state (B, Hkv, dk, dv); decay (B, T, Hkv*dk) when
// per_key_decay else (B, T, Hkv); beta (B, T, Hkv) when beta_per_head else (B, T, 1).
struct LinearAttentionDesc {
  int64_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, dk = 0, dv = 0;
  bool gated = false, delta = false, per_key_decay = false, beta_per_head = false;
  float scale = 1.f;
};
// Shared memory the LinearAttention kernel takes per block: k, the decay factors, the group's
// query rows, one partial sum per thread and two scalars.
inline size_t linear_attention_smem_bytes(const LinearAttentionDesc& d) {
  const int64_t row_groups = (d.dk + kLinearAttentionRows - 1) / kLinearAttentionRows;
  return sizeof(float) *
         static_cast<size_t>((2 + d.q_heads / d.kv_heads) * d.dk + 32 * row_groups + 2);
}
// The most shared memory a block gets without opting in.
inline constexpr size_t kLinearAttentionMaxSmem = 48 * 1024;

// Runs the recurrence over the whole sequence: output (B, T, Hq*dv) and, where present is not
// null, the final state. past, decay and beta may be null where absent (past: zeros). Every
// tensor has storage st; dk <= kLinearAttentionMaxDk and linear_attention_smem_bytes(d) <=
// kLinearAttentionMaxSmem.
void launch_linear_attention(Storage st, const LinearAttentionDesc& d, const void* q, const void* k,
                             const void* v, const void* past, const void* decay, const void* beta,
                             void* out, void* present, cudaStream_t stream);

// CausalConvWithState's geometry: input/output (B, C, L), weight (C, 1, k), bias (C), state
// (B, C, k - 1).
struct CausalConvDesc {
  int64_t batch = 0, channels = 0, length = 0, kernel = 1;
  bool silu = false;
};
// y = the causal depthwise convolution of [past or zeros, x] (+ bias, then SiLU where d.silu);
// present (where not null) = the last k - 1 positions of [past or zeros, x]. bias and past may
// be null.
void launch_causal_conv(Storage st, const CausalConvDesc& d, const void* x, const void* w,
                        const void* bias, const void* past, void* y, void* present,
                        cudaStream_t stream);

}  // namespace lumen::cuda
