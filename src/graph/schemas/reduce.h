// Type inference shared by the reduction schemas (reduce.cc, reduce_extra.cc).
#pragma once

#include "graph/node_context.h"

namespace lumen {

// ReduceX: axes as attribute or input 1, keepdims, noop_with_empty_axes; output has the input's
// dtype. Refuses bool inputs and (for ReduceMax/Min) reductions over empty dims.
void infer_reduce(InferContext& ctx);
// ArgMax/ArgMin: axis, keepdims, select_last_index; int64 output.
void infer_argmax(InferContext& ctx);

}  // namespace lumen
