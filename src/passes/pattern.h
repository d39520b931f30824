// Small queries the pattern-matching fusion passes (fuse_layer_norm, fuse_gelu, fuse_attention)
// ask while walking a decomposed subgraph.
#pragma once

#include "lumen/graph.h"

namespace lumen {

// The live node that is the only reader of value `id` (read once), or -1 when the value has no
// reader, several, or is a graph output (then it must stay).
int sole_reader(const Graph& graph, int id);

// The producer of value `id` when it is a live node of kind `op` with one output, else -1.
int producer_of(const Graph& graph, int id, OpKind op);

// Whether value `id` is a float32 constant with one element; its value goes to *out.
bool scalar_constant(const Graph& graph, int id, float* out);

// Whether value `id` is an integer constant (int64 or int32) with one element; its value goes to
// *out.
bool int_scalar_constant(const Graph& graph, int id, int64_t* out);

// A Slice of one axis with step 1 (every bound a constant), its bounds clamped to [0, n].
struct AxisSlice {
  int source = -1;
  int64_t axis = 0, begin = 0, end = 0;
};
// Whether value `v` is made by such a Slice of a tensor of static shape; it goes to *out.
bool axis_slice(const Graph& graph, int v, AxisSlice* out);

// Whether value `id` is a one-element float32 constant within a relative 1e-4 of `want`.
bool is_scalar(const Graph& graph, int id, float want);

// For a two-input node: the input that is not `id` (-1 when both or neither are `id`).
int other_input(const Node& node, int id);

// Whether node `id` is a Transpose of a float32 tensor of rank 2 or more whose perm swaps the
// last two dimensions and keeps the others in place (attention's K^T, as exporters write it).
bool swaps_last_two(const Graph& graph, int id);

// Float attribute `name` of node n, or `fallback` where n has none.
float attr_float_or(const Node& n, const char* name, float fallback);

// Whether `gate` is HardSigmoid with HardSwish's alpha 1/6 and beta 1/2, so that
// Mul(x, gate(x)) is HardSwish(x) (how exporters before opset 14 write it).
bool is_hard_swish_gate(const Node& gate);

}  // namespace lumen
