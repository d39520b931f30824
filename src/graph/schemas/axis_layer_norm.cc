// Schema of AxisLayerNorm, which the optimizer's fold-layout-transposes pass makes from a
// LayerNormalization over the last axis of a Transpose that moved one axis last (ConvNeXt's
// channels-last LayerNorm between (N, C, H, W) convolutions):
//   Y = (X - mean) / sqrt(var + epsilon) * Scale + B, mean and var over axis `axis` of X alone
//   (C = X.dims[axis] elements each; Scale and B hold C values)
//   axis_last = 1: Y has X's dims with `axis` moved last, the others in order; 0: Y has X's shape.
// float32 or float16 data; statistics in float32.
#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_axis_layer_norm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (ctx.input_dtype(0) != DType::kFloat32 && ctx.input_dtype(0) != DType::kFloat16)
    ctx.fail_shape(std::string("X must be float32 or float16, not ") +
                   dtype_name(ctx.input_dtype(0)));
  int axis = 0;
  try {
    axis = normalize_axis(ctx.attr_int("axis"), x.rank());
  } catch (const ShapeError& e) {
    ctx.fail_shape(e.what());
  }
  if (ctx.attr_float("epsilon", 1e-5f) < 0.0f) ctx.fail_model("epsilon must not be negative");
  const int64_t channels = x.dims()[axis];
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const char* what = i == 1 ? "Scale" : "B";
    if (ctx.input_dtype(i) != ctx.input_dtype(0))
      ctx.fail_shape(std::string(what) + " must be " + dtype_name(ctx.input_dtype(0)) + ", not " +
                     dtype_name(ctx.input_dtype(i)));
    if (ctx.input_shape(i).numel() != channels)
      ctx.fail_shape(std::string(what) + " shape " + ctx.input_shape(i).to_string() +
                     " must hold the " + std::to_string(channels) + " elements of axis " +
                     std::to_string(axis) + " of X " + x.to_string());
  }
  Shape y = x;
  if (ctx.attr_int("axis_last", 0) != 0) {
    std::vector<int64_t>& d = y.dims();
    d.erase(d.begin() + axis);
    d.push_back(channels);
  }
  ctx.set_output(0, ctx.input_dtype(0), y);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(AxisLayerNorm, {.min_inputs = 2,
                                      .max_inputs = 3,
                                      .attrs = {{"axis", AttrType::kInt, true},
                                                {"epsilon", AttrType::kFloat},
                                                {"axis_last", AttrType::kInt}},
                                      .infer = &infer_axis_layer_norm});

}  // namespace lumen
