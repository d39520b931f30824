// Schemas of LinearAttention and CausalConvWithState (opset 27), the two ops of linear-attention
// layers: the recurrent state update of Gated DeltaNet / GLA / RetNet, and the stateful causal
// depthwise convolution in front of it (and in Mamba).
#include "graph/schemas/linear_attention.h"

#include <cmath>
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

bool is_attention_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

void require_attention_float(const NodeContext& ctx, int i, const char* what) {
  const DType t = ctx.input_dtype(i);
  if (!is_attention_float(t))
    ctx.fail_shape(std::string(what) + " must be float32, float16 or bfloat16, not " +
                   dtype_name(t));
}

// Input i must have input 0's dtype (the type T shared by the activations).
void require_same_dtype(const NodeContext& ctx, int i, const char* what) {
  if (ctx.input_dtype(i) != ctx.input_dtype(0))
    ctx.fail_shape(std::string(what) + " must be " + dtype_name(ctx.input_dtype(0)) +
                   " like input 0, not " + dtype_name(ctx.input_dtype(i)));
}

void require_rank(const NodeContext& ctx, int i, const char* what, int rank) {
  if (ctx.input_shape(i).rank() != rank)
    ctx.fail_shape(std::string(what) + " must have rank " + std::to_string(rank) + ", got " +
                   ctx.input_shape(i).to_string());
}

// Input i must be (batch, seq, last) for one of the allowed last dimensions; returns which.
int require_packed(const NodeContext& ctx, int i, const char* what, int64_t batch, int64_t seq,
                   int64_t last_a, int64_t last_b) {
  require_rank(ctx, i, what, 3);
  const Shape& s = ctx.input_shape(i);
  if (s[0] == batch && s[1] == seq && (s[2] == last_a || s[2] == last_b))
    return s[2] == last_a ? 0 : 1;
  std::string want = Shape{batch, seq, last_a}.to_string();
  if (last_b != last_a) want += " or " + Shape{batch, seq, last_b}.to_string();
  ctx.fail_shape(std::string(what) + " must have shape " + want + ", got " + s.to_string());
}

LinearUpdateRule parse_update_rule(const NodeContext& ctx) {
  const std::string rule = ctx.attr_string("update_rule", "gated_delta");
  if (rule == "linear") return LinearUpdateRule::kLinear;
  if (rule == "gated") return LinearUpdateRule::kGated;
  if (rule == "delta") return LinearUpdateRule::kDelta;
  if (rule == "gated_delta") return LinearUpdateRule::kGatedDelta;
  ctx.fail_model("update_rule must be 'linear', 'gated', 'delta' or 'gated_delta', got '" + rule +
                 "'");
}

}  // namespace

LinearAttentionSpec linear_attention_spec(const NodeContext& ctx) {
  constexpr int kQuery = 0, kKey = 1, kValue = 2, kPast = 3, kDecay = 4, kBeta = 5;
  LinearAttentionSpec spec;
  spec.rule = parse_update_rule(ctx);
  spec.gated = spec.rule == LinearUpdateRule::kGated || spec.rule == LinearUpdateRule::kGatedDelta;
  spec.delta = spec.rule == LinearUpdateRule::kDelta || spec.rule == LinearUpdateRule::kGatedDelta;
  const std::string rule = ctx.attr_string("update_rule", "gated_delta");
  spec.q_heads = ctx.attr_int("q_num_heads");
  spec.kv_heads = ctx.attr_int("kv_num_heads");
  if (spec.q_heads < 1 || spec.kv_heads < 1 || spec.q_heads % spec.kv_heads != 0)
    ctx.fail_model("q_num_heads (" + std::to_string(spec.q_heads) +
                   ") must be a positive multiple of kv_num_heads (" +
                   std::to_string(spec.kv_heads) + ")");
  if (ctx.attr_int("chunk_size", 0) < 0) ctx.fail_model("chunk_size must not be negative");
  // The spec's reference forbids the inputs a rule does not use, rather than ignoring them.
  if (spec.gated != ctx.has_input(kDecay))
    ctx.fail_model("update_rule '" + rule + (spec.gated ? "' requires" : "' takes no") +
                   " decay input");
  if (spec.delta != ctx.has_input(kBeta))
    ctx.fail_model("update_rule '" + rule + (spec.delta ? "' requires" : "' takes no") +
                   " beta input");

  require_attention_float(ctx, kQuery, "query");
  require_same_dtype(ctx, kKey, "key");
  require_same_dtype(ctx, kValue, "value");
  spec.dtype = ctx.input_dtype(kQuery);
  require_rank(ctx, kQuery, "query", 3);
  const Shape& q = ctx.input_shape(kQuery);
  spec.batch = q[0];
  spec.seq = q[1];
  if (q[2] < 1 || q[2] % spec.q_heads != 0)
    ctx.fail_shape("query's last dimension " + std::to_string(q[2]) +
                   " must be a positive multiple of q_num_heads (" + std::to_string(spec.q_heads) +
                   ")");
  spec.dk = q[2] / spec.q_heads;
  require_packed(ctx, kKey, "key", spec.batch, spec.seq, spec.kv_heads * spec.dk,
                 spec.kv_heads * spec.dk);
  require_rank(ctx, kValue, "value", 3);
  const Shape& v = ctx.input_shape(kValue);
  if (v[0] != spec.batch || v[1] != spec.seq || v[2] < 1 || v[2] % spec.kv_heads != 0)
    ctx.fail_shape("value must have shape [" + std::to_string(spec.batch) + ", " +
                   std::to_string(spec.seq) + ", kv_num_heads * d_v] with kv_num_heads " +
                   std::to_string(spec.kv_heads) + " and d_v >= 1, got " + v.to_string());
  spec.dv = v[2] / spec.kv_heads;

  spec.state_dtype = spec.dtype;
  if (ctx.has_input(kPast)) {
    spec.has_past = true;
    require_attention_float(ctx, kPast, "past_state");
    spec.state_dtype = ctx.input_dtype(kPast);
    const Shape want{spec.batch, spec.kv_heads, spec.dk, spec.dv};
    if (ctx.input_shape(kPast) != want)
      ctx.fail_shape("past_state must have shape " + want.to_string() +
                     " (batch, kv_num_heads, d_k, d_v), got " + ctx.input_shape(kPast).to_string());
  }
  if (spec.gated) {
    require_same_dtype(ctx, kDecay, "decay");
    spec.per_key_decay = require_packed(ctx, kDecay, "decay", spec.batch, spec.seq,
                                        spec.kv_heads * spec.dk, spec.kv_heads) == 0;
  }
  if (spec.delta) {
    require_same_dtype(ctx, kBeta, "beta");
    spec.beta_per_head =
        require_packed(ctx, kBeta, "beta", spec.batch, spec.seq, spec.kv_heads, 1) == 0;
  }
  const float scale = ctx.attr_float("scale", 0.0f);
  if (!std::isfinite(scale)) ctx.fail_model("scale must be finite");
  spec.scale = scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(spec.dk));
  return spec;
}

CausalConvSpec causal_conv_spec(const NodeContext& ctx) {
  constexpr int kInput = 0, kWeight = 1, kBias = 2, kPast = 3;
  CausalConvSpec spec;
  const std::string activation = ctx.attr_string("activation", "none");
  if (activation == "silu" || activation == "swish") {
    spec.silu = true;
  } else if (activation != "none") {
    ctx.fail_model("activation must be 'silu', 'swish' or 'none', got '" + activation + "'");
  }
  require_attention_float(ctx, kInput, "input");
  require_same_dtype(ctx, kWeight, "weight");
  spec.dtype = ctx.input_dtype(kInput);
  require_rank(ctx, kInput, "input", 3);
  const Shape& x = ctx.input_shape(kInput);
  spec.batch = x[0];
  spec.channels = x[1];
  spec.length = x[2];
  require_rank(ctx, kWeight, "weight", 3);
  const Shape& w = ctx.input_shape(kWeight);
  if (w[0] != spec.channels || w[1] != 1 || w[2] < 1)
    ctx.fail_shape("weight must have shape [" + std::to_string(spec.channels) +
                   ", 1, k] (channels, 1, kernel size k >= 1), got " + w.to_string());
  spec.kernel = w[2];
  if (ctx.has_input(kBias)) {
    spec.has_bias = true;
    require_same_dtype(ctx, kBias, "bias");
    if (ctx.input_shape(kBias) != Shape{spec.channels})
      ctx.fail_shape("bias must have shape [" + std::to_string(spec.channels) + "], got " +
                     ctx.input_shape(kBias).to_string());
  }
  if (ctx.has_input(kPast)) {
    spec.has_past = true;
    require_same_dtype(ctx, kPast, "past_state");
    const Shape want{spec.batch, spec.channels, spec.kernel - 1};
    if (ctx.input_shape(kPast) != want)
      ctx.fail_shape("past_state must have shape " + want.to_string() +
                     " (batch, channels, k - 1), got " + ctx.input_shape(kPast).to_string());
  }
  return spec;
}

namespace {

void infer_linear_attention(InferContext& ctx) {
  const LinearAttentionSpec spec = linear_attention_spec(ctx);
  ctx.set_output(0, spec.dtype, Shape{spec.batch, spec.seq, spec.q_heads * spec.dv});
  if (ctx.num_outputs() > 1)
    ctx.set_output(1, spec.state_dtype, Shape{spec.batch, spec.kv_heads, spec.dk, spec.dv});
}

void infer_causal_conv(InferContext& ctx) {
  const CausalConvSpec spec = causal_conv_spec(ctx);
  ctx.set_output(0, spec.dtype, ctx.input_shape(0));
  if (ctx.num_outputs() > 1)
    ctx.set_output(1, spec.dtype, Shape{spec.batch, spec.channels, spec.kernel - 1});
}

}  // namespace

LUMEN_REGISTER_SCHEMA(LinearAttention, {.min_inputs = 3,
                                        .max_inputs = 6,
                                        .min_outputs = 1,
                                        .max_outputs = 2,
                                        .attrs = {{"chunk_size", AttrType::kInt},
                                                  {"kv_num_heads", AttrType::kInt, true},
                                                  {"q_num_heads", AttrType::kInt, true},
                                                  {"scale", AttrType::kFloat},
                                                  {"update_rule", AttrType::kString}},
                                        .infer = &infer_linear_attention});
LUMEN_REGISTER_SCHEMA(CausalConvWithState, {.min_inputs = 2,
                                            .max_inputs = 4,
                                            .min_outputs = 1,
                                            .max_outputs = 2,
                                            .attrs = {{"activation", AttrType::kString}},
                                            .infer = &infer_causal_conv});

}  // namespace lumen
