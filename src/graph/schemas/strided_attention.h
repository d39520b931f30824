// StridedAttention's views, resolved from its attributes: computed once by its schema (which
// validates them against the node's inputs and output) and again by its CPU kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/node_context.h"

namespace lumen {

// A strided view of a tensor's elements: element (i_0, ..., i_{R-1}) of `shape` lies at
// offset + sum_d i_d * strides[d] of the underlying contiguous buffer.
struct TensorView {
  Shape shape;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// Q [..., Sq, D] in input 0, K [..., Sk, D] in input 1, V [..., Sk, Dv] in input 2 and
// Y [..., Sq, Dv] in the output, one leading (batch, head) shape for all four. Q's, V's and Y's
// last dim is contiguous (stride 1); K's depth or sequence dim is.
struct AttentionViews {
  TensorView q, k, v, y;
};
AttentionViews attention_views(const NodeContext& ctx);

// Checks that input 3 (the additive mask), when present, broadcasts onto the scores
// [..., Sq, Sk] of queries q [..., Sq, D] and Sk keys (FusedAttention's and StridedAttention's
// rule); ShapeError otherwise.
void check_attention_mask(const NodeContext& ctx, const Shape& q, int64_t sk);

}  // namespace lumen
