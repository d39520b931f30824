// Schemas of the reductions: ReduceMean, ReduceSum, ReduceMax, ReduceMin (axes as an attribute,
// opset <= 17, or as a second input, opset 13 Sum / 18 others) and ArgMax.
#include <algorithm>
#include <string>
#include <vector>

#include "graph/schema.h"
#include "graph/schemas/reduce.h"

namespace lumen {
namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

void infer_reduce(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kBool) ctx.fail_shape("the input must be numeric, not bool");
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    if (ctx.has_attr("axes")) ctx.fail_model("axes given both as an attribute and as input 1");
    const Shape& as = ctx.input_shape(1);
    if (as.rank() != 1) ctx.fail_shape("the axes input must be 1-D, got " + as.to_string());
    axes = ctx.input_ints(1, "axes");
  } else {
    axes = ctx.attr_ints("axes", {});
  }
  int64_t noop = ctx.attr_int("noop_with_empty_axes", 0);
  if (noop != 0 && noop != 1) ctx.fail_model("noop_with_empty_axes must be 0 or 1");
  int64_t keepdims = ctx.attr_int("keepdims", 1);
  if (keepdims != 0 && keepdims != 1) ctx.fail_model("keepdims must be 0 or 1");
  if (axes.empty() && noop == 1) {
    ctx.set_output(0, dt, x);
    return;
  }
  const int rank = x.rank();
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      ctx.fail_shape("axis " + std::to_string(a) + " in axes " + join(axes) +
                     " is out of range for rank " + std::to_string(rank));
    int k = static_cast<int>(a < 0 ? a + rank : a);
    if (reduced[k])
      ctx.fail_model("axes " + join(axes) + " name dimension " + std::to_string(k) + " twice");
    reduced[k] = true;
  }
  // ReduceMax and ReduceMin over nothing (undefined before opset 20) give -inf and +inf, or the
  // type's lowest and highest value, as opset 20 defines (the kernels start from those).
  std::vector<int64_t> out;
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      if (keepdims) out.push_back(1);
    } else {
      out.push_back(x.dims()[d]);
    }
  }
  ctx.set_output(0, dt, Shape(std::move(out)));
}

void infer_argmax(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kBool) ctx.fail_shape("the input must be numeric, not bool");
  if (x.rank() < 1) ctx.fail_shape("the input must have rank 1 or more");
  int axis = 0;
  try {
    axis = normalize_axis(ctx.attr_int("axis", 0), x.rank());
  } catch (const ShapeError& e) {
    ctx.fail_shape(e.what());
  }
  int64_t keepdims = ctx.attr_int("keepdims", 1);
  if (keepdims != 0 && keepdims != 1) ctx.fail_model("keepdims must be 0 or 1");
  int64_t last = ctx.attr_int("select_last_index", 0);
  if (last != 0 && last != 1) ctx.fail_model("select_last_index must be 0 or 1");
  std::vector<int64_t> out;
  for (int d = 0; d < x.rank(); ++d)
    if (d != axis)
      out.push_back(x.dims()[d]);
    else if (keepdims)
      out.push_back(1);
  Shape out_shape(std::move(out));
  if (x.dims()[axis] == 0 && out_shape.numel() > 0)
    ctx.fail_shape(std::string("cannot take the ") + op_name(ctx.op()) + " over an empty axis of " +
                   x.to_string());
  ctx.set_output(0, DType::kInt64, out_shape);
}

#define LUMEN_REDUCE_SCHEMA(Name)                                                   \
  LUMEN_REGISTER_SCHEMA(Name, {.min_inputs = 1,                                     \
                               .max_inputs = 2,                                     \
                               .attrs = {{"axes", AttrType::kInts},                 \
                                         {"keepdims", AttrType::kInt},              \
                                         {"noop_with_empty_axes", AttrType::kInt}}, \
                               .infer = &infer_reduce})
LUMEN_REDUCE_SCHEMA(ReduceMean);
LUMEN_REDUCE_SCHEMA(ReduceSum);
LUMEN_REDUCE_SCHEMA(ReduceMax);
LUMEN_REDUCE_SCHEMA(ReduceMin);
#undef LUMEN_REDUCE_SCHEMA

LUMEN_REGISTER_SCHEMA(ArgMax, {.min_inputs = 1,
                               .max_inputs = 1,
                               .attrs = {{"axis", AttrType::kInt},
                                         {"keepdims", AttrType::kInt},
                                         {"select_last_index", AttrType::kInt}},
                               .infer = &infer_argmax});

}  // namespace lumen
