// lumen._Generator and lumen._Generation: token generation from an ONNX decoder (lumen/generate.h)
// for python/lumen/model.py's Model.generate and Model.generate_stream.
#include "bindings.h"

namespace lumen::python {
namespace {

py::dict stats_dict(const GenerateStats& s) {
  py::dict d;
  d["batch"] = s.batch;
  d["prompt_tokens"] = s.prompt_tokens;
  d["new_tokens"] = s.new_tokens;
  d["prefill_s"] = s.prefill_seconds;
  d["decode_s"] = s.decode_seconds;
  d["compile_s"] = s.compile_seconds;
  d["cache_length"] = s.cache_length;
  d["cache_in_place"] = s.cache_in_place;
  d["prefill_tokens_per_s"] = s.prefill_tokens_per_second();
  d["decode_tokens_per_s"] = s.decode_tokens_per_second();
  return d;
}

}  // namespace

void bind_generate(py::module_& m) {
  py::class_<Generation>(m, "_Generation")
      .def("next",
           [](Generation& g) -> py::object {
             std::vector<int64_t> tokens;
             bool more = false;
             {
               py::gil_scoped_release release;
               more = g.next(&tokens);
             }
             if (!more) return py::none();
             return py::cast(tokens);
           })
      .def_property_readonly("tokens", &Generation::tokens)
      .def_property_readonly("stats", [](const Generation& g) { return stats_dict(g.stats()); });

  py::class_<Generator>(m, "_Generator")
      .def(py::init([](const std::string& path, const std::vector<std::string>& backends,
                       const std::string& precision) {
             CompileOptions compile;
             compile.backends = backends;
             compile.precision = to_precision(precision);
             py::gil_scoped_release release;
             return std::make_unique<Generator>(path, compile);
           }),
           py::arg("path"), py::arg("backends"), py::arg("precision") = "fp32")
      .def(
          "start",
          [](Generator& gen, const std::vector<std::vector<int64_t>>& prompts,
             int64_t max_new_tokens, bool do_sample, float temperature, int64_t top_k, float top_p,
             int64_t eos_token_id, uint64_t seed, int64_t pad_token_id) {
            GenerateOptions o;
            o.max_new_tokens = max_new_tokens;
            o.do_sample = do_sample;
            o.temperature = temperature;
            o.top_k = top_k;
            o.top_p = top_p;
            o.eos_token_id = eos_token_id;
            o.seed = seed;
            o.pad_token_id = pad_token_id;
            py::gil_scoped_release release;
            return gen.start(prompts, o);
          },
          py::keep_alive<0, 1>(), py::arg("prompts"), py::arg("max_new_tokens"),
          py::arg("do_sample"), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"),
          py::arg("eos_token_id"), py::arg("seed"), py::arg("pad_token_id"))
      .def_property_readonly("layout", [](const Generator& g) { return g.layout().to_string(); })
      .def_property_readonly("vocab", [](const Generator& g) { return g.layout().vocab; })
      .def_property("max_length", &Generator::max_length, &Generator::set_max_length)
      .def_property_readonly("num_plans", [](Generator& g) { return g.session().num_plans(); });
}

}  // namespace lumen::python
