#include "graph/node_context.h"

#include "graph/schema.h"

namespace lumen {

std::string NodeContext::where() const {
  return "node '" + node_.name + "' (" + op_name(node_.op) + ")";
}

bool NodeContext::has_input(int i) const {
  return i >= 0 && i < num_inputs() && node_.inputs[i] >= 0;
}

const TensorType& NodeContext::input(int i) const {
  if (!has_input(i)) fail_model("input " + std::to_string(i) + " is missing");
  return graph_.value(node_.inputs[i]).type;
}

const Tensor* NodeContext::input_value(int i) const {
  if (!has_input(i)) return nullptr;
  const Value& v = graph_.value(node_.inputs[i]);
  return v.data && !v.user_weight ? &*v.data : nullptr;
}

std::vector<int64_t> NodeContext::input_ints(int i, const char* what) const {
  const Tensor* t = input_value(i);
  if (t == nullptr)
    fail_shape(std::string("the ") + what + " input must be known when the graph is built");
  if (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)
    fail_model(std::string("the ") + what + " input must be int64 or int32, not " +
               dtype_name(t->dtype()));
  std::vector<int64_t> out(static_cast<size_t>(t->numel()));
  for (int64_t k = 0; k < t->numel(); ++k)
    out[k] = t->dtype() == DType::kInt64 ? t->data<int64_t>()[k] : t->data<int32_t>()[k];
  return out;
}

const TensorType& NodeContext::output(int i) const {
  if (i < 0 || i >= num_outputs()) fail_model("output " + std::to_string(i) + " does not exist");
  return graph_.value(node_.outputs[i]).type;
}

bool NodeContext::has_attr(const std::string& name) const {
  return node_.attrs.count(name) > 0;
}

const Attribute* NodeContext::attr(const std::string& name) const {
  auto it = node_.attrs.find(name);
  return it == node_.attrs.end() ? nullptr : &it->second;
}

namespace {
template <typename F>
auto read_attr(const NodeContext& ctx, const std::string& name, F get) -> decltype(get()) {
  try {
    return get();
  } catch (const InvalidModel& e) {
    ctx.fail_model("attribute '" + name + "': " + e.what());
  }
}
}  // namespace

int64_t NodeContext::attr_int(const std::string& name) const {
  const Attribute* a = attr(name);
  if (!a) fail_model("required attribute '" + name + "' is missing");
  return read_attr(*this, name, [&] { return a->as_int(); });
}

int64_t NodeContext::attr_int(const std::string& name, int64_t fallback) const {
  const Attribute* a = attr(name);
  return a ? read_attr(*this, name, [&] { return a->as_int(); }) : fallback;
}

float NodeContext::attr_float(const std::string& name, float fallback) const {
  const Attribute* a = attr(name);
  return a ? read_attr(*this, name, [&] { return a->as_float(); }) : fallback;
}

std::string NodeContext::attr_string(const std::string& name, const std::string& fallback) const {
  const Attribute* a = attr(name);
  return a ? read_attr(*this, name, [&] { return a->as_string(); }) : fallback;
}

std::vector<int64_t> NodeContext::attr_ints(const std::string& name) const {
  const Attribute* a = attr(name);
  if (!a) fail_model("required attribute '" + name + "' is missing");
  return read_attr(*this, name, [&] { return a->as_ints(); });
}

std::vector<int64_t> NodeContext::attr_ints(const std::string& name,
                                            const std::vector<int64_t>& fallback) const {
  const Attribute* a = attr(name);
  return a ? read_attr(*this, name, [&] { return a->as_ints(); }) : fallback;
}

std::vector<float> NodeContext::attr_floats(const std::string& name,
                                            const std::vector<float>& fallback) const {
  const Attribute* a = attr(name);
  return a ? read_attr(*this, name, [&] { return a->as_floats(); }) : fallback;
}

void NodeContext::fail_shape(const std::string& message) const {
  throw ShapeError(where() + ": " + message);
}
void NodeContext::fail_model(const std::string& message) const {
  throw InvalidModel(where() + ": " + message);
}
void NodeContext::fail_unsupported(const std::string& message) const {
  throw UnsupportedOp(where() + ": " + message);
}

void InferContext::set_output(int i, DType dtype, const Shape& shape) {
  if (i < 0 || i >= num_outputs()) fail_model("output " + std::to_string(i) + " does not exist");
  // kDynamicDim is allowed only from ops that declare data-dependent output shapes.
  const bool dynamic_ok = op_schema(op()).dynamic_outputs;
  for (int64_t d : shape.dims())
    if (d < 0 && !(d == kDynamicDim && dynamic_ok))
      fail_shape("inferred a negative dimension: " + shape.to_string());
  if (shape.is_static()) shape.numel();  // throws on overflow
  Value& v = mutable_graph_.value(node().outputs[i]);
  v.type = TensorType{dtype, shape};
}

void InferContext::set_output_value(int i, Tensor value) {
  set_output(i, value.dtype(), value.shape());
  mutable_graph_.value(node().outputs[i]).data = std::move(value);
}

}  // namespace lumen
