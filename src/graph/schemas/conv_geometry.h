// Window geometry shared by Conv, ConvTranspose and the pools: attribute checks, padding and
// output sizes per the ONNX spec. Used by the schemas and by the CPU kernels, so both agree.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/node_context.h"

namespace lumen {

struct ConvGeometry {
  int spatial = 0;              // number of spatial dimensions
  std::vector<int64_t> in;      // input spatial sizes
  std::vector<int64_t> out;     // output spatial sizes
  std::vector<int64_t> kernel;  // kernel spatial sizes
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;  // ONNX form: 1 means no dilation
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;         // ConvTranspose: may be negative (see below)
  std::vector<int64_t> output_padding;  // ConvTranspose only

  // Effective kernel extent d*(k-1)+1 along spatial axis i.
  int64_t extent(int i) const { return dilations[i] * (kernel[i] - 1) + 1; }
};

// Checks that input `x` (N, C, spatial...) has rank 3 or more and a floating dtype.
void check_window_input(const NodeContext& ctx, int input, int max_rank = 5);

// Conv and the pools: reads strides, dilations, pads and auto_pad (InvalidModel when malformed)
// and computes the padding and output sizes. ceil_mode applies to explicit pads only (as in
// ONNX, windows that would start in the right padding are dropped). Throws ShapeError when the
// kernel is larger than the padded input.
ConvGeometry window_geometry(const NodeContext& ctx, const Shape& x,
                             const std::vector<int64_t>& kernel, bool ceil_mode);

// ConvTranspose: as above plus output_padding and output_shape. Output size along i is
// strides*(in-1) + extent - pad_begin - pad_end; output_padding is folded into pad_end, which
// therefore may be negative (the trailing positions then receive only the bias).
ConvGeometry conv_transpose_geometry(const NodeContext& ctx, const Shape& x,
                                     const std::vector<int64_t>& kernel);

// FusedConv, MaxPool and AveragePool with channels_last=1 (set by the channels-last pass) read and
// write (N, spatial..., C) tensors: these convert between that order and (N, C, spatial...).
Shape to_channels_first(const Shape& channels_last);
Shape to_channels_last(const Shape& channels_first);
// Whether the node's channels_last attribute is set (0 or 1; InvalidModel otherwise).
bool is_channels_last(const NodeContext& ctx);

// The kernel_shape attribute when given (checked against the weight's spatial dims), else the
// weight's spatial dims.
std::vector<int64_t> conv_kernel_shape(const NodeContext& ctx, const Shape& w);

}  // namespace lumen
