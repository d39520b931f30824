// Converters for ops with a training mode: Dropout and BatchNormalization. Lumen runs inference,
// and the training forms where they are deterministic: Dropout with ratio 0 (the identity) and
// BatchNormalization with batch statistics (which need no randomness). Random dropout is refused.
#include <algorithm>
#include <string>
#include <vector>

#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

// The single value of an input known at build time; throws ShapeError when it is not known
// (the conformance runner and callers can then fix it with OnnxLoadOptions::input_values).
double known_scalar(ImportContext& ctx, Value* v, const char* what) {
  if (!v->data || v->user_weight)
    throw ShapeError(ctx.where() + ": the " + what +
                     " input must be known when the graph is built (lumen runs Dropout in "
                     "inference, or in training mode with ratio 0)");
  if (v->data->numel() != 1)
    throw ShapeError(ctx.where() + ": the " + what + " input must be a scalar, got shape " +
                     v->data->shape().to_string());
  return v->data->item_as_double();
}

// Dropout is the identity when training_mode is absent or false, and in training mode with ratio
// 0; its mask output, if read, is then all true.
std::vector<Value*> convert_dropout(ImportContext& ctx) {
  if (ctx.input(0) == nullptr) ctx.unsupported("input 0 is missing");
  if (Value* training = ctx.input(2); training && known_scalar(ctx, training, "training_mode")) {
    const double ratio = ctx.input(1) ? known_scalar(ctx, ctx.input(1), "ratio") : 0.5;
    if (ratio != 0.0)
      ctx.unsupported("Dropout in training mode with ratio " + std::to_string(ratio) +
                      " drops random elements; lumen does not produce random outputs (it runs "
                      "training-mode Dropout with ratio 0 only)");
  }
  std::vector<Value*> outs = {ctx.emit1("Identity", {ctx.input(0)})};
  if (ctx.num_outputs() > 1) {
    Tensor mask = Tensor::empty(ctx.input(0)->type.shape, DType::kBool);
    std::fill_n(mask.data<bool>(), mask.numel(), true);
    outs.push_back(ctx.graph().add_constant(ctx.graph().unique_name(ctx.name() + "/mask"), mask));
  }
  return outs;
}

// BatchNormalization (opset 14+). With training_mode=1 it normalises by the batch's own mean and
// (population) variance over every axis but 1, and its optional outputs are the updated running
// statistics: running = input * momentum + batch * (1 - momentum). Built from ReduceMean and the
// inference BatchNormalization.
std::vector<Value*> convert_batch_norm(ImportContext& ctx) {
  const int64_t training = ctx.take("training_mode").value_or(Attribute(0)).as_int();
  if (training == 0)
    return ctx.emit("BatchNormalization", ctx.inputs(), ctx.attrs(),
                    std::min(ctx.num_outputs(), 1));
  if (training != 1) ctx.unsupported("training_mode must be 0 or 1");
  const float momentum = ctx.take("momentum").value_or(Attribute(0.9f)).as_float();
  Value* x = ctx.input(0);
  for (int i = 0; i < 5; ++i)
    if (ctx.input(i) == nullptr) ctx.unsupported("input " + std::to_string(i) + " is missing");
  if (x->type.dtype != DType::kFloat32)
    ctx.unsupported("training_mode=1 is supported for float32 inputs only");
  const int rank = x->type.shape.rank();
  if (rank < 2) ctx.unsupported("X must have rank 2 or more");
  std::vector<int64_t> axes = {0};
  for (int d = 2; d < rank; ++d) axes.push_back(d);
  const Attributes reduce = {{"axes", axes}, {"keepdims", int64_t{1}}};
  // Each helper node gets its own name: several share an op type.
  Graph& g = ctx.graph();
  auto add = [&](const char* op, const std::vector<Value*>& in, const char* tag,
                 const Attributes& attrs = {}) {
    return g.add_op(op, in, attrs, g.unique_name(ctx.name() + "/" + tag));
  };
  Value* mean_k = add("ReduceMean", {x}, "batch_mean", reduce);
  Value* centred = add("Sub", {x, mean_k}, "centred");
  Value* square = add("Mul", {centred, centred}, "centred_square");
  Value* var_k = add("ReduceMean", {square}, "batch_var", reduce);
  Value* channels = ctx.constant_ints({x->type.shape[1]});
  Value* mean = add("Reshape", {mean_k, channels}, "batch_mean_c");
  Value* var = add("Reshape", {var_k, channels}, "batch_var_c");
  std::vector<Value*> outs = {
      ctx.emit1("BatchNormalization", {x, ctx.input(1), ctx.input(2), mean, var}, ctx.attrs())};
  Value* keep = ctx.constant_scalar(momentum);
  Value* take = ctx.constant_scalar(1.0f - momentum);
  static const char* const kTags[][3] = {{"", "", ""},
                                         {"running_mean_old", "running_mean_new", "running_mean"},
                                         {"running_var_old", "running_var_new", "running_var"}};
  for (int i = 1; i < ctx.num_outputs() && i < 3; ++i) {
    Value* old_part = add("Mul", {ctx.input(2 + i), keep}, kTags[i][0]);
    Value* new_part = add("Mul", {i == 1 ? mean : var, take}, kTags[i][1]);
    outs.push_back(add("Add", {old_part, new_part}, kTags[i][2]));
  }
  return outs;
}

}  // namespace

LUMEN_ONNX_CONVERTER(Dropout, "Dropout", 1, 1000, &convert_dropout);
LUMEN_ONNX_CONVERTER(BatchNormalizationV14, "BatchNormalization", 14, 1000, &convert_batch_norm);

}  // namespace lumen::onnx_import
