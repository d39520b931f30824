// Schemas of QuantizeLinear and DequantizeLinear through opset 25: per-tensor, per-axis and
// blocked (opset 21, `block_size`) scales; quantized types int8/uint8, int16/uint16 (21), the
// float8 variants (19), int4/uint4 (21), float4e2m1 (23) and int2/uint2 (25); `output_dtype` (21),
// `precision` (23) and float8e8m0 scales (24).
#include <optional>
#include <string>

#include "core/narrow_types.h"
#include "graph/onnx_dtype.h"
#include "graph/schema.h"
#include "graph/schemas/quant_layout.h"

namespace lumen {
namespace {

bool is_quantized_type(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
      return true;
    default:
      return is_narrow(t) && t != DType::kFloat8E8M0;
  }
}

bool is_real_type(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Checks the scale's shape against x's: a scalar (or one element) per tensor; with block_size,
// x's shape but ceil(x[axis] / block_size) along the axis; else 1-D, one per index of the axis.
void check_scale_shape(const InferContext& ctx, const char* name) {
  const Shape& x = ctx.input_shape(0);
  const Shape& s = ctx.input_shape(1);
  const int64_t block = ctx.attr_int("block_size", 0);
  if (block < 0) ctx.fail_model("block_size must not be negative, got " + std::to_string(block));
  if (s.numel() == 1 && s.rank() <= 1) return;
  const int64_t axis_attr = ctx.attr_int("axis", 1);
  if (axis_attr < -x.rank() || axis_attr >= x.rank())
    ctx.fail_shape("axis " + std::to_string(axis_attr) + " is out of range for x " + x.to_string());
  const int axis = normalize_axis(axis_attr, x.rank());
  if (block == 0) {
    if (s.rank() != 1 || s[0] != x[axis])
      ctx.fail_shape(std::string(name) + " " + s.to_string() +
                     " must be a scalar or have one element per index of axis " +
                     std::to_string(axis) + " of x " + x.to_string() +
                     " (or give block_size for blocked quantization)");
    return;
  }
  bool fits = s.rank() == x.rank();
  for (int d = 0; fits && d < x.rank(); ++d)
    fits = d == axis ? s[d] == (x[d] + block - 1) / block : s[d] == x[d];
  if (!fits)
    ctx.fail_shape(std::string(name) + " " + s.to_string() + " does not block x " + x.to_string() +
                   " along axis " + std::to_string(axis) + " in blocks of " +
                   std::to_string(block));
}

// The zero point has the scale's shape; per tensor, any one-element shape of rank 0 or 1 ([] and
// [1] mix in ONNX's own test models).
void check_zero_point(const InferContext& ctx, const char* name) {
  if (!ctx.has_input(2)) return;
  const Shape& z = ctx.input_shape(2);
  const Shape& s = ctx.input_shape(1);
  auto one = [](const Shape& t) { return t.numel() == 1 && t.rank() <= 1; };
  if (one(s) && one(z)) return;
  if (z != s)
    ctx.fail_shape(std::string(name) + " " + ctx.input_shape(2).to_string() +
                   " must have the shape of the scale " + ctx.input_shape(1).to_string());
}

// The dtype of an `output_dtype`-like attribute, or nullopt when absent (0 counts as absent).
std::optional<DType> dtype_attr(const InferContext& ctx, const char* name) {
  const int64_t code = ctx.attr_int(name, 0);
  if (code == 0) return std::nullopt;
  std::optional<DType> d = dtype_from_onnx(code);
  if (!d)
    ctx.fail_unsupported(std::string(name) + " " + onnx_dtype_name(code) + " is not supported");
  return d;
}

void infer_quantize_linear(InferContext& ctx) {
  const DType xt = ctx.input_dtype(0), st = ctx.input_dtype(1);
  if (!is_real_type(xt) && xt != DType::kInt32)
    ctx.fail_shape(std::string("x must be float32, float16, bfloat16 or int32, not ") +
                   dtype_name(xt));
  if (!is_real_type(st) && st != DType::kInt32 && st != DType::kFloat8E8M0)
    ctx.fail_shape(
        std::string("y_scale must be float32, float16, bfloat16, int32 or float8e8m0, not ") +
        dtype_name(st));
  std::optional<DType> out = dtype_attr(ctx, "output_dtype");
  if (ctx.has_input(2)) {
    const DType zt = ctx.input_dtype(2);
    if (out && *out != zt)
      ctx.fail_model(std::string("output_dtype is ") + dtype_name(*out) + " but y_zero_point is " +
                     dtype_name(zt));
    out = zt;
  }
  if (!out) out = DType::kUInt8;
  if (!is_quantized_type(*out))
    ctx.fail_shape(std::string("cannot quantize to ") + dtype_name(*out));
  if (std::optional<DType> p = dtype_attr(ctx, "precision")) {
    if (!is_real_type(*p) && *p != DType::kFloat64)
      ctx.fail_shape(std::string("precision must be float32, float16, bfloat16 or float64, not ") +
                     dtype_name(*p));
  }
  check_scale_shape(ctx, "y_scale");
  check_zero_point(ctx, "y_zero_point");
  ctx.set_output(0, *out, ctx.input_shape(0));
}

void infer_dequantize_linear(InferContext& ctx) {
  const DType xt = ctx.input_dtype(0), st = ctx.input_dtype(1);
  if (!is_quantized_type(xt) && xt != DType::kInt32)
    ctx.fail_shape(std::string("cannot dequantize ") + dtype_name(xt));
  if (!is_real_type(st) && st != DType::kFloat8E8M0)
    ctx.fail_shape(std::string("x_scale must be float32, float16, bfloat16 or float8e8m0, not ") +
                   dtype_name(st));
  std::optional<DType> out = dtype_attr(ctx, "output_dtype");
  if (!out) {
    if (st == DType::kFloat8E8M0)
      ctx.fail_model("a float8e8m0 x_scale needs output_dtype to name the output's type");
    out = st;
  }
  if (!is_real_type(*out))
    ctx.fail_shape(std::string("output_dtype must be float32, float16 or bfloat16, not ") +
                   dtype_name(*out));
  check_scale_shape(ctx, "x_scale");
  if (ctx.has_input(2) && ctx.input_dtype(2) != xt)
    ctx.fail_shape(std::string("x_zero_point is ") + dtype_name(ctx.input_dtype(2)) + " but x is " +
                   dtype_name(xt));
  check_zero_point(ctx, "x_zero_point");
  ctx.set_output(0, *out, ctx.input_shape(0));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(QuantizeLinear, {.min_inputs = 2,
                                       .max_inputs = 3,
                                       .attrs = {{"axis", AttrType::kInt},
                                                 {"saturate", AttrType::kInt},
                                                 {"block_size", AttrType::kInt},
                                                 {"output_dtype", AttrType::kInt},
                                                 {"precision", AttrType::kInt}},
                                       .infer = &infer_quantize_linear});
LUMEN_REGISTER_SCHEMA(DequantizeLinear, {.min_inputs = 2,
                                         .max_inputs = 3,
                                         .attrs = {{"axis", AttrType::kInt},
                                                   {"block_size", AttrType::kInt},
                                                   {"output_dtype", AttrType::kInt}},
                                         .infer = &infer_dequantize_linear});

QuantParamLayout quant_param_layout(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& s = ctx.input_shape(1);
  QuantParamLayout l;
  if (s.numel() == 1 && s.rank() <= 1) {
    l.inner = x.numel();
    return l;
  }
  const int axis = normalize_axis(ctx.attr_int("axis", 1), x.rank());
  for (int d = 0; d < axis; ++d) l.outer *= x[d];
  l.axis_len = x[axis];
  for (int d = axis + 1; d < x.rank(); ++d) l.inner *= x[d];
  const int64_t block = ctx.attr_int("block_size", 0);
  if (block > 0) {
    l.block = block;
    l.p_inner = 1;
    l.p_axis = l.inner;
    l.p_outer = s[axis] * l.inner;
  } else {
    l.p_axis = 1;
  }
  return l;
}

}  // namespace lumen
