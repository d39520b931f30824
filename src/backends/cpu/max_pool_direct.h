// A direct MaxPool kernel for what the oneDNN path in pool.cc does not run: the Indices output
// (flat input positions, row-major or with storage_order 1 column-major over the spatial axes)
// and int8 / uint8 inputs.
#pragma once

#include <memory>
#include <string>

#include "backends/kernel.h"
#include "graph/node_context.h"

namespace lumen::cpu {

// "" when the direct kernel runs the node (float32, int8 or uint8; 1 to 3 spatial axes), else why
// not.
std::string check_direct_max_pool(const NodeContext& ctx);
// The kernel; call only where check_direct_max_pool(ctx) is "".
std::unique_ptr<Kernel> make_direct_max_pool(const NodeContext& ctx);

}  // namespace lumen::cpu
