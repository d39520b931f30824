// OnnxValue (tensors, sequences and optionals at OnnxSession's edge) and reading ONNX's serialized
// SequenceProto and OptionalProto test data.
#include <onnx/onnx-data_pb.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lumen/onnx.h"
#include "onnx/tensor_proto.h"

namespace lumen {

const char* onnx_value_kind_name(OnnxValueKind kind) {
  switch (kind) {
    case OnnxValueKind::kTensor:
      return "tensor";
    case OnnxValueKind::kSequence:
      return "sequence";
    case OnnxValueKind::kOptionalTensor:
      return "optional tensor";
    case OnnxValueKind::kOptionalSequence:
      return "optional sequence";
  }
  return "value";
}

std::string onnx_element_name(const std::string& name, size_t index) {
  return name + "[" + std::to_string(index) + "]";
}

OnnxValue OnnxValue::tensor(Tensor t) {
  return {OnnxValueKind::kTensor, true, {std::move(t)}};
}

OnnxValue OnnxValue::sequence(std::vector<Tensor> elements) {
  return {OnnxValueKind::kSequence, true, std::move(elements)};
}

OnnxValue OnnxValue::optional_tensor(Tensor t) {
  return {OnnxValueKind::kOptionalTensor, true, {std::move(t)}};
}

OnnxValue OnnxValue::optional_sequence(std::vector<Tensor> elements) {
  return {OnnxValueKind::kOptionalSequence, true, std::move(elements)};
}

OnnxValue OnnxValue::empty_optional(OnnxValueKind kind) {
  if (kind != OnnxValueKind::kOptionalTensor && kind != OnnxValueKind::kOptionalSequence)
    throw InvalidArgument(std::string("OnnxValue::empty_optional: a ") +
                          onnx_value_kind_name(kind) + " is not an optional");
  return {kind, false, {}};
}

namespace {

std::vector<Tensor> sequence_tensors(const onnx::SequenceProto& seq, const std::string& dir,
                                     const std::string& what) {
  if (seq.elem_type() != onnx::SequenceProto::TENSOR &&
      seq.elem_type() != onnx::SequenceProto::UNDEFINED)
    throw UnsupportedOp(what + ": lumen reads sequences of tensors only");
  std::vector<Tensor> out;
  for (int k = 0; k < seq.tensor_values_size(); ++k)
    out.push_back(onnx_import::tensor_from_proto(seq.tensor_values(k), dir,
                                                 what + " element " + std::to_string(k)));
  return out;
}

}  // namespace

OnnxValue load_onnx_value(const std::string& path, OnnxValueKind kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = std::move(ss).str();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  switch (kind) {
    case OnnxValueKind::kTensor: {
      onnx::TensorProto proto;
      if (!proto.ParseFromString(bytes)) throw InvalidModel(path + ": not a valid TensorProto");
      return OnnxValue::tensor(onnx_import::tensor_from_proto(proto, dir, path));
    }
    case OnnxValueKind::kSequence: {
      onnx::SequenceProto proto;
      if (!proto.ParseFromString(bytes)) throw InvalidModel(path + ": not a valid SequenceProto");
      return OnnxValue::sequence(sequence_tensors(proto, dir, path));
    }
    case OnnxValueKind::kOptionalTensor:
    case OnnxValueKind::kOptionalSequence: {
      onnx::OptionalProto proto;
      if (!proto.ParseFromString(bytes)) throw InvalidModel(path + ": not a valid OptionalProto");
      if (proto.elem_type() == onnx::OptionalProto::UNDEFINED)
        return OnnxValue::empty_optional(kind);
      if (kind == OnnxValueKind::kOptionalTensor) {
        if (proto.elem_type() != onnx::OptionalProto::TENSOR)
          throw InvalidModel(path + ": the optional does not hold a tensor");
        return OnnxValue::optional_tensor(
            onnx_import::tensor_from_proto(proto.tensor_value(), dir, path));
      }
      if (proto.elem_type() != onnx::OptionalProto::SEQUENCE)
        throw InvalidModel(path + ": the optional does not hold a sequence");
      return OnnxValue::optional_sequence(sequence_tensors(proto.sequence_value(), dir, path));
    }
  }
  throw InvalidArgument("load_onnx_value: unknown kind");
}

}  // namespace lumen
