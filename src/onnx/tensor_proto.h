// onnx.TensorProto -> lumen::Tensor, with every length checked against the shape.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "lumen/tensor.h"

namespace lumen::onnx_import {

// Converts a TensorProto (inline, raw or external data). ONNX's narrow types arrive unpacked, one
// byte per element (4- and 2-bit values packed in the file; int4 and int2 sign-extended). `base_dir` is the model's folder (external
// data must stay inside it); `what` names the tensor in errors. Throws InvalidModel, UnsupportedOp
// (string, complex and other dtypes lumen lacks), IoError (external data).
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir,
                         const std::string& what);

// The same, but a large raw buffer is moved out of `proto` (left without raw data) into the tensor
// instead of being copied: for the importer, which owns the model it parsed.
Tensor take_tensor_from_proto(onnx::TensorProto& proto, const std::string& base_dir,
                              const std::string& what);

// Writes a host tensor as a TensorProto (dims, data type, raw data; 4- and 2-bit types packed two
// or four to a byte, the first element in the lowest bits). Throws InvalidArgument for a device
// tensor.
void tensor_to_proto(const Tensor& tensor, onnx::TensorProto* proto);

class ModelFile;
// Main-graph initializer `index` whose raw bytes `file` left out of `proto` (ModelFile::has_raw):
// checked like tensor_from_proto, then read straight from the file into the tensor.
Tensor tensor_from_file(const onnx::TensorProto& proto, const ModelFile& file, int index,
                        const std::string& what);

// Maps the part [offset, offset + length) of a file under `base_dir` named by the relative
// `location` into memory; throws IoError for an absolute location, one that leaves base_dir (by
// "..", or a symbolic link), or a range past the end of the file.
std::shared_ptr<Buffer> map_external_data(const std::string& base_dir, const std::string& location,
                                          int64_t offset, int64_t length, const std::string& what);

}  // namespace lumen::onnx_import
