// lumen._Session: an ONNX model (OnnxSession) for python/lumen/model.py, which adds the
// PyTorch-like surface (model(x), run with out=, inputs/outputs, summary).
#include "bindings.h"

namespace lumen::python {
namespace {

std::map<std::string, Tensor> to_feeds(const py::dict& inputs) {
  std::map<std::string, Tensor> feeds;
  for (auto [name, value] : inputs) {
    auto n = name.cast<std::string>();
    if (py::isinstance<Tensor>(value))
      feeds[n] = value.cast<Tensor>();
    else if (py::isinstance<py::array>(value))
      feeds[n] = tensor_from_numpy(py::reinterpret_borrow<py::array>(value));
    else
      throw InvalidArgument("input '" + n + "': expected a lumen.Tensor or a NumPy array, got " +
                            py::repr(py::type::handle_of(value)).cast<std::string>());
  }
  return feeds;
}

std::map<std::string, Shape> to_shapes(const py::dict& shapes) {
  std::map<std::string, Shape> out;
  for (auto [name, dims] : shapes)
    out[name.cast<std::string>()] = Shape(dims.cast<std::vector<int64_t>>());
  return out;
}

py::list type_list(const std::vector<TensorInfo>& infos) {
  py::list out;
  for (const TensorInfo& info : infos)
    out.append(
        py::make_tuple(info.name, info.type.dtype, py::tuple(py::cast(info.type.shape.dims()))));
  return out;
}

}  // namespace

Precision to_precision(const std::string& name) {
  return name == "tf32"          ? Precision::kTF32
         : name == "fp16"        ? Precision::kFloat16
         : name == "bf16"        ? Precision::kBFloat16
         : name == "fp32-strict" ? Precision::kFloat32Strict
                                 : Precision::kFloat32;
}

void bind_model(py::module_& m) {
  py::class_<OnnxSession>(m, "_Session")
      .def(py::init([](const std::string& path, const std::vector<std::string>& backends,
                       const std::string& precision, bool plan_per_shape) {
             CompileOptions compile;
             compile.backends = backends;
             compile.precision = to_precision(precision);
             OnnxLoadOptions load;
             load.plan_per_shape = plan_per_shape;
             py::gil_scoped_release release;
             return std::make_unique<OnnxSession>(path, load, compile);
           }),
           py::arg("path"), py::arg("backends"), py::arg("precision") = "fp32",
           py::arg("plan_per_shape") = false)
      .def(
          "run",
          [](OnnxSession& s, const py::dict& inputs) {
            std::map<std::string, Tensor> feeds = to_feeds(inputs);
            py::gil_scoped_release release;
            return s.run(feeds);
          },
          py::arg("inputs"))
      .def_property_readonly("inputs",
                             [](const OnnxSession& s) {
                               py::list out;
                               for (const OnnxInputInfo& in : s.info().inputs)
                                 out.append(py::make_tuple(in.name, in.dtype, in.dims, in.symbols));
                               return out;
                             })
      .def_property_readonly("output_names", [](const OnnxSession& s) { return s.info().outputs; })
      .def_property_readonly("opset", [](const OnnxSession& s) { return s.info().opset; })
      .def_property_readonly("producer", [](const OnnxSession& s) { return s.info().producer; })
      .def("num_plans", &OnnxSession::num_plans)
      .def("stats",
           [](const OnnxSession& s) {
             const OnnxSession::Stats st = s.stats();
             py::dict d;
             d["compiles"] = st.compiles;
             d["sized"] = st.sized;
             d["families"] = st.families;
             d["kernels_shared"] = st.kernels_shared;
             d["kernels_built"] = st.kernels_built;
             d["refused"] = st.refused;
             return d;
           })
      .def_property_readonly("value_inputs",
                             [](const OnnxSession& s) { return s.info().value_inputs; })
      .def(
          "plan_outputs_for",
          [](OnnxSession& s, const py::dict& inputs) {
            std::map<std::string, Tensor> feeds = to_feeds(inputs);
            Executable* plan = nullptr;
            {
              py::gil_scoped_release release;
              plan = s.plan_for(feeds);
            }
            return type_list(plan->outputs());
          },
          py::arg("inputs"))
      .def(
          "plan_summary_for",
          [](OnnxSession& s, const py::dict& inputs) {
            std::map<std::string, Tensor> feeds = to_feeds(inputs);
            py::gil_scoped_release release;
            return s.plan_for(feeds)->summary();
          },
          py::arg("inputs"))
      .def(
          "plan_inputs",
          [](OnnxSession& s, const py::dict& shapes) {
            return type_list(s.plan_for(to_shapes(shapes))->inputs());
          },
          py::arg("shapes"))
      .def(
          "plan_outputs",
          [](OnnxSession& s, const py::dict& shapes) {
            return type_list(s.plan_for(to_shapes(shapes))->outputs());
          },
          py::arg("shapes"))
      .def(
          "plan_summary",
          [](OnnxSession& s, const py::dict& shapes) {
            return s.plan_for(to_shapes(shapes))->summary();
          },
          py::arg("shapes"));
}

}  // namespace lumen::python
