// The float16 rewrite of a placed graph (CompileOptions::precision == Precision::kFloat16).
#pragma once

#include <vector>

#include "backends/backend.h"
#include "lumen/graph.h"

namespace lumen {

// Stores as float16 every float32 value that nodes placed on a backend that takes_float16() make
// or read; placed[id] is node id's backend (nullptr where it does not run) and needed[id] whether
// it runs. Constants read only by such nodes are converted once, here; any other crossing gets a
// Cast node on the float16 side (appended to the graph, with placed/needed grown to match): a
// float32 input or constant into a float16 node, and a float16 value into a float32 reader or out
// of the graph, whose outputs keep their names and float32 type. Returns how many nodes now run
// in float16.
int convert_to_float16(Graph& graph, std::vector<Backend*>& placed, std::vector<bool>& needed);

}  // namespace lumen
