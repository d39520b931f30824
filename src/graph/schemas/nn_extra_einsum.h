// Einsum's equation resolved against its operands' shapes: computed by the schema (which
// validates it) and again by the CPU kernel, so that both read the equation the same way.
#pragma once

#include <vector>

#include "graph/node_context.h"

namespace lumen {

// Every subscript letter and every dimension covered by '...' becomes one label id in
// [0, label_sizes.size()). Ellipsis dims are right-aligned across operands (NumPy broadcasting).
struct EinsumSpec {
  std::vector<int64_t> label_sizes;        // the broadcast size of each label
  std::vector<std::vector<int>> operands;  // per operand: the label of each of its axes
  std::vector<int> output;                 // the label of each output axis
  Shape output_shape;
};

// Parses ctx's "equation" attribute for its inputs. Throws InvalidModel for a malformed
// equation and ShapeError when the operands' shapes do not fit it.
EinsumSpec einsum_spec(const NodeContext& ctx);

}  // namespace lumen
