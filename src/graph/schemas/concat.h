// The shape rule Concat shares with the optimizer's fused concatenations (ChannelShuffle,
// FusedConcat), so all three check their inputs and name their errors the same way.
#pragma once

#include "graph/node_context.h"

namespace lumen {

// The shape of inputs [first, num_inputs) concatenated along the node's `axis` attribute, which
// is wrapped into [0, rank) and stored in *axis. Throws InvalidModel for a missing input or an
// axis out of range, ShapeError for scalars or inputs that differ in dtype, rank or a dim off
// the axis.
Shape concat_shape(const NodeContext& ctx, int first, int* axis);

}  // namespace lumen
