// Schemas of Swish (opset 24: x * sigmoid(alpha * x)) and SwiGLU (opset 28: Swish_alpha(A) * B,
// A and B of one shape, no broadcasting).
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_swish(InferContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (!is_floating(t))
    ctx.fail_shape(std::string("X must be a floating-point tensor, not ") + dtype_name(t));
  ctx.set_output(0, t, ctx.input_shape(0));
}

void infer_swiglu(InferContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (!is_floating(t))
    ctx.fail_shape(std::string("A must be a floating-point tensor, not ") + dtype_name(t));
  if (ctx.input_dtype(1) != t)
    ctx.fail_shape(std::string("B is ") + dtype_name(ctx.input_dtype(1)) + ", A is " +
                   dtype_name(t));
  if (ctx.input_shape(0) != ctx.input_shape(1))
    ctx.fail_shape("A " + ctx.input_shape(0).to_string() + " and B " +
                   ctx.input_shape(1).to_string() +
                   " must have the same shape (SwiGLU does not broadcast)");
  ctx.set_output(0, t, ctx.input_shape(0));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(Swish, {.min_inputs = 1,
                              .max_inputs = 1,
                              .attrs = {{"alpha", AttrType::kFloat}},
                              .infer = &infer_swish});
LUMEN_REGISTER_SCHEMA(SwiGLU, {.min_inputs = 2,
                               .max_inputs = 2,
                               .attrs = {{"alpha", AttrType::kFloat}},
                               .infer = &infer_swiglu});

}  // namespace lumen
