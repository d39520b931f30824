// The 16-bit float rewrite of a placed graph (CompileOptions::precision kFloat16 or kBFloat16).
#pragma once

#include <vector>

#include "backends/backend.h"
#include "lumen/graph.h"

namespace lumen {

// Stores as `half` (DType::kFloat16 or kBFloat16) every float32 value that nodes placed on a
// backend that takes_half_floats(half) make or read; placed[id] is node id's backend (nullptr where
// it does not run) and needed[id] whether it runs. Constants read only by such nodes are converted
// once, here; any other crossing gets a Cast node on the 16-bit side (appended to the graph, with
// placed/needed grown to match): a float32 input or constant into a 16-bit node, and a 16-bit value
// into a float32 reader or out of the graph, whose outputs keep their names and float32 type.
// Returns how many nodes now run on 16-bit storage.
int convert_to_half_storage(Graph& graph, DType half, std::vector<Backend*>& placed,
                            std::vector<bool>& needed);

}  // namespace lumen
