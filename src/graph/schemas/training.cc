// Schemas of the optimizer ops of ONNX's ai.onnx.preview.training domain (version 1): Adagrad,
// Adam and Momentum. Each updates n tensors at once (layout in optimizer_layout.h): R is a float
// or double scalar, T an int64 scalar, and every X, G and state tensor of one update shares X's
// floating dtype (float32 or float64) and shape. Outputs take the dtype and shape of their X.
#include <string>

#include "graph/schema.h"
#include "graph/schemas/optimizer_layout.h"

namespace lumen {
namespace {

const char* role_name(OpKind op, int role) {
  static const char* const kAdagrad[] = {"X", "G", "H"};
  static const char* const kAdam[] = {"X", "G", "V", "H"};
  static const char* const kMomentum[] = {"X", "G", "V"};
  if (op == OpKind::kAdam) return kAdam[role];
  return op == OpKind::kAdagrad ? kAdagrad[role] : kMomentum[role];
}

// R or T: a one-element tensor (a scalar, or shape [1]).
void check_scalar(InferContext& ctx, int i, const char* name) {
  const Shape& s = ctx.input_shape(i);
  if (s.numel() != 1 || s.rank() > 1)
    ctx.fail_shape(std::string(name) + " must be a scalar, got shape " + s.to_string());
}

void infer_optimizer(InferContext& ctx) {
  const OptimizerLayout layout = optimizer_layout(ctx.op());
  const int n = layout.tensors(ctx.num_inputs());
  if (n == 0)
    ctx.fail_model("takes R, T and then " + std::to_string(layout.roles_in) +
                   " tensors per optimized tensor, got " + std::to_string(ctx.num_inputs()) +
                   " inputs");
  if (ctx.num_outputs() > layout.roles_out * n)
    ctx.fail_model("has " + std::to_string(ctx.num_outputs()) + " outputs, but updates " +
                   std::to_string(n) + " tensors into at most " +
                   std::to_string(layout.roles_out * n));
  for (int k = 0; k < ctx.num_inputs(); ++k)
    if (!ctx.has_input(k)) ctx.fail_model("input " + std::to_string(k) + " is missing");
  const DType r = ctx.input_dtype(0);
  if (r != DType::kFloat32 && r != DType::kFloat64)
    ctx.fail_shape(std::string("R must be float32 or float64, not ") + dtype_name(r));
  check_scalar(ctx, 0, "R");
  if (ctx.input_dtype(1) != DType::kInt64)
    ctx.fail_shape(std::string("T must be int64, not ") + dtype_name(ctx.input_dtype(1)));
  check_scalar(ctx, 1, "T");

  const DType t = ctx.input_dtype(OptimizerLayout::input_index(0, 0, n));
  if (t != DType::kFloat32 && t != DType::kFloat64)
    ctx.fail_shape(std::string("X_1 must be float32 or float64, not ") + dtype_name(t));
  for (int i = 0; i < n; ++i) {
    const Shape& x = ctx.input_shape(OptimizerLayout::input_index(0, i, n));
    for (int role = 0; role < layout.roles_in; ++role) {
      const int k = OptimizerLayout::input_index(role, i, n);
      const std::string name = role_name(ctx.op(), role) + std::string("_") + std::to_string(i + 1);
      if (ctx.input_dtype(k) != t)
        ctx.fail_shape(name + " is " + dtype_name(ctx.input_dtype(k)) + ", but X_1 is " +
                       dtype_name(t));
      if (ctx.input_shape(k) != x)
        ctx.fail_shape(name + " has shape " + ctx.input_shape(k).to_string() + ", but X_" +
                       std::to_string(i + 1) + " has " + x.to_string());
    }
  }
  for (int o = 0; o < ctx.num_outputs(); ++o)
    ctx.set_output(o, t, ctx.input_shape(OptimizerLayout::input_index(0, o % n, n)));
}

void infer_momentum(InferContext& ctx) {
  const std::string mode = ctx.attr_string("mode", "");
  if (mode != "standard" && mode != "nesterov")
    ctx.fail_model("mode must be 'standard' or 'nesterov', got '" + mode + "'");
  infer_optimizer(ctx);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(Adagrad, {.min_inputs = 5,
                                .max_inputs = kVariadic,
                                .min_outputs = 1,
                                .max_outputs = kVariadic,
                                .attrs = {{"decay_factor", AttrType::kFloat},
                                          {"epsilon", AttrType::kFloat},
                                          {"norm_coefficient", AttrType::kFloat}},
                                .infer = &infer_optimizer});
LUMEN_REGISTER_SCHEMA(Adam, {.min_inputs = 6,
                             .max_inputs = kVariadic,
                             .min_outputs = 1,
                             .max_outputs = kVariadic,
                             .attrs = {{"alpha", AttrType::kFloat},
                                       {"beta", AttrType::kFloat},
                                       {"epsilon", AttrType::kFloat},
                                       {"norm_coefficient", AttrType::kFloat},
                                       {"norm_coefficient_post", AttrType::kFloat}},
                             .infer = &infer_optimizer});
LUMEN_REGISTER_SCHEMA(Momentum, {.min_inputs = 5,
                                 .max_inputs = kVariadic,
                                 .min_outputs = 1,
                                 .max_outputs = kVariadic,
                                 .attrs = {{"alpha", AttrType::kFloat, true},
                                           {"beta", AttrType::kFloat, true},
                                           {"mode", AttrType::kString, true},
                                           {"norm_coefficient", AttrType::kFloat, true}},
                                 .infer = &infer_momentum});

}  // namespace lumen
