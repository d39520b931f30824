// Schemas of LpPool (opset 18's form: ceil_mode and dilations; earlier opsets are the same op
// without them) and GlobalLpPool. p is an int from opset 2 (a float before); either is read.
#include <cmath>
#include <string>

#include "graph/schema.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen {
namespace {

void check_p(const InferContext& ctx) {
  const float p = ctx.attr_float("p", 2.0f);
  if (!(p > 0.0f) || !std::isfinite(p))
    ctx.fail_model("p must be a positive number, got " + std::to_string(p));
}

void infer_lp_pool(InferContext& ctx) {
  check_window_input(ctx, 0);
  check_p(ctx);
  const int64_t ceil_mode = ctx.attr_int("ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1)
    ctx.fail_model("ceil_mode must be 0 or 1, got " + std::to_string(ceil_mode));
  const Shape& x = ctx.input_shape(0);
  ConvGeometry g = window_geometry(ctx, x, ctx.attr_ints("kernel_shape"), ceil_mode != 0);
  std::vector<int64_t> out = {x[0], x[1]};
  out.insert(out.end(), g.out.begin(), g.out.end());
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

void infer_global_lp_pool(InferContext& ctx) {
  check_window_input(ctx, 0, 8);
  check_p(ctx);
  std::vector<int64_t> out = ctx.input_shape(0).dims();
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(LpPool, {.min_inputs = 1,
                               .max_inputs = 1,
                               .attrs = {{"auto_pad", AttrType::kString},
                                         {"ceil_mode", AttrType::kInt},
                                         {"dilations", AttrType::kInts},
                                         {"kernel_shape", AttrType::kInts, true},
                                         {"p", AttrType::kFloat},
                                         {"pads", AttrType::kInts},
                                         {"strides", AttrType::kInts}},
                               .infer = &infer_lp_pool});
LUMEN_REGISTER_SCHEMA(GlobalLpPool, {.min_inputs = 1,
                                     .max_inputs = 1,
                                     .attrs = {{"p", AttrType::kFloat}},
                                     .infer = &infer_global_lp_pool});

}  // namespace lumen
