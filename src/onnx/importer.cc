// The ONNX importer: ModelProto -> Graph. Initializers become constants, inputs are resolved to
// concrete shapes, and every node is converted (by name, or by a registered converter) as it is
// read, so a bad or unsupported node fails here, at load time, naming itself.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "graph/onnx_dtype.h"
#include "graph/op_kind.h"
#include "lumen/onnx.h"
#include "onnx/converter.h"
#include "onnx/input_types.h"
#include "onnx/model_file.h"
#include "onnx/tensor_proto.h"
#include "onnx/value_inputs.h"
#include "onnx/weight_cache.h"

namespace lumen {
namespace onnx_import {
namespace {

constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 28;
// What a schema says when an input that decides shapes is not a constant (NodeContext::input_ints).
constexpr const char* kNeedsValue = "must be known when the graph is built";
// Nodes that inlined subgraphs (unrolled loops, SequenceMap bodies) may add to one model; a node
// of nested inlined subgraphs counts once per level.
constexpr int64_t kMaxInlinedNodes = 1 << 17;
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw IoError("cannot read '" + path + "'");
  return ss.str();
}

Attribute convert_attribute(const onnx::AttributeProto& a, const std::string& where,
                            const std::string& base_dir) {
  std::string what = where + ": attribute '" + a.name() + "'";
  if (!a.ref_attr_name().empty()) throw UnsupportedOp(what + " refers to a function attribute");
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      return a.f();
    case onnx::AttributeProto::INT:
      return a.i();
    case onnx::AttributeProto::STRING:
      return a.s();
    case onnx::AttributeProto::TENSOR:
      return tensor_from_proto(a.t(), base_dir, what);
    case onnx::AttributeProto::FLOATS:
      return std::vector<float>(a.floats().begin(), a.floats().end());
    case onnx::AttributeProto::INTS:
      return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto::STRINGS:
      return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS:
      // If, Loop, Scan and SequenceMap read their subgraphs from the proto.
      throw UnsupportedOp(
          what + ": lumen reads subgraph attributes only on If, Loop, Scan and SequenceMap");
    case onnx::AttributeProto::UNDEFINED: {
      // Old exporters leave the type unset; infer it from the one field that is filled.
      if (a.has_f()) return a.f();
      if (a.has_i()) return a.i();
      if (a.has_s()) return a.s();
      if (a.has_t()) return tensor_from_proto(a.t(), base_dir, what);
      if (a.ints_size()) return std::vector<int64_t>(a.ints().begin(), a.ints().end());
      if (a.floats_size()) return std::vector<float>(a.floats().begin(), a.floats().end());
      throw InvalidModel(what + " has no type and no value");
    }
    default:
      throw UnsupportedOp(what + " has an unsupported type");
  }
}

// Imports one graph: the model's main graph, or (with a parent scope) a subgraph of an If, Loop
// or Scan node, which becomes a Graph of its own that reads outer values through its inputs.
class Importer final : public Scope {
 public:
  // `model` is the importer's own: the main graph's large initializers are moved out of it, or
  // read from `file` where it left their raw bytes out of `model`.
  // With `weights`, the main graph's initializers are taken from it when it has them.
  Importer(onnx::ModelProto& model, const OnnxLoadOptions& options, std::string base_dir,
           const ModelFile* file = nullptr, WeightCache* weights = nullptr)
      : model_(model),
        options_(options),
        base_dir_(std::move(base_dir)),
        file_(file),
        weights_(weights) {}
  // A subgraph importer nested in `parent`.
  Importer(Importer& parent, int64_t opset)
      : model_(parent.model_),
        options_(parent.options_),
        base_dir_(parent.base_dir_),
        opset_(opset),
        training_opset_(parent.training_opset_),
        parent_(&parent) {}
  // An importer of a subgraph inlined into `parent`'s graph (Scope::inline_graph): its nodes go
  // into the parent's graph, named under `prefix`, and outer names are the parent's values.
  Importer(Importer& parent, int64_t opset, std::string prefix)
      : model_(parent.model_),
        options_(parent.options_),
        base_dir_(parent.base_dir_),
        opset_(opset),
        training_opset_(parent.training_opset_),
        graph_(parent.graph_),
        node_names_(parent.node_names_),
        parent_(&parent),
        prefix_(std::move(prefix)) {}

  Value* resolve(const std::string& name) override {
    auto it = values_.find(name);
    if (it != values_.end()) return it->second;
    if (parent_ == nullptr) return nullptr;
    Value* outer = parent_->resolve(name);
    if (outer == nullptr || inlined()) return outer;
    return values_[name] = capture(outer, name);
  }

  // The sequence or optional called `name`, as resolve() finds tensors; nullptr when none is.
  const ListValue* resolve_list(const std::string& name) {
    auto it = lists_.find(name);
    if (it != lists_.end()) return &it->second;
    if (parent_ == nullptr) return nullptr;
    const ListValue* outer = parent_->resolve_list(name);
    if (outer == nullptr || inlined()) return outer;
    ListValue inner = *outer;
    for (size_t k = 0; k < inner.elements.size(); ++k)
      inner.elements[k] = capture(inner.elements[k], onnx_element_name(name, k));
    return &(lists_[name] = std::move(inner));
  }

  Subgraph import_graph(const onnx::GraphProto& proto,
                        const std::vector<TensorType>& input_types) override {
    Importer sub(*this, opset_);
    return sub.run_subgraph(proto, input_types);
  }

  std::vector<ImportedValue> inline_graph(const onnx::GraphProto& proto,
                                          const std::vector<ImportedValue>& inputs,
                                          const std::string& prefix) override {
    Importer* root = this;
    while (root->parent_ != nullptr) root = root->parent_;
    if (root->inlined_nodes_ > kMaxInlinedNodes)
      throw UnsupportedOp("unrolled loops and per-element subgraphs add over " +
                          std::to_string(kMaxInlinedNodes) + " nodes to the graph");
    const int before = graph_.num_nodes();
    Importer sub(*this, opset_, prefix);
    std::vector<ImportedValue> outs = sub.run_inline(proto, inputs);
    root->inlined_nodes_ += graph_.num_nodes() - before;
    return outs;
  }

  Graph run(OnnxModelInfo* info) {
    OnnxModelInfo local;
    OnnxModelInfo& out = info ? *info : local;
    out = OnnxModelInfo{};
    if (!model_.has_graph()) throw InvalidModel("the model has no graph");
    read_opset();
    // Found before anything is built, so a caller whose load fails for want of these values
    // (lumen run) can fix them and load again.
    for (std::string& name : find_value_inputs(model_, opset_))
      if (!options_.input_values.count(name)) out.value_inputs.push_back(std::move(name));
    graph_.keep_unfolded(options_.unfolded);
    onnx::GraphProto& g = *model_.mutable_graph();
    if (g.sparse_initializer_size() > 0)
      throw UnsupportedOp("sparse initializers are not supported");
    for (int i = 0; i < g.initializer_size(); ++i) {
      onnx::TensorProto& init = *g.mutable_initializer(i);
      auto load = [&] {
        return file_ != nullptr && file_->has_raw(i)
                   ? tensor_from_file(init, *file_, i, initializer_what(init))
                   : take_tensor_from_proto(init, base_dir_, initializer_what(init));
      };
      add_initializer(init, weights_ != nullptr && !init.name().empty()
                                ? weights_->get(init.name(), load)
                                : load());
    }
    out.ir_version = model_.ir_version();
    out.opset = opset_;
    out.producer = model_.producer_name() + " " + model_.producer_version();
    std::unordered_set<std::string> input_names;
    for (const auto& in : g.input()) {
      if (values_.count(in.name()) && initializer_names_.count(in.name())) continue;
      out.inputs.push_back(add_input(in));
      input_names.insert(in.name());
    }
    for (const auto& [name, shape] : options_.input_shapes)
      if (!input_names.count(name))
        throw InvalidArgument("input shape given for '" + name + "', which is not a model input");
    check_list_options();
    for (const auto& [name, value] : options_.input_values)
      if (!input_names.count(name))
        throw InvalidArgument("input value given for '" + name + "', which is not a model input");
    try {
      for (const auto& node : g.node()) add_node(node);
    } catch (const ShapeError& e) {
      std::string msg = e.what();
      if (out.value_inputs.empty() || msg.find(kNeedsValue) == std::string::npos) throw;
      std::string names;
      for (const std::string& name : out.value_inputs)
        names += (names.empty() ? "'" : ", '") + name + "'";
      throw ShapeError(msg.substr(msg.find(": ") + 2) +
                       "; the value comes at run time from input " + names +
                       ": run the model through OnnxSession (`lumen run`, Python's " +
                       "lumen.Model), which compiles a plan per value, or fix it with " +
                       "OnnxLoadOptions::input_values");
    }
    for (const auto& o : g.output()) {
      auto it = values_.find(o.name());
      auto list = lists_.find(o.name());
      if (it == values_.end() && list == lists_.end())
        throw InvalidModel("graph output '" + o.name() + "' is produced by nothing");
      OnnxOutputForm form;
      form.first = static_cast<int>(graph_.outputs().size());
      if (it != values_.end()) {
        Value* v = it->second;
        // Another output's value too: a value of its own, so each output has one slot.
        if (v->is_output) v = graph_.add_op("Identity", {v}, {}, graph_.unique_name(o.name()));
        graph_.mark_output(v);
      } else {
        form = mark_list_output(o.name(), list->second);
      }
      out.output_forms.push_back(form);
      out.outputs.push_back(o.name());
      OnnxInputInfo declared;
      declared.name = o.name();
      if (o.type().has_tensor_type()) {
        try {
          declared = onnx_import::declared_tensor(o.name(), o.type().tensor_type(), "output");
        } catch (const Error&) {
          // A type Lumen lacks: left undeclared here (the node that makes it fails on its own).
        }
      }
      out.output_types.push_back(std::move(declared));
    }
    if (g.output_size() == 0) throw InvalidModel("the graph has no outputs");
    graph_.verify();
    return std::move(graph_);
  }

 private:
  Subgraph run_subgraph(const onnx::GraphProto& g, const std::vector<TensorType>& input_types) {
    if (g.sparse_initializer_size() > 0)
      throw UnsupportedOp("sparse initializers are not supported");
    if (g.input_size() != static_cast<int>(input_types.size()))
      throw InvalidModel("the subgraph has " + std::to_string(g.input_size()) +
                         " inputs, expected " + std::to_string(input_types.size()));
    for (int i = 0; i < g.input_size(); ++i) {
      const onnx::ValueInfoProto& in = g.input(i);
      std::string what = "input '" + in.name() + "'";
      if (in.name().empty()) throw InvalidModel("a subgraph input has no name");
      if (values_.count(in.name())) throw InvalidModel(what + " is defined twice");
      if (in.type().has_tensor_type() && in.type().tensor_type().elem_type() != 0) {
        auto declared = dtype_from_onnx(in.type().tensor_type().elem_type());
        if (!declared || *declared != input_types[i].dtype)
          throw InvalidModel(what + " is declared " +
                             onnx_dtype_name(in.type().tensor_type().elem_type()) + ", but gets " +
                             dtype_name(input_types[i].dtype));
      } else if (in.type().value_case() != onnx::TypeProto::VALUE_NOT_SET &&
                 !in.type().has_tensor_type()) {
        throw UnsupportedOp(what + ": only tensor inputs are supported (not sequences or maps)");
      }
      values_[in.name()] = graph_.add_input(in.name(), input_types[i].shape, input_types[i].dtype);
    }
    for (const auto& init : g.initializer())
      add_initializer(init, tensor_from_proto(init, base_dir_, initializer_what(init)));
    for (const auto& node : g.node()) add_node(node);
    if (g.output_size() == 0) throw InvalidModel("the subgraph has no outputs");
    for (const auto& o : g.output()) {
      Value* v = resolve(o.name());
      if (v == nullptr && resolve_list(o.name()) != nullptr)
        throw ShapeError("output '" + o.name() + "' is a " +
                         onnx_value_kind_name(resolve_list(o.name())->kind) +
                         ", which lumen resolves when the graph is built: the value that picks " +
                         "the branch or counts the iterations " + kNeedsValue);
      if (v == nullptr) throw InvalidModel("output '" + o.name() + "' is produced by nothing");
      // Each output gets a value of its own, so the compiled subgraph has one slot per output.
      if (v->is_output) v = graph_.add_op("Identity", {v}, {}, graph_.unique_name(o.name()));
      graph_.mark_output(v);
    }
    graph_.verify();
    return Subgraph{std::make_shared<Graph>(std::move(graph_)), std::move(captured_)};
  }

  // An inlined subgraph (inline_graph): formal inputs bound to `inputs`, nodes added to the
  // enclosing graph; returns what its outputs name.
  std::vector<ImportedValue> run_inline(const onnx::GraphProto& g,
                                        const std::vector<ImportedValue>& inputs) {
    if (g.sparse_initializer_size() > 0)
      throw UnsupportedOp("sparse initializers are not supported");
    if (g.input_size() != static_cast<int>(inputs.size()))
      throw InvalidModel("the subgraph has " + std::to_string(g.input_size()) +
                         " inputs, expected " + std::to_string(inputs.size()));
    for (int i = 0; i < g.input_size(); ++i) {
      const onnx::ValueInfoProto& in = g.input(i);
      const ImportedValue& given = inputs[i];
      std::string what = "input '" + in.name() + "'";
      if (in.name().empty()) throw InvalidModel("a subgraph input has no name");
      if (values_.count(in.name()) || lists_.count(in.name()))
        throw InvalidModel(what + " is defined twice");
      if (in.type().has_tensor_type()) {
        if (given.tensor == nullptr)
          throw InvalidModel(what + " is declared a tensor, but gets a " +
                             onnx_value_kind_name(given.list.kind));
        int32_t elem = in.type().tensor_type().elem_type();
        auto declared = dtype_from_onnx(elem);
        if (elem != 0 && (!declared || *declared != given.tensor->type.dtype))
          throw InvalidModel(what + " is declared " + onnx_dtype_name(elem) + ", but gets " +
                             dtype_name(given.tensor->type.dtype));
      }
      if (given.tensor != nullptr) {
        values_[in.name()] = given.tensor;
      } else {
        lists_[in.name()] = given.list;
      }
    }
    for (const auto& init : g.initializer())
      add_initializer(init, tensor_from_proto(init, base_dir_, initializer_what(init)));
    for (const auto& node : g.node()) add_node(node);
    std::vector<ImportedValue> outs;
    for (const auto& o : g.output()) {
      ImportedValue v;
      v.tensor = resolve(o.name());
      const ListValue* list = v.tensor == nullptr ? resolve_list(o.name()) : nullptr;
      if (v.tensor == nullptr && list == nullptr)
        throw InvalidModel("output '" + o.name() + "' is produced by nothing");
      if (list != nullptr) v.list = *list;
      outs.push_back(std::move(v));
    }
    return outs;
  }

  bool inlined() const { return !prefix_.empty(); }
  int64_t default_dim() const { return options_.default_dim; }

  // An outer value as this (separately built) subgraph reads it: a constant copied in, or an
  // input of the subgraph bound to the outer value by the node (captured_).
  Value* capture(Value* outer, const std::string& name) {
    if (outer->data && !outer->user_weight && !outer->is_input)
      return graph_.add_constant(graph_.unique_name(name), *outer->data);
    captured_.push_back(outer);
    return graph_.add_input(graph_.unique_name(name), outer->type.shape, outer->type.dtype);
  }

  // Marks a sequence or optional output: each of its tensors becomes a graph output of its own,
  // named "name[k]".
  OnnxOutputForm mark_list_output(const std::string& name, const ListValue& list) {
    OnnxOutputForm form{list.kind, list.present, static_cast<int>(graph_.outputs().size()),
                        static_cast<int>(list.elements.size())};
    for (size_t k = 0; k < list.elements.size(); ++k) {
      Value* v =
          graph_.add_op("Identity", {list.elements[k]}, {}, graph_.unique_name(name + "/element"));
      graph_.rename(v, graph_.unique_name(onnx_element_name(name, k)));
      graph_.mark_output(v);
    }
    return form;
  }

  // Sequence lengths and empty optionals may be given only for inputs of those kinds (called
  // before any node is read, when lists_ holds only the graph's inputs).
  void check_list_options() const {
    auto kind_of = [&](const std::string& name) -> const ListValue* {
      auto it = lists_.find(name);
      return it == lists_.end() ? nullptr : &it->second;
    };
    for (const auto& [name, shapes] : options_.sequence_shapes) {
      const ListValue* l = kind_of(name);
      if (l == nullptr ||
          (l->kind != OnnxValueKind::kSequence && l->kind != OnnxValueKind::kOptionalSequence))
        throw InvalidArgument("sequence shapes given for '" + name +
                              "', which is not a sequence input of the model");
    }
    for (const std::string& name : options_.empty_optionals) {
      const ListValue* l = kind_of(name);
      if (l == nullptr || l->kind == OnnxValueKind::kSequence)
        throw InvalidArgument("'" + name + "' is given as an empty optional, but it is not an " +
                              "optional input of the model");
    }
  }

  void read_opset() {
    bool found = false;
    for (const auto& op : model_.opset_import()) {
      if (op.domain().empty() || op.domain() == "ai.onnx") {
        opset_ = op.version();
        found = true;
      } else if (op.domain() == kTrainingDomain) {
        training_opset_ = op.version();
      }
    }
    // A model of training ops only: its default-domain nodes, if any, are refused in add_node.
    if (!found && training_opset_ == 1) return;
    // The first node, named in the refusals below so the user sees what the model would run.
    std::string first = "";
    if (model_.graph().node_size() > 0) {
      const onnx::NodeProto& n = model_.graph().node(0);
      first = "; its first node is '" + (n.name().empty() ? n.op_type() : n.name()) + "' (" +
              (n.domain().empty() ? "" : n.domain() + ".") + n.op_type() + ")";
    }
    if (!found && model_.opset_import_size() > 0) {
      const auto& other = model_.opset_import(0);
      throw UnsupportedOp("the model uses only domain '" + other.domain() + "' (opset " +
                          std::to_string(other.version()) +
                          "), which lumen does not run; lumen runs the default domain (ai.onnx)" +
                          first);
    }
    if (!found) throw InvalidModel("the model imports no opset of the default domain");
    if (opset_ < 1 || opset_ > kMaxOpset)
      throw UnsupportedOp("opset " + std::to_string(opset_) +
                          " of the default domain (ai.onnx): lumen reads opsets " +
                          std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + first);
  }

  static std::string initializer_what(const onnx::TensorProto& init) {
    return "initializer '" + init.name() + "'";
  }

  void add_initializer(const onnx::TensorProto& init, Tensor t) {
    if (init.name().empty()) throw InvalidModel("an initializer has no name");
    if (values_.count(init.name()))
      throw InvalidModel("initializer '" + init.name() + "' is defined twice");
    std::string name = inlined() ? graph_.unique_name(prefix_ + init.name()) : init.name();
    values_[init.name()] = graph_.add_constant(name, std::move(t));
    initializer_names_.insert(init.name());
  }

  // A sequence or optional graph input: as many graph inputs as the tensors it holds
  // (OnnxLoadOptions::sequence_shapes, empty_optionals), kept in lists_.
  OnnxInputInfo add_list_input(const onnx::ValueInfoProto& in, const std::string& what) {
    const onnx::TypeProto_Tensor* elem = nullptr;
    const OnnxValueKind kind = declared_list(in.type(), what, &elem);
    if (options_.input_values.count(in.name()))
      throw InvalidArgument(what + " is a " + onnx_value_kind_name(kind) +
                            ": its value cannot be fixed");
    const auto& tt = *elem;
    OnnxInputInfo info = declared_tensor(in.name(), tt, what);
    info.kind = kind;
    ListValue list{kind, true, {}, info.dtype};
    if (kind != OnnxValueKind::kSequence && options_.empty_optionals.count(in.name())) {
      list.present = false;
    } else if (kind == OnnxValueKind::kOptionalTensor) {
      auto given = options_.input_shapes.find(in.name());
      Shape shape = input_shape(what, tt, info,
                                given == options_.input_shapes.end() ? nullptr : &given->second,
                                default_dim());
      list.elements.push_back(graph_.add_input(in.name(), shape, info.dtype));
    } else {
      auto given = options_.sequence_shapes.find(in.name());
      std::vector<Shape> shapes{input_shape(what, tt, info, nullptr, default_dim())};
      if (given != options_.sequence_shapes.end()) shapes = given->second;
      for (size_t k = 0; k < shapes.size(); ++k) {
        std::string name = onnx_element_name(in.name(), k);
        Shape shape = input_shape("input '" + name + "'", tt, info, &shapes[k], default_dim());
        if (graph_.find_value(name))
          throw InvalidModel(what + ": the name '" + name + "' is taken");
        list.elements.push_back(graph_.add_input(name, shape, info.dtype));
      }
    }
    lists_[in.name()] = std::move(list);
    return info;
  }

  OnnxInputInfo add_input(const onnx::ValueInfoProto& in) {
    std::string what = "input '" + in.name() + "'";
    if (in.name().empty()) throw InvalidModel("a graph input has no name");
    if (values_.count(in.name()) || lists_.count(in.name()))
      throw InvalidModel(what + " is defined twice");
    if (!in.type().has_tensor_type()) return add_list_input(in, what);
    const auto& tt = in.type().tensor_type();
    OnnxInputInfo info = declared_tensor(in.name(), tt, what);
    const DType dtype = info.dtype;
    auto given = options_.input_shapes.find(in.name());
    Shape shape =
        input_shape(what, tt, info, given == options_.input_shapes.end() ? nullptr : &given->second,
                    default_dim());
    auto fixed = options_.input_values.find(in.name());
    if (fixed != options_.input_values.end()) {
      const Tensor& t = fixed->second;
      if (t.dtype() != dtype || (given != options_.input_shapes.end() && t.shape() != shape))
        throw ShapeError(what + ": the fixed value is " + dtype_name(t.dtype()) +
                         t.shape().to_string() + ", the model declares " + dtype_name(dtype));
      values_[in.name()] = graph_.add_constant(in.name(), t);
      return info;
    }
    values_[in.name()] = graph_.add_input(in.name(), shape, dtype);
    return info;
  }

  void add_node(const onnx::NodeProto& node) {
    std::string op_type = node.op_type();
    std::string label = node.name().empty() ? op_type : node.name();
    std::string where =
        "node '" + label + "' (" + op_type + ", opset " + std::to_string(opset_) + ")";
    const bool training = node.domain() == kTrainingDomain;
    if (training) {
      where = "node '" + label + "' (" + op_type + ", " + kTrainingDomain + " opset " +
              std::to_string(training_opset_) + ")";
      if (training_opset_ != 1)
        throw UnsupportedOp(where + ": lumen runs opset 1 of domain '" + kTrainingDomain + "'");
      if (!is_training_op(op_type))
        throw UnsupportedOp(where + ": lumen runs only Adagrad, Adam and Momentum of domain '" +
                            kTrainingDomain + "'");
    } else if (node.domain() == kMicrosoftDomain) {
      where = "node '" + label + "' (" + op_type + ", " + kMicrosoftDomain + ")";
      if (!is_microsoft_op(op_type))
        throw UnsupportedOp(where + ": lumen runs only MatMulNBits and QLinearAdd of domain '" +
                            kMicrosoftDomain + "'");
    } else if (!node.domain().empty() && node.domain() != "ai.onnx") {
      throw UnsupportedOp(where + ": domain '" + node.domain() + "' is not supported");
    } else if (is_microsoft_op(op_type)) {
      throw UnsupportedOp(where + ": " + op_type + " is an op of domain '" + kMicrosoftDomain +
                          "', not of the default domain");
    } else if (opset_ == 0) {
      throw InvalidModel(where + ": the model imports no opset of the default domain");
    } else if (is_training_op(op_type)) {
      throw UnsupportedOp(where + ": " + op_type + " is an op of domain '" + kTrainingDomain +
                          "', not of the default domain");
    }
    if (!training && opset_ < stable_since(op_type))
      throw UnsupportedOp(where + ": lumen reads opsets " + std::to_string(kMinOpset) + " to " +
                          std::to_string(kMaxOpset) + ", and this op changed since opset " +
                          std::to_string(opset_));
    std::vector<Value*> inputs;
    std::vector<const ListValue*> lists;  // sequences and optionals, where inputs has nullptr
    for (const std::string& in : node.input()) {
      Value* v = in.empty() ? nullptr : resolve(in);
      const ListValue* list = in.empty() || v != nullptr ? nullptr : resolve_list(in);
      if (!in.empty() && v == nullptr && list == nullptr)
        throw InvalidModel(where + ": input '" + in + "' is produced by nothing before it" +
                           (parent_ ? " (neither in the subgraph nor in an enclosing graph)" : ""));
      if (list != nullptr && !takes_lists(op_type))
        throw InvalidModel(where + ": input '" + in + "' is a " + onnx_value_kind_name(list->kind) +
                           ", and " + op_type + " takes tensors");
      inputs.push_back(v);
      lists.push_back(list);
    }
    while (!inputs.empty() && inputs.back() == nullptr && lists.back() == nullptr) {
      inputs.pop_back();
      lists.pop_back();
    }
    int num_outputs = 0;
    for (int i = 0; i < node.output_size(); ++i)
      if (!node.output(i).empty()) num_outputs = i + 1;
    for (const std::string& out : node.output())
      if (!out.empty() && (values_.count(out) || lists_.count(out)))
        throw InvalidModel(where + ": output '" + out + "' is already defined");
    const int64_t node_opset = training ? training_opset_ : opset_;
    Converter converter = training ? nullptr : find_converter(op_type, opset_);
    Attributes attrs;
    for (const auto& a : node.attribute()) {
      if (attrs.count(a.name()))
        throw InvalidModel(where + ": attribute '" + a.name() + "' repeats");
      // A converter that takes subgraphs reads them from the proto itself.
      bool graph = a.type() == onnx::AttributeProto::GRAPH || a.has_g();
      if (graph && converter != nullptr && subgraph_ops().count(op_type)) continue;
      // Optional's `type` (a TypeProto) is read by its converter.
      bool type = a.type() == onnx::AttributeProto::TYPE_PROTO || a.has_tp();
      if (type && converter != nullptr && takes_lists(op_type)) continue;
      attrs[a.name()] = convert_attribute(a, where, base_dir_);
    }
    const std::string base = prefix_ + label;
    std::string name = base;
    for (int k = 1; node_names_.count(name) || graph_.find_value(name + ":out"); ++k)
      name = base + "_" + std::to_string(k);
    node_names_.insert(name);

    ImportContext ctx(graph_, node, node_opset, name, inputs, std::move(attrs), num_outputs);
    ctx.set_scope(this);
    if (takes_lists(op_type)) ctx.set_list_inputs(std::move(lists));
    if (inlined()) ctx.set_label(label);
    const int values_before = graph_.num_values();
    std::vector<Value*> outs;
    if (converter != nullptr) {
      try {
        outs = converter(ctx);
      } catch (const ShapeError& e) {
        // A converter's own check of its input shapes: marked like a failed inference.
        rethrow_as(e, error_detail(e), true);
      }
    } else {
      auto kind = op_kind_from_name(op_type);
      if (!kind || op_type != op_name(*kind)) ctx.unsupported("lumen has no such op");
      outs = ctx.emit(op_type, inputs, ctx.attrs(), num_outputs);
    }
    for (int i = 0; i < num_outputs; ++i) {
      const std::string& out_name = node.output(i);
      if (out_name.empty()) continue;
      auto list = ctx.list_outputs().find(i);
      if (list != ctx.list_outputs().end()) {
        lists_[out_name] = list->second;
        continue;
      }
      if (i >= static_cast<int>(outs.size()) || outs[i] == nullptr)
        ctx.unsupported("output " + std::to_string(i) + " is not produced");
      Value* v = outs[i];
      if (inlined()) {
        // Names are local to the inlined subgraph: values it made get unique names in the shared
        // graph, and values from outside keep theirs.
        if (v->id >= values_before) graph_.rename(v, graph_.unique_name(prefix_ + out_name));
        values_[out_name] = v;
        continue;
      }
      if (v->producer < 0 || v->is_input) {
        // The converter passed an existing value through (Identity-like): give the name an alias.
        v = graph_.add_op("Identity", {v}, {}, graph_.unique_name(name + "_alias"));
      }
      graph_.rename(v, out_name);
      values_[out_name] = v;
    }
  }

  onnx::ModelProto& model_;
  const OnnxLoadOptions& options_;
  std::string base_dir_;
  const ModelFile* file_ = nullptr;  // the main graph's raw initializer bytes, when read from it
  WeightCache* weights_ = nullptr;   // the main graph's initializers shared with other graphs
  int64_t opset_ = 0;
  int64_t training_opset_ = 0;  // the model's opset of kTrainingDomain, 0 when not imported
  Graph own_graph_;
  Graph& graph_ = own_graph_;  // an inlined subgraph's importer adds to its parent's graph
  std::unordered_map<std::string, Value*> values_;
  std::unordered_map<std::string, ListValue> lists_;  // sequences and optionals, by name
  std::unordered_set<std::string> initializer_names_;
  std::unordered_set<std::string> own_node_names_;
  std::unordered_set<std::string>& node_names_ = own_node_names_;
  Importer* parent_ = nullptr;    // the enclosing graph's importer, for subgraphs
  std::string prefix_;            // set for an inlined subgraph: its node names start with it
  int64_t inlined_nodes_ = 0;     // nodes added by inlined subgraphs (counted at the root)
  std::vector<Value*> captured_;  // outer values read by this subgraph, in input order
};

}  // namespace

std::string ImportContext::where() const {
  return "node '" + (label_.empty() ? name_ : label_) + "' (" + node_.op_type() + ", opset " +
         std::to_string(opset_) + ")";
}

std::vector<Value*> ImportContext::emit(std::string_view op, const std::vector<Value*>& inputs,
                                        const Attributes& attrs, int num_outputs) {
  // Helper nodes are named "name/Op", "name/Op_1", ...: free both as a value name and as a node
  // name (whose output value is "NAME:out").
  std::string node_name = name_;
  if (emitted_++ > 0) {
    std::string base = name_ + "/" + std::string(op);
    node_name = base;
    for (int k = 1; graph_.find_value(node_name) || graph_.find_value(node_name + ":out"); ++k)
      node_name = base + "_" + std::to_string(k);
  }
  try {
    return graph_.add_op(op, inputs, num_outputs, attrs, node_name);
  } catch (const Error& e) {
    // Re-word so the message names the ONNX node and opset; a failed inference is marked as
    // depending on the input types (NodeBuildFailure).
    std::string detail = error_detail(e);
    if (detail.rfind("node '", 0) == 0 && detail.find("): ") != std::string::npos)
      detail = detail.substr(detail.find("): ") + 3);  // the lumen node is this ONNX node
    rethrow_as(e, where() + ": " + detail, true);
  }
}

Value* ImportContext::emit1(std::string_view op, const std::vector<Value*>& inputs,
                            const Attributes& attrs) {
  return emit(op, inputs, attrs, 1)[0];
}

Value* ImportContext::constant_ints(const std::vector<int64_t>& values) {
  return graph_.add_constant(
      graph_.unique_name(name_ + "/const"),
      Tensor::from_vector<int64_t>({static_cast<int64_t>(values.size())}, values));
}

Value* ImportContext::constant_scalar(float value) {
  return graph_.add_constant(graph_.unique_name(name_ + "/const"), Tensor::scalar<float>(value));
}

std::optional<Attribute> ImportContext::take(const std::string& name) {
  auto it = attrs_.find(name);
  if (it == attrs_.end()) return std::nullopt;
  Attribute a = it->second;
  attrs_.erase(it);
  return a;
}

void ImportContext::unsupported(const std::string& why) const {
  throw UnsupportedOp(where() + ": " + why);
}

Subgraph ImportContext::import_subgraph(const std::string& attr,
                                        const std::vector<TensorType>& input_types) {
  const onnx::GraphProto* proto = nullptr;
  for (const auto& a : node_.attribute())
    if (a.name() == attr && (a.type() == onnx::AttributeProto::GRAPH || a.has_g())) proto = &a.g();
  std::string what = where() + ": subgraph '" + attr + "'";
  if (proto == nullptr) throw InvalidModel(what + " is missing");
  try {
    return scope_->import_graph(*proto, input_types);
  } catch (const Error& e) {
    // Prefix the error with this node, so a nested failure reads from the outside in.
    rethrow_as(e, what + ": " + error_detail(e));
  }
}

}  // namespace onnx_import

Graph load_onnx_bytes(std::string_view bytes, const OnnxLoadOptions& options,
                      const std::string& base_dir, OnnxModelInfo* info) {
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    throw InvalidModel("the model is over 2 GB; keep large weights in external data");
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw InvalidModel("not a valid ONNX model (protobuf parsing failed; truncated or not ONNX?)");
  return onnx_import::Importer(model, options, base_dir).run(info);
}

Graph load_onnx(const std::string& path, const OnnxLoadOptions& options, OnnxModelInfo* info) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  try {
    // The weights go straight from the file into their tensors (onnx/model_file.h).
    onnx::ModelProto model;
    onnx_import::ModelFile file(path, &model);
    return onnx_import::Importer(model, options, dir.empty() ? "." : dir, &file).run(info);
  } catch (const Error& e) {
    std::string msg = e.what();
    auto colon = msg.find(": ");
    std::string detail = path + ": " + (colon == std::string::npos ? msg : msg.substr(colon + 2));
    switch (e.kind()) {
      case ErrorKind::kInvalidModel:
        throw InvalidModel(detail);
      case ErrorKind::kUnsupportedOp:
        throw UnsupportedOp(detail);
      case ErrorKind::kShapeError:
        throw ShapeError(detail);
      case ErrorKind::kIoError:
        throw IoError(detail);
      case ErrorKind::kInvalidArgument:
        throw InvalidArgument(detail);
      default:
        throw;
    }
  }
}

namespace onnx_import {

Graph load_onnx_cached(const std::string& path, const OnnxLoadOptions& options, WeightCache& cache,
                       OnnxModelInfo* info, std::string* kept) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  onnx::ModelProto model;
  ModelFile file(path, &model);
  if (kept != nullptr && !model.SerializeToString(kept))
    throw InvalidModel("the model cannot be serialized again");
  return Importer(model, options, dir.empty() ? "." : dir, &file, &cache).run(info);
}

Graph load_onnx_model(const std::string& kept, const std::string& base_dir,
                      const OnnxLoadOptions& options, WeightCache& cache, OnnxModelInfo* info) {
  onnx::ModelProto model;
  if (!model.ParseFromString(kept)) throw InvalidModel("not a valid ONNX model");
  return Importer(model, options, base_dir, nullptr, &cache).run(info);
}

}  // namespace onnx_import

Tensor load_onnx_tensor(const std::string& path) {
  std::string bytes = onnx_import::read_file(path);
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) throw InvalidModel(path + ": not a valid TensorProto");
  std::string dir = std::filesystem::path(path).parent_path().string();
  return onnx_import::tensor_from_proto(proto, dir.empty() ? "." : dir, path);
}

}  // namespace lumen
