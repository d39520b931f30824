// Resolved attributes of the sampling ops GridSample, RoiAlign, LRN and MaxUnpool, shared by their
// schemas and CPU kernels so both read them one way. Each throws InvalidModel (naming the node) on
// a malformed attribute.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/node_context.h"

namespace lumen {

enum class GridSampleMode { kBilinear, kNearest, kBicubic };
enum class GridSamplePadding { kZeros, kBorder, kReflection };

struct GridSampleSpec {
  GridSampleMode mode = GridSampleMode::kBilinear;
  GridSamplePadding padding = GridSamplePadding::kZeros;
  bool align_corners = false;
};
// GridSample's mode (also opset 20's names linear and cubic), padding_mode and align_corners.
GridSampleSpec grid_sample_spec(const NodeContext& ctx);

struct RoiAlignSpec {
  bool half_pixel = true;  // coordinate_transformation_mode: half_pixel, else output_half_pixel
  bool max = false;        // mode max, else avg
  int64_t output_height = 1;
  int64_t output_width = 1;
  int64_t sampling_ratio = 0;  // 0: adaptive, ceil(roi size / output size) samples per bin
  float spatial_scale = 1.0f;
};
RoiAlignSpec roi_align_spec(const NodeContext& ctx);

struct LrnSpec {
  int64_t size = 1;
  float alpha = 1e-4f;
  float beta = 0.75f;
  float bias = 1.0f;
};
LrnSpec lrn_spec(const NodeContext& ctx);

// MaxUnpool's output shape without the output_shape input: (in - 1) * stride + kernel - pads per
// spatial axis. I's flat indices address a tensor of this shape; a larger output_shape adds
// trailing zeros along each axis (as ONNX's reference does).
std::vector<int64_t> max_unpool_default_shape(const NodeContext& ctx);

}  // namespace lumen
