// Schemas of the element-wise ops: unary maths, Clip, Not, the broadcasting binary ops
// (arithmetic, Pow, comparisons, logic), variadic Min/Max and Where. ONNX opset 13-17 forms;
// Gelu takes opset 20's `approximate` attribute.
#include <string>
#include <vector>

#include "graph/schema.h"
#include "graph/schemas/elementwise_infer.h"

namespace lumen {
namespace {

// ---- unary ----

void infer_not(InferContext& ctx) {
  require_input(ctx, 0, ctx.input_dtype(0) == DType::kBool, "bool");
  ctx.set_output(0, DType::kBool, ctx.input_shape(0));
}

void infer_gelu(InferContext& ctx) {
  std::string approx = ctx.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh")
    ctx.fail_model("attribute 'approximate' must be \"none\" or \"tanh\", got \"" + approx + "\"");
  infer_float_unary(ctx);
}

// Clip(x, min?, max?): min and max are optional scalars of x's dtype.
void infer_clip(InferContext& ctx) {
  require_input(ctx, 0, is_numeric(ctx.input_dtype(0)), "a numeric tensor");
  require_same_dtype(ctx, {0, 1, 2});
  for (int i = 1; i <= 2; ++i)
    if (ctx.has_input(i) && ctx.input_shape(i).numel() != 1)
      ctx.fail_shape(std::string(i == 1 ? "min" : "max") + " must be a scalar, got shape " +
                     ctx.input_shape(i).to_string());
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

// ---- binary and variadic ----

// Pow(base, exponent): the exponent may have another numeric dtype; the result has base's.
void infer_pow(InferContext& ctx) {
  require_input(ctx, 0, is_numeric(ctx.input_dtype(0)), "a numeric tensor");
  require_input(ctx, 1, is_numeric(ctx.input_dtype(1)), "a numeric tensor");
  ctx.set_output(0, ctx.input_dtype(0), broadcast_inputs(ctx, {0, 1}));
}

// Equal: numeric or bool inputs of one dtype; bool result.
void infer_equal(InferContext& ctx) {
  DType t = ctx.input_dtype(0);
  require_input(ctx, 0, is_numeric(t) || t == DType::kBool, "a numeric or bool tensor");
  require_same_dtype(ctx, {0, 1});
  ctx.set_output(0, DType::kBool, broadcast_inputs(ctx, {0, 1}));
}

// Where(condition, x, y): a bool condition; x and y of one (any) dtype; three-way broadcast.
void infer_where(InferContext& ctx) {
  require_input(ctx, 0, ctx.input_dtype(0) == DType::kBool, "bool");
  require_same_dtype(ctx, {1, 2});
  ctx.set_output(0, ctx.input_dtype(1), broadcast_inputs(ctx, {0, 1, 2}));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(Relu, {.attrs = {}, .infer = &infer_numeric_unary});
LUMEN_REGISTER_SCHEMA(LeakyRelu,
                      {.attrs = {{"alpha", AttrType::kFloat}}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Sigmoid, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Tanh, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Gelu, {.attrs = {{"approximate", AttrType::kString}}, .infer = &infer_gelu});
LUMEN_REGISTER_SCHEMA(Erf, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Exp, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Log, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Sqrt, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Neg, {.attrs = {}, .infer = &infer_numeric_unary});
LUMEN_REGISTER_SCHEMA(Abs, {.attrs = {}, .infer = &infer_numeric_unary});
LUMEN_REGISTER_SCHEMA(Reciprocal, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(HardSigmoid,
                      {.attrs = {{"alpha", AttrType::kFloat}, {"beta", AttrType::kFloat}},
                       .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(HardSwish, {.attrs = {}, .infer = &infer_float_unary});
LUMEN_REGISTER_SCHEMA(Clip, {.min_inputs = 1, .max_inputs = 3, .attrs = {}, .infer = &infer_clip});
LUMEN_REGISTER_SCHEMA(Not, {.attrs = {}, .infer = &infer_not});

LUMEN_REGISTER_SCHEMA(Add, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_arith});
LUMEN_REGISTER_SCHEMA(Sub, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_arith});
LUMEN_REGISTER_SCHEMA(Mul, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_arith});
LUMEN_REGISTER_SCHEMA(Div, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_arith});
LUMEN_REGISTER_SCHEMA(Pow, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_pow});
LUMEN_REGISTER_SCHEMA(
    Min, {.min_inputs = 1, .max_inputs = kVariadic, .attrs = {}, .infer = &infer_arith});
LUMEN_REGISTER_SCHEMA(
    Max, {.min_inputs = 1, .max_inputs = kVariadic, .attrs = {}, .infer = &infer_arith});
LUMEN_REGISTER_SCHEMA(Equal,
                      {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_equal});
LUMEN_REGISTER_SCHEMA(Less, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_order});
LUMEN_REGISTER_SCHEMA(Greater,
                      {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_order});
LUMEN_REGISTER_SCHEMA(And, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_logic});
LUMEN_REGISTER_SCHEMA(Or, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_logic});
LUMEN_REGISTER_SCHEMA(Where,
                      {.min_inputs = 3, .max_inputs = 3, .attrs = {}, .infer = &infer_where});

}  // namespace lumen
