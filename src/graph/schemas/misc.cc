// Schemas of assorted ops outside the larger families: Shrink (element-wise),
// MeanVarianceNormalization, Det (batched determinant) and ReverseSequence.
#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_shrink(InferContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (!is_floating(t) && !is_integer(t))
    ctx.fail_shape(std::string("input must be numeric, not ") + dtype_name(t));
  if (ctx.attr_float("lambd", 0.5f) < 0.0f) ctx.fail_model("lambd must not be negative");
  ctx.set_output(0, t, ctx.input_shape(0));
}

void infer_mvn(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (!is_floating(ctx.input_dtype(0)))
    ctx.fail_shape(std::string("X must be floating-point, not ") + dtype_name(ctx.input_dtype(0)));
  std::vector<bool> seen(x.rank(), false);
  for (int64_t a : ctx.attr_ints("axes", {0, 2, 3})) {
    if (a < -x.rank() || a >= x.rank())
      ctx.fail_shape("axis " + std::to_string(a) + " is out of range for X " + x.to_string());
    const int k = normalize_axis(a, x.rank());
    if (seen[k]) ctx.fail_model("axes name dimension " + std::to_string(k) + " twice");
    seen[k] = true;
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_det(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (!is_floating(ctx.input_dtype(0)))
    ctx.fail_shape(std::string("X must be floating-point, not ") + dtype_name(ctx.input_dtype(0)));
  if (x.rank() < 2 || x[-1] != x[-2])
    ctx.fail_shape("X must be square matrices [..., M, M], got " + x.to_string());
  std::vector<int64_t> out(x.dims().begin(), x.dims().end() - 2);
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

void infer_reverse_sequence(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank() < 2) ctx.fail_shape("input must have rank 2 or more, got " + x.to_string());
  const int64_t batch_axis = ctx.attr_int("batch_axis", 1);
  const int64_t time_axis = ctx.attr_int("time_axis", 0);
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) ||
      batch_axis == time_axis)
    ctx.fail_model("batch_axis and time_axis must be 0 and 1 in some order, got " +
                   std::to_string(batch_axis) + " and " + std::to_string(time_axis));
  if (ctx.input_dtype(1) != DType::kInt64)
    ctx.fail_shape(std::string("sequence_lens must be int64, not ") +
                   dtype_name(ctx.input_dtype(1)));
  const Shape& lens = ctx.input_shape(1);
  if (lens.rank() != 1 || lens[0] != x[static_cast<int>(batch_axis)])
    ctx.fail_shape("sequence_lens must have shape [" +
                   std::to_string(x[static_cast<int>(batch_axis)]) + "] (the batch of input " +
                   x.to_string() + "), got " + lens.to_string());
  ctx.set_output(0, ctx.input_dtype(0), x);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(Shrink, {.attrs = {{"lambd", AttrType::kFloat}, {"bias", AttrType::kFloat}},
                               .infer = &infer_shrink});
LUMEN_REGISTER_SCHEMA(MeanVarianceNormalization,
                      {.attrs = {{"axes", AttrType::kInts}}, .infer = &infer_mvn});
LUMEN_REGISTER_SCHEMA(Det, {.attrs = {}, .infer = &infer_det});
LUMEN_REGISTER_SCHEMA(ReverseSequence,
                      {.min_inputs = 2,
                       .max_inputs = 2,
                       .attrs = {{"batch_axis", AttrType::kInt}, {"time_axis", AttrType::kInt}},
                       .infer = &infer_reverse_sequence});

}  // namespace lumen
