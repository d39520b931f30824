// Schemas of the normalisation and softmax ops: BatchNormalization (inference form),
// LayerNormalization (opset 17), Softmax and LogSoftmax (opset 13).
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

void require_floating(const InferContext& ctx, int i, const char* what) {
  if (!is_floating(ctx.input_dtype(i)))
    ctx.fail_shape(std::string(what) + " must be a floating-point tensor, not " +
                   dtype_name(ctx.input_dtype(i)));
}

void infer_batch_norm(InferContext& ctx) {
  if (ctx.attr_int("training_mode", 0) != 0)
    ctx.fail_unsupported("training_mode=1 is not supported; lumen runs inference only");
  if (ctx.attr_int("spatial", 1) != 1)
    ctx.fail_unsupported("spatial=0 (per-element statistics) is not supported");
  if (ctx.num_outputs() > 1)
    ctx.fail_model("outputs running_mean and running_var exist only with training_mode=1");
  if (ctx.attr_float("epsilon", 1e-5f) < 0.0f) ctx.fail_model("epsilon must not be negative");
  const Shape& x = ctx.input_shape(0);
  require_floating(ctx, 0, "X");
  if (x.rank() < 2) ctx.fail_shape("X must have rank 2 or more, got " + x.to_string());
  static const char* const kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    require_floating(ctx, i, kNames[i]);
    const Shape& s = ctx.input_shape(i);
    if (s.rank() != 1 || s.dims()[0] != x.dims()[1])
      ctx.fail_shape(std::string(kNames[i]) + " must have shape [" + std::to_string(x.dims()[1]) +
                     "] (the channels of X " + x.to_string() + "), got " + s.to_string());
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

// Scale and B must broadcast one way onto X's normalised dims [axis, rank).
void check_norm_param(const InferContext& ctx, int i, const char* what, int axis) {
  const Shape& x = ctx.input_shape(0);
  const Shape& p = ctx.input_shape(i);
  if (ctx.input_dtype(i) != ctx.input_dtype(0))
    ctx.fail_shape(std::string(what) + " must be " + dtype_name(ctx.input_dtype(0)) + ", not " +
                   dtype_name(ctx.input_dtype(i)));
  bool ok = p.rank() <= x.rank();
  for (int k = 1; ok && k <= p.rank(); ++k) {
    int xd = x.rank() - k;
    int64_t pd = p.dims()[p.rank() - k];
    ok = xd >= axis ? (pd == x.dims()[xd] || pd == 1) : pd == 1;
  }
  if (!ok)
    ctx.fail_shape(std::string(what) + " shape " + p.to_string() +
                   " does not broadcast onto the normalised dims of X " + x.to_string() +
                   " from axis " + std::to_string(axis));
}

void infer_layer_norm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  require_floating(ctx, 0, "X");
  int axis = 0;
  try {
    axis = normalize_axis(ctx.attr_int("axis", -1), x.rank());
  } catch (const ShapeError& e) {
    ctx.fail_shape(e.what());
  }
  if (ctx.attr_int("stash_type", 1) != 1)
    ctx.fail_unsupported("stash_type must be 1 (float32 statistics)");
  if (ctx.attr_float("epsilon", 1e-5f) < 0.0f) ctx.fail_model("epsilon must not be negative");
  check_norm_param(ctx, 1, "Scale", axis);
  if (ctx.has_input(2)) check_norm_param(ctx, 2, "B", axis);
  ctx.set_output(0, ctx.input_dtype(0), x);
  Shape stats = x;
  for (int d = axis; d < x.rank(); ++d) stats.dims()[d] = 1;
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, DType::kFloat32, stats);
}

void infer_softmax(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  require_floating(ctx, 0, "input");
  if (x.rank() < 1) ctx.fail_shape("the input must have rank 1 or more");
  try {
    normalize_axis(ctx.attr_int("axis", -1), x.rank());
  } catch (const ShapeError& e) {
    ctx.fail_shape(e.what());
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(BatchNormalization, {.min_inputs = 5,
                                           .max_inputs = 5,
                                           .min_outputs = 1,
                                           .max_outputs = 3,
                                           .attrs = {{"epsilon", AttrType::kFloat},
                                                     {"momentum", AttrType::kFloat},
                                                     {"training_mode", AttrType::kInt},
                                                     {"spatial", AttrType::kInt}},
                                           .infer = &infer_batch_norm});
LUMEN_REGISTER_SCHEMA(LayerNormalization, {.min_inputs = 2,
                                           .max_inputs = 3,
                                           .min_outputs = 1,
                                           .max_outputs = 3,
                                           .attrs = {{"axis", AttrType::kInt},
                                                     {"epsilon", AttrType::kFloat},
                                                     {"stash_type", AttrType::kInt}},
                                           .infer = &infer_layer_norm});
LUMEN_REGISTER_SCHEMA(Softmax, {.min_inputs = 1,
                                .max_inputs = 1,
                                .attrs = {{"axis", AttrType::kInt}},
                                .infer = &infer_softmax});
LUMEN_REGISTER_SCHEMA(LogSoftmax, {.min_inputs = 1,
                                   .max_inputs = 1,
                                   .attrs = {{"axis", AttrType::kInt}},
                                   .infer = &infer_softmax});

}  // namespace lumen
