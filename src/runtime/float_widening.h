// Float32 widening of nodes no backend runs at their float type: ONNX's newer opsets allow float16,
// bfloat16 and float64 for many ops whose kernels take float32 only (Exp, MatMul, Conv, Softmax,
// Einsum, ...). Such a node runs in float32 between Cast nodes, as ONNX Runtime does for types its
// kernels lack: inputs are converted to float32, the node computes, and each float output is
// converted back to the type the model declares.
#pragma once

#include <vector>

#include "backends/backend.h"
#include "lumen/graph.h"

namespace lumen {

// For every node with needed[id] that no backend in `backends` supports as typed, but one does
// once its float16, bfloat16 and float64 inputs are float32: inserts a Cast to float32 before each
// such input and a Cast back after each output that changed type (graph outputs keep their names
// and types). Nodes of other dtypes, and nodes no backend runs even in float32, are left alone.
// Returns how many nodes were widened; `needed` grows to cover the added Casts.
int widen_unsupported_floats(Graph& graph, const std::vector<Backend*>& backends,
                             std::vector<bool>& needed);

}  // namespace lumen
