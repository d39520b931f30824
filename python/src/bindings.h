// What the binding files share: one bind_* function per area (errors, tensor, ops, model) and the
// conversions between Python objects and lumen types.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "lumen/lumen.h"

namespace lumen::python {

namespace py = pybind11;

// Registers the exception classes (lumen.Error and one subclass per ErrorKind) and the translator
// that turns a thrown lumen::Error into the class of its kind.
void bind_errors(py::module_& m);
// lumen.Tensor, lumen.dtype, NumPy and DLPack interop.
void bind_tensor(py::module_& m);
// Eager ops (lumen._op) and the Python operators of Tensor.
void bind_ops(py::module_& m);
// lumen._Session: an ONNX model (OnnxSession) for python/lumen/model.py.
void bind_model(py::module_& m);
// lumen._Generator / _Generation: token generation from an ONNX decoder (lumen/generate.h).
void bind_generate(py::module_& m);
// "fp32" | "fp32-strict" | "tf32" | "fp16" | "bf16" -> Precision (anything else: float32; model.py
// checks it).
Precision to_precision(const std::string& name);

// The runtime every eager op and session of this process compiles with.
Runtime& runtime();
// A dtype from lumen.dtype, a NumPy dtype or anything np.dtype() accepts ("float32", np.int64);
// throws InvalidArgument for a dtype lumen lacks.
DType to_dtype(py::handle spec);
// The NumPy dtype of a lumen dtype; throws InvalidArgument for bfloat16 (NumPy has none).
py::dtype to_numpy_dtype(DType dtype);
// Parses "cpu", "cuda" or "cuda:N". Throws DeviceError naming the available backends when the
// device's backend (Runtime::backends()) is not available in this build or on this machine.
Device to_device(const std::string& spec);
// A host tensor sharing the array's memory when it is C-contiguous, aligned and writable, a copy
// otherwise.
// The array stays alive as long as the tensor's buffer.
Tensor tensor_from_numpy(py::array array);
// An operand of an op: a lumen.Tensor as is, a NumPy array through tensor_from_numpy, and a Python
// number as a 0-d tensor of dtype `like` (float32 when a float meets an integer dtype).
Tensor to_operand(py::handle obj, DType like);

}  // namespace lumen::python
