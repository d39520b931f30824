// The matrix-product shaders' common entry: MatMul, Gemm, FusedMatMul and pointwise convolutions
// enqueue their products through it.
#pragma once

#include <cstdint>

#include "backends/vulkan/vulkan_context.h"

namespace lumen::vulkan {

// Y[b] = act(alpha A[b] B[b] + beta C[b] + D[b]) for b < batch, float32: the push constants of
// shaders/gemm.comp and gemm_tiled.comp. Operands are addressed by element strides (batch, row,
// column; 0 broadcasts); C and D are optional (address 0); Y is contiguous (batch, m, n).
struct GemmPush {
  uint64_t a = 0, b = 0, c = 0, d = 0, y = 0;
  int32_t m = 0, n = 0, k = 0;
  int32_t a_bs = 0, a_rs = 0, a_cs = 0;
  int32_t b_bs = 0, b_rs = 0, b_cs = 0;
  int32_t c_bs = 0, c_rs = 0, c_cs = 0;
  int32_t d_bs = 0, d_rs = 0, d_cs = 0;
  float alpha = 1.f, beta = 0.f, act_a = 0.f, act_b = 0.f;
};

// Enqueues the product on `stream`: the 128x128 vec4 tiles where the operands allow
// (row-major, k and n multiples of 4, 16-byte aligned, at least 64 rows and columns), else the
// generic strided shader. `act` is an activation code of shaders/common.glsl.
void enqueue_gemm(VulkanStream& stream, const GemmPush& push, int64_t batch, int act);

}  // namespace lumen::vulkan
