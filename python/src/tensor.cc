// lumen.Tensor and lumen.dtype: NumPy views without copies, DLPack both ways, device moves.
#include <algorithm>
#include <cstring>
#include <memory>

#include "bindings.h"
#include "dlpack.h"

namespace lumen::python {
namespace {

std::vector<int64_t> dims_of(py::handle shape) {
  std::vector<int64_t> dims;
  for (py::handle d : shape) dims.push_back(d.cast<int64_t>());
  return dims;
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple out(shape.rank());
  for (int i = 0; i < shape.rank(); ++i) out[i] = py::int_(shape.dims()[i]);
  return out;
}

void require_host(const Tensor& t, const char* what) {
  if (t.device().type != DeviceType::kCPU)
    throw InvalidArgument(std::string(what) + ": the tensor is on " + t.device().to_string() +
                          "; call .cpu() first");
}

// A NumPy array over the tensor's memory; the array's base keeps the tensor's buffer alive.
py::array numpy_view(const Tensor& t) {
  require_host(t, "numpy()");
  py::dtype dtype = to_numpy_dtype(t.dtype());
  std::vector<py::ssize_t> shape(t.shape().dims().begin(), t.shape().dims().end());
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.shape().strides())
    strides.push_back(static_cast<py::ssize_t>(s * dtype_size(t.dtype())));
  py::capsule owner(new Tensor(t), [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dtype, shape, strides, t.raw_data(), owner);
}

// What a DLPack capsule made by Lumen owns: the tensor (so its memory lives) and the shape and
// strides arrays the DLTensor points at.
struct DLPackOwner {
  Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
};

// The narrow ONNX types (float8, float4, 4- and 2-bit integers), which Lumen stores one per byte
// and neither DLPack nor NumPy can describe.
bool is_narrow(DType dtype) {
  return is_narrow_float(dtype) || dtype == DType::kInt4 || dtype == DType::kUInt4 ||
         dtype == DType::kInt2 || dtype == DType::kUInt2;
}

DLDataType dl_dtype(DType dtype) {
  if (is_narrow(dtype))
    throw InvalidArgument(std::string("DLPack: ") + dtype_name(dtype) +
                          " has no DLPack type; cast the tensor to float32 (or int8) first");
  uint8_t bits = static_cast<uint8_t>(dtype_size(dtype) * 8);
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kFloat64:
      return {kDLFloat, bits, 1};
    case DType::kBFloat16:
      return {kDLBfloat, bits, 1};
    case DType::kBool:
      return {kDLBool, bits, 1};
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return {kDLUInt, bits, 1};
    default:
      return {kDLInt, bits, 1};
  }
}

DType from_dl_dtype(DLDataType t) {
  if (t.lanes != 1)
    throw InvalidArgument("from_dlpack: vector dtypes (lanes " + std::to_string(t.lanes) +
                          ") are not supported");
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 16) return DType::kFloat16;
      if (t.bits == 32) return DType::kFloat32;
      if (t.bits == 64) return DType::kFloat64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::kBFloat16;
      break;
    case kDLBool:
      if (t.bits == 8) return DType::kBool;
      break;
    case kDLInt:
      if (t.bits == 8) return DType::kInt8;
      if (t.bits == 16) return DType::kInt16;
      if (t.bits == 32) return DType::kInt32;
      if (t.bits == 64) return DType::kInt64;
      break;
    case kDLUInt:
      if (t.bits == 8) return DType::kUInt8;
      if (t.bits == 16) return DType::kUInt16;
      if (t.bits == 32) return DType::kUInt32;
      if (t.bits == 64) return DType::kUInt64;
      break;
  }
  throw InvalidArgument("from_dlpack: DLPack dtype code " + std::to_string(t.code) + " with " +
                        std::to_string(t.bits) + " bits is not supported");
}

void dlpack_capsule_destructor(PyObject* capsule) {
  // A capsule nobody consumed still owns its tensor.
  if (!PyCapsule_IsValid(capsule, kDLTensorCapsule)) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kDLTensorCapsule));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

// DLPack's device code of a tensor's device; a Vulkan tensor has no DLPack form (its data pointer
// is a device address, not a buffer DLPack's consumers can open).
int32_t dl_device_type(Device device) {
  if (device.type == DeviceType::kVulkan)
    throw InvalidArgument("a tensor on " + device.to_string() +
                          " has no DLPack form; move it to \"cpu\" first");
  return device.type == DeviceType::kCUDA ? kDLCUDA : kDLCPU;
}

py::capsule to_dlpack(const Tensor& t) {
  auto owner = std::make_unique<DLPackOwner>();
  owner->tensor = t;
  owner->shape = t.shape().dims();
  owner->strides = t.shape().strides();
  DLTensor& dl = owner->managed.dl_tensor;
  dl.data = t.raw_data();
  Device device = t.device();
  dl.device = {dl_device_type(device), device.index};
  dl.ndim = t.rank();
  dl.dtype = dl_dtype(t.dtype());
  dl.shape = owner->shape.data();
  dl.strides = owner->strides.data();
  dl.byte_offset = 0;
  owner->managed.manager_ctx = owner.get();
  owner->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<DLPackOwner*>(self->manager_ctx);
  };
  PyObject* capsule = PyCapsule_New(&owner->managed, kDLTensorCapsule, &dlpack_capsule_destructor);
  if (capsule == nullptr) throw py::error_already_set();
  owner.release();
  return py::reinterpret_steal<py::capsule>(capsule);
}

Tensor from_dlpack_capsule(py::handle obj) {
  PyObject* capsule = obj.ptr();
  if (!PyCapsule_CheckExact(capsule) || !PyCapsule_IsValid(capsule, kDLTensorCapsule))
    throw InvalidArgument(
        "from_dlpack: expected an object with __dlpack__ or an unused 'dltensor' capsule");
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kDLTensorCapsule));
  const DLTensor& dl = managed->dl_tensor;
  DType dtype = from_dl_dtype(dl.dtype);
  Device device;
  if (dl.device.device_type == kDLCPU) {
    device = Device::cpu();
  } else if (dl.device.device_type == kDLCUDA) {
    device = Device::cuda(dl.device.device_id);
  } else {
    throw InvalidArgument("from_dlpack: DLPack device type " +
                          std::to_string(dl.device.device_type) + " is not supported");
  }
  Shape shape(std::vector<int64_t>(dl.shape, dl.shape + dl.ndim));
  if (dl.strides != nullptr) {
    std::vector<int64_t> dense = shape.strides();
    for (int i = 0; i < dl.ndim; ++i)
      if (shape.dims()[i] > 1 && dl.strides[i] != dense[i])
        throw InvalidArgument("from_dlpack: the tensor is not contiguous (strides of dim " +
                              std::to_string(i) + ": " + std::to_string(dl.strides[i]) +
                              ", dense: " + std::to_string(dense[i]) +
                              "); make it contiguous first");
  }
  size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  // From here on the tensor owns the producer's memory: the capsule is marked used.
  PyCapsule_SetName(capsule, kUsedDLTensorCapsule);
  auto buffer = Buffer::wrap(data, bytes, device, [managed] {
    if (managed->deleter != nullptr) managed->deleter(managed);
  });
  return Tensor(buffer, 0, shape, dtype);
}

std::tuple<int, int> dlpack_device(const Tensor& t) {
  Device device = t.device();
  return {dl_device_type(device), device.index};
}

}  // namespace

Runtime& runtime() {
  // Never destroyed: cached executables may be used by tensors' owners until the process exits.
  static Runtime* rt = new Runtime();
  return *rt;
}

DType to_dtype(py::handle spec) {
  if (py::isinstance<DType>(spec)) return spec.cast<DType>();
  py::dtype np_dtype;
  try {
    np_dtype = py::dtype::from_args(py::reinterpret_borrow<py::object>(spec));
  } catch (const py::error_already_set&) {
    throw InvalidArgument("unknown dtype " + py::repr(spec).cast<std::string>());
  }
  std::string name = np_dtype.attr("name").cast<std::string>();
  try {
    return dtype_from_name(name);
  } catch (const InvalidArgument&) {
    throw InvalidArgument("dtype '" + name + "' is not supported by lumen");
  }
}

py::dtype to_numpy_dtype(DType dtype) {
  if (dtype == DType::kBFloat16 || is_narrow(dtype))
    throw InvalidArgument(std::string(dtype_name(dtype)) +
                          " has no NumPy dtype; convert the tensor to float32 first");
  return py::dtype(dtype_name(dtype));
}

Device to_device(const std::string& spec) {
  if (spec == "cpu") return Device::cpu();
  for (const char* name : {"cuda", "vulkan"}) {
    const std::string n = name;
    if (spec.rfind(n, 0) != 0) continue;
    int index = 0;
    if (spec.size() > n.size()) {
      if (spec[n.size()] != ':' || spec.size() == n.size() + 1 ||
          spec.find_first_not_of("0123456789", n.size() + 1) != std::string::npos)
        break;
      index = std::stoi(spec.substr(n.size() + 1));
    }
    std::vector<std::string> names = runtime().backends();
    if (std::find(names.begin(), names.end(), n) == names.end()) {
      std::string list;
      for (const std::string& b : names) list += (list.empty() ? "" : ", ") + b;
      throw DeviceError("device '" + spec + "' is not available: this build on this machine has " +
                        "the backends [" + list + "]");
    }
    return n == "cuda" ? Device::cuda(index) : Device::vulkan(index);
  }
  throw InvalidArgument("unknown device '" + spec +
                        "' (use \"cpu\", \"cuda\", \"cuda:N\", \"vulkan\" or \"vulkan:N\")");
}

Tensor tensor_from_numpy(py::array array) {
  DType dtype = to_dtype(array.dtype());
  Shape shape(std::vector<int64_t>(array.shape(), array.shape() + array.ndim()));
  bool native = array.dtype().attr("isnative").cast<bool>();
  // Read-only arrays (np.frombuffer over bytes, read-only memory maps) are copied: t.numpy() is a
  // writable view, and writing through it must never touch memory its owner made read-only.
  int flags = array.flags();
  bool direct = native && array.size() > 0 && (flags & py::array::c_style) &&
                (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) &&
                (flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_);
  if (direct) {
    // Share the array's memory; the buffer holds a reference to the array until it goes.
    PyObject* owner = array.ptr();
    Py_INCREF(owner);
    auto buffer =
        Buffer::wrap(const_cast<void*>(array.data()), array.nbytes(), Device::cpu(), [owner] {
          py::gil_scoped_acquire gil;
          Py_DECREF(owner);
        });
    return Tensor(buffer, 0, shape, dtype);
  }
  Tensor t = Tensor::empty(shape, dtype);
  if (t.nbytes() > 0) {
    py::object numpy = py::module_::import("numpy");
    py::object native_dtype = array.dtype().attr("newbyteorder")("=");
    py::array dense = numpy.attr("ascontiguousarray")(array, native_dtype);
    std::memcpy(t.raw_data(), dense.data(), t.nbytes());
  }
  return t;
}

void bind_tensor(py::module_& m) {
  py::enum_<DType> dtype(m, "dtype", "An element type: lumen.float32, lumen.int64, ...");
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                  DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kInt32, DType::kUInt32,
                  DType::kInt64, DType::kUInt64, DType::kBool})
    dtype.value(dtype_name(d), d);
  // Set, not def'd: def would add an overload behind py::enum_'s own __str__ and __repr__.
  dtype.attr("__str__") =
      py::cpp_function([](DType d) { return std::string(dtype_name(d)); }, py::is_method(dtype));
  dtype.attr("__repr__") = py::cpp_function(
      [](DType d) { return "lumen." + std::string(dtype_name(d)); }, py::is_method(dtype));
  dtype
      .def_property_readonly(
          "itemsize", [](DType d) { return dtype_size(d); }, "Bytes per element.")
      .def_property_readonly(
          "is_floating_point", [](DType d) { return is_floating(d); },
          "True for float16, bfloat16, float32 and float64.");

  py::class_<Tensor>(m, "Tensor",
                     "A dense, row-major tensor on one device. Copies share memory; clone() "
                     "copies. Create one with lumen.tensor, lumen.from_numpy, lumen.randn, ...")
      .def_property_readonly(
          "shape", [](const Tensor& t) { return shape_tuple(t.shape()); }, "The shape, a tuple.")
      .def_property_readonly(
          "dtype", [](const Tensor& t) { return t.dtype(); }, "The element type (lumen.dtype).")
      .def_property_readonly(
          "device", [](const Tensor& t) { return t.device().to_string(); },
          "Where the memory is: \"cpu\" or \"cuda:N\".")
      .def_property_readonly(
          "ndim", [](const Tensor& t) { return t.rank(); }, "The number of dimensions.")
      .def_property_readonly(
          "nbytes", [](const Tensor& t) { return t.nbytes(); }, "Bytes of data.")
      .def(
          "numel", [](const Tensor& t) { return t.numel(); }, "The number of elements.")
      .def(
          "dim", [](const Tensor& t) { return t.rank(); }, "The number of dimensions.")
      .def(
          "data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); },
          "The address of the first element.")
      .def("numpy", &numpy_view,
           "A NumPy array sharing this tensor's memory (no copy); host tensors only.")
      .def(
          "__array__",
          [](const Tensor& t, py::object dtype) -> py::object {
            py::array view = numpy_view(t);
            if (dtype.is_none()) return view;
            return view.attr("astype")(dtype);
          },
          py::arg("dtype") = py::none(), "NumPy's hook: np.asarray(t) is a view.")
      .def(
          "reshape",
          [](const Tensor& t, py::args shape) {
            if (shape.size() == 1 && !py::isinstance<py::int_>(shape[0]))
              return t.reshape(Shape(dims_of(shape[0])));
            return t.reshape(Shape(dims_of(shape)));
          },
          "A view with another shape and the same number of elements; one dimension may be -1.")
      .def("clone", &Tensor::clone, "A copy on the same device.")
      .def(
          "to",
          [](const Tensor& t, const std::string& device) {
            Device d = to_device(device);
            py::gil_scoped_release release;
            return t.to(d);
          },
          py::arg("device"),
          "The tensor on `device` (\"cpu\", \"cuda\", \"cuda:N\"); itself when already there. "
          "Raises lumen.DeviceError when the device is not available.")
      .def(
          "cpu",
          [](const Tensor& t) {
            py::gil_scoped_release release;
            return t.to(Device::cpu());
          },
          "The tensor in host memory (itself when it is there).")
      .def("_narrow",
           [](const Tensor& t, int64_t start, int64_t length) { return t.narrow(start, length); })
      .def(
          "__dlpack__", [](const Tensor& t, py::object stream) { return to_dlpack(t); },
          py::arg("stream") = py::none(),
          "A DLPack capsule sharing this tensor's memory (for torch.from_dlpack and others).")
      .def("__dlpack_device__", &dlpack_device, "(DLPack device type, device index).")
      .def("_to_string", [](const Tensor& t) { return t.to_string(); });

  m.def(
      "from_numpy",
      [](py::object array) {
        if (py::isinstance<py::array>(array))
          return tensor_from_numpy(py::reinterpret_borrow<py::array>(array));
        if (!py::isinstance(array, py::module_::import("numpy").attr("generic")))
          throw InvalidArgument("from_numpy: expected a NumPy array, got " +
                                py::repr(py::type::handle_of(array)).cast<std::string>());
        return tensor_from_numpy(py::module_::import("numpy").attr("asarray")(array));
      },
      py::arg("array"),
      "A host tensor sharing the array's memory when it is C-contiguous, aligned and writable "
      "(writes to "
      "one show in the other), a copy otherwise.");
  m.def("_from_dlpack_capsule", &from_dlpack_capsule, py::arg("capsule"));
  m.def(
      "_empty",
      [](py::object shape, py::object dtype, const std::string& device) {
        return Tensor::empty(Shape(dims_of(shape)), to_dtype(dtype), to_device(device));
      },
      py::arg("shape"), py::arg("dtype"), py::arg("device"));
  m.def("_to_dtype", &to_dtype, py::arg("spec"));
  m.def(
      "_numpy_dtype", [](py::object spec) { return to_numpy_dtype(to_dtype(spec)); },
      py::arg("spec"));
  m.def(
      "_device", [](const std::string& spec) { return to_device(spec).to_string(); },
      py::arg("spec"));
}

}  // namespace lumen::python
