// Converters for ops whose newer versions (opsets 19-28) changed form while their meaning maps onto
// the lumen op of the older version: DFT's axis became an input (20), ReduceMax/ReduceMin take bool
// (20), QLinearMatMul takes 16-bit float scales (21), Range gained stash_type (27), SpaceToDepth a
// CRD mode (28).
#include <string>

#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

// DFT from opset 20: the axis is an optional input (default -2, the last signal axis) instead of
// an attribute (default 1). Lumen's DFT keeps it as an attribute, so the input must be a constant
// (an input value that OnnxSession fixes per run counts).
std::vector<Value*> convert_dft_v20(ImportContext& ctx) {
  Value* x = ctx.input(0);
  if (x == nullptr) ctx.unsupported("input 0 is missing");
  int64_t axis = -2;
  if (Value* a = ctx.input(2)) {
    if (!a->data || a->user_weight)
      throw ShapeError(ctx.where() + ": the axis input must be known when the graph is built");
    if (a->data->numel() != 1) throw InvalidModel(ctx.where() + ": axis must be a scalar");
    axis = static_cast<int64_t>(a->data->item_as_double());
  }
  const int64_t rank = x->type.shape.rank();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1)
    throw InvalidModel(ctx.where() + ": axis " + std::to_string(axis) +
                       " is out of range for an input of rank " + std::to_string(rank) +
                       " (the last dimension holds the real and imaginary parts)");
  Attributes attrs = ctx.attrs();
  attrs["axis"] = axis;
  std::vector<Value*> inputs = {x};
  if (Value* length = ctx.input(1)) inputs.push_back(length);
  return {ctx.emit1("DFT", inputs, attrs)};
}

// Range from opset 27: float16 and bfloat16 bounds, whose elements are computed in stash_type
// (float32 by default, the only one supported): the bounds are cast to float32, the float32
// Range computes start + i * delta, and the result is cast back once.
std::vector<Value*> convert_range_v27(ImportContext& ctx) {
  if (auto stash = ctx.take("stash_type"); stash && stash->as_int() != 1)
    ctx.unsupported("stash_type " + std::to_string(stash->as_int()) +
                    " (only 1, float32, is supported)");
  std::vector<Value*> inputs = ctx.inputs();
  const DType t = inputs.empty() || inputs[0] == nullptr ? DType::kFloat32 : inputs[0]->type.dtype;
  if (t != DType::kFloat16 && t != DType::kBFloat16)
    return {ctx.emit1("Range", inputs, ctx.attrs())};
  for (Value*& v : inputs)
    if (v != nullptr) v = ctx.emit1("Cast", {v}, {{"to", int64_t{1}}});  // onnx FLOAT
  Value* range = ctx.emit1("Range", inputs, ctx.attrs());
  return {ctx.emit1("Cast", {range}, {{"to", t == DType::kFloat16 ? int64_t{10} : int64_t{16}}})};
}

// ReduceMax and ReduceMin from opset 20 take bool (False < True): reduced as int32 between Casts.
std::vector<Value*> convert_reduce_extremum_v20(ImportContext& ctx) {
  Value* x = ctx.input(0);
  const std::string op = ctx.proto().op_type();
  if (x == nullptr || x->type.dtype != DType::kBool)
    return ctx.emit(op, ctx.inputs(), ctx.attrs(), ctx.num_outputs());
  std::vector<Value*> inputs = ctx.inputs();
  inputs[0] = ctx.emit1("Cast", {x}, {{"to", int64_t{6}}});  // onnx INT32
  Value* reduced = ctx.emit1(op, inputs, ctx.attrs());
  // reduced > 0: an empty ReduceMax gives int32's lowest (false), an empty ReduceMin its highest
  // (true), as bool's own minimum and maximum.
  Value* zero = ctx.graph().add_constant(ctx.graph().unique_name(ctx.name() + "/zero"),
                                         Tensor::scalar<int32_t>(0));
  return {ctx.emit1("Greater", {reduced, zero})};
}

// SpaceToDepth from opset 28 has a mode: DCR (the default, lumen's SpaceToDepth) or CRD, where
// the output channel is c * b * b + by * b + bx: a Reshape to [N, C, H/b, b, W/b, b], a Transpose
// to [N, C, b, b, H/b, W/b] and a Reshape back.
std::vector<Value*> convert_space_to_depth_v28(ImportContext& ctx) {
  const std::string mode = ctx.take("mode").value_or(Attribute(std::string("DCR"))).as_string();
  if (mode == "DCR") return {ctx.emit1("SpaceToDepth", ctx.inputs(), ctx.attrs())};
  if (mode != "CRD") ctx.unsupported("mode must be DCR or CRD, not '" + mode + "'");
  Value* x = ctx.input(0);
  if (x == nullptr) ctx.unsupported("input 0 is missing");
  const Shape& s = x->type.shape;
  const int64_t b = ctx.attrs().count("blocksize") ? ctx.attrs().at("blocksize").as_int() : 0;
  if (s.rank() != 4 || b <= 0 || s[2] % b != 0 || s[3] % b != 0)
    throw ShapeError(ctx.where() + ": the input must be [N, C, H, W] with H and W divisible by " +
                     "blocksize, got " + s.to_string() + " and blocksize " + std::to_string(b));
  Value* blocks = ctx.emit1("Reshape", {x, ctx.constant_ints({s[0], s[1], s[2] / b, b, s[3] / b, b})});
  Value* moved = ctx.emit1("Transpose", {blocks}, {{"perm", std::vector<int64_t>{0, 1, 3, 5, 2, 4}}});
  return {ctx.emit1("Reshape", {moved, ctx.constant_ints({s[0], s[1] * b * b, s[2] / b, s[3] / b})})};
}

// QLinearMatMul from opset 21 takes float16 and bfloat16 scales (inputs 1, 4 and 6); lumen's
// kernel reads float32 scales, so those are cast (the scales only scale the integer product).
std::vector<Value*> convert_qlinear_matmul_v21(ImportContext& ctx) {
  std::vector<Value*> inputs = ctx.inputs();
  for (size_t i : {1, 4, 6}) {
    if (i >= inputs.size() || inputs[i] == nullptr) continue;
    const DType t = inputs[i]->type.dtype;
    if (t == DType::kFloat16 || t == DType::kBFloat16)
      inputs[i] = ctx.emit1("Cast", {inputs[i]}, {{"to", int64_t{1}}});  // onnx FLOAT
  }
  return {ctx.emit1("QLinearMatMul", inputs, ctx.attrs())};
}

}  // namespace

LUMEN_ONNX_CONVERTER(QLinearMatMulV21, "QLinearMatMul", 21, 1000, &convert_qlinear_matmul_v21);
LUMEN_ONNX_CONVERTER(SpaceToDepthV28, "SpaceToDepth", 28, 1000, &convert_space_to_depth_v28);
LUMEN_ONNX_CONVERTER(ReduceMaxV20, "ReduceMax", 20, 1000, &convert_reduce_extremum_v20);
LUMEN_ONNX_CONVERTER(ReduceMinV20, "ReduceMin", 20, 1000, &convert_reduce_extremum_v20);
LUMEN_ONNX_CONVERTER(DftV20, "DFT", 20, 1000, &convert_dft_v20);
LUMEN_ONNX_CONVERTER(RangeV27, "Range", 27, 1000, &convert_range_v27);

}  // namespace lumen::onnx_import
