// Schemas of MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool (ONNX output shapes,
// including ceil_mode and SAME padding).
#include <string>

#include "graph/schema.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen {
namespace {

int64_t read_flag(InferContext& ctx, const char* name) {
  int64_t v = ctx.attr_int(name, 0);
  if (v != 0 && v != 1)
    ctx.fail_model(std::string(name) + " must be 0 or 1, got " + std::to_string(v));
  return v;
}

// MaxPool also takes int8 and uint8 inputs (`int8_ok`); the rank check is the same. With
// channels_last=1 (set by the optimizer's channels-last pass; float32, one output) X and Y are
// (N, spatial..., C).
Shape pooled_shape(InferContext& ctx, bool int8_ok = false) {
  DType t = ctx.input_dtype(0);
  const Shape& x = ctx.input_shape(0);
  if (int8_ok && (t == DType::kInt8 || t == DType::kUInt8)) {
    if (x.rank() < 3 || x.rank() > 5)
      ctx.fail_shape("input 0 must be (N, C, spatial...) of rank 3 to 5, got " + x.to_string());
  } else {
    check_window_input(ctx, 0);
  }
  bool ceil_mode = read_flag(ctx, "ceil_mode") != 0;
  const bool channels_last = is_channels_last(ctx);
  const Shape first = channels_last ? to_channels_first(x) : x;
  ConvGeometry g = window_geometry(ctx, first, ctx.attr_ints("kernel_shape"), ceil_mode);
  std::vector<int64_t> out = {first[0], first[1]};
  out.insert(out.end(), g.out.begin(), g.out.end());
  return channels_last ? to_channels_last(Shape(out)) : Shape(out);
}

void infer_max_pool(InferContext& ctx) {
  read_flag(ctx, "storage_order");
  if (ctx.num_outputs() > 1 && is_channels_last(ctx))
    ctx.fail_model("channels_last takes no Indices output");
  Shape out = pooled_shape(ctx, true);
  ctx.set_output(0, ctx.input_dtype(0), out);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kInt64, out);
}

void infer_average_pool(InferContext& ctx) {
  read_flag(ctx, "count_include_pad");
  ctx.set_output(0, ctx.input_dtype(0), pooled_shape(ctx));
}

void infer_global_pool(InferContext& ctx) {
  check_window_input(ctx, 0, 8);
  std::vector<int64_t> out = ctx.input_shape(0).dims();
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(MaxPool, {.min_inputs = 1,
                                .max_inputs = 1,
                                .min_outputs = 1,
                                .max_outputs = 2,
                                .attrs = {{"auto_pad", AttrType::kString},
                                          {"ceil_mode", AttrType::kInt},
                                          {"dilations", AttrType::kInts},
                                          {"kernel_shape", AttrType::kInts, true},
                                          {"pads", AttrType::kInts},
                                          {"storage_order", AttrType::kInt},
                                          {"strides", AttrType::kInts},
                                          {"channels_last", AttrType::kInt}},
                                .infer = &infer_max_pool});

LUMEN_REGISTER_SCHEMA(AveragePool, {.min_inputs = 1,
                                    .max_inputs = 1,
                                    .attrs = {{"auto_pad", AttrType::kString},
                                              {"ceil_mode", AttrType::kInt},
                                              {"count_include_pad", AttrType::kInt},
                                              {"dilations", AttrType::kInts},
                                              {"kernel_shape", AttrType::kInts, true},
                                              {"pads", AttrType::kInts},
                                              {"strides", AttrType::kInts},
                                              {"channels_last", AttrType::kInt}},
                                    .infer = &infer_average_pool});

LUMEN_REGISTER_SCHEMA(GlobalAveragePool,
                      {.min_inputs = 1, .max_inputs = 1, .attrs = {}, .infer = &infer_global_pool});
LUMEN_REGISTER_SCHEMA(GlobalMaxPool,
                      {.min_inputs = 1, .max_inputs = 1, .attrs = {}, .infer = &infer_global_pool});

}  // namespace lumen
