// Eager ops: each call runs a one-node graph compiled once per (op, input types, attributes,
// constant inputs, device) and cached, so eager ops use the same kernels as compiled models and a
// repeated call costs a map lookup plus Executable::execute. Also the Python operators of Tensor.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "bindings.h"

namespace lumen::python {
namespace {

// One input of an eager op: a tensor bound at run time, a constant baked into the graph (shape
// inputs such as Reshape's, which the schema must know when the node is built), or omitted.
struct Operand {
  Tensor tensor;
  bool constant = false;
};

std::string hex_bytes(const Tensor& t) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  Tensor host = t.to(Device::cpu());
  const auto* p = static_cast<const unsigned char*>(host.raw_data());
  for (size_t i = 0; i < host.nbytes(); ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

std::string cache_key(const std::string& op, const std::vector<Operand>& inputs,
                      const Attributes& attrs, int num_outputs, bool on_cuda) {
  std::string key = op;
  key += on_cuda ? "|cuda|" : "|cpu|";
  key += std::to_string(num_outputs);
  for (const Operand& in : inputs) {
    key += '|';
    if (!in.tensor.defined()) continue;
    key += dtype_name(in.tensor.dtype());
    for (int64_t d : in.tensor.shape().dims()) key += ',' + std::to_string(d);
    if (in.constant) key += '=' + hex_bytes(in.tensor);
  }
  for (const auto& [name, value] : attrs) key += '|' + name + '=' + value.to_string();
  return key;
}

Executable* compile_op(const std::string& op, const std::vector<Operand>& inputs,
                       const Attributes& attrs, int num_outputs, bool on_cuda) {
  Graph graph;
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Operand& in = inputs[i];
    std::string name = "input" + std::to_string(i);
    if (!in.tensor.defined())
      values.push_back(nullptr);
    else if (in.constant)
      values.push_back(graph.add_constant(name, in.tensor.to(Device::cpu())));
    else
      values.push_back(graph.add_input(name, in.tensor.shape(), in.tensor.dtype()));
  }
  std::vector<Value*> outputs = graph.add_op(op, values, num_outputs, attrs, op);
  for (Value* out : outputs) graph.mark_output(out);
  CompileOptions options;
  options.backends = {on_cuda ? "cuda" : "cpu"};
  return graph.compile(&runtime(), options);
}

class OpCache {
 public:
  Executable* find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  void insert(const std::string& key, Executable* exe) {
    std::lock_guard<std::mutex> lock(mutex_);
    map_.emplace(key, exe);
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.size();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, Executable*> map_;
};

OpCache& op_cache() {
  static OpCache* cache = new OpCache();
  return *cache;
}

// Runs `op` on `inputs` (the GIL is released while it runs) and returns its outputs.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Operand>& inputs,
                           const Attributes& attrs, int num_outputs) {
  bool on_cuda = false;
  std::vector<Tensor> bound;
  for (const Operand& in : inputs) {
    if (!in.tensor.defined()) continue;
    on_cuda = on_cuda || in.tensor.device().type == DeviceType::kCUDA;
    if (!in.constant) bound.push_back(in.tensor);
  }
  std::string key = cache_key(op, inputs, attrs, num_outputs, on_cuda);
  Executable* exe = op_cache().find(key);
  if (exe == nullptr) {
    exe = compile_op(op, inputs, attrs, num_outputs, on_cuda);
    op_cache().insert(key, exe);
  }
  py::gil_scoped_release release;
  return exe->execute(bound);
}

Attribute to_attribute(const std::string& name, py::handle v) {
  if (py::isinstance<py::bool_>(v) || py::isinstance<py::int_>(v))
    return Attribute(v.cast<int64_t>());
  if (py::isinstance<py::float_>(v)) return Attribute(v.cast<double>());
  if (py::isinstance<py::str>(v)) return Attribute(v.cast<std::string>());
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    bool all_ints = true;
    for (py::handle e : v) all_ints = all_ints && py::isinstance<py::int_>(e);
    if (all_ints) return Attribute(v.cast<std::vector<int64_t>>());
    return Attribute(v.cast<std::vector<float>>());
  }
  throw InvalidArgument("attribute '" + name + "': unsupported value " +
                        py::repr(v).cast<std::string>());
}

DType first_dtype(const py::list& inputs) {
  for (py::handle h : inputs)
    if (py::isinstance<Tensor>(h)) return h.cast<const Tensor&>().dtype();
  return DType::kFloat32;
}

py::object pack(std::vector<Tensor> outputs, int num_outputs) {
  if (num_outputs == 1) return py::cast(std::move(outputs[0]));
  py::tuple out(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) out[i] = py::cast(std::move(outputs[i]));
  return out;
}

// The dtype two operands meet at, by PyTorch's rules: a floating dtype beats any integer one
// (int64 + float32 is float32, where NumPy would say float64); otherwise NumPy's promotion.
DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_floating(a) != is_floating(b)) return is_floating(a) ? a : b;
  if (a == DType::kBFloat16 || b == DType::kBFloat16) return DType::kFloat32;
  py::object numpy = py::module_::import("numpy");
  return to_dtype(numpy.attr("promote_types")(to_numpy_dtype(a), to_numpy_dtype(b)));
}

Tensor cast(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor like = Tensor::empty(Shape{}, dtype);
  std::memset(like.raw_data(), 0, like.nbytes());
  return run_op("CastLike", {{t}, {like}}, {}, 1)[0];
}

Tensor binary(const std::string& op, const Tensor& self, py::handle other, bool reflected,
              bool true_divide = false) {
  Tensor b = to_operand(other, self.dtype());
  Tensor a = self;
  if (reflected) std::swap(a, b);
  DType common = promote(a.dtype(), b.dtype());
  if (true_divide && !is_floating(common)) common = DType::kFloat32;
  return run_op(op, {{cast(a, common)}, {cast(b, common)}}, {}, 1)[0];
}

}  // namespace

Tensor to_operand(py::handle obj, DType like) {
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
  if (py::isinstance<py::array>(obj))
    return tensor_from_numpy(py::reinterpret_borrow<py::array>(obj));
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    py::object numpy = py::module_::import("numpy");
    py::array array = numpy.attr("asarray")(obj);
    if (array.dtype().kind() == 'f')
      array =
          numpy.attr("asarray")(array, to_numpy_dtype(is_floating(like) ? like : DType::kFloat32));
    return tensor_from_numpy(array);
  }
  bool is_bool = py::isinstance<py::bool_>(obj);
  bool is_int = !is_bool && py::isinstance<py::int_>(obj);
  bool is_float = py::isinstance<py::float_>(obj);
  if (!is_bool && !is_int && !is_float)
    throw InvalidArgument("expected a lumen.Tensor, a NumPy array or a number, got " +
                          py::repr(py::type::handle_of(obj)).cast<std::string>());
  DType dtype = like;
  if (is_float && !is_floating(like)) dtype = DType::kFloat32;
  if (!is_bool && like == DType::kBool) dtype = is_int ? DType::kInt64 : DType::kFloat32;
  if (dtype == DType::kFloat32) return Tensor::scalar<float>(obj.cast<float>());
  if (dtype == DType::kInt64) return Tensor::scalar<int64_t>(obj.cast<int64_t>());
  py::object numpy = py::module_::import("numpy");
  return tensor_from_numpy(numpy.attr("array")(obj, to_numpy_dtype(dtype)));
}

void bind_ops(py::module_& m) {
  m.def(
      "_op",
      [](const std::string& op, const py::list& inputs, const py::dict& attrs, int num_outputs,
         const std::vector<size_t>& constant) {
        DType like = first_dtype(inputs);
        std::vector<Operand> operands;
        for (size_t i = 0; i < inputs.size(); ++i) {
          py::handle h = inputs[i];
          bool is_constant = std::find(constant.begin(), constant.end(), i) != constant.end();
          if (h.is_none())
            operands.push_back({});
          else
            operands.push_back({to_operand(h, is_constant ? DType::kInt64 : like), is_constant});
        }
        Attributes attributes;
        for (auto [name, value] : attrs) {
          auto n = name.cast<std::string>();
          attributes[n] = to_attribute(n, value);
        }
        return pack(run_op(op, operands, attributes, num_outputs), num_outputs);
      },
      py::arg("op"), py::arg("inputs"), py::arg("attrs") = py::dict(), py::arg("num_outputs") = 1,
      py::arg("constant") = std::vector<size_t>{},
      "Runs one lumen op (an ONNX name, e.g. \"Conv\") eagerly. inputs: Tensors, arrays or "
      "numbers (None for an omitted optional input); constant: positions of inputs baked into "
      "the compiled op (shape arguments). Compiled once per op, input types, "
      "attributes and constants, then cached.");
  m.def(
      "_cast", [](const Tensor& t, py::object dtype) { return cast(t, to_dtype(dtype)); },
      py::arg("tensor"), py::arg("dtype"));
  m.def(
      "_binary",
      [](const std::string& op, const Tensor& a, py::handle b) { return binary(op, a, b, false); },
      py::arg("op"), py::arg("a"), py::arg("b"),
      "A binary op with PyTorch's type promotion (a Python number takes a's dtype).");
  m.def("_op_cache_size", [] { return op_cache().size(); });

  auto tensor = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  struct Binary {
    const char* name;
    const char* op;
    bool reflected;
    bool true_divide;
  };
  static const Binary kBinary[] = {
      {"__add__", "Add", false, false},       {"__radd__", "Add", true, false},
      {"__sub__", "Sub", false, false},       {"__rsub__", "Sub", true, false},
      {"__mul__", "Mul", false, false},       {"__rmul__", "Mul", true, false},
      {"__truediv__", "Div", false, true},    {"__rtruediv__", "Div", true, true},
      {"__pow__", "Pow", false, false},       {"__rpow__", "Pow", true, false},
      {"__matmul__", "MatMul", false, false}, {"__rmatmul__", "MatMul", true, false},
      {"__lt__", "Less", false, false},       {"__le__", "LessOrEqual", false, false},
      {"__gt__", "Greater", false, false},    {"__ge__", "GreaterOrEqual", false, false},
      {"__and__", "And", false, false},       {"__or__", "Or", false, false},
      {"__xor__", "Xor", false, false},
  };
  for (const Binary& b : kBinary) {
    const Binary* spec = &b;
    tensor.def(
        b.name,
        [spec](const Tensor& self, py::handle other) {
          return binary(spec->op, self, other, spec->reflected, spec->true_divide);
        },
        (std::string("Element-wise ") + b.op + " with NumPy broadcasting.").c_str());
  }
  tensor.def(
      "__neg__", [](const Tensor& t) { return run_op("Neg", {{t}}, {}, 1)[0]; }, "-t");
  tensor.def(
      "__abs__", [](const Tensor& t) { return run_op("Abs", {{t}}, {}, 1)[0]; }, "abs(t)");
}

}  // namespace lumen::python
