// Schemas of InstanceNormalization, DepthToSpace, SpaceToDepth (opset 13) and Einsum (opset 12).
#include <string>

#include "graph/schema.h"
#include "graph/schemas/nn_extra_einsum.h"

namespace lumen {
namespace {

void require_float(const InferContext& ctx, int i, const char* what) {
  if (!is_floating(ctx.input_dtype(i)))
    ctx.fail_shape(std::string(what) + " must be a floating-point tensor, not " +
                   dtype_name(ctx.input_dtype(i)));
}

void infer_instance_norm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  require_float(ctx, 0, "input");
  if (x.rank() < 3) ctx.fail_shape("input must have rank 3 or more, got " + x.to_string());
  if (ctx.attr_float("epsilon", 1e-5f) < 0.0f) ctx.fail_model("epsilon must not be negative");
  static const char* const kNames[] = {"input", "scale", "B"};
  for (int i = 1; i < 3; ++i) {
    if (ctx.input_dtype(i) != ctx.input_dtype(0))
      ctx.fail_shape(std::string(kNames[i]) + " must be " + dtype_name(ctx.input_dtype(0)));
    const Shape& s = ctx.input_shape(i);
    if (s.rank() != 1 || s.dims()[0] != x.dims()[1])
      ctx.fail_shape(std::string(kNames[i]) + " must have shape [" + std::to_string(x.dims()[1]) +
                     "], got " + s.to_string());
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

int64_t read_blocksize(const InferContext& ctx) {
  int64_t b = ctx.attr_int("blocksize");
  if (b < 1) ctx.fail_model("blocksize must be positive, got " + std::to_string(b));
  return b;
}

void infer_depth_to_space(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int64_t b = read_blocksize(ctx);
  std::string mode = ctx.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") ctx.fail_model("mode must be DCR or CRD, got '" + mode + "'");
  if (x.rank() != 4) ctx.fail_shape("input must have rank 4, got " + x.to_string());
  if (x.dims()[1] % (b * b) != 0)
    ctx.fail_shape("channels " + std::to_string(x.dims()[1]) +
                   " are not divisible by blocksize^2 " + std::to_string(b * b));
  ctx.set_output(0, ctx.input_dtype(0),
                 Shape{x.dims()[0], x.dims()[1] / (b * b), x.dims()[2] * b, x.dims()[3] * b});
}

void infer_space_to_depth(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int64_t b = read_blocksize(ctx);
  if (x.rank() != 4) ctx.fail_shape("input must have rank 4, got " + x.to_string());
  if (x.dims()[2] % b != 0 || x.dims()[3] % b != 0)
    ctx.fail_shape("spatial dims of " + x.to_string() + " are not divisible by blocksize " +
                   std::to_string(b));
  ctx.set_output(0, ctx.input_dtype(0),
                 Shape{x.dims()[0], x.dims()[1] * b * b, x.dims()[2] / b, x.dims()[3] / b});
}

void infer_einsum(InferContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.input_dtype(i) != ctx.input_dtype(0))
      ctx.fail_shape("all einsum operands must have one dtype; input " + std::to_string(i) +
                     " is " + dtype_name(ctx.input_dtype(i)));
  }
  EinsumSpec spec = einsum_spec(ctx);
  ctx.set_output(0, ctx.input_dtype(0), spec.output_shape);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(InstanceNormalization, {.min_inputs = 3,
                                              .max_inputs = 3,
                                              .attrs = {{"epsilon", AttrType::kFloat}},
                                              .infer = &infer_instance_norm});
LUMEN_REGISTER_SCHEMA(DepthToSpace,
                      {.min_inputs = 1,
                       .max_inputs = 1,
                       .attrs = {{"blocksize", AttrType::kInt, true}, {"mode", AttrType::kString}},
                       .infer = &infer_depth_to_space});
LUMEN_REGISTER_SCHEMA(SpaceToDepth, {.min_inputs = 1,
                                     .max_inputs = 1,
                                     .attrs = {{"blocksize", AttrType::kInt, true}},
                                     .infer = &infer_space_to_depth});
LUMEN_REGISTER_SCHEMA(Einsum, {.min_inputs = 1,
                               .max_inputs = kVariadic,
                               .attrs = {{"equation", AttrType::kString, true}},
                               .infer = &infer_einsum});

}  // namespace lumen
