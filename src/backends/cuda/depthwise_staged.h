// A depthwise convolution whose block first stages its input tile (with the window's halo) in
// shared memory, so each input element is read from global memory about once instead of up to
// KH x KW times through the cache: for the large windows of ConvNeXt-style networks (7x7), where
// the per-output kernel (launch_depthwise_conv) rereads 49 inputs per output. ConvKernel (conv.cc)
// times it against the other ways.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// Whether launch_depthwise_staged takes `desc`: square 3x3, 5x5 or 7x7 windows, stride 1,
// dilation 1, at most 65535 planes (batch x output channels) and planes whose sizes fit 32 bits.
bool depthwise_staged_supports(const Conv2dDesc& desc);

// y = op(depthwise conv(x, w) + bias[c] + residual), as launch_depthwise_conv computes it (the
// same sums in the same order; taps over the padding add a zero product where that kernel skips
// them), for a desc that depthwise_staged_supports.
void launch_depthwise_staged(Storage st, const Conv2dDesc& desc, const void* x, const void* w,
                             void* y, const ConvEpilogue& epilogue, cudaStream_t stream);

}  // namespace lumen::cuda
