// The measured choice (kernel_choice.h) for a matrix product with constant weights, shared by the
// MatMul, Gemm and FusedMatMul kernels: packed_gemm or oneDNN's matmul.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cpu/dnnl_matmul.h"
#include "backends/cpu/kernel_choice.h"
#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {

// Times `packed` (B packed for packed_gemm, with `epilogue`) against `mm` (initialised for the
// same product on the constant `b`, or left empty below AVX-512, where pick_lumen_kernel takes
// packed_gemm untimed) on a rows x k x n product, with a bias when `with_bias`, and releases the
// loser (packed or mm reset). `key` names the node for the cache (op, shapes, attributes).
// `onednn_any_size`: the caller runs mm at every row count (DnnlMatmulByRows), so a plan for many
// sizes times the two as well (pick_lumen_kernel).
KernelChoice pick_gemm(const std::string& key, const Graph& graph, const Tensor& b, int64_t rows,
                       int64_t k, int64_t n, const GemmEpilogue& epilogue, bool with_bias,
                       PackedMatrix& packed, DnnlMatmul& mm, bool onednn_any_size = false);

}  // namespace lumen::cpu
