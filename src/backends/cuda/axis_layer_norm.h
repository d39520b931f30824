// Launcher of the CUDA kernel of AxisLayerNorm (axis_layer_norm.cu; kernel class in
// axis_layer_norm_op.cc): a LayerNorm over a non-trailing axis, read and written in place of the
// transposes around it. Plain C++ types, so the kernel class needs no CUDA C++.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// x seen as [outer, channels, inner]: each of the outer * inner columns of `channels` elements
// (stride inner) normalized, y = (x - mean) / sqrt(var + epsilon) * scale[c] + bias[c] (bias may
// be null), written in x's layout or, with `axis_last`, as [outer, inner, channels]. Elements of
// `st` (float32, float16 or bfloat16), statistics in float32; scale and bias in the same storage.
void launch_axis_layer_norm(Storage st, const void* x, const void* scale, const void* bias, void* y,
                            int64_t outer, int64_t channels, int64_t inner, float epsilon,
                            bool axis_last, cudaStream_t stream);

}  // namespace lumen::cuda
