// lumen.Error and one Python exception class per lumen::ErrorKind. Each kind also derives from the
// built-in exception a Python caller would catch for it (ShapeError is a ValueError, IoError an
// OSError), and carries its kind's name as the class attribute `kind`.
#include "bindings.h"

namespace lumen::python {
namespace {

struct KindClass {
  ErrorKind kind;
  const char* name;
  PyObject* builtin;
  PyObject* type = nullptr;
};

KindClass* kind_classes() {
  static KindClass classes[] = {
      {ErrorKind::kInvalidModel, "InvalidModel", PyExc_ValueError},
      {ErrorKind::kUnsupportedOp, "UnsupportedOp", PyExc_NotImplementedError},
      {ErrorKind::kShapeError, "ShapeError", PyExc_ValueError},
      {ErrorKind::kInvalidArgument, "InvalidArgument", PyExc_ValueError},
      {ErrorKind::kOutOfMemory, "OutOfMemory", PyExc_MemoryError},
      {ErrorKind::kDeviceError, "DeviceError", PyExc_RuntimeError},
      {ErrorKind::kIoError, "IoError", PyExc_OSError},
  };
  return classes;
}
constexpr int kNumKinds = 7;
PyObject* base_error = nullptr;

}  // namespace

void bind_errors(py::module_& m) {
  base_error = PyErr_NewExceptionWithDoc(
      "lumen.Error", "Base class of every error lumen raises; `kind` names the error kind.",
      PyExc_Exception, nullptr);
  PyObject_SetAttrString(base_error, "kind", py::str("Error").ptr());
  m.attr("Error") = py::handle(base_error);
  KindClass* classes = kind_classes();
  for (int i = 0; i < kNumKinds; ++i) {
    py::tuple bases = py::make_tuple(py::handle(base_error), py::handle(classes[i].builtin));
    std::string qualified = std::string("lumen.") + classes[i].name;
    classes[i].type = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
    if (classes[i].type == nullptr) throw py::error_already_set();
    PyObject_SetAttrString(classes[i].type, "kind", py::str(classes[i].name).ptr());
    m.attr(classes[i].name) = py::handle(classes[i].type);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      for (int i = 0; i < kNumKinds; ++i)
        if (kind_classes()[i].kind == e.kind()) {
          PyErr_SetString(kind_classes()[i].type, e.what());
          return;
        }
      PyErr_SetString(base_error, e.what());
    }
  });
}

}  // namespace lumen::python
