// Col2Im's geometry, shared by its schema and its CPU kernel so that both agree.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/node_context.h"

namespace lumen {

struct Col2ImGeometry {
  int64_t channels = 0;            // C
  std::vector<int64_t> image;      // image_shape
  std::vector<int64_t> block;      // block_shape
  std::vector<int64_t> strides;    // per spatial axis
  std::vector<int64_t> dilations;  // per spatial axis
  std::vector<int64_t> pad_begin;  // per spatial axis
  std::vector<int64_t> counts;     // blocks along each spatial axis (their product is L)
};

// Reads and checks a Col2Im node's inputs and attributes; throws through ctx.fail_* (ShapeError,
// InvalidModel) when they do not fit together.
Col2ImGeometry col2im_geometry(const NodeContext& ctx);

}  // namespace lumen
