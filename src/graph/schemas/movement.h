// Resolved attributes of the data-movement ops (Transpose, Slice, Pad, Resize): computed once from
// a node by its schema (which validates them) and again by its CPU kernel (which captures them),
// so both agree on one reading of the ONNX rules.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/node_context.h"

namespace lumen {

// Transpose's perm, checked to be a permutation of the input's axes (default: reversed).
std::vector<int64_t> transpose_perm(const NodeContext& ctx);

// Slice with every axis resolved: output[i] reads input[starts[d] + i * steps[d]] along each d.
struct SliceSpec {
  std::vector<int64_t> starts;  // per input axis, in range whenever the output is non-empty
  std::vector<int64_t> steps;   // per input axis, never 0
  Shape output;
};
SliceSpec slice_spec(const NodeContext& ctx);

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Pad with pads resolved per input axis; negative pads crop.
struct PadSpec {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> begin;  // per input axis
  std::vector<int64_t> end;    // per input axis
  Shape output;
};
PadSpec pad_spec(const NodeContext& ctx);

enum class ResizeMode { kNearest, kLinear, kCubic };
enum class ResizeCoord {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixel,  // tf_half_pixel_for_nearest
  kTfCropAndResize,
  kHalfPixelSymmetric,  // opset 19: half_pixel, centred on the input when the length rounds
};
enum class ResizeNearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

// Resize with one scale per input axis (1 where an axis is not resized).
struct ResizeSpec {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  bool antialias = false;
  std::vector<double> scales;  // per input axis: the given scale, or output / input for sizes
  Shape output;
};
ResizeSpec resize_spec(const NodeContext& ctx);

// The input coordinate that output coordinate `x` of an axis maps back to (ONNX Resize's
// coordinate_transformation_mode formulas); throws UnsupportedOp for tf_crop_and_resize.
double resize_source_coord(ResizeCoord coord, int64_t x, double scale, int64_t in_len,
                           int64_t out_len);

}  // namespace lumen
