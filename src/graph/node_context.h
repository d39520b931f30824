// NodeContext: a node seen with its graph, for schemas (type inference) and kernel factories.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "lumen/graph.h"
#include "lumen/runtime.h"

namespace lumen {

// Read access to one node: its inputs' types and known values, and typed attribute getters that
// throw InvalidModel (naming the node) on a wrong type or a missing required attribute.
class NodeContext {
 public:
  NodeContext(const Graph& graph, const Node& node, Precision precision = Precision::kFloat32)
      : graph_(graph), node_(node), precision_(precision) {}

  const Graph& graph() const { return graph_; }
  const Node& node() const { return node_; }
  OpKind op() const { return node_.op; }
  // The compile's precision, for kernel factories (CompileOptions::precision).
  Precision precision() const { return precision_; }
  // "node 'conv1' (Conv)" for error messages.
  std::string where() const;

  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  // True when input i is present (not past the end, not an omitted optional input).
  bool has_input(int i) const;
  const TensorType& input(int i) const;  // throws InvalidModel when input i is absent
  const Shape& input_shape(int i) const { return input(i).shape; }
  DType input_dtype(int i) const { return input(i).dtype; }
  // The input's data when known at build time (weights, constants, folded values), else nullptr.
  const Tensor* input_value(int i) const;
  // Reads a known integer tensor (int64 or int32) as a list; throws ShapeError when the value is
  // not known at build time (naming `what`, e.g. "shape").
  std::vector<int64_t> input_ints(int i, const char* what) const;

  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  const TensorType& output(int i) const;

  bool has_attr(const std::string& name) const;
  const Attribute* attr(const std::string& name) const;
  int64_t attr_int(const std::string& name) const;  // required
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  float attr_float(const std::string& name, float fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name) const;  // required
  std::vector<int64_t> attr_ints(const std::string& name,
                                 const std::vector<int64_t>& fallback) const;
  std::vector<float> attr_floats(const std::string& name, const std::vector<float>& fallback) const;

  [[noreturn]] void fail_shape(const std::string& message) const;        // ShapeError
  [[noreturn]] void fail_model(const std::string& message) const;        // InvalidModel
  [[noreturn]] void fail_unsupported(const std::string& message) const;  // UnsupportedOp

 private:
  const Graph& graph_;
  const Node& node_;
  Precision precision_;
};

// What a schema's infer function gets: a NodeContext that may also set the output types.
class InferContext : public NodeContext {
 public:
  InferContext(Graph& graph, Node& node) : NodeContext(graph, node), mutable_graph_(graph) {}
  void set_output(int i, DType dtype, const Shape& shape);
  // Sets the output's type and its value, known at build time (Shape, ...).
  void set_output_value(int i, Tensor value);

 private:
  Graph& mutable_graph_;
};

}  // namespace lumen
