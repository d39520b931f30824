// Resize's per-axis sampling taps (ONNX Resize: nearest with every nearest_mode, linear, cubic
// with cubic_coeff_a and exclude_outside, antialiased linear and cubic, every
// coordinate_transformation_mode including tf_crop_and_resize), worked out once at compile time
// in double precision. Shared by the CPU and CUDA kernels, so both backends blend the same inputs
// with the same weights.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "graph/node_context.h"
#include "graph/schemas/movement.h"

namespace lumen {

// How one axis is sampled: output coordinate o blends input idx[o * taps + j] with weight
// wt[o * taps + j]; outside[o] (tf_crop_and_resize only) marks outputs set to the extrapolation
// value instead.
struct ResizeAxisMap {
  int taps = 1;
  std::vector<int64_t> idx;
  std::vector<float> wt;
  std::vector<char> outside;
  bool any_outside = false;
};

// The region of interest of tf_crop_and_resize as (start, end) per input axis, read from the
// node's constant roi input (InvalidModel when it is missing or malformed).
std::vector<std::pair<double, double>> resize_roi(const NodeContext& ctx, int rank);

// The taps of one axis of `in` inputs and `out` outputs at `scale` (roi: that axis's region of
// interest, used by tf_crop_and_resize only). Taps that read one index are merged, and an axis
// whose every output reads one input with weight 1 becomes a plain index map (taps == 1).
ResizeAxisMap resize_axis_map(const ResizeSpec& spec, const NodeContext& ctx, int64_t in,
                              int64_t out, double scale, std::pair<double, double> roi);

}  // namespace lumen
