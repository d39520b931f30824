// Schemas of the further element-wise ops: trigonometric and hyperbolic functions, rounding,
// Sign, IsNaN/IsInf, the activations Elu ... ThresholdedRelu and PRelu, Mod, Xor, LessOrEqual,
// GreaterOrEqual, variadic Sum/Mean, CastLike and Size. ONNX opset 13-18 forms.
#include <string>
#include <vector>

#include "graph/schema.h"
#include "graph/schemas/cast_attrs.h"
#include "graph/schemas/elementwise_infer.h"

namespace lumen {
namespace {

// Float input, bool output of the same shape.
void infer_float_predicate(InferContext& ctx) {
  require_input(ctx, 0, is_floating(ctx.input_dtype(0)), "a floating-point tensor");
  ctx.set_output(0, DType::kBool, ctx.input_shape(0));
}

void infer_is_inf(InferContext& ctx) {
  for (const char* name : {"detect_negative", "detect_positive"}) {
    int64_t v = ctx.attr_int(name, 1);
    if (v != 0 && v != 1)
      ctx.fail_model(std::string("attribute '") + name + "' must be 0 or 1, got " +
                     std::to_string(v));
  }
  infer_float_predicate(ctx);
}

void infer_celu(InferContext& ctx) {
  if (ctx.attr_float("alpha", 1.0f) == 0.0f) ctx.fail_model("attribute 'alpha' must not be 0");
  infer_float_unary(ctx);
}

// PRelu(X, slope): slope broadcasts to X's shape (unidirectionally); the output is X's shape.
void infer_prelu(InferContext& ctx) {
  require_input(ctx, 0, is_numeric(ctx.input_dtype(0)), "a numeric tensor");
  require_same_dtype(ctx, {0, 1});
  const Shape& x = ctx.input_shape(0);
  const Shape& slope = ctx.input_shape(1);
  if (broadcast_inputs(ctx, {0, 1}) != x)
    ctx.fail_shape("slope of shape " + slope.to_string() + " does not broadcast to X's shape " +
                   x.to_string());
  ctx.set_output(0, ctx.input_dtype(0), x);
}

// Mod(A, B, fmod): fmod 0 (integer modulo with the divisor's sign) or 1 (C fmod, the only form
// for floating-point inputs).
void infer_mod(InferContext& ctx) {
  int64_t fmod = ctx.attr_int("fmod", 0);
  if (fmod != 0 && fmod != 1)
    ctx.fail_model("attribute 'fmod' must be 0 or 1, got " + std::to_string(fmod));
  // Floats with fmod = 0 (floor division) were invalid before opset 28, which defines them; lumen
  // runs them at every opset.
  infer_arith(ctx);
}

// Mean: floating-point inputs of one dtype, broadcast together.
void infer_mean(InferContext& ctx) {
  require_input(ctx, 0, is_floating(ctx.input_dtype(0)), "a floating-point tensor");
  infer_arith(ctx);
}

// CastLike(input, target_type): input converted to target_type's dtype.
void infer_cast_like(InferContext& ctx) {
  check_cast_attrs(ctx);
  ctx.set_output(0, ctx.input_dtype(1), ctx.input_shape(0));
}

// Size: the element count as an int64 scalar, known when the graph is built.
void infer_size(InferContext& ctx) {
  ctx.set_output_value(0, Tensor::scalar<int64_t>(ctx.input_shape(0).numel()));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(Sin, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Cos, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Tan, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Asin, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Acos, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Atan, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Sinh, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Cosh, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Asinh, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Acosh, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Atanh, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Floor, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Ceil, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Round, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Sign, {.attrs = {}, .infer = &infer_numeric_unary});
LUMEN_REGISTER_SCHEMA(IsNaN, {.attrs = {}, .infer = &infer_float_predicate});
LUMEN_REGISTER_SCHEMA(IsInf, {.attrs = {{"detect_negative", AttrType::kInt},
                                        {"detect_positive", AttrType::kInt}},
                              .infer = &infer_is_inf});
LUMEN_REGISTER_SCHEMA(Elu, {.attrs = {{"alpha", AttrType::kFloat}}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Selu, {.attrs = {{"alpha", AttrType::kFloat}, {"gamma", AttrType::kFloat}},
                             .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Celu, {.attrs = {{"alpha", AttrType::kFloat}}, .infer = &infer_celu});
LUMEN_REGISTER_SCHEMA(Softplus, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Softsign, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Mish, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(ThresholdedRelu,
                      {.attrs = {{"alpha", AttrType::kFloat}}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(PRelu,
                      {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_prelu});
LUMEN_REGISTER_SCHEMA(Mod, {.min_inputs = 2,
                            .max_inputs = 2,
                            .attrs = {{"fmod", AttrType::kInt}},
                            .infer = &infer_mod});
LUMEN_REGISTER_SCHEMA(Xor, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_logic});
LUMEN_REGISTER_SCHEMA(LessOrEqual,
                      {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_order});
LUMEN_REGISTER_SCHEMA(GreaterOrEqual,
                      {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_order});
LUMEN_REGISTER_SCHEMA(
    Sum, {.min_inputs = 1, .max_inputs = kVariadic, .attrs = {}, .infer = &infer_arith});
LUMEN_REGISTER_SCHEMA(
    Mean, {.min_inputs = 1, .max_inputs = kVariadic, .attrs = {}, .infer = &infer_mean});
LUMEN_REGISTER_SCHEMA(CastLike, {.min_inputs = 2,
                                 .max_inputs = 2,
                                 .attrs = {{"saturate", AttrType::kInt},
                                           {"round_mode", AttrType::kString},
                                           {"fnuz_inf_to_nan", AttrType::kInt}},
                                 .infer = &infer_cast_like});
LUMEN_REGISTER_SCHEMA(Size, {.attrs = {}, .infer = &infer_size});

}  // namespace lumen
