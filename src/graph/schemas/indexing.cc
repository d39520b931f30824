// Schemas of the indexing ops: GatherElements, GatherND, ScatterND, ScatterElements, OneHot,
// Trilu and EyeLike.
#include <string>
#include <vector>

#include "graph/onnx_dtype.h"
#include "graph/schema.h"

namespace lumen {
namespace {

void check_indices_dtype(const InferContext& ctx, int i) {
  DType dt = ctx.input_dtype(i);
  if (dt != DType::kInt64 && dt != DType::kInt32)
    ctx.fail_shape(std::string("indices must be int64 or int32, got ") + dtype_name(dt));
}

int axis_in(const InferContext& ctx, int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    ctx.fail_shape("axis " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

void check_reduction(const InferContext& ctx) {
  std::string r = ctx.attr_string("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    ctx.fail_model("reduction must be none, add, mul, max or min, got '" + r + "'");
}

void infer_gather_elements(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  check_indices_dtype(ctx, 1);
  if (data.rank() < 1) ctx.fail_shape("data must have rank 1 or more");
  if (idx.rank() != data.rank())
    ctx.fail_shape("indices " + idx.to_string() + " and data " + data.to_string() +
                   " must have the same rank");
  int axis = axis_in(ctx, ctx.attr_int("axis", 0), data.rank());
  for (int d = 0; d < data.rank(); ++d)
    if (d != axis && idx.dims()[d] > data.dims()[d])
      ctx.fail_shape("indices " + idx.to_string() + " exceed data " + data.to_string() +
                     " in dimension " + std::to_string(d));
  if (data.dims()[axis] == 0 && idx.numel() > 0)
    ctx.fail_shape("cannot gather from an empty axis of " + data.to_string());
  ctx.set_output(0, ctx.input_dtype(0), idx);
}

void infer_scatter_elements(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  const Shape& upd = ctx.input_shape(2);
  check_indices_dtype(ctx, 1);
  check_reduction(ctx);
  if (data.rank() < 1) ctx.fail_shape("data must have rank 1 or more");
  if (idx.rank() != data.rank())
    ctx.fail_shape("indices " + idx.to_string() + " and data " + data.to_string() +
                   " must have the same rank");
  if (upd != idx)
    ctx.fail_shape("updates " + upd.to_string() + " must have the shape of indices " +
                   idx.to_string());
  if (ctx.input_dtype(2) != ctx.input_dtype(0))
    ctx.fail_shape("updates and data must have the same dtype");
  int axis = axis_in(ctx, ctx.attr_int("axis", 0), data.rank());
  for (int d = 0; d < data.rank(); ++d)
    if (d != axis && idx.dims()[d] > data.dims()[d])
      ctx.fail_shape("indices " + idx.to_string() + " exceed data " + data.to_string() +
                     " in dimension " + std::to_string(d));
  ctx.set_output(0, ctx.input_dtype(0), data);
}

void infer_gather_nd(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  check_indices_dtype(ctx, 1);
  const int64_t b = ctx.attr_int("batch_dims", 0);
  if (data.rank() < 1 || idx.rank() < 1) ctx.fail_shape("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(data.rank(), idx.rank()))
    ctx.fail_model("batch_dims " + std::to_string(b) + " must be in [0, min(ranks))");
  for (int d = 0; d < b; ++d)
    if (data.dims()[d] != idx.dims()[d])
      ctx.fail_shape("batch dims of data " + data.to_string() + " and indices " + idx.to_string() +
                     " differ");
  const int64_t q = idx.dims().back();
  if (q < 1 || q > data.rank() - b)
    ctx.fail_shape("the last dim of indices " + idx.to_string() + " must be in [1, " +
                   std::to_string(data.rank() - b) + "]");
  std::vector<int64_t> out(idx.dims().begin(), idx.dims().end() - 1);
  for (int d = static_cast<int>(b + q); d < data.rank(); ++d) out.push_back(data.dims()[d]);
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(out)));
}

void infer_scatter_nd(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  const Shape& upd = ctx.input_shape(2);
  check_indices_dtype(ctx, 1);
  check_reduction(ctx);
  if (data.rank() < 1 || idx.rank() < 1) ctx.fail_shape("data and indices must have rank >= 1");
  if (ctx.input_dtype(2) != ctx.input_dtype(0))
    ctx.fail_shape("updates and data must have the same dtype");
  const int64_t q = idx.dims().back();
  if (q < 1 || q > data.rank())
    ctx.fail_shape("the last dim of indices " + idx.to_string() + " must be in [1, " +
                   std::to_string(data.rank()) + "]");
  std::vector<int64_t> want(idx.dims().begin(), idx.dims().end() - 1);
  for (int d = static_cast<int>(q); d < data.rank(); ++d) want.push_back(data.dims()[d]);
  if (upd != Shape(want))
    ctx.fail_shape("updates " + upd.to_string() + " must have shape " + Shape(want).to_string());
  ctx.set_output(0, ctx.input_dtype(0), data);
}

void infer_one_hot(InferContext& ctx) {
  const Shape& idx = ctx.input_shape(0);
  DType it = ctx.input_dtype(0);
  if (it == DType::kBool) ctx.fail_shape("indices must be numeric, not bool");
  if (ctx.input_shape(1).numel() != 1) ctx.fail_shape("depth must hold one value");
  if (ctx.input_shape(2).rank() != 1 || ctx.input_shape(2).dims()[0] != 2)
    ctx.fail_shape("values must be [off_value, on_value], got shape " +
                   ctx.input_shape(2).to_string());
  const Tensor* dv = ctx.input_value(1);
  if (!dv) ctx.fail_shape("depth must be known when the graph is built");
  if (dv->dtype() == DType::kBool) ctx.fail_shape("depth must be numeric");
  const int64_t depth = static_cast<int64_t>(dv->item_as_double(0));
  if (depth < 1) ctx.fail_shape("depth must be positive, got " + std::to_string(depth));
  const int r = idx.rank() + 1;
  int axis = axis_in(ctx, ctx.attr_int("axis", -1), r);
  std::vector<int64_t> out = idx.dims();
  out.insert(out.begin() + axis, depth);
  ctx.set_output(0, ctx.input_dtype(2), Shape(std::move(out)));
}

void infer_trilu(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank() < 2) ctx.fail_shape("the input must have rank 2 or more, got " + x.to_string());
  int64_t upper = ctx.attr_int("upper", 1);
  if (upper != 0 && upper != 1) ctx.fail_model("upper must be 0 or 1");
  if (ctx.has_input(1)) {
    DType kt = ctx.input_dtype(1);
    if (kt != DType::kInt64 && kt != DType::kInt32) ctx.fail_shape("k must be int64");
    if (ctx.input_shape(1).numel() != 1) ctx.fail_shape("k must hold one value");
    ctx.input_ints(1, "k");
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_eye_like(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank() != 2) ctx.fail_shape("the input must be 2-D, got " + x.to_string());
  DType dt = ctx.input_dtype(0);
  if (ctx.has_attr("dtype")) {
    int64_t code = ctx.attr_int("dtype");
    std::optional<DType> d = dtype_from_onnx(code);
    if (!d) ctx.fail_unsupported("dtype " + onnx_dtype_name(code) + " is not supported");
    dt = *d;
  }
  if (is_narrow_float(dt))
    ctx.fail_unsupported(std::string("EyeLike does not make ") + dtype_name(dt) + " tensors");
  ctx.set_output(0, dt, x);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(GatherElements, {.min_inputs = 2,
                                       .max_inputs = 2,
                                       .attrs = {{"axis", AttrType::kInt}},
                                       .infer = &infer_gather_elements});
LUMEN_REGISTER_SCHEMA(ScatterElements,
                      {.min_inputs = 3,
                       .max_inputs = 3,
                       .attrs = {{"axis", AttrType::kInt}, {"reduction", AttrType::kString}},
                       .infer = &infer_scatter_elements});
LUMEN_REGISTER_SCHEMA(GatherND, {.min_inputs = 2,
                                 .max_inputs = 2,
                                 .attrs = {{"batch_dims", AttrType::kInt}},
                                 .infer = &infer_gather_nd});
LUMEN_REGISTER_SCHEMA(ScatterND, {.min_inputs = 3,
                                  .max_inputs = 3,
                                  .attrs = {{"reduction", AttrType::kString}},
                                  .infer = &infer_scatter_nd});
LUMEN_REGISTER_SCHEMA(OneHot, {.min_inputs = 3,
                               .max_inputs = 3,
                               .attrs = {{"axis", AttrType::kInt}},
                               .infer = &infer_one_hot});
LUMEN_REGISTER_SCHEMA(Trilu, {.min_inputs = 1,
                              .max_inputs = 2,
                              .attrs = {{"upper", AttrType::kInt}},
                              .infer = &infer_trilu});
LUMEN_REGISTER_SCHEMA(EyeLike, {.attrs = {{"dtype", AttrType::kInt}, {"k", AttrType::kInt}},
                                .infer = &infer_eye_like});

}  // namespace lumen
