// Resolved attributes and dimensions of the opset-27 ops of linear-attention layers (Gated
// DeltaNet, Mamba): LinearAttention and CausalConvWithState. The schemas compute them (and
// validate the node); the kernels compute them again, so that both read the ONNX rules alike.
#pragma once

#include <cstdint>

#include "graph/node_context.h"

namespace lumen {

// LinearAttention's update_rule: which of decay (gating) and beta (delta correction) it uses.
enum class LinearUpdateRule { kLinear, kGated, kDelta, kGatedDelta };

// The dimensions of one LinearAttention node. query (B, T, Hq*dk), key (B, T, Hkv*dk),
// value (B, T, Hkv*dv), past_state/present_state (B, Hkv, dk, dv); decay (B, T, Hkv*dk) when
// per_key_decay else (B, T, Hkv); beta (B, T, Hkv) when beta_per_head else (B, T, 1).
struct LinearAttentionSpec {
  LinearUpdateRule rule = LinearUpdateRule::kGatedDelta;
  bool gated = true;  // state decays by exp(decay) each step
  bool delta = true;  // the write is corrected by beta * (v - S^T k)
  int64_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, dk = 0, dv = 0;
  bool per_key_decay = false;
  bool beta_per_head = false;
  bool has_past = false;
  float scale = 0.0f;                   // resolved: the attribute, or 1/sqrt(dk) where it is 0
  DType dtype = DType::kFloat32;        // T: query, key, value, decay, beta and output
  DType state_dtype = DType::kFloat32;  // S: past_state's dtype, else T (present_state's dtype)
};

// Reads and checks a LinearAttention node: InvalidModel for bad attributes or a decay/beta input
// the update rule requires but lacks (or forbids but has), ShapeError for inputs that do not fit.
LinearAttentionSpec linear_attention_spec(const NodeContext& ctx);

// The dimensions of one CausalConvWithState node: input and output (B, C, L), weight (C, 1, k),
// bias (C), past_state/present_state (B, C, k - 1).
struct CausalConvSpec {
  int64_t batch = 0, channels = 0, length = 0, kernel = 0;
  bool silu = false;  // activation 'silu' or its alias 'swish'
  bool has_bias = false;
  bool has_past = false;
  DType dtype = DType::kFloat32;
};

// Reads and checks a CausalConvWithState node (InvalidModel for a bad activation, ShapeError for
// inputs that do not fit).
CausalConvSpec causal_conv_spec(const NodeContext& ctx);

}  // namespace lumen
