// Kernels of the control-flow ops (If, Loop, Scan). They live in the runtime, not in a backend,
// because they run compiled subgraphs (Executables) rather than device code; like ONNX Runtime's
// control-flow kernels, each subgraph is compiled once, when its node is compiled.
#pragma once

#include <memory>

#include "backends/kernel.h"
#include "lumen/runtime.h"

namespace lumen {

// True for ops whose kernels come from make_control_flow_kernel.
bool is_control_flow(OpKind op);

// Compiles the node's subgraphs for `runtime` (which owns the Executables) with `options`, and
// returns a kernel that runs them. Throws what compiling a subgraph throws.
std::unique_ptr<Kernel> make_control_flow_kernel(Runtime* runtime, const CompileOptions& options,
                                                 const Graph& graph, const Node& node);

}  // namespace lumen
