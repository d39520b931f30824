// Converters: how an ONNX node of a given op (and opset) becomes lumen nodes. Most ops map one to
// one (same name, same attributes); the files ops_*.cc register converters for the rest.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "lumen/graph.h"
#include "lumen/onnx.h"

namespace lumen::onnx_import {

// A subgraph imported as a Graph of its own. Its inputs are the subgraph's formal inputs, then one
// input per non-constant value it reads from an enclosing graph; `captured` lists those outer
// values (values of the importing graph) in the same order, to become extra inputs of the node.
// Constant outer values are copied in as constants instead, so the subgraph can fold over them.
struct Subgraph {
  std::shared_ptr<Graph> graph;
  std::vector<Value*> captured;
};

// Marks an error raised while building one node for the types its inputs have in this graph: its
// shape inference failed, or its converter refused those types. Anything else the importer
// rejects (a name defined twice or nowhere, an unreadable attribute or tensor, an op lumen lacks)
// is about the model itself and is not marked. An If whose condition is known only at run time
// defers a marked error from one of its branches to the run that takes that branch, since the
// input shapes given may fit only the other branch (ops_control.cc).
class NodeBuildFailure {
 public:
  virtual ~NodeBuildFailure() = default;
};

// Whether `e` carries the NodeBuildFailure mark.
bool is_node_build_failure(const Error& e);

// Throws an error of e's kind with `message` (what() without the kind), marked when e is or when
// `mark` asks for it (only ShapeError and InvalidModel are ever marked). Other kinds of error are
// rethrown as they are, so call it only inside a catch block.
[[noreturn]] void rethrow_as(const Error& e, const std::string& message, bool mark = false);

// e.what() without its leading "Kind: ".
std::string error_detail(const Error& e);

// A sequence or an optional as the importer holds it. Lumen graphs carry tensors only, so it is
// resolved when the graph is built: a list of the graph's tensor values, of known length.
struct ListValue {
  OnnxValueKind kind = OnnxValueKind::kSequence;  // never kTensor
  bool present = true;                            // false only for an empty optional
  std::vector<Value*> elements;   // a sequence's tensors; an optional tensor's one tensor
  DType dtype = DType::kFloat32;  // the tensors' type, kept for an empty one
};

// A value an inlined subgraph takes or gives: a tensor (`tensor` set), or else `list`.
struct ImportedValue {
  Value* tensor = nullptr;
  ListValue list;
};

// Name lookup across nested graphs: a subgraph (If's branches, a Loop's or Scan's body) may read
// any value an enclosing graph defined before the node that owns the subgraph.
class Scope {
 public:
  virtual ~Scope() = default;
  // The value called `name` as this graph sees it (capturing it from an enclosing graph when it
  // is defined there), or nullptr when no enclosing graph defines it.
  virtual Value* resolve(const std::string& name) = 0;
  // Imports `proto` as a subgraph nested in this scope, its formal inputs typed input_types.
  virtual Subgraph import_graph(const onnx::GraphProto& proto,
                                const std::vector<TensorType>& input_types) = 0;
  // Imports `proto`'s nodes into this scope's own graph (no Graph of their own), its formal
  // inputs bound to `inputs`, and returns its outputs. Its names stay local to it; the nodes it
  // adds are named under `prefix`. Outer names resolve to this scope's values as they are.
  virtual std::vector<ImportedValue> inline_graph(const onnx::GraphProto& proto,
                                                  const std::vector<ImportedValue>& inputs,
                                                  const std::string& prefix) = 0;
};

// One ONNX node being imported.
class ImportContext {
 public:
  ImportContext(Graph& graph, const onnx::NodeProto& node, int64_t opset, std::string name,
                std::vector<Value*> inputs, Attributes attrs, int num_outputs)
      : graph_(graph),
        node_(node),
        opset_(opset),
        name_(std::move(name)),
        inputs_(std::move(inputs)),
        attrs_(std::move(attrs)),
        num_outputs_(num_outputs) {}

  Graph& graph() { return graph_; }
  const onnx::NodeProto& proto() const { return node_; }
  int64_t opset() const { return opset_; }
  const std::string& name() const { return name_; }
  // The node's inputs; nullptr for an omitted optional input.
  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Attributes& attrs() { return attrs_; }
  // How many outputs the model reads (trailing omitted ones dropped).
  int num_outputs() const { return num_outputs_; }
  // "node 'x' (Softmax, opset 11)"
  std::string where() const;
  // Names the node `label` in where() while its lumen nodes keep name(): a node of an inlined
  // subgraph, whose name carries the copy's prefix (ImportContext::inline_subgraph).
  void set_label(std::string label) { label_ = std::move(label); }

  // Adds a lumen op named after this node (the first keeps the node's name).
  std::vector<Value*> emit(std::string_view op, const std::vector<Value*>& inputs,
                           const Attributes& attrs, int num_outputs = 1);
  Value* emit1(std::string_view op, const std::vector<Value*>& inputs,
               const Attributes& attrs = {});
  // Adds an int64 1-D constant.
  Value* constant_ints(const std::vector<int64_t>& values);
  Value* constant_scalar(float value);
  // Removes and returns an attribute (nullptr if absent), so the default mapping does not see it.
  std::optional<Attribute> take(const std::string& name);
  [[noreturn]] void unsupported(const std::string& why) const;
  // Imports the graph attribute `attr` of this node. input_types gives the type of each formal
  // input (lumen compiles subgraphs for these exact types; a declared element type must agree).
  // Errors inside name this node and the attribute.
  Subgraph import_subgraph(const std::string& attr, const std::vector<TensorType>& input_types);
  // The scope the node's graph resolves names in (set by the importer).
  void set_scope(Scope* scope) { scope_ = scope; }
  // The sequence or optional given as input i, or nullptr when input i is a tensor or omitted
  // (inputs()[i] is nullptr for a sequence or optional).
  const ListValue* list_input(size_t i) const {
    return i < list_inputs_.size() ? list_inputs_[i] : nullptr;
  }
  // Set by the importer: one entry per input (nullptr for tensors), only for ops in takes_lists().
  void set_list_inputs(std::vector<const ListValue*> lists) { list_inputs_ = std::move(lists); }
  // Makes output i the sequence or optional `list`; the converter returns nullptr in its place.
  void set_list_output(int i, ListValue list) { list_outputs_[i] = std::move(list); }
  const std::map<int, ListValue>& list_outputs() const { return list_outputs_; }
  // Imports the graph attribute `attr` into this node's graph (Scope::inline_graph), its formal
  // inputs bound to `inputs`: how a Loop is unrolled, an If's known branch taken and a
  // SequenceMap's body applied per element, all when the graph is built. `tag` tells the copies
  // apart in node names ("iter_3"). Errors inside name this node and the attribute.
  std::vector<ImportedValue> inline_subgraph(const std::string& attr,
                                             const std::vector<ImportedValue>& inputs,
                                             const std::string& tag);

 private:
  Graph& graph_;
  const onnx::NodeProto& node_;
  int64_t opset_;
  std::string name_;
  std::string label_;  // for messages, when not name_
  std::vector<Value*> inputs_;
  Attributes attrs_;
  int num_outputs_;
  int emitted_ = 0;
  Scope* scope_ = nullptr;
  std::vector<const ListValue*> list_inputs_;
  std::map<int, ListValue> list_outputs_;
};

// The training-preview domain, whose deterministic optimizer ops (opset 1) lumen runs.
inline constexpr const char* kTrainingDomain = "ai.onnx.preview.training";
// ONNX Runtime's contrib domain, of which lumen runs MatMulNBits and QLinearAdd (opset 1).
inline constexpr const char* kMicrosoftDomain = "com.microsoft";
// Whether op_type is one of the com.microsoft ops lumen runs.
bool is_microsoft_op(const std::string& op_type);
// Whether op_type is one of the training domain's ops lumen runs.
bool is_training_op(const std::string& op_type);
// The opset since which op_type has kept its meaning (7 unless listed): models older than opset 7
// are read when every node's op is older than the model.
int64_t stable_since(const std::string& op_type);
// Ops whose converters read their subgraph attributes themselves.
const std::unordered_set<std::string>& subgraph_ops();

// Returns the node's outputs, in order (as many as ctx.num_outputs()).
using Converter = std::vector<Value*> (*)(ImportContext& ctx);

// Registers a converter for op_type in the default domain, used for opsets in [min_opset,
// max_opset].
bool register_converter(const char* op_type, int64_t min_opset, int64_t max_opset, Converter fn);
// The converter for op_type at this opset, or nullptr (then the op maps by name).
Converter find_converter(const std::string& op_type, int64_t opset);

// Whether op_type's converter takes sequences and optionals as inputs (ops_sequence.cc); any
// other op given one is refused by the importer.
bool takes_lists(const std::string& op_type);
// A Loop that carries a sequence or an optional: unrolled when the graph is built, its trip count
// and condition known by then (ops_sequence.cc).
std::vector<Value*> unroll_loop(ImportContext& ctx);
// The node's outputs from an inlined subgraph's: tensors returned, sequences and optionals set as
// list outputs (nullptr returned in their place). `outs` must cover ctx.num_outputs().
std::vector<Value*> forward_outputs(ImportContext& ctx, const std::vector<ImportedValue>& outs);

#define LUMEN_ONNX_CONVERTER(Tag, op_type, min_opset, max_opset, fn) \
  static const bool lumen_onnx_converter_##Tag =                     \
      ::lumen::onnx_import::register_converter(op_type, min_opset, max_opset, fn)

}  // namespace lumen::onnx_import
