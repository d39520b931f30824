// A decoder's decoding step rewritten to write its key/value cache in place (Generator).
//
// The ONNX decoder form makes each layer's present key and value as Concat(past, new) along the
// sequence axis: a copy of the whole cache per layer and step, into memory of its own, from which
// the new slot is then copied back into the cache. Here, in a decoding step's optimized graph
// built with pasts one slot shorter than the cache (so that every size the model derives from
// them, past + 1, is the cache's), each such Concat becomes TensorScatter(cache, new,
// write_index): the past input takes the cache's full length and is marked written in place
// (Graph::mark_input_written), so the step writes the new token's key and value into the caller's
// cache at slot write_index[b] and its attention reads the cache where it lies. The presents stop
// being graph outputs. The new slot's position among the keys does not matter to attention (the
// mask says which slots hold tokens; position_ids carry positions), so one step shape serves every
// step of a generation.
#pragma once

#include <cstdint>
#include <string>

#include "lumen/graph.h"

namespace lumen {

// The graph input the rewritten step takes: int64 [batch], the cache slot each sequence's new key
// and value go to.
inline constexpr const char* kCacheWriteIndex = "lumen.cache_write_index";

// Rewrites `graph` (an optimized step of `layers` layers whose inputs past_key_values.N.key/value
// feed only Concat(past, new) along axis 2, the presents present.N.key/value) as above. Returns
// false and leaves the graph unchanged where any layer's past or present has another form.
bool write_cache_in_place(Graph& graph, int64_t layers);

}  // namespace lumen
