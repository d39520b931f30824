// Schema of ONNX Attention (opsets 23, 24 and 25: one op, the later versions adding inputs and
// attributes), scaled dot-product attention over heads:
//   Y = softmax(softcap(scale * Q K^T) + bias) V
// Q [B, Hq, Sq, D], K [B, Hkv, S, D], V [B, Hkv, S, Dv], or 3-D [B, S, H * D] with q_num_heads
// and kv_num_heads; Hkv divides Hq (grouped- and multi-query attention). past_key/past_value
// [B, Hkv, P, D/Dv] go before K and V; present_key/present_value [B, Hkv, P + S, D/Dv] are the
// concatenations. The bias sums attn_mask (boolean, or added; broadcast onto [B, Hq, Sq, P + S],
// its last dim padded as masked), the causal frontier (bottom-right aligned), opset 25's sliding
// window and opset 24's nonpad_kv_seqlen. qk_matmul_output [B, Hq, Sq, P + S] holds the scores at
// the stage qk_matmul_output_mode names. Q and K share one float type (Y's), V may have another.
#include "graph/schemas/attention.h"

#include <cmath>
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

bool attention_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat64;
}

// Strides of a contiguous [B, H, S, D] tensor.
AttentionStrides strides_4d(int64_t heads, int64_t len, int64_t depth) {
  return {heads * len * depth, len * depth, depth};
}

// Strides of a [B, S, H * D] tensor seen as [B, H, S, D].
AttentionStrides strides_3d(int64_t heads, int64_t len, int64_t depth) {
  return {len * heads * depth, depth, heads * depth};
}

void infer_attention(InferContext& ctx) {
  const AttentionGeometry g = attention_geometry(ctx);
  const DType t1 = ctx.input_dtype(kAttnQ), t2 = ctx.input_dtype(kAttnV);
  if (g.three_d)
    ctx.set_output(kAttnY, t1, Shape({g.batch, g.q_len, g.q_heads * g.v_head_size}));
  else
    ctx.set_output(kAttnY, t1, Shape({g.batch, g.q_heads, g.q_len, g.v_head_size}));
  if (g.has_present_key)
    ctx.set_output(kAttnPresentKey, ctx.input_dtype(kAttnK),
                   Shape({g.batch, g.kv_heads, g.total_len, g.head_size}));
  if (g.has_present_value)
    ctx.set_output(kAttnPresentValue, t2, Shape({g.batch, g.kv_heads, g.total_len, g.v_head_size}));
  if (g.has_qk) ctx.set_output(kAttnQk, t1, Shape({g.batch, g.q_heads, g.q_len, g.total_len}));
}

// Checks attn_mask against the scores [B, Hq, Sq, T] and sets its kind and strides.
void read_mask(const NodeContext& ctx, AttentionGeometry& g) {
  if (!ctx.has_input(kAttnMask)) return;
  const DType mt = ctx.input_dtype(kAttnMask);
  if (mt == DType::kBool)
    g.mask = AttentionMaskKind::kBool;
  else if (attention_float(mt))
    g.mask = AttentionMaskKind::kAdditive;
  else
    ctx.fail_shape(std::string("attn_mask must be bool or a float type, not ") + dtype_name(mt));
  const Shape& m = ctx.input_shape(kAttnMask);
  const int rank = m.rank();
  if (rank < 1 || rank > 4) ctx.fail_shape("attn_mask must have rank 1 to 4, got " + m.to_string());
  const int64_t scores[4] = {g.batch, g.q_heads, g.q_len, g.total_len};
  int64_t strides[3] = {0, 0, 0};
  int64_t acc = m[-1];
  bool ok = m[-1] <= g.total_len;
  for (int i = 2; i <= rank; ++i) {  // the dims before the key dim, from the right
    const int64_t md = m.dims()[rank - i], sd = scores[4 - i];
    ok = ok && (md == sd || md == 1);
    if (md != 1) strides[4 - i] = acc;
    acc *= md;
  }
  if (!ok)
    ctx.fail_shape("attn_mask " + m.to_string() + " does not broadcast onto the scores [" +
                   std::to_string(g.batch) + ", " + std::to_string(g.q_heads) + ", " +
                   std::to_string(g.q_len) + ", " + std::to_string(g.total_len) +
                   "] (its last dim may be shorter)");
  g.mask_batch = strides[0];
  g.mask_head = strides[1];
  g.mask_row = strides[2];
  g.mask_len = m[-1];
}

}  // namespace

AttentionGeometry attention_geometry(const NodeContext& ctx) {
  AttentionGeometry g;
  const DType t1 = ctx.input_dtype(kAttnQ);
  if (!attention_float(t1))
    ctx.fail_shape(std::string("Q must be float32, float16, bfloat16 or float64, not ") +
                   dtype_name(t1));
  if (ctx.input_dtype(kAttnK) != t1)
    ctx.fail_shape(std::string("K must have Q's type ") + dtype_name(t1) + ", not " +
                   dtype_name(ctx.input_dtype(kAttnK)));
  const DType t2 = ctx.input_dtype(kAttnV);
  if (!attention_float(t2))
    ctx.fail_shape(std::string("V must be float32, float16, bfloat16 or float64, not ") +
                   dtype_name(t2));
  const Shape& q = ctx.input_shape(kAttnQ);
  const Shape& k = ctx.input_shape(kAttnK);
  const Shape& v = ctx.input_shape(kAttnV);
  const int rank = q.rank();
  if ((rank != 3 && rank != 4) || k.rank() != rank || v.rank() != rank)
    ctx.fail_shape("Q, K and V must all be 3-D or all 4-D, got " + q.to_string() + ", " +
                   k.to_string() + ", " + v.to_string());
  if (k[0] != q[0] || v[0] != q[0])
    ctx.fail_shape("Q " + q.to_string() + ", K " + k.to_string() + " and V " + v.to_string() +
                   " must have one batch size");
  g.batch = q[0];
  const bool has_q_heads = ctx.has_attr("q_num_heads"), has_kv_heads = ctx.has_attr("kv_num_heads");
  g.three_d = rank == 3;
  if (g.three_d) {
    if (!has_q_heads || !has_kv_heads)
      ctx.fail_model("3-D Q, K and V need the attributes q_num_heads and kv_num_heads");
    g.q_heads = ctx.attr_int("q_num_heads");
    g.kv_heads = ctx.attr_int("kv_num_heads");
    if (g.q_heads <= 0 || g.kv_heads <= 0)
      ctx.fail_model("q_num_heads and kv_num_heads must be positive, got " +
                     std::to_string(g.q_heads) + " and " + std::to_string(g.kv_heads));
    if (q[2] % g.q_heads != 0 || k[2] % g.kv_heads != 0 || v[2] % g.kv_heads != 0)
      ctx.fail_shape("hidden sizes of Q " + q.to_string() + ", K " + k.to_string() + " and V " +
                     v.to_string() + " are not multiples of q_num_heads " +
                     std::to_string(g.q_heads) + " and kv_num_heads " + std::to_string(g.kv_heads));
    g.q_len = q[1];
    g.kv_len = k[1];
    g.head_size = q[2] / g.q_heads;
    g.v_head_size = v[2] / g.kv_heads;
    if (k[2] / g.kv_heads != g.head_size)
      ctx.fail_shape("K " + k.to_string() + " with " + std::to_string(g.kv_heads) +
                     " heads has another head size than Q " + q.to_string() + " with " +
                     std::to_string(g.q_heads));
    if (v[1] != g.kv_len)
      ctx.fail_shape("K " + k.to_string() + " and V " + v.to_string() +
                     " must have one sequence length");
  } else {
    g.q_heads = q[1];
    g.kv_heads = k[1];
    g.q_len = q[2];
    g.kv_len = k[2];
    g.head_size = q[3];
    g.v_head_size = v[3];
    if (v[1] != g.kv_heads || v[2] != g.kv_len)
      ctx.fail_shape("K " + k.to_string() + " and V " + v.to_string() +
                     " must have one head count and sequence length");
    if (k[3] != g.head_size)
      ctx.fail_shape("Q " + q.to_string() + " and K " + k.to_string() + " must have one head size");
    if ((has_q_heads && ctx.attr_int("q_num_heads") != g.q_heads) ||
        (has_kv_heads && ctx.attr_int("kv_num_heads") != g.kv_heads))
      ctx.fail_shape("q_num_heads/kv_num_heads disagree with 4-D Q " + q.to_string() + " and K " +
                     k.to_string());
  }
  if (g.kv_heads <= 0 || g.q_heads % g.kv_heads != 0)
    ctx.fail_shape("the " + std::to_string(g.kv_heads) + " heads of K and V do not divide the " +
                   std::to_string(g.q_heads) + " heads of Q");
  if (g.three_d) {
    g.q = strides_3d(g.q_heads, g.q_len, g.head_size);
    g.k = strides_3d(g.kv_heads, g.kv_len, g.head_size);
    g.v = strides_3d(g.kv_heads, g.kv_len, g.v_head_size);
    g.y = strides_3d(g.q_heads, g.q_len, g.v_head_size);
  } else {
    g.q = strides_4d(g.q_heads, g.q_len, g.head_size);
    g.k = strides_4d(g.kv_heads, g.kv_len, g.head_size);
    g.v = strides_4d(g.kv_heads, g.kv_len, g.v_head_size);
    g.y = strides_4d(g.q_heads, g.q_len, g.v_head_size);
  }

  // past_key and past_value, together.
  const bool pk = ctx.has_input(kAttnPastKey), pv = ctx.has_input(kAttnPastValue);
  if (pk != pv) ctx.fail_model("past_key and past_value must be given together");
  g.has_past = pk;
  if (g.has_past) {
    const Shape& a = ctx.input_shape(kAttnPastKey);
    const Shape& b = ctx.input_shape(kAttnPastValue);
    if (a.rank() != 4 || b.rank() != 4 || a[0] != g.batch || a[1] != g.kv_heads ||
        a[3] != g.head_size || b[0] != g.batch || b[1] != g.kv_heads || b[2] != a[2] ||
        b[3] != g.v_head_size)
      ctx.fail_shape("past_key " + a.to_string() + " and past_value " + b.to_string() +
                     " must be [" + std::to_string(g.batch) + ", " + std::to_string(g.kv_heads) +
                     ", P, " + std::to_string(g.head_size) + "] and [..., P, " +
                     std::to_string(g.v_head_size) + "]");
    if (ctx.input_dtype(kAttnPastKey) != t1 || ctx.input_dtype(kAttnPastValue) != t2)
      ctx.fail_shape("past_key and past_value must have the types of K and V");
    g.past_len = a[2];
  }
  g.total_len = g.past_len + g.kv_len;
  g.past_k = strides_4d(g.kv_heads, g.past_len, g.head_size);
  g.past_v = strides_4d(g.kv_heads, g.past_len, g.v_head_size);
  g.present_k = strides_4d(g.kv_heads, g.total_len, g.head_size);
  g.present_v = strides_4d(g.kv_heads, g.total_len, g.v_head_size);

  if (ctx.has_input(kAttnNonpad)) {
    const Shape& n = ctx.input_shape(kAttnNonpad);
    if (ctx.input_dtype(kAttnNonpad) != DType::kInt64 || n.rank() != 1 || n[0] != g.batch)
      ctx.fail_shape("nonpad_kv_seqlen must be int64 [" + std::to_string(g.batch) + "], got " +
                     dtype_name(ctx.input_dtype(kAttnNonpad)) + " " + n.to_string());
    g.has_nonpad = true;
  }
  read_mask(ctx, g);

  g.causal = ctx.attr_int("is_causal", 0) != 0;
  g.scale = ctx.has_attr("scale") ? ctx.attr_float("scale", 1.0f)
                                  : 1.0f / std::sqrt(static_cast<float>(g.head_size));
  g.softcap = ctx.attr_float("softcap", 0.0f);
  if (!(g.softcap >= 0.0f)) ctx.fail_model("softcap must be 0 (none) or positive");
  g.left_window = ctx.attr_int("left_window_size", -1);
  g.right_window = ctx.attr_int("right_window_size", -1);
  if (g.left_window < -1 || g.right_window < -1)
    ctx.fail_model("left_window_size and right_window_size must be -1 (unbounded) or more");
  g.qk_mode = static_cast<int>(ctx.attr_int("qk_matmul_output_mode", 0));
  if (g.qk_mode < 0 || g.qk_mode > 3) ctx.fail_model("qk_matmul_output_mode must be 0 to 3");
  if (ctx.has_attr("softmax_precision")) {
    // The kernels compute the softmax in float32 (float16 and bfloat16 ones too), rounding once
    // into the output type; float64 runs in float32 as well.
    const int64_t p = ctx.attr_int("softmax_precision");
    if (p != 1 && p != 10 && p != 11 && p != 16)
      ctx.fail_model(
          "softmax_precision must be 1 (float), 10 (float16), 11 (double) or 16 "
          "(bfloat16), got " +
          std::to_string(p));
  }
  g.has_present_key = ctx.num_outputs() > kAttnPresentKey;
  g.has_present_value = ctx.num_outputs() > kAttnPresentValue;
  g.has_qk = ctx.num_outputs() > kAttnQk;
  return g;
}

LUMEN_REGISTER_SCHEMA(Attention, {.min_inputs = 3,
                                  .max_inputs = 7,
                                  .min_outputs = 1,
                                  .max_outputs = 4,
                                  .attrs = {{"is_causal", AttrType::kInt},
                                            {"kv_num_heads", AttrType::kInt},
                                            {"q_num_heads", AttrType::kInt},
                                            {"qk_matmul_output_mode", AttrType::kInt},
                                            {"scale", AttrType::kFloat},
                                            {"softcap", AttrType::kFloat},
                                            {"softmax_precision", AttrType::kInt},
                                            {"left_window_size", AttrType::kInt},
                                            {"right_window_size", AttrType::kInt}},
                                  .infer = &infer_attention});

}  // namespace lumen
