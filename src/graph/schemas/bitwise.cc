// Schemas of the bit ops: BitShift (ONNX opset 11), BitwiseAnd, BitwiseOr, BitwiseXor and
// BitwiseNot (opset 18), and BitCast (opset 26).
#include <string>

#include "graph/onnx_dtype.h"
#include "graph/schema.h"
#include "graph/schemas/elementwise_infer.h"

namespace lumen {
namespace {

bool is_unsigned_integer(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
}

bool is_whole_byte_integer(DType t) {
  return is_integer(t) && t != DType::kInt4 && t != DType::kUInt4 && t != DType::kInt2 &&
         t != DType::kUInt2;
}

// The eight integer dtypes of ONNX's bitwise ops (not the narrow 4- and 2-bit ones).
bool is_bitwise_integer(DType t) {
  return is_unsigned_integer(t) || t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 ||
         t == DType::kInt64;
}

// Bits of one element as ONNX counts them (bool is one byte; the narrow types are 8, 4 or 2 bits
// although Lumen stores each in a byte).
int bit_width(DType t) {
  switch (t) {
    case DType::kFloat4E2M1:
    case DType::kUInt4:
    case DType::kInt4:
      return 4;
    case DType::kUInt2:
    case DType::kInt2:
      return 2;
    default:
      return static_cast<int>(dtype_size(t)) * 8;
  }
}

// BitShift(X, Y, direction): X shifted left or right by Y bits, element-wise with broadcasting;
// both inputs of one integer dtype (unsigned before opset 28, which added the signed ones; lumen
// runs them at every opset).
void infer_bit_shift(InferContext& ctx) {
  std::string direction = ctx.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    ctx.fail_model("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"" + direction +
                   "\"");
  require_input(ctx, 0, is_whole_byte_integer(ctx.input_dtype(0)),
                "an 8- to 64-bit integer tensor");
  require_same_dtype(ctx, {0, 1});
  ctx.set_output(0, ctx.input_dtype(0), broadcast_inputs(ctx, {0, 1}));
}

// BitwiseAnd / Or / Xor(A, B): integers of one dtype, broadcast together.
void infer_bitwise_binary(InferContext& ctx) {
  require_input(ctx, 0, is_bitwise_integer(ctx.input_dtype(0)), "an integer tensor");
  require_same_dtype(ctx, {0, 1});
  ctx.set_output(0, ctx.input_dtype(0), broadcast_inputs(ctx, {0, 1}));
}

void infer_bitwise_not(InferContext& ctx) {
  require_input(ctx, 0, is_bitwise_integer(ctx.input_dtype(0)), "an integer tensor");
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

// BitCast(input, to): the same bits read as dtype `to`, which must be as wide as the input's.
void infer_bit_cast(InferContext& ctx) {
  const int64_t to = ctx.attr_int("to");
  std::optional<DType> out = dtype_from_onnx(to);
  if (!out)
    ctx.fail_unsupported("'to' is " + onnx_dtype_name(to) + ", which Lumen has no dtype for");
  const DType in = ctx.input_dtype(0);
  if (bit_width(in) != bit_width(*out))
    ctx.fail_shape(std::string("cannot reinterpret ") + dtype_name(in) + " (" +
                   std::to_string(bit_width(in)) + " bits) as " + dtype_name(*out) + " (" +
                   std::to_string(bit_width(*out)) + " bits): the widths must match");
  ctx.set_output(0, *out, ctx.input_shape(0));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(BitShift, {.min_inputs = 2,
                                 .max_inputs = 2,
                                 .attrs = {{"direction", AttrType::kString, true}},
                                 .infer = &infer_bit_shift});
LUMEN_REGISTER_SCHEMA(
    BitwiseAnd, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_bitwise_binary});
LUMEN_REGISTER_SCHEMA(
    BitwiseOr, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_bitwise_binary});
LUMEN_REGISTER_SCHEMA(
    BitwiseXor, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_bitwise_binary});
LUMEN_REGISTER_SCHEMA(BitwiseNot, {.attrs = {}, .infer = &infer_bitwise_not});
LUMEN_REGISTER_SCHEMA(BitCast, {.attrs = {{"to", AttrType::kInt, true}}, .infer = &infer_bit_cast});

}  // namespace lumen
