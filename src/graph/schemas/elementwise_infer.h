// Type-inference helpers shared by the element-wise schema files (elementwise.cc,
// elementwise_extra.cc): dtype checks, NumPy broadcasting of inputs, and the infer functions of
// the plain unary, arithmetic, comparison and logic ops.
#pragma once

#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {

inline bool is_numeric(DType t) {
  return is_floating(t) || is_integer(t);
}

inline void require_input(const InferContext& ctx, int i, bool ok, const char* what) {
  if (!ok)
    ctx.fail_shape("input " + std::to_string(i) + " must be " + what + ", got " +
                   dtype_name(ctx.input_dtype(i)));
}

// All present inputs in `which` must share input `first`'s dtype.
inline void require_same_dtype(const InferContext& ctx, const std::vector<int>& which) {
  const DType want = ctx.input_dtype(which.front());
  for (int i : which)
    if (ctx.has_input(i) && ctx.input_dtype(i) != want)
      ctx.fail_shape("input " + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
                     " but input " + std::to_string(which.front()) + " is " + dtype_name(want));
}

// NumPy broadcast of the listed inputs' shapes.
inline Shape broadcast_inputs(const InferContext& ctx, const std::vector<int>& which) {
  Shape out = ctx.input_shape(which.front());
  for (int i : which) {
    try {
      out = broadcast_shapes(out, ctx.input_shape(i));
    } catch (const ShapeError&) {
      std::string shapes;
      for (int k : which) shapes += (shapes.empty() ? "" : ", ") + ctx.input_shape(k).to_string();
      ctx.fail_shape("input shapes " + shapes + " cannot be broadcast together");
    }
  }
  return out;
}

inline std::vector<int> all_inputs(const InferContext& ctx) {
  std::vector<int> v;
  for (int i = 0; i < ctx.num_inputs(); ++i) v.push_back(i);
  return v;
}

inline void infer_float_unary(InferContext& ctx) {
  require_input(ctx, 0, is_floating(ctx.input_dtype(0)), "a floating-point tensor");
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

inline void infer_numeric_unary(InferContext& ctx) {
  require_input(ctx, 0, is_numeric(ctx.input_dtype(0)), "a numeric tensor");
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

// Add, Sub, Mul, Div, Min, Max, Sum, Mod: numeric inputs of one dtype, broadcast together.
inline void infer_arith(InferContext& ctx) {
  std::vector<int> ins = all_inputs(ctx);
  require_input(ctx, 0, is_numeric(ctx.input_dtype(0)), "a numeric tensor");
  require_same_dtype(ctx, ins);
  ctx.set_output(0, ctx.input_dtype(0), broadcast_inputs(ctx, ins));
}

// Less, Greater, LessOrEqual, GreaterOrEqual: numeric inputs of one dtype; bool result.
inline void infer_order(InferContext& ctx) {
  require_input(ctx, 0, is_numeric(ctx.input_dtype(0)), "a numeric tensor");
  require_same_dtype(ctx, {0, 1});
  ctx.set_output(0, DType::kBool, broadcast_inputs(ctx, {0, 1}));
}

// And, Or, Xor: bool inputs.
inline void infer_logic(InferContext& ctx) {
  for (int i = 0; i < 2; ++i) require_input(ctx, i, ctx.input_dtype(i) == DType::kBool, "bool");
  ctx.set_output(0, DType::kBool, broadcast_inputs(ctx, {0, 1}));
}

}  // namespace lumen
