// Schema of CumProd (ONNX opset 26): the running product of x along one axis, given as a
// build-time scalar input, with the `exclusive` and `reverse` flags of CumSum.
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

bool is_cum_prod_dtype(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16 || t == DType::kInt32 || t == DType::kInt64 || t == DType::kUInt32 ||
         t == DType::kUInt64;
}

void infer_cum_prod(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const DType dt = ctx.input_dtype(0);
  if (!is_cum_prod_dtype(dt))
    ctx.fail_shape(std::string("x must be float16, bfloat16, float32, float64, int32, int64, "
                               "uint32 or uint64, got ") +
                   dtype_name(dt));
  if (x.rank() < 1) ctx.fail_shape("x must have rank 1 or more");
  const DType at = ctx.input_dtype(1);
  if (at != DType::kInt32 && at != DType::kInt64)
    ctx.fail_shape(std::string("axis must be int32 or int64, got ") + dtype_name(at));
  if (ctx.input_shape(1).numel() != 1)
    ctx.fail_shape("axis must hold one value, got shape " + ctx.input_shape(1).to_string());
  const int64_t axis = ctx.input_ints(1, "axis")[0];
  if (axis < -x.rank() || axis >= x.rank())
    ctx.fail_shape("axis " + std::to_string(axis) + " is out of range for x " + x.to_string());
  for (const char* flag : {"exclusive", "reverse"}) {
    const int64_t v = ctx.attr_int(flag, 0);
    if (v != 0 && v != 1) ctx.fail_model(std::string(flag) + " must be 0 or 1");
  }
  ctx.set_output(0, dt, x);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(CumProd,
                      {.min_inputs = 2,
                       .max_inputs = 2,
                       .attrs = {{"exclusive", AttrType::kInt}, {"reverse", AttrType::kInt}},
                       .infer = &infer_cum_prod});

}  // namespace lumen
