// Schema of FusedConcat, which the optimizer's fuse-concat pass makes from DenseNet's
// Concat -> BatchNormalization (as a per-channel Mul and Add) -> [Relu]:
//   Y = activation(Concat(X1, ..., Xn, axis) * scale[c] + shift[c])
// with c the index along `axis`. Inputs: scale [C], shift [C] (float32, C the concatenated
// length), then the pieces X1..Xn (float32, one rank, the same dims off `axis`). `activation` is
// "" (none) or "Relu".
#include <string>

#include "graph/schema.h"
#include "graph/schemas/concat.h"

namespace lumen {
namespace {

void infer_fused_concat(InferContext& ctx) {
  if (ctx.num_inputs() < 3) ctx.fail_model("needs scale, shift and at least one piece");
  int axis = 0;
  const Shape y = concat_shape(ctx, 2, &axis);
  const std::string activation = ctx.attr_string("activation", "");
  if (!activation.empty() && activation != "Relu")
    ctx.fail_model("activation must be \"\" or \"Relu\", not \"" + activation + "\"");
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.input_dtype(i) != DType::kFloat32)
      ctx.fail_shape("input " + std::to_string(i) + " must be float32, not " +
                     dtype_name(ctx.input_dtype(i)));
  for (int i = 0; i < 2; ++i)
    if (ctx.input_shape(i).numel() != y.dims()[axis])
      ctx.fail_shape(std::string(i == 0 ? "scale " : "shift ") + ctx.input_shape(i).to_string() +
                     " must have one value per channel (" + std::to_string(y.dims()[axis]) + ")");
  ctx.set_output(0, DType::kFloat32, y);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(FusedConcat,
                      {.min_inputs = 3,
                       .max_inputs = kVariadic,
                       .attrs = {{"axis", AttrType::kInt, true}, {"activation", AttrType::kString}},
                       .infer = &infer_fused_concat});

}  // namespace lumen
