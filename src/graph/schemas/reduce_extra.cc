// Schemas of the further reductions and axis ops: ArgMin, ReduceProd, ReduceSumSquare,
// ReduceLogSum, ReduceLogSumExp, ReduceL1, ReduceL2 (shared inference in reduce.h), CumSum,
// Hardmax (opset 13) and TopK.
#include <string>
#include <vector>

#include "graph/schema.h"
#include "graph/schemas/reduce.h"

namespace lumen {
namespace {

int axis_of(const InferContext& ctx, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    ctx.fail_shape("axis " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Reads input i, a scalar or 1-element integer tensor known at build time.
int64_t scalar_int_input(const InferContext& ctx, int i, const char* what) {
  DType dt = ctx.input_dtype(i);
  if (dt != DType::kInt64 && dt != DType::kInt32)
    ctx.fail_shape(std::string(what) + " must be int64 or int32, got " + dtype_name(dt));
  if (ctx.input_shape(i).numel() != 1)
    ctx.fail_shape(std::string(what) + " must hold one value, got shape " +
                   ctx.input_shape(i).to_string());
  return ctx.input_ints(i, what)[0];
}

void infer_cumsum(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kBool) ctx.fail_shape("the input must be numeric, not bool");
  if (x.rank() < 1) ctx.fail_shape("the input must have rank 1 or more");
  if (ctx.input_shape(1).rank() > 1) ctx.fail_shape("axis must be a scalar or 1-element tensor");
  axis_of(ctx, scalar_int_input(ctx, 1, "axis"), x.rank());
  for (const char* flag : {"exclusive", "reverse"}) {
    int64_t v = ctx.attr_int(flag, 0);
    if (v != 0 && v != 1) ctx.fail_model(std::string(flag) + " must be 0 or 1");
  }
  ctx.set_output(0, dt, x);
}

void infer_hardmax(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  DType dt = ctx.input_dtype(0);
  if (!is_floating(dt))
    ctx.fail_shape(std::string("the input must be floating, got ") + dtype_name(dt));
  if (x.rank() < 1) ctx.fail_shape("the input must have rank 1 or more");
  axis_of(ctx, ctx.attr_int("axis", -1), x.rank());
  ctx.set_output(0, dt, x);
}

void infer_topk(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kBool) ctx.fail_shape("the input must be numeric, not bool");
  if (x.rank() < 1) ctx.fail_shape("the input must have rank 1 or more");
  if (ctx.input_shape(1).rank() != 1) ctx.fail_shape("K must be a 1-D tensor of one value");
  int64_t k = scalar_int_input(ctx, 1, "K");
  int axis = axis_of(ctx, ctx.attr_int("axis", -1), x.rank());
  for (const char* flag : {"largest", "sorted"}) {
    int64_t v = ctx.attr_int(flag, 1);
    if (v != 0 && v != 1) ctx.fail_model(std::string(flag) + " must be 0 or 1");
  }
  if (k < 0 || k > x.dims()[axis])
    ctx.fail_shape("K = " + std::to_string(k) + " is outside [0, " +
                   std::to_string(x.dims()[axis]) + "] for input " + x.to_string());
  Shape out = x;
  out.dims()[axis] = k;
  ctx.set_output(0, dt, out);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kInt64, out);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(ArgMin, {.min_inputs = 1,
                               .max_inputs = 1,
                               .attrs = {{"axis", AttrType::kInt},
                                         {"keepdims", AttrType::kInt},
                                         {"select_last_index", AttrType::kInt}},
                               .infer = &infer_argmax});

#define LUMEN_REDUCE_EXTRA_SCHEMA(Name)                                             \
  LUMEN_REGISTER_SCHEMA(Name, {.min_inputs = 1,                                     \
                               .max_inputs = 2,                                     \
                               .attrs = {{"axes", AttrType::kInts},                 \
                                         {"keepdims", AttrType::kInt},              \
                                         {"noop_with_empty_axes", AttrType::kInt}}, \
                               .infer = &infer_reduce})
LUMEN_REDUCE_EXTRA_SCHEMA(ReduceProd);
LUMEN_REDUCE_EXTRA_SCHEMA(ReduceSumSquare);
LUMEN_REDUCE_EXTRA_SCHEMA(ReduceLogSum);
LUMEN_REDUCE_EXTRA_SCHEMA(ReduceLogSumExp);
LUMEN_REDUCE_EXTRA_SCHEMA(ReduceL1);
LUMEN_REDUCE_EXTRA_SCHEMA(ReduceL2);
#undef LUMEN_REDUCE_EXTRA_SCHEMA

LUMEN_REGISTER_SCHEMA(CumSum,
                      {.min_inputs = 2,
                       .max_inputs = 2,
                       .attrs = {{"exclusive", AttrType::kInt}, {"reverse", AttrType::kInt}},
                       .infer = &infer_cumsum});
LUMEN_REGISTER_SCHEMA(Hardmax, {.attrs = {{"axis", AttrType::kInt}}, .infer = &infer_hardmax});
LUMEN_REGISTER_SCHEMA(TopK, {.min_inputs = 2,
                             .max_inputs = 2,
                             .min_outputs = 1,
                             .max_outputs = 2,
                             .attrs = {{"axis", AttrType::kInt},
                                       {"largest", AttrType::kInt},
                                       {"sorted", AttrType::kInt}},
                             .infer = &infer_topk});

}  // namespace lumen
