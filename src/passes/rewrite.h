// Graph-editing helpers shared by every optimizer pass: use replacement, node removal, input
// rewiring, and the small queries passes ask about values and attributes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lumen/graph.h"

namespace lumen {

// Whether the value is a constant the optimizer may rely on: it holds data and is not a user
// weight (whose data may still change).
bool is_constant(const Value& value);

// Whether every use of `from` can move to `to`: always for values read only by nodes; when `from`
// is a graph output, only if `to` is produced by a node and is neither a graph input nor a graph
// output itself (the output then keeps its name by a rename).
bool can_replace_uses(const Graph& graph, int from, int to);

// Moves every use of `from` (node inputs and the graph-output slot) to `to`. When `from` is a graph
// output, `to` takes over its name so the model's outputs keep their names. Requires
// can_replace_uses(graph, from, to); throws InvalidArgument otherwise.
void replace_uses(Graph& graph, int from, int to);

// Marks node `id` removed and unlinks it from its inputs' consumer lists. Its outputs must have no
// live consumers left and not be graph outputs (checked; InvalidArgument otherwise).
void remove_node(Graph& graph, int id);

// Drops the data of constant `id` (not a user weight, graph input or output) once no node reads
// it, so replaced tensors do not stay in memory; returns whether it did.
bool release_if_unused(Graph& graph, int id);

// Puts a fusion's node in place of the subgraph it matched: moves the uses of `out` (the chain's
// result) to `replacement`, removes the chain's nodes (readers before what they read, whatever
// their order in `chain`) and drops the constants that only they read.
void replace_chain(Graph& graph, const std::vector<int>& chain, int out, int replacement);

// Sets input `k` of node `id` to value `to` (-1 for omitted), keeping consumer lists right.
void set_input(Graph& graph, int id, int k, int to);

// A new Reshape of value `v` to the static `shape` (a view), named `name` (made unique); returns
// its output.
int add_reshape(Graph& graph, int v, const Shape& shape, const std::string& name);

// `y` followed back through Reshapes of static shape whose outputs only the next one reads and
// that are not graph outputs: the value the first of them reshapes (y itself when no Reshape
// makes it).
int before_reshapes(const Graph& graph, int y);

// Whether FusedMatMul node `n` normalizes its rows (its optional input 4, the norm scale, is set).
bool fused_matmul_has_norm(const Node& n);

// Whether two attributes hold the same value (tensor attributes compare dtype, shape and bytes;
// subgraph attributes compare by identity).
bool attributes_equal(const Attribute& a, const Attribute& b);
bool attributes_equal(const Attributes& a, const Attributes& b);

// The FusedConv / FusedMatMul epilogue attributes (`activation`, `activation_alpha`,
// `activation_beta`) of an activation node (Relu, LeakyRelu, Clip with constant bounds, Sigmoid,
// Tanh, HardSwish), or false when `act` cannot be fused.
bool activation_attributes(const Graph& graph, const Node& act, Attributes* attrs);

// The value to pass as FusedMatMul's bias for a row bias `v` over an output with `n` columns: v
// itself when it is a float32 [n], a new [n] constant when it is a constant [1, ..., 1, n]; -1
// otherwise.
int row_bias_value(Graph& graph, int v, int64_t n);

// Whether Gemm node `gemm` is one FusedMatMul can express: float32, alpha 1, and C absent or beta
// 1 with C a row ([N], or a constant [1, N]).
bool gemm_fits_fused_matmul(const Graph& graph, const Node& gemm);
// Rewrites such a Gemm as that FusedMatMul (trans_a, trans_b, C as its bias), in place.
void gemm_to_fused_matmul(Graph& graph, int id);

// An inference BatchNormalization as a per-channel affine map y = x * scale[c] + shift[c], with
// scale = gamma / sqrt(var + epsilon) and shift = beta - mean * scale (in double), when its
// gamma, beta, mean and variance are float32 constants of `channels` elements; else false.
bool batch_norm_affine(const Graph& graph, const Node& bn, int64_t channels,
                       std::vector<double>* scale, std::vector<double>* shift);

// Op name -> number of live nodes.
std::map<std::string, int> op_histogram(const Graph& graph);

}  // namespace lumen
