// Graph IR: a Graph owns Nodes and Values and refers to them by integer id.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "lumen/attribute.h"
#include "lumen/tensor.h"

namespace lumen {

// The kind of an op. Its enumerators come from src/graph/op_kinds.def; from outside, ops are named
// by string ("MatMul" or "matmul").
enum class OpKind : uint16_t;

class Executable;

// What one optimizer pass did in one round of Graph::optimize(): the live node count and the op
// histogram (op name -> number of live nodes) before and after it ran, and whether it changed the
// graph. Rounds count from 1.
struct PassStats {
  std::string pass;
  int round = 0;
  bool changed = false;
  int nodes_before = 0;
  int nodes_after = 0;
  std::map<std::string, int> ops_before;
  std::map<std::string, int> ops_after;
};
class Runtime;
struct CompileOptions;

struct TensorType {
  DType dtype = DType::kFloat32;
  Shape shape;
  bool operator==(const TensorType& other) const = default;
  std::string to_string() const;  // "float32[1, 10]"
};

// A tensor-valued edge of the graph: produced by one node (or a graph input or weight) and read by
// any number of nodes.
struct Value {
  int id = -1;
  std::string name;
  TensorType type;
  int producer = -1;           // node id, or -1 for inputs and weights
  std::vector<int> consumers;  // node ids, one entry per use
  std::optional<Tensor> data;  // weights, constants, and values folded at build time
  bool is_input = false;
  bool is_output = false;
  bool user_weight = false;       // added by add_weight(): data may still change, so never folded
                                  // at build time
  bool written_in_place = false;  // an input a run may write (Graph::mark_input_written)
  bool is_weight() const { return data.has_value() && producer < 0; }
};

// One operation. inputs may hold -1 for an omitted optional input.
struct Node {
  int id = -1;
  OpKind op{};
  std::string name;
  std::vector<int> inputs;
  std::vector<int> outputs;
  Attributes attrs;
  std::string backend;   // set by the router: "cpu", "cuda"
  bool removed = false;  // dropped by a pass; ids stay stable
};

// A dataflow graph. Building it infers every output's type at once, so a wrong shape or an unknown
// op fails at the call that adds it, with the node's name. Values and nodes are never moved in
// memory (pointers returned here stay valid while the Graph lives).
class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  // A copy of every value and node; constant data (weights) is shared, not copied. Subgraphs of
  // control-flow attributes are shared too.
  Graph clone() const;
  // The same with only the live nodes and the values they and the graph's inputs and outputs
  // use, renumbered in their order (removed nodes and dead values gone); constant data shared.
  // With the maps, (*value_map)[old id] and (*node_map)[old id] receive the new ids (-1: gone).
  Graph compacted(std::vector<int>* value_map = nullptr,
                  std::vector<int>* node_map = nullptr) const;

  // A graph input the caller binds at execute time.
  Value* add_input(const std::string& name, const Shape& shape, DType dtype = DType::kFloat32);
  // A weight: constant data owned by the graph, zero-filled until set_data() fills it.
  Value* add_weight(const std::string& name, const Shape& shape, DType dtype = DType::kFloat32);
  // A constant with the given data (shared, not copied).
  Value* add_constant(const std::string& name, Tensor data);
  // Replaces a weight's data; throws ShapeError when the type differs.
  void set_data(Value* weight, Tensor data);

  // Adds a node with one output and returns that output. `op` is an ONNX name ("MatMul") or its
  // lower-case form ("matmul"). Throws UnsupportedOp for an unknown op, InvalidModel for bad
  // attributes, ShapeError for inputs that do not fit.
  Value* add_op(std::string_view op, const std::vector<Value*>& inputs,
                const Attributes& attrs = {}, const std::string& name = "");
  // The same for ops with several outputs (Split, ...); nullptr entries in inputs are omitted
  // optional inputs.
  std::vector<Value*> add_op(std::string_view op, const std::vector<Value*>& inputs,
                             int num_outputs, const Attributes& attrs = {},
                             const std::string& name = "");
  void mark_output(Value* value);
  // Lets a run write graph input `input`'s memory: the step that reads it, when its kernel runs
  // in place (Kernel::in_place_input, e.g. TensorScatter into a key/value cache), writes the
  // caller's tensor instead of a copy, and after each execute the caller's tensor holds what that
  // step wrote (copied back where the step ran on another device than the tensor). That step must
  // be the input's only reader. Throws InvalidArgument for a value that is not a graph input.
  void mark_input_written(Value* input);
  // Stops value `id` being a graph output (its producer stays, for other readers). Throws
  // InvalidArgument when it is not an output.
  void remove_output(int id);

  // Rewrites the graph for speed (the optimizer: dead code, no-op nodes, common subexpressions,
  // Conv+BatchNormalization, constant folding), running its passes until none changes anything.
  // Outputs keep their names and values. Returns one entry per pass and round; callers may ignore
  // it. Safe to call more than once.
  std::vector<PassStats> optimize();
  // The same for a graph that will be compiled for `backends` (CompileOptions::backends; empty
  // means every available one): fusions into forms only the CPU backend runs (channels-last
  // regions, residual and SiLU convolution epilogues, FusedMatMul, FusedAttention) are left out
  // when "cuda" may run the graph, so the GPU gets the ops it has kernels for.
  std::vector<PassStats> optimize(const std::vector<std::string>& backends);
  // Compiles for `runtime`'s devices; the Executable is owned by the runtime.
  Executable* compile(Runtime* runtime);
  Executable* compile(Runtime* runtime, const CompileOptions& options);

  // Checks every structural invariant (ids, producers, consumers, types against the schemas, no
  // cycles); throws InvalidModel naming the first problem.
  void verify() const;
  std::string to_text() const;  // one line per node
  std::string to_dot() const;   // Graphviz

  // --- access for passes, backends and tools ---
  Value& value(int id);
  const Value& value(int id) const;
  Node& node(int id);
  const Node& node(int id) const;
  int num_values() const { return static_cast<int>(values_.size()); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  // Live nodes in an order where every node follows its producers; throws InvalidModel on a cycle.
  std::vector<int> topological_order() const;
  // Renames a value; throws InvalidModel when another value has that name.
  void rename(Value* value, const std::string& name);
  // Makes `new_id` the graph output in `old_id`'s place (same position); `old_id` stops being an
  // output. Throws InvalidArgument when `old_id` is not an output or `new_id` already is one.
  void replace_output(int old_id, int new_id);
  // Finds a value by name, or nullptr.
  Value* find_value(std::string_view name);
  // Adds a node by kind with explicit output types already inferred (for importers and passes);
  // run infer_node() afterwards to check it against the schema.
  Node& add_node(OpKind op, const std::vector<int>& inputs, int num_outputs, Attributes attrs,
                 const std::string& name);
  // Runs the schema of node `id`: checks its attributes and inputs, sets its output types, and
  // folds it when every input is known and the result is small.
  void infer_node(int id);
  // Re-infers every live node in topological order.
  void infer_all();
  // Nodes (by name) that folding at build time and the optimizer's constant folding leave to run
  // although their inputs are known: those whose outputs in a shape family depend on the sizes
  // (onnx/shape_family.h). Set before the nodes are added.
  void keep_unfolded(std::set<std::string> node_names);
  bool is_kept_unfolded(const Node& node) const;
  std::string unique_name(std::string_view base);

 private:
  Value& new_value(const std::string& name);
  std::deque<Value> values_;
  std::deque<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<int> outputs_;
  std::unordered_set<std::string> names_;
  std::set<std::string> unfolded_;
  bool weights_released_ = false;  // an earlier compile freed packed weights (release_weights)
  int name_counter_ = 0;
};

}  // namespace lumen
