// ONNX Attention (opsets 23-25) resolved from a node's inputs and attributes: computed and checked
// by the op's schema, and computed again by its CPU and CUDA kernels, so that all three read one
// geometry.
#pragma once

#include <cstdint>

#include "graph/node_context.h"

namespace lumen {

// Input and output positions of ONNX Attention.
inline constexpr int kAttnQ = 0, kAttnK = 1, kAttnV = 2, kAttnMask = 3, kAttnPastKey = 4,
                     kAttnPastValue = 5, kAttnNonpad = 6;
inline constexpr int kAttnY = 0, kAttnPresentKey = 1, kAttnPresentValue = 2, kAttnQk = 3;

// Element strides of one operand seen as [batch, heads, sequence, depth] (depth contiguous): a
// 4-D tensor's own, or those of a 3-D [batch, sequence, heads * depth] one.
struct AttentionStrides {
  int64_t batch = 0, head = 0, row = 0;
};

// What attn_mask is: absent, boolean (true: the key takes part) or added to the scores.
enum class AttentionMaskKind : uint8_t { kNone, kBool, kAdditive };

struct AttentionGeometry {
  int64_t batch = 0;
  int64_t q_heads = 0, kv_heads = 0;      // kv_heads divides q_heads: query head h reads kv head
                                          // h / (q_heads / kv_heads)
  int64_t q_len = 0;                      // queries per head
  int64_t kv_len = 0;                     // keys in K and V
  int64_t past_len = 0;                   // keys in past_key and past_value (0 without them)
  int64_t total_len = 0;                  // past_len + kv_len: the keys attended, past first
  int64_t head_size = 0;                  // of Q and K
  int64_t v_head_size = 0;                // of V and Y
  bool three_d = false;                   // Q, K, V and Y are [batch, sequence, heads * depth]
  AttentionStrides q, k, v, y;            // in Q, K, V and Y (3-D or 4-D)
  AttentionStrides past_k, past_v;        // in past_key/past_value and present_key/present_value,
  AttentionStrides present_k, present_v;  // always 4-D and contiguous
  bool has_past = false;
  bool has_present_key = false, has_present_value = false;  // those outputs exist
  bool has_qk = false;                                      // the qk_matmul_output output exists
  int qk_mode = 0;       // what it holds: 0 scale*QK^T, 1 after softcap, 2 plus the bias, 3 softmax
  float scale = 1.0f;    // the attribute, or 1/sqrt(head_size)
  float softcap = 0.0f;  // 0: none, else scores become softcap * tanh(scores / softcap)
  bool causal = false;
  // Sliding window (opset 25): query at absolute position p attends keys in
  // [p - left_window, p + right_window]; -1 leaves that side open.
  int64_t left_window = -1, right_window = -1;
  bool has_nonpad = false;  // nonpad_kv_seqlen [batch] (int64) given
  AttentionMaskKind mask = AttentionMaskKind::kNone;
  // The mask's element strides along [batch, q head, query] (0 where it broadcasts) and the
  // length of its last dim (keys at or past it are masked out: opset 24's padding with -inf,
  // which ONNX's reference applies to every version). Its key dim is contiguous.
  int64_t mask_batch = 0, mask_head = 0, mask_row = 0, mask_len = 0;
};

// The causal and window limits of query `i` of batch `b`'s rows: the keys it may attend are
// [lo, hi) (before attn_mask is applied; lo >= hi when there is none). `nonpad` is that batch's
// nonpad_kv_seqlen when given (else ignored).
struct AttentionKeyRange {
  int64_t lo = 0, hi = 0;
};
inline AttentionKeyRange attention_key_range(const AttentionGeometry& g, int64_t i,
                                             int64_t nonpad) {
  // Position of the query block's first query among the keys (bottom-right alignment).
  const int64_t offset = g.has_past ? g.past_len : g.has_nonpad ? nonpad - g.q_len : 0;
  const int64_t p = offset + i;
  AttentionKeyRange r{0, g.total_len};
  if (g.has_nonpad && nonpad < r.hi) r.hi = nonpad < 0 ? 0 : nonpad;
  if (g.mask != AttentionMaskKind::kNone && g.mask_len < r.hi) r.hi = g.mask_len;
  if (g.causal && p + 1 < r.hi) r.hi = p + 1;
  if (g.right_window >= 0 && p + g.right_window + 1 < r.hi) r.hi = p + g.right_window + 1;
  if (g.left_window >= 0 && p - g.left_window > r.lo) r.lo = p - g.left_window;
  return r;
}

// The geometry of an Attention node; ShapeError or InvalidModel (naming the node) when its
// inputs and attributes do not fit together.
AttentionGeometry attention_geometry(const NodeContext& ctx);

}  // namespace lumen
