// The matrix-product shaders' common entry: MatMul, Gemm, FusedMatMul and pointwise convolutions
// enqueue their products through it; convolutions share its split-K plan and reduction.
#pragma once

#include <cstdint>

#include "backends/vulkan/vulkan_context.h"

namespace lumen::vulkan {

// Y[b] = act(alpha A[b] B[b] + beta C[b] + D[b]) for b < batch: the push constants of
// shaders/gemm.comp and gemm_tiled.comp. Operands are addressed by element strides (batch, row,
// column; 0 broadcasts); C and D are optional (address 0); Y is contiguous (batch, m, n).
// k_split is set by enqueue_gemm (0: one pass over all of k).
struct GemmPush {
  uint64_t a = 0, b = 0, c = 0, d = 0, y = 0;
  int32_t m = 0, n = 0, k = 0;
  int32_t a_bs = 0, a_rs = 0, a_cs = 0;
  int32_t b_bs = 0, b_rs = 0, b_cs = 0;
  int32_t c_bs = 0, c_rs = 0, c_cs = 0;
  int32_t d_bs = 0, d_rs = 0, d_cs = 0;
  float alpha = 1.f, beta = 0.f, act_a = 0.f, act_b = 0.f;
  int32_t k_split = 0;
};
static_assert(sizeof(GemmPush) <= kPushBytes);

// The push constants of shaders/gemm_reduce.comp: Y = act(sum of `splits` partial products in W
// + beta C + D), shapes and strides as in GemmPush.
struct ReducePush {
  uint64_t w = 0, c = 0, d = 0, y = 0;
  int32_t m = 0, n = 0, batch = 1, splits = 1;
  int32_t c_bs = 0, c_rs = 0, c_cs = 0;
  int32_t d_bs = 0, d_rs = 0, d_cs = 0;
  float beta = 0.f, act_a = 0.f, act_b = 0.f;
};
static_assert(sizeof(ReducePush) <= kPushBytes);

// How a product's depth k is cut: `splits` passes of k_split each (splits 1, k_split 0: none).
struct SplitK {
  int32_t splits = 1;
  int32_t k_split = 0;
};

// Enough workgroups to keep a large GPU busy (an H100 has 132 multiprocessors): smaller tiles,
// then splits of k, are taken until a product has this many.
inline constexpr int64_t kBusyGroups = 128;

// The split of k for a product of `groups` workgroups whose tiles have depth `depth`, with
// `outputs` elements of Y in all: none where the groups already fill the GPU or k is short, else
// enough splits of at least 64 deep to reach about four times kBusyGroups (measured on the H200
// against twice and eight times, and depths of 32 and 128), within the workspace.
SplitK plan_split(int64_t groups, int64_t k, int64_t depth, int64_t outputs);

// Enqueues the product on `stream`: gemm_tiled.comp in 128x128 or 64x64 tiles (vec4 reads where
// the operands allow), gemm.comp for products of at most 16 rows, gemm_coop.comp (64x64 tiles on
// cooperative matrices) for longer float16 ones where the device has them, each split along k where
// that leaves the GPU idle (then gemm_reduce.comp applies the epilogue). `act` is an activation
// code of shaders/common.glsl; `dtype` is the operands' float type (float32 or float16, which the
// partial sums of a split take too).
void enqueue_gemm(VulkanStream& stream, const GemmPush& push, int64_t batch, int act, DType dtype);

}  // namespace lumen::vulkan
