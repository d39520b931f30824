// RotaryEmbedding's geometry, read from a node by the schema and the kernels alike.
#pragma once

#include <cstdint>

#include "graph/node_context.h"

namespace lumen {

// The sizes of one RotaryEmbedding node. X is read as (batch, heads, seq, head_size) for a 4-D
// input and (batch, seq, heads, head_size) for a 3-D one (`three_d`); the first rotary_dim values
// of each head are rotated, the rest copied.
struct RotaryGeometry {
  int64_t batch = 0, heads = 0, seq = 0, head_size = 0;
  int64_t rotary_dim = 0;    // even, <= head_size
  int64_t max_position = 0;  // rows of the caches when position_ids is given
  bool interleaved = false;  // pairs (2i, 2i+1) rather than halves (i, i + rotary_dim / 2)
  bool three_d = false;
  bool with_positions = false;
};

// Checks the node's attributes and shapes (ShapeError / InvalidModel naming the node) and returns
// its geometry.
RotaryGeometry rotary_geometry(const NodeContext& ctx);

}  // namespace lumen
