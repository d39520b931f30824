// Converters for ONNX ops that are not one lumen op by the same name at every opset: Constant,
// the pre-opset-13 Softmax family, Scatter, and the older attribute forms of Clip, Pad,
// Slice and Upsample/Resize.
#include <algorithm>

#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

std::vector<Value*> convert_constant(ImportContext& ctx) {
  Attributes& a = ctx.attrs();
  if (a.size() != 1) ctx.unsupported("Constant needs exactly one value attribute");
  const auto& [key, attr] = *a.begin();
  Tensor t;
  if (key == "value") {
    t = attr.as_tensor();
  } else if (key == "value_float") {
    t = Tensor::scalar<float>(attr.as_float());
  } else if (key == "value_floats") {
    const auto& v = attr.as_floats();
    t = Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v);
  } else if (key == "value_int") {
    t = Tensor::scalar<int64_t>(attr.as_int());
  } else if (key == "value_ints") {
    const auto& v = attr.as_ints();
    t = Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
  } else {
    ctx.unsupported("Constant attribute '" + key + "' is not supported");
  }
  return {ctx.graph().add_constant(ctx.graph().unique_name(ctx.name() + "/value"), t)};
}

// Before opset 13, Softmax flattened its input to 2-D at `axis` (default 1) and normalised rows.
std::vector<Value*> convert_softmax_v1(ImportContext& ctx) {
  Value* x = ctx.input(0);
  if (x == nullptr) ctx.unsupported("input 0 is missing");
  int rank = x->type.shape.rank();
  int64_t axis = ctx.take("axis").value_or(Attribute(1)).as_int();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) ctx.unsupported("axis out of range");
  std::string op = ctx.proto().op_type();
  if (axis == rank - 1 || rank <= 1) return {ctx.emit1(op, {x}, {{"axis", -1}})};
  Value* flat = ctx.emit1("Flatten", {x}, {{"axis", axis}});
  Value* y = ctx.emit1(op, {flat}, {{"axis", 1}});
  return {ctx.emit1("Reshape", {y, ctx.constant_ints(x->type.shape.dims())})};
}

// Clip before opset 11: min and max are attributes.
std::vector<Value*> convert_clip_v6(ImportContext& ctx) {
  float lo = ctx.take("min").value_or(Attribute(-3.402823466e38f)).as_float();
  float hi = ctx.take("max").value_or(Attribute(3.402823466e38f)).as_float();
  return {ctx.emit1("Clip", {ctx.input(0), ctx.constant_scalar(lo), ctx.constant_scalar(hi)})};
}

// Pad before opset 11: pads and value are attributes.
std::vector<Value*> convert_pad_v2(ImportContext& ctx) {
  auto pads = ctx.take("pads");
  if (!pads) ctx.unsupported("Pad needs pads");
  float value = ctx.take("value").value_or(Attribute(0.0f)).as_float();
  Attributes rest = ctx.attrs();
  return {ctx.emit1(
      "Pad", {ctx.input(0), ctx.constant_ints(pads->as_ints()), ctx.constant_scalar(value)}, rest)};
}

// Slice before opset 10: starts, ends and axes are attributes.
std::vector<Value*> convert_slice_v1(ImportContext& ctx) {
  auto starts = ctx.take("starts");
  auto ends = ctx.take("ends");
  if (!starts || !ends) ctx.unsupported("Slice needs starts and ends");
  std::vector<Value*> ins = {ctx.input(0), ctx.constant_ints(starts->as_ints()),
                             ctx.constant_ints(ends->as_ints())};
  if (auto axes = ctx.take("axes")) ins.push_back(ctx.constant_ints(axes->as_ints()));
  return {ctx.emit1("Slice", ins)};
}

// Upsample (opsets 7-9) and Resize at opset 10: scales only, asymmetric coordinates, and for
// nearest the floor of the source coordinate (what ONNX Runtime does for these versions).
std::vector<Value*> convert_upsample(ImportContext& ctx) {
  std::string mode = ctx.take("mode").value_or(Attribute("nearest")).as_string();
  Value* scales = ctx.input(1);
  if (auto attr = ctx.take("scales")) {
    const auto& v = attr->as_floats();
    scales =
        ctx.graph().add_constant(ctx.graph().unique_name(ctx.name() + "/scales"),
                                 Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v));
  }
  if (scales == nullptr) ctx.unsupported("no scales");
  if (mode == "bilinear") mode = "linear";
  Attributes attrs = {{"mode", mode}, {"coordinate_transformation_mode", "asymmetric"}};
  if (mode == "nearest") attrs["nearest_mode"] = "floor";
  return {ctx.emit1("Resize", {ctx.input(0), nullptr, scales}, attrs)};
}

// Scatter (opsets 9-10) is ScatterElements under its old name.
std::vector<Value*> convert_scatter(ImportContext& ctx) {
  return {ctx.emit1("ScatterElements", ctx.inputs(), ctx.attrs())};
}

}  // namespace

LUMEN_ONNX_CONVERTER(Scatter, "Scatter", 1, 10, &convert_scatter);
LUMEN_ONNX_CONVERTER(Constant, "Constant", 1, 1000, &convert_constant);
LUMEN_ONNX_CONVERTER(SoftmaxV1, "Softmax", 1, 12, &convert_softmax_v1);
LUMEN_ONNX_CONVERTER(LogSoftmaxV1, "LogSoftmax", 1, 12, &convert_softmax_v1);
LUMEN_ONNX_CONVERTER(ClipV6, "Clip", 1, 10, &convert_clip_v6);
LUMEN_ONNX_CONVERTER(PadV2, "Pad", 1, 10, &convert_pad_v2);
LUMEN_ONNX_CONVERTER(SliceV1, "Slice", 1, 9, &convert_slice_v1);
LUMEN_ONNX_CONVERTER(Upsample, "Upsample", 1, 9, &convert_upsample);
LUMEN_ONNX_CONVERTER(ResizeV10, "Resize", 10, 10, &convert_upsample);

}  // namespace lumen::onnx_import
