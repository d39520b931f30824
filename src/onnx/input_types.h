// How a graph declares its inputs: a tensor type's dtype and dims, the shape a load gives it, and
// what a sequence or optional declaration holds.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "lumen/onnx.h"

namespace lumen::onnx_import {

// A tensor type as input `name` declares it: dtype, dims (-1 where symbolic) and their symbols.
// `what` names the input in errors (UnsupportedOp for a dtype lumen lacks, InvalidModel for a
// negative dim).
OnnxInputInfo declared_tensor(const std::string& name, const onnx::TypeProto_Tensor& tt,
                              const std::string& what);

// The shape a tensor input (or a sequence's element) gets: `given` when it fits the declaration
// (ShapeError otherwise), else the declared dims with symbolic ones at `default_dim`.
Shape input_shape(const std::string& what, const onnx::TypeProto_Tensor& tt,
                  const OnnxInputInfo& info, const Shape* given, int64_t default_dim);

// The kind of a sequence or optional type and the tensor type it holds (set in `tensor`).
// UnsupportedOp for maps, sparse tensors and nested sequences.
OnnxValueKind declared_list(const onnx::TypeProto& type, const std::string& what,
                            const onnx::TypeProto_Tensor** tensor);

}  // namespace lumen::onnx_import
