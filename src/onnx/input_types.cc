#include "onnx/input_types.h"

#include "graph/onnx_dtype.h"

namespace lumen::onnx_import {

OnnxInputInfo declared_tensor(const std::string& name, const onnx::TypeProto_Tensor& tt,
                              const std::string& what) {
  auto dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype)
    throw UnsupportedOp(what + ": data type " + onnx_dtype_name(tt.elem_type()) +
                        " is not supported");
  OnnxInputInfo info{name, *dtype, {}, {}};
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) throw InvalidModel(what + ": negative dimension");
      info.dims.push_back(d.dim_value());
      info.symbols.emplace_back();
    } else {
      info.dims.push_back(-1);
      info.symbols.push_back(d.has_dim_param() ? d.dim_param() : "?");
    }
  }
  return info;
}

Shape input_shape(const std::string& what, const onnx::TypeProto_Tensor& tt,
                  const OnnxInputInfo& info, const Shape* given, int64_t default_dim) {
  if (given == nullptr) {
    std::vector<int64_t> dims = info.dims;
    for (int64_t& d : dims)
      if (d < 0) d = default_dim;
    return Shape(dims);
  }
  const Shape& shape = *given;
  bool ok = !tt.has_shape() || shape.rank() == static_cast<int>(info.dims.size());
  for (int i = 0; ok && i < shape.rank() && tt.has_shape(); ++i)
    ok = info.dims[i] < 0 || info.dims[i] == shape.dims()[i];
  if (!ok) {
    std::string declared = "[";
    for (size_t i = 0; i < info.dims.size(); ++i)
      declared +=
          (i ? ", " : "") + (info.dims[i] < 0 ? info.symbols[i] : std::to_string(info.dims[i]));
    throw ShapeError(what + ": shape " + shape.to_string() + " does not fit the declared " +
                     declared + "]");
  }
  return shape;
}

OnnxValueKind declared_list(const onnx::TypeProto& type, const std::string& what,
                            const onnx::TypeProto_Tensor** tensor) {
  OnnxValueKind kind = OnnxValueKind::kSequence;
  const onnx::TypeProto* elem = nullptr;
  if (type.has_sequence_type()) {
    elem = &type.sequence_type().elem_type();
  } else if (type.has_optional_type()) {
    elem = &type.optional_type().elem_type();
    kind = OnnxValueKind::kOptionalTensor;
    if (elem->has_sequence_type()) {
      elem = &elem->sequence_type().elem_type();
      kind = OnnxValueKind::kOptionalSequence;
    }
  }
  if (elem == nullptr || !elem->has_tensor_type())
    throw UnsupportedOp(what + ": lumen takes tensors, sequences of tensors and optional " +
                        "tensors or sequences (not maps, sparse tensors or nested sequences)");
  *tensor = &elem->tensor_type();
  return kind;
}

}  // namespace lumen::onnx_import
