// Schemas of the quantization ops DynamicQuantizeLinear, the integer products MatMulInteger,
// QLinearMatMul, ConvInteger and QLinearConv, and com.microsoft's QLinearAdd (QuantizeLinear and
// DequantizeLinear are in quant_linear.cc).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "graph/schema.h"
#include "graph/schemas/conv_geometry.h"
#include "graph/schemas/elementwise_infer.h"
#include "graph/schemas/linalg.h"

namespace lumen {
namespace {

bool is_8bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

void require_8bit(const InferContext& ctx, int i, const char* what) {
  if (!is_8bit(ctx.input_dtype(i)))
    ctx.fail_shape(std::string(what) + " must be int8 or uint8, not " +
                   dtype_name(ctx.input_dtype(i)));
}

void require_float_scale(const InferContext& ctx, int i, const char* what) {
  if (ctx.input_dtype(i) != DType::kFloat32)
    ctx.fail_shape(std::string(what) + " must be float32, not " + dtype_name(ctx.input_dtype(i)));
}

// A scale or zero point: a scalar (or one element) for the whole tensor, or a 1-D tensor of
// `per_axis` elements (when per_axis > 0).
void check_param_shape(const InferContext& ctx, int i, const char* what, int64_t per_axis) {
  const Shape& s = ctx.input_shape(i);
  if (s.numel() == 1 && s.rank() <= 1) return;
  if (per_axis > 0 && s.rank() == 1 && s[0] == per_axis) return;
  ctx.fail_shape(std::string(what) + " must be a scalar" +
                 (per_axis > 0 ? " or have shape [" + std::to_string(per_axis) + "]" : "") +
                 ", got " + s.to_string());
}

void infer_dynamic_quantize_linear(InferContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32)
    ctx.fail_shape(std::string("x must be float32, not ") + dtype_name(ctx.input_dtype(0)));
  ctx.set_output(0, DType::kUInt8, ctx.input_shape(0));
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kFloat32, Shape{});
  if (ctx.num_outputs() > 2) ctx.set_output(2, DType::kUInt8, Shape{});
}

// Rows of A (per-row zero points and scales) and columns of B (per-column ones).
int64_t rows_of(const Shape& a) {
  return a.rank() >= 2 ? a[-2] : 1;
}
int64_t cols_of(const Shape& b) {
  return b.rank() >= 2 ? b[-1] : 1;
}

void check_zero_point(const InferContext& ctx, int zp, int data, const char* what,
                      int64_t per_axis) {
  if (!ctx.has_input(zp)) return;
  if (ctx.input_dtype(zp) != ctx.input_dtype(data))
    ctx.fail_shape(std::string(what) + " is " + dtype_name(ctx.input_dtype(zp)) +
                   " but its tensor is " + dtype_name(ctx.input_dtype(data)));
  check_param_shape(ctx, zp, what, per_axis);
}

void infer_matmul_integer(InferContext& ctx) {
  require_8bit(ctx, 0, "A");
  require_8bit(ctx, 1, "B");
  check_zero_point(ctx, 2, 0, "a_zero_point", rows_of(ctx.input_shape(0)));
  check_zero_point(ctx, 3, 1, "b_zero_point", cols_of(ctx.input_shape(1)));
  ctx.set_output(0, DType::kInt32, matmul_shape(ctx, 0, 1));
}

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
void infer_qlinear_matmul(InferContext& ctx) {
  require_8bit(ctx, 0, "a");
  require_8bit(ctx, 3, "b");
  require_8bit(ctx, 7, "y_zero_point");
  const int64_t rows = rows_of(ctx.input_shape(0)), cols = cols_of(ctx.input_shape(3));
  require_float_scale(ctx, 1, "a_scale");
  require_float_scale(ctx, 4, "b_scale");
  require_float_scale(ctx, 6, "y_scale");
  check_param_shape(ctx, 1, "a_scale", rows);
  check_param_shape(ctx, 4, "b_scale", cols);
  check_param_shape(ctx, 6, "y_scale", 0);
  check_zero_point(ctx, 2, 0, "a_zero_point", rows);
  check_zero_point(ctx, 5, 3, "b_zero_point", cols);
  check_param_shape(ctx, 7, "y_zero_point", 0);
  ctx.set_output(0, ctx.input_dtype(7), matmul_shape(ctx, 0, 3));
}

// Conv geometry for integer convolutions: x's (N, C, ...) shape and w at input w_index; returns
// the output shape, (N, M, ...).
Shape integer_conv_shape(InferContext& ctx, const Shape& x, int w_index) {
  const Shape& w = ctx.input_shape(w_index);
  if (x.rank() < 3) ctx.fail_shape("x must have rank 3 or more (N, C, ...), got " + x.to_string());
  if (w.rank() != x.rank())
    ctx.fail_shape("w " + w.to_string() + " must have the rank of x " + x.to_string());
  const int64_t group = ctx.attr_int("group", 1);
  if (group < 1) ctx.fail_model("group must be positive, got " + std::to_string(group));
  if (x[1] % group != 0 || w[0] % group != 0 || w[1] * group != x[1])
    ctx.fail_shape("w " + w.to_string() + " does not fit x " + x.to_string() + " with group " +
                   std::to_string(group));
  ConvGeometry g = window_geometry(ctx, x, conv_kernel_shape(ctx, w), false);
  std::vector<int64_t> out = {x[0], w[0]};
  out.insert(out.end(), g.out.begin(), g.out.end());
  return Shape(out);
}

void infer_conv_integer(InferContext& ctx) {
  require_8bit(ctx, 0, "x");
  require_8bit(ctx, 1, "w");
  const Shape out = integer_conv_shape(ctx, ctx.input_shape(0), 1);
  check_zero_point(ctx, 2, 0, "x_zero_point", 0);
  check_zero_point(ctx, 3, 1, "w_zero_point", out[1]);
  ctx.set_output(0, DType::kInt32, out);
}

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B. With
// channels_last=1 (set by the channels-last pass) x and y are (N, ..., C).
void infer_qlinear_conv(InferContext& ctx) {
  require_8bit(ctx, 0, "x");
  require_8bit(ctx, 3, "w");
  require_8bit(ctx, 7, "y_zero_point");
  const bool channels_last = is_channels_last(ctx);
  const Shape out = integer_conv_shape(
      ctx, channels_last ? to_channels_first(ctx.input_shape(0)) : ctx.input_shape(0), 3);
  require_float_scale(ctx, 1, "x_scale");
  require_float_scale(ctx, 4, "w_scale");
  require_float_scale(ctx, 6, "y_scale");
  check_param_shape(ctx, 1, "x_scale", 0);
  check_param_shape(ctx, 4, "w_scale", out[1]);
  check_param_shape(ctx, 6, "y_scale", 0);
  check_zero_point(ctx, 2, 0, "x_zero_point", 0);
  check_zero_point(ctx, 5, 3, "w_zero_point", out[1]);
  check_param_shape(ctx, 7, "y_zero_point", 0);
  if (ctx.has_input(8)) {
    if (ctx.input_dtype(8) != DType::kInt32)
      ctx.fail_shape(std::string("B must be int32, not ") + dtype_name(ctx.input_dtype(8)));
    const Shape& b = ctx.input_shape(8);
    if (b.rank() != 1 || b[0] != out[1])
      ctx.fail_shape("B must have shape [" + std::to_string(out[1]) + "], got " + b.to_string());
  }
  ctx.set_output(0, ctx.input_dtype(7), channels_last ? to_channels_last(out) : out);
}

// Inputs: A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point (zero points
// optional); A, B, C and the zero points share one 8-bit type; every scale and zero point is a
// scalar; A and B broadcast (NumPy rules).
void infer_qlinear_add(InferContext& ctx) {
  const std::pair<int, const char*> required[] = {
      {0, "A"}, {1, "A_scale"}, {3, "B"}, {4, "B_scale"}, {6, "C_scale"}};
  for (const auto& [k, name] : required)
    if (!ctx.has_input(k)) ctx.fail_model(std::string("input ") + name + " is missing");
  require_8bit(ctx, 0, "A");
  if (ctx.input_dtype(3) != ctx.input_dtype(0))
    ctx.fail_shape(std::string("B is ") + dtype_name(ctx.input_dtype(3)) + " but A is " +
                   dtype_name(ctx.input_dtype(0)));
  for (const auto& [k, name] :
       {std::pair<int, const char*>{1, "A_scale"}, {4, "B_scale"}, {6, "C_scale"}}) {
    require_float_scale(ctx, k, name);
    check_param_shape(ctx, k, name, 0);
  }
  check_zero_point(ctx, 2, 0, "A_zero_point", 0);
  check_zero_point(ctx, 5, 3, "B_zero_point", 0);
  check_zero_point(ctx, 7, 0, "C_zero_point", 0);
  ctx.set_output(0, ctx.input_dtype(0), broadcast_inputs(ctx, {0, 3}));
}

const std::vector<AttrSpec> kConvAttrs = {
    {"auto_pad", AttrType::kString}, {"dilations", AttrType::kInts},
    {"group", AttrType::kInt},       {"kernel_shape", AttrType::kInts},
    {"pads", AttrType::kInts},       {"strides", AttrType::kInts}};
const std::vector<AttrSpec> kQLinearConvAttrs = {
    {"auto_pad", AttrType::kString},   {"dilations", AttrType::kInts}, {"group", AttrType::kInt},
    {"kernel_shape", AttrType::kInts}, {"pads", AttrType::kInts},      {"strides", AttrType::kInts},
    {"channels_last", AttrType::kInt}};

}  // namespace

LUMEN_REGISTER_SCHEMA(DynamicQuantizeLinear,
                      {.max_outputs = 3, .attrs = {}, .infer = &infer_dynamic_quantize_linear});
LUMEN_REGISTER_SCHEMA(
    MatMulInteger, {.min_inputs = 2, .max_inputs = 4, .attrs = {}, .infer = &infer_matmul_integer});
LUMEN_REGISTER_SCHEMA(
    QLinearMatMul, {.min_inputs = 8, .max_inputs = 8, .attrs = {}, .infer = &infer_qlinear_matmul});
LUMEN_REGISTER_SCHEMA(QLinearAdd,
                      {.min_inputs = 1, .max_inputs = 8, .attrs = {}, .infer = &infer_qlinear_add});
LUMEN_REGISTER_SCHEMA(ConvInteger, {.min_inputs = 2,
                                    .max_inputs = 4,
                                    .attrs = kConvAttrs,
                                    .infer = &infer_conv_integer});
LUMEN_REGISTER_SCHEMA(QLinearConv, {.min_inputs = 8,
                                    .max_inputs = 9,
                                    .attrs = kQLinearConvAttrs,
                                    .infer = &infer_qlinear_conv});

}  // namespace lumen
