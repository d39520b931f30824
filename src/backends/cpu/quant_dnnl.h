// oneDNN int8 kernels of QLinearConv and QLinearMatMul (u8/s8 activations, s8 weights with zero
// zero point, int32 accumulation, per-channel output scales, requantized u8/s8 output), used where
// they give the exact reference kernels' integer products (quant_conv.cc, quant_gemm.cc).
#pragma once

#include <memory>

#include "backends/kernel.h"
#include "graph/node_context.h"

namespace lumen::cpu {

// Whether oneDNN's int8 products are exact for weights of magnitude up to `max_abs_weight`: always
// on CPUs with VNNI (AVX512-VNNI, AVX-VNNI, AMX), whose dot-product instructions accumulate in
// int32; without VNNI oneDNN pairs products in a saturating int16 add (vpmaddubsw), exact only
// while 255 * 2 * |w| fits in int16 (|w| <= 64), and for s8 activations it halves the weights
// (oneDNN's scale_adjust), which is never exact: there only u8 activations qualify.
bool dnnl_int8_exact(int max_abs_weight, bool signed_activations);

// The oneDNN kernel of a QLinearConv node, or nullptr when it cannot run the node exactly (weights
// not a constant s8 tensor with zero zero points, scales or zero points not constants, s8
// activations on a CPU without VNNI, no non-reference oneDNN implementation). Without VNNI,
// weights beyond +-64 are split in two halves within +-64 and the two exact products summed in
// int32.
std::unique_ptr<Kernel> make_dnnl_qlinear_conv(const NodeContext& ctx);

// The oneDNN kernel of a QLinearMatMul node whose B is a constant s8 matrix [K, N] with zero zero
// points and whose A, y scales and zero points are per-tensor constants; nullptr otherwise (as
// above).
std::unique_ptr<Kernel> make_dnnl_qlinear_matmul(const NodeContext& ctx);

}  // namespace lumen::cpu
