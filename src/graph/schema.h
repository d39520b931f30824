// OpSchema: what an op accepts and how its output types follow from its inputs.
#pragma once

#include <vector>

#include "graph/node_context.h"
#include "graph/op_kind.h"

namespace lumen {

struct AttrSpec {
  const char* name;
  AttrType type;
  bool required = false;
};

inline constexpr int kVariadic = 1 << 20;

struct OpSchema {
  int min_inputs = 1;
  int max_inputs = 1;  // kVariadic for "any number"
  int min_outputs = 1;
  int max_outputs = 1;
  std::vector<AttrSpec> attrs;  // attributes not listed here are rejected
  // Checks inputs and attribute values, sets every output's type (and value, where it is known
  // without running the op). Throws through ctx.fail_*().
  void (*infer)(InferContext& ctx) = nullptr;
  // Deterministic ops with all inputs known are evaluated at build time when small.
  bool foldable = true;
  // Whether inputs may have kDynamicDim dimensions (shapes known only at run time). Most ops
  // need static shapes, so a node over such an input is refused when it is added.
  bool dynamic_inputs = false;
  // Whether infer may give outputs kDynamicDim dimensions (shapes that depend on the data).
  bool dynamic_outputs = false;
};

// The schema of an op; throws UnsupportedOp when none is registered.
const OpSchema& op_schema(OpKind kind);
bool has_schema(OpKind kind);
// Called by LUMEN_REGISTER_SCHEMA at static initialisation.
bool register_schema(OpKind kind, OpSchema schema);

// Registers the schema of op `Name` from the file that defines it:
//   LUMEN_REGISTER_SCHEMA(Relu, {.infer = infer_unary});
#define LUMEN_REGISTER_SCHEMA(Name, ...)             \
  static const bool lumen_schema_registered_##Name = \
      ::lumen::register_schema(::lumen::OpKind::k##Name, ::lumen::OpSchema __VA_ARGS__)

// Evaluates a node on known inputs (installed by the CPU backend); the graph uses it to fold
// small constant subgraphs (shape computations) at build time.
using NodeEvaluator = std::vector<Tensor> (*)(const Graph& graph, const Node& node,
                                              const std::vector<Tensor>& inputs);
void set_node_evaluator(NodeEvaluator evaluator);
NodeEvaluator node_evaluator();

}  // namespace lumen
