// The Cast kernel's factory, shared with ops that convert like Cast does (CastLike).
#pragma once

#include <memory>

#include "backends/kernel.h"
#include "graph/node_context.h"

namespace lumen::cpu {

// A kernel converting input 0 to output 0's dtype with Cast's rules (every pair of lumen's
// dtypes; float to integer truncates, anything to bool is x != 0, halves round to nearest even).
std::unique_ptr<Kernel> make_cast_kernel(const NodeContext& ctx);

}  // namespace lumen::cpu
