// Schema of the bit ops: BitShift (ONNX opset 11).
#include <string>

#include "graph/schema.h"
#include "graph/schemas/elementwise_infer.h"

namespace lumen {
namespace {

bool is_whole_byte_integer(DType t) {
  return is_integer(t) && t != DType::kInt4 && t != DType::kUInt4 && t != DType::kInt2 &&
         t != DType::kUInt2;
}

// BitShift(X, Y, direction): X shifted left or right by Y bits, element-wise with broadcasting;
// both inputs of one integer dtype (unsigned before opset 28, which added the signed ones; lumen
// runs them at every opset).
void infer_bit_shift(InferContext& ctx) {
  std::string direction = ctx.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    ctx.fail_model("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"" + direction +
                   "\"");
  require_input(ctx, 0, is_whole_byte_integer(ctx.input_dtype(0)), "an 8- to 64-bit integer tensor");
  require_same_dtype(ctx, {0, 1});
  ctx.set_output(0, ctx.input_dtype(0), broadcast_inputs(ctx, {0, 1}));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(BitShift, {.min_inputs = 2,
                                 .max_inputs = 2,
                                 .attrs = {{"direction", AttrType::kString, true}},
                                 .infer = &infer_bit_shift});

}  // namespace lumen
