// Shape rules shared by the matrix-product schemas (MatMul, MatMulInteger, QLinearMatMul).
#pragma once

#include "graph/node_context.h"

namespace lumen {

// numpy.matmul's output shape for A = input a_index and B = input b_index: a 1-D operand gets a 1
// prepended (A) or appended (B) that the output drops, and the batch dimensions (all but the last
// two) broadcast. Fails through ctx (ShapeError) on rank 0, unequal inner dimensions or batch
// dimensions that do not broadcast.
Shape matmul_shape(const InferContext& ctx, int a_index, int b_index);

}  // namespace lumen
