// Where QuantizeLinear's and DequantizeLinear's scale and zero point sit over x: per tensor, per
// axis, or blocked. Computed once from the ONNX attributes (quant_linear.cc) for every backend's
// kernel; the struct is plain, so CUDA device code takes it as a kernel parameter.
#pragma once

#include <cstdint>

namespace lumen {

class NodeContext;

// x as [outer, axis_len, inner]; the parameter of element (o, d, i) is at
// o * p_outer + (d / block) * p_axis + i * p_inner (all strides 0: one per tensor).
struct QuantParamLayout {
  int64_t outer = 1, axis_len = 1, inner = 1, block = 1;
  int64_t p_outer = 0, p_axis = 0, p_inner = 0;
};

// The layout of ctx's scale (input 1) over its x (input 0), by its axis and block_size.
QuantParamLayout quant_param_layout(const NodeContext& ctx);

}  // namespace lumen
