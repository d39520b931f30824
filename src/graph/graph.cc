// Graph construction, lookup and per-node type inference.
#include "lumen/graph.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "graph/schema.h"

namespace lumen {
namespace {

// Values folded at build time stay small: folding exists for shape arithmetic, not to precompute
// weights (the optimizer's constant folding does that, when asked).
constexpr int64_t kMaxFoldElements = 1 << 12;

}  // namespace

std::string TensorType::to_string() const {
  return std::string(dtype_name(dtype)) + shape.to_string();
}

Graph::Graph() = default;
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

Graph Graph::clone() const {
  Graph copy;
  copy.values_ = values_;
  copy.nodes_ = nodes_;
  copy.inputs_ = inputs_;
  copy.outputs_ = outputs_;
  copy.names_ = names_;
  copy.weights_released_ = weights_released_;
  copy.name_counter_ = name_counter_;
  copy.unfolded_ = unfolded_;
  return copy;
}

Graph Graph::compacted(std::vector<int>* value_ids, std::vector<int>* node_ids) const {
  std::vector<int> value_map(values_.size(), -1), node_map(nodes_.size(), -1);
  std::vector<bool> used(values_.size(), false);
  for (int in : inputs_) used[in] = true;
  for (int out : outputs_) used[out] = true;
  for (const Node& n : nodes_) {
    if (n.removed) continue;
    for (int in : n.inputs)
      if (in >= 0) used[in] = true;
    for (int out : n.outputs) used[out] = true;
  }
  Graph copy;
  for (const Node& n : nodes_) {
    if (n.removed) continue;
    node_map[n.id] = static_cast<int>(copy.nodes_.size());
    copy.nodes_.push_back(n);
  }
  for (const Value& v : values_) {
    if (!used[v.id]) continue;
    value_map[v.id] = static_cast<int>(copy.values_.size());
    Value& c = copy.values_.emplace_back(v);
    c.id = value_map[v.id];
    c.producer = v.producer >= 0 ? node_map[v.producer] : -1;
    c.consumers.clear();
    for (int k : v.consumers)
      if (node_map[k] >= 0) c.consumers.push_back(node_map[k]);
  }
  for (Node& n : copy.nodes_) {
    n.id = node_map[n.id];
    for (int& in : n.inputs)
      if (in >= 0) in = value_map[in];
    for (int& out : n.outputs) out = value_map[out];
  }
  for (int in : inputs_) copy.inputs_.push_back(value_map[in]);
  for (int out : outputs_) copy.outputs_.push_back(value_map[out]);
  copy.names_ = names_;
  copy.unfolded_ = unfolded_;
  copy.weights_released_ = weights_released_;
  copy.name_counter_ = name_counter_;
  if (value_ids != nullptr) *value_ids = std::move(value_map);
  if (node_ids != nullptr) *node_ids = std::move(node_map);
  return copy;
}

void Graph::keep_unfolded(std::set<std::string> node_names) {
  unfolded_ = std::move(node_names);
}

bool Graph::is_kept_unfolded(const Node& node) const {
  return unfolded_.count(node.name) > 0;
}

Value& Graph::value(int id) {
  if (id < 0 || id >= num_values()) throw InvalidArgument("no value with id " + std::to_string(id));
  return values_[id];
}
const Value& Graph::value(int id) const {
  if (id < 0 || id >= num_values()) throw InvalidArgument("no value with id " + std::to_string(id));
  return values_[id];
}
Node& Graph::node(int id) {
  if (id < 0 || id >= num_nodes()) throw InvalidArgument("no node with id " + std::to_string(id));
  return nodes_[id];
}
const Node& Graph::node(int id) const {
  if (id < 0 || id >= num_nodes()) throw InvalidArgument("no node with id " + std::to_string(id));
  return nodes_[id];
}

std::string Graph::unique_name(std::string_view base) {
  std::string name(base.empty() ? "v" : base);
  // Free as a value name and as a node name (a node's outputs are named NAME:out).
  while (names_.count(name) || names_.count(name + ":out"))
    name = std::string(base) + "_" + std::to_string(++name_counter_);
  return name;
}

Value& Graph::new_value(const std::string& name) {
  if (name.empty()) throw InvalidArgument("a value needs a name");
  if (!names_.insert(name).second) throw InvalidModel("duplicate value name '" + name + "'");
  Value& v = values_.emplace_back();
  v.id = num_values() - 1;
  v.name = name;
  return v;
}

void Graph::rename(Value* value, const std::string& name) {
  if (value == nullptr || value->id < 0 || value->id >= num_values() ||
      &values_[value->id] != value)
    throw InvalidArgument("rename: not a value of this graph");
  if (value->name == name) return;
  if (name.empty()) throw InvalidArgument("rename: empty name");
  if (!names_.insert(name).second) throw InvalidModel("duplicate value name '" + name + "'");
  names_.erase(value->name);
  value->name = name;
}

Value* Graph::find_value(std::string_view name) {
  for (Value& v : values_)
    if (v.name == name) return &v;
  return nullptr;
}

Value* Graph::add_input(const std::string& name, const Shape& shape, DType dtype) {
  shape.numel();  // validates the dimensions
  Value& v = new_value(name);
  v.type = {dtype, shape};
  v.is_input = true;
  inputs_.push_back(v.id);
  return &v;
}

Value* Graph::add_weight(const std::string& name, const Shape& shape, DType dtype) {
  Value& v = new_value(name);
  v.type = {dtype, shape};
  v.data = Tensor::zeros(shape, dtype);
  v.user_weight = true;
  return &v;
}

Value* Graph::add_constant(const std::string& name, Tensor data) {
  if (!data.defined()) throw InvalidArgument("add_constant '" + name + "': undefined tensor");
  if (data.device().type != DeviceType::kCPU)
    throw InvalidArgument("add_constant '" + name + "': data must be on the host");
  Value& v = new_value(name);
  v.type = {data.dtype(), data.shape()};
  v.data = std::move(data);
  return &v;
}

void Graph::set_data(Value* weight, Tensor data) {
  if (weight == nullptr || weight->id < 0 || weight->id >= num_values() ||
      &values_[weight->id] != weight)
    throw InvalidArgument("set_data: not a value of this graph");
  if (!weight->data || weight->producer >= 0)
    throw InvalidArgument("set_data: '" + weight->name + "' is not a weight");
  TensorType t{data.dtype(), data.shape()};
  if (!(t == weight->type))
    throw ShapeError("set_data: weight '" + weight->name + "' is " + weight->type.to_string() +
                     ", data is " + t.to_string());
  weight->data = std::move(data);
}

Node& Graph::add_node(OpKind op, const std::vector<int>& inputs, int num_outputs, Attributes attrs,
                      const std::string& name) {
  if (num_outputs < 0) throw InvalidArgument("add_node: negative output count");
  for (int in : inputs)
    if (in < -1 || in >= num_values())
      throw InvalidModel(std::string("node '") + name + "' (" + op_name(op) + "): input id " +
                         std::to_string(in) + " does not exist");
  std::string node_name = name.empty() ? unique_name(op_name(op)) : name;
  int id = num_nodes();
  std::vector<int> outs;
  for (int k = 0; k < num_outputs; ++k) {
    Value& v = new_value(unique_name(num_outputs == 1 ? node_name + ":out"
                                                      : node_name + ":out" + std::to_string(k)));
    v.producer = id;
    outs.push_back(v.id);
  }
  Node& n = nodes_.emplace_back();
  n.id = id;
  n.op = op;
  n.name = node_name;
  n.inputs = inputs;
  n.outputs = std::move(outs);
  n.attrs = std::move(attrs);
  for (int in : inputs)
    if (in >= 0) values_[in].consumers.push_back(id);
  return n;
}

std::vector<Value*> Graph::add_op(std::string_view op, const std::vector<Value*>& inputs,
                                  int num_outputs, const Attributes& attrs,
                                  const std::string& name) {
  auto kind = op_kind_from_name(op);
  if (!kind || !has_schema(*kind))
    throw UnsupportedOp("unknown op '" + std::string(op) + "'" +
                        (name.empty() ? "" : " (node '" + name + "')"));
  std::vector<int> ids;
  for (Value* v : inputs) {
    if (v != nullptr && (v->id < 0 || v->id >= num_values() || &values_[v->id] != v))
      throw InvalidArgument("add_op " + std::string(op) + ": input is not a value of this graph");
    ids.push_back(v ? v->id : -1);
  }
  if (!name.empty() && names_.count(name + ":out"))
    throw InvalidModel("duplicate node name '" + name + "'");
  Node& n = add_node(*kind, ids, num_outputs, attrs, name);
  int id = n.id;
  try {
    infer_node(id);
  } catch (...) {
    // Leave the graph as it was: unlink the failed node and drop it.
    for (int in : nodes_[id].inputs)
      if (in >= 0) values_[in].consumers.pop_back();
    for (int out : nodes_[id].outputs) names_.erase(values_[out].name);
    values_.resize(values_.size() - nodes_[id].outputs.size());
    nodes_.pop_back();
    throw;
  }
  std::vector<Value*> outs;
  for (int o : nodes_[id].outputs) outs.push_back(&values_[o]);
  return outs;
}

Value* Graph::add_op(std::string_view op, const std::vector<Value*>& inputs,
                     const Attributes& attrs, const std::string& name) {
  return add_op(op, inputs, 1, attrs, name)[0];
}

void Graph::mark_output(Value* value) {
  if (value == nullptr || value->id < 0 || value->id >= num_values() ||
      &values_[value->id] != value)
    throw InvalidArgument("mark_output: not a value of this graph");
  if (!value->is_output) {
    value->is_output = true;
    outputs_.push_back(value->id);
  }
}

void Graph::mark_input_written(Value* input) {
  if (input == nullptr || input->id < 0 || input->id >= num_values() ||
      &values_[input->id] != input || !input->is_input)
    throw InvalidArgument("mark_input_written: not an input of this graph");
  input->written_in_place = true;
}

void Graph::remove_output(int id) {
  Value& v = value(id);
  if (!v.is_output) throw InvalidArgument("remove_output: '" + v.name + "' is not a graph output");
  outputs_.erase(std::remove(outputs_.begin(), outputs_.end(), id), outputs_.end());
  v.is_output = false;
}

void Graph::replace_output(int old_id, int new_id) {
  Value& old_value = value(old_id);
  Value& new_value = value(new_id);
  if (!old_value.is_output)
    throw InvalidArgument("replace_output: '" + old_value.name + "' is not a graph output");
  if (new_value.is_output)
    throw InvalidArgument("replace_output: '" + new_value.name + "' is a graph output already");
  for (int& out : outputs_)
    if (out == old_id) out = new_id;
  old_value.is_output = false;
  new_value.is_output = true;
}

void Graph::infer_node(int id) {
  Node& n = node(id);
  InferContext ctx(*this, n);
  const OpSchema& schema = op_schema(n.op);
  int num_in = static_cast<int>(n.inputs.size());
  if (num_in < schema.min_inputs || num_in > schema.max_inputs)
    ctx.fail_model(
        "takes " + std::to_string(schema.min_inputs) +
        (schema.max_inputs == kVariadic ? " or more" : " to " + std::to_string(schema.max_inputs)) +
        " inputs, got " + std::to_string(num_in));
  int num_out = static_cast<int>(n.outputs.size());
  if (num_out < schema.min_outputs || num_out > schema.max_outputs)
    ctx.fail_model("has " + std::to_string(num_out) + " outputs, expected " +
                   std::to_string(schema.min_outputs) + " to " +
                   std::to_string(schema.max_outputs));
  for (int k = 0; k < schema.min_inputs; ++k)
    if (n.inputs[k] < 0) ctx.fail_model("required input " + std::to_string(k) + " is missing");
  for (const auto& [key, attr] : n.attrs) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : schema.attrs)
      if (key == s.name) spec = &s;
    if (!spec) ctx.fail_model("unknown attribute '" + key + "'");
    bool ok = attr.type() == spec->type ||
              (spec->type == AttrType::kFloat && attr.type() == AttrType::kInt);
    if (!ok)
      ctx.fail_model("attribute '" + key + "' is " + attr_type_name(attr.type()) + ", expected " +
                     attr_type_name(spec->type));
  }
  for (const AttrSpec& s : schema.attrs)
    if (s.required && !n.attrs.count(s.name))
      ctx.fail_model(std::string("required attribute '") + s.name + "' is missing");
  if (!schema.dynamic_inputs) {
    for (int k = 0; k < num_in; ++k) {
      if (n.inputs[k] < 0 || values_[n.inputs[k]].type.shape.is_static()) continue;
      const Value& v = values_[n.inputs[k]];
      std::string from = v.producer >= 0 ? " (an output of node '" + nodes_[v.producer].name +
                                               "' (" + op_name(nodes_[v.producer].op) + "))"
                                         : "";
      ctx.fail_unsupported("input " + std::to_string(k) + " '" + v.name + "'" + from +
                           " has shape " + v.type.shape.to_string() +
                           ", known only at run time; lumen compiles this op for static shapes");
    }
  }
  for (int out : n.outputs) values_[out].data.reset();
  schema.infer(ctx);

  // Fold small deterministic nodes whose inputs are all known (shape arithmetic).
  bool known = schema.foldable && node_evaluator() != nullptr && !is_kept_unfolded(n);
  for (int k = 0; known && k < num_in; ++k) known = n.inputs[k] < 0 || ctx.input_value(k);
  // An output whose shape depends on the data (kDynamicDim) is bounded by the inputs, which are
  // known here; folding it gives it its concrete shape.
  for (int out : n.outputs) {
    if (values_[out].data || !values_[out].type.shape.is_static()) continue;
    if (!known || values_[out].type.shape.numel() > kMaxFoldElements) known = false;
  }
  bool all_set = true;
  for (int out : n.outputs) all_set = all_set && values_[out].data.has_value();
  if (!known || all_set) return;
  std::vector<Tensor> ins;
  for (int k = 0; k < num_in; ++k) ins.push_back(n.inputs[k] < 0 ? Tensor() : *ctx.input_value(k));
  std::vector<Tensor> outs;
  try {
    outs = node_evaluator()(*this, n, ins);
  } catch (const UnsupportedOp&) {
    return;  // no kernel for this variant: it simply runs at execute time
  }
  for (int k = 0; k < num_out; ++k) {
    Value& v = values_[n.outputs[k]];
    if (outs[k].dtype() != v.type.dtype || !v.type.shape.admits(outs[k].shape()))
      ctx.fail_shape("evaluated output " + std::to_string(k) + " is " +
                     TensorType{outs[k].dtype(), outs[k].shape()}.to_string() + ", inferred " +
                     v.type.to_string());
    v.type.shape = outs[k].shape();
    v.data = outs[k];
  }
}

void Graph::infer_all() {
  for (int id : topological_order()) infer_node(id);
}

std::vector<int> Graph::topological_order() const {
  // Kahn's algorithm over live nodes; a node is ready once every input's producer has run.
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<int> order;
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (const Node& n : nodes_) {
    if (n.removed) continue;
    for (int in : n.inputs)
      if (in >= 0 && values_[in].producer >= 0 && !nodes_[values_[in].producer].removed)
        ++pending[n.id];
    if (pending[n.id] == 0) ready.push(n.id);
  }
  size_t live = 0;
  for (const Node& n : nodes_) live += n.removed ? 0 : 1;
  // Process in id order among ready nodes so the order is deterministic and follows insertion.
  std::vector<bool> done(nodes_.size(), false);
  while (!ready.empty()) {
    int id = ready.top();
    ready.pop();
    order.push_back(id);
    done[id] = true;
    for (int out : nodes_[id].outputs)
      for (int c : values_[out].consumers)
        if (!nodes_[c].removed && --pending[c] == 0) ready.push(c);
  }
  if (order.size() != live) {
    for (const Node& n : nodes_)
      if (!n.removed && !done[n.id])
        throw InvalidModel("the graph has a cycle through node '" + n.name + "' (" + op_name(n.op) +
                           ")");
  }
  return order;
}

}  // namespace lumen
