// The attributes Cast and CastLike share: `saturate` (opset 19; casts to float8), `round_mode`
// (opset 24; casts to float8e8m0: "up", "down" or "nearest") and lumen's own `fnuz_inf_to_nan`,
// which the importer sets for opsets 19-23, where infinity cast to float8e4m3fnuz or
// float8e5m2fnuz is NaN even when saturating (opset 24 on: the largest value).
#pragma once

#include <string>

#include "graph/schema.h"

namespace lumen {

// Fails the model for a round_mode other than up, down and nearest.
inline void check_cast_attrs(const InferContext& ctx) {
  const std::string mode = ctx.attr_string("round_mode", "up");
  if (mode != "up" && mode != "down" && mode != "nearest")
    ctx.fail_model("round_mode must be up, down or nearest, got '" + mode + "'");
}

}  // namespace lumen
