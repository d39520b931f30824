// Schema of FusedAttention, the scaled-dot-product attention the optimizer's fuse-attention pass
// makes from MatMul -> scale -> [Add mask] -> Softmax -> MatMul:
//   Y = softmax(scale * Q @ K^T + mask, last axis) @ V
// Q [..., Sq, D]; K [..., Sk, D], or K^T [..., D, Sk] when k_transposed = 1 (the layout exporters
// hand to the first MatMul); V [..., Sk, Dv]; the optional additive mask broadcasts onto the
// scores [..., Sq, Sk]. Q, K and V share their leading (batch, head) dims exactly, except with
// kv_group = G > 1 (grouped-query attention, the fold-kv-group pass): then K and V have Q's heads
// (the dim before the last two) divided by G, and query head h reads key/value head h / G.
// Y [..., Sq, Dv].
#include <string>

#include "graph/schema.h"
#include "graph/schemas/strided_attention.h"

namespace lumen {
namespace {

void infer_fused_attention(InferContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::kFloat32)
      ctx.fail_shape("input " + std::to_string(i) + " must be float32, not " +
                     dtype_name(ctx.input_dtype(i)));
  const int64_t k_transposed = ctx.attr_int("k_transposed", 0);
  if (k_transposed != 0 && k_transposed != 1) ctx.fail_model("k_transposed must be 0 or 1");
  const Shape& q = ctx.input_shape(0);
  const Shape& k = ctx.input_shape(1);
  const Shape& v = ctx.input_shape(2);
  const int rank = q.rank();
  if (rank < 2 || k.rank() != rank || v.rank() != rank)
    ctx.fail_shape("Q, K and V must have one rank of 2 or more, got " + q.to_string() + ", " +
                   k.to_string() + ", " + v.to_string());
  const int64_t group = ctx.attr_int("kv_group", 1);
  if (group < 1 || (group > 1 && rank < 3))
    ctx.fail_model("kv_group must be 1, or above 1 with a heads dim, got " + std::to_string(group));
  for (int d = 0; d < rank - 2; ++d) {
    const int64_t want = d == rank - 3 ? q.dims()[d] / group : q.dims()[d];
    if ((d == rank - 3 && q.dims()[d] % group != 0) || k.dims()[d] != want || v.dims()[d] != want)
      ctx.fail_shape("Q " + q.to_string() + ", K " + k.to_string() + " and V " + v.to_string() +
                     " must share their leading dims" +
                     (group > 1 ? " (heads divided by kv_group " + std::to_string(group) + ")"
                                : std::string()));
  }
  const int64_t depth = q.dims()[rank - 1];
  const int64_t sk = k.dims()[rank - 2 + k_transposed];
  const int64_t k_depth = k.dims()[rank - 1 - k_transposed];
  if (k_depth != depth || v.dims()[rank - 2] != sk)
    ctx.fail_shape("Q " + q.to_string() + ", K" + (k_transposed ? "^T " : " ") + k.to_string() +
                   " and V " + v.to_string() + " do not fit together");
  check_attention_mask(ctx, q, sk);
  Shape y = q;
  y.dims()[rank - 1] = v.dims()[rank - 1];
  ctx.set_output(0, DType::kFloat32, y);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(FusedAttention, {.min_inputs = 3,
                                       .max_inputs = 4,
                                       .attrs = {{"scale", AttrType::kFloat, true},
                                                 {"k_transposed", AttrType::kInt},
                                                 {"kv_group", AttrType::kInt}},
                                       .infer = &infer_fused_attention});

}  // namespace lumen
