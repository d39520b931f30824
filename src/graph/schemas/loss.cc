// Schemas of the loss ops (opset 13+): NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
// Both take scores [N, C, d1, ...], integer targets [N, d1, ...] and optional class weights [C].
#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {
namespace {

// Checks the inputs and attributes shared by both losses and sets output 0 (the loss).
void infer_loss_common(InferContext& ctx, const char* x_name, const char* t_name,
                       const char* w_name) {
  const std::string reduction = ctx.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    ctx.fail_model("reduction must be 'none', 'sum' or 'mean', not '" + reduction + "'");
  const Shape& x = ctx.input_shape(0);
  if (!is_floating(ctx.input_dtype(0)))
    ctx.fail_shape(std::string(x_name) + " must be a floating-point tensor, not " +
                   dtype_name(ctx.input_dtype(0)));
  if (x.rank() < 2)
    ctx.fail_shape(std::string(x_name) + " must have rank 2 or more ([N, C, d1, ...]), got " +
                   x.to_string());
  const DType tdt = ctx.input_dtype(1);
  if (tdt != DType::kInt64 && tdt != DType::kInt32)
    ctx.fail_shape(std::string(t_name) + " must be int64 or int32, not " + dtype_name(tdt));
  const Shape& t = ctx.input_shape(1);
  std::vector<int64_t> want = x.dims();
  want.erase(want.begin() + 1);
  if (t.dims() != want)
    ctx.fail_shape(std::string(t_name) + " shape " + t.to_string() + " does not fit " + x_name +
                   " shape " + x.to_string() + " (expected " + Shape(want).to_string() + ")");
  if (ctx.has_input(2)) {
    if (ctx.input_dtype(2) != ctx.input_dtype(0))
      ctx.fail_shape(std::string(w_name) + " must be " + dtype_name(ctx.input_dtype(0)) + ", not " +
                     dtype_name(ctx.input_dtype(2)));
    const Shape& w = ctx.input_shape(2);
    if (w.rank() != 1 || w.dims()[0] != x.dims()[1])
      ctx.fail_shape(std::string(w_name) + " must have shape [" + std::to_string(x.dims()[1]) +
                     "] (the classes of " + x_name + "), got " + w.to_string());
  }
  ctx.set_output(0, ctx.input_dtype(0), reduction == "none" ? t : Shape{});
}

void infer_nll_loss(InferContext& ctx) {
  infer_loss_common(ctx, "input", "target", "weight");
}

void infer_softmax_cross_entropy(InferContext& ctx) {
  infer_loss_common(ctx, "scores", "labels", "weights");
  if (ctx.num_outputs() > 1) ctx.set_output(1, ctx.input_dtype(0), ctx.input_shape(0));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(NegativeLogLikelihoodLoss, {.min_inputs = 2,
                                                  .max_inputs = 3,
                                                  .min_outputs = 1,
                                                  .max_outputs = 1,
                                                  .attrs = {{"reduction", AttrType::kString},
                                                            {"ignore_index", AttrType::kInt}},
                                                  .infer = &infer_nll_loss});
LUMEN_REGISTER_SCHEMA(SoftmaxCrossEntropyLoss, {.min_inputs = 2,
                                                .max_inputs = 3,
                                                .min_outputs = 1,
                                                .max_outputs = 2,
                                                .attrs = {{"reduction", AttrType::kString},
                                                          {"ignore_index", AttrType::kInt}},
                                                .infer = &infer_softmax_cross_entropy});

}  // namespace lumen
