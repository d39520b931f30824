// Schemas of the ops whose output shape depends on their input data: NonZero, Compress, Unique and
// NonMaxSuppression (ONNX opset 11-17). Such a dimension is kDynamicDim; when the inputs are known
// at build time the graph folds the node and the dimension becomes concrete.
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_non_zero(InferContext& ctx) {
  ctx.set_output(0, DType::kInt64, Shape{ctx.input_shape(0).rank(), kDynamicDim});
}

void infer_compress(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const TensorType& cond = ctx.input(1);
  if (cond.dtype != DType::kBool) ctx.fail_model("condition must be bool");
  if (cond.shape.rank() != 1)
    ctx.fail_shape("condition must be 1-D, got " + cond.shape.to_string());
  if (!ctx.has_attr("axis")) {
    if (cond.shape[0] > x.numel())
      ctx.fail_shape("condition has " + std::to_string(cond.shape[0]) + " entries for " +
                     std::to_string(x.numel()) + " elements");
    ctx.set_output(0, ctx.input_dtype(0), Shape{kDynamicDim});
    return;
  }
  int64_t axis = ctx.attr_int("axis");
  if (axis < -x.rank() || axis >= x.rank())
    ctx.fail_model("axis " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(x.rank()));
  int a = static_cast<int>(axis < 0 ? axis + x.rank() : axis);
  if (cond.shape[0] > x[a])
    ctx.fail_shape("condition has " + std::to_string(cond.shape[0]) + " entries for axis " +
                   std::to_string(a) + " of size " + std::to_string(x[a]));
  Shape out = x;
  out[a] = kDynamicDim;
  ctx.set_output(0, ctx.input_dtype(0), out);
}

void infer_unique(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kFloat16 || dt == DType::kBFloat16)
    ctx.fail_unsupported(std::string("input dtype ") + dtype_name(dt) + " is not supported");
  Shape y{kDynamicDim};
  int64_t inverse = x.numel();
  if (ctx.has_attr("axis")) {
    int64_t axis = ctx.attr_int("axis");
    if (axis < -x.rank() || axis >= x.rank())
      ctx.fail_model("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(x.rank()));
    int a = static_cast<int>(axis < 0 ? axis + x.rank() : axis);
    y = x;
    y[a] = kDynamicDim;
    inverse = x[a];
  }
  ctx.set_output(0, dt, y);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kInt64, Shape{kDynamicDim});
  if (ctx.num_outputs() > 2) ctx.set_output(2, DType::kInt64, Shape{inverse});
  if (ctx.num_outputs() > 3) ctx.set_output(3, DType::kInt64, Shape{kDynamicDim});
}

void infer_non_max_suppression(InferContext& ctx) {
  const TensorType& boxes = ctx.input(0);
  const TensorType& scores = ctx.input(1);
  if (boxes.dtype != DType::kFloat32 || scores.dtype != DType::kFloat32)
    ctx.fail_unsupported("boxes and scores must be float32");
  if (boxes.shape.rank() != 3 || boxes.shape[2] != 4)
    ctx.fail_shape("boxes must be [batch, boxes, 4], got " + boxes.shape.to_string());
  if (scores.shape.rank() != 3 || scores.shape[0] != boxes.shape[0] ||
      scores.shape[2] != boxes.shape[1])
    ctx.fail_shape("scores must be [batch, classes, boxes] for boxes " + boxes.shape.to_string() +
                   ", got " + scores.shape.to_string());
  const char* names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (int k = 2; k < 5; ++k) {
    if (!ctx.has_input(k)) continue;
    if (ctx.input_shape(k).numel() != 1)
      ctx.fail_shape(std::string(names[k - 2]) + " must hold one value, got " +
                     ctx.input_shape(k).to_string());
    DType want = k == 2 ? DType::kInt64 : DType::kFloat32;
    if (ctx.input_dtype(k) != want)
      ctx.fail_model(std::string(names[k - 2]) + " must be " + dtype_name(want));
  }
  int64_t center = ctx.attr_int("center_point_box", 0);
  if (center != 0 && center != 1)
    ctx.fail_model("center_point_box must be 0 or 1, got " + std::to_string(center));
  ctx.set_output(0, DType::kInt64, Shape{kDynamicDim, 3});
}

}  // namespace

LUMEN_REGISTER_SCHEMA(NonZero, {.attrs = {}, .infer = &infer_non_zero, .dynamic_outputs = true});
LUMEN_REGISTER_SCHEMA(Compress, {.min_inputs = 2,
                                 .max_inputs = 2,
                                 .attrs = {{"axis", AttrType::kInt}},
                                 .infer = &infer_compress,
                                 .dynamic_outputs = true});
LUMEN_REGISTER_SCHEMA(Unique, {.max_outputs = 4,
                               .attrs = {{"axis", AttrType::kInt}, {"sorted", AttrType::kInt}},
                               .infer = &infer_unique,
                               .dynamic_outputs = true});
LUMEN_REGISTER_SCHEMA(NonMaxSuppression, {.min_inputs = 2,
                                          .max_inputs = 5,
                                          .attrs = {{"center_point_box", AttrType::kInt}},
                                          .infer = &infer_non_max_suppression,
                                          .dynamic_outputs = true});

}  // namespace lumen
