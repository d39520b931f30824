// The extension module lumen._lumen; the package python/lumen re-exports it.
#include "bindings.h"

PYBIND11_MODULE(_lumen, m) {
  m.doc() = "Lumen's C++ runtime; use the `lumen` package rather than this module.";
  lumen::python::bind_errors(m);
  lumen::python::bind_tensor(m);
  lumen::python::bind_ops(m);
  lumen::python::bind_model(m);
  lumen::python::bind_generate(m);
  m.def(
      "version", [] { return std::string(lumen::version()); }, "Lumen's version, \"0.1.0\".");
  m.def(
      "set_num_threads", [](int n) { lumen::set_num_threads(n); }, pybind11::arg("n"),
      "Sets the CPU threads of every later compile and run, process-wide (0: every core).");
  m.def(
      "num_threads", [] { return lumen::num_threads(); },
      "The CPU threads a compile or run started now uses.");
  m.def(
      "backends", [] { return lumen::python::runtime().backends(); },
      "Names of the backends this build can use on this machine: ['cpu'], or ['cpu', 'cuda'].");
}
