// A pointwise (1x1, stride 1, no padding, one group) float32 convolution over NCHW images as one
// launch with its epilogue: per image Y[Cout, HW] = op(W[Cout, Cin] X[Cin, HW] + bias[c] + Z).
// cuBLASLt runs that product and then needs a launch of its own for the epilogue (its bias
// epilogue broadcasts the other way in row-major order, and it has no ReLU6), and at batch 1 a
// MobileNet's 1x1 convolutions are small enough that the launches cost more than the arithmetic.
// ConvKernel (conv.cc) offers this as one of the ways it times.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// The output tile a block computes: kWide 32 channels x 64 pixels (large images), kTall 64
// channels x 16 pixels (7x7 and 14x14 images, where 64 pixels would leave most of a tile empty).
enum class PointwiseTile { kWide, kTall };

// y (batch, cout, hw) = op(w (cout, cin) x (batch, cin, hw) per image + bias[c] + residual), all
// float32 (bias and residual may be null). Exact float32 arithmetic (FMA, no tensor cores), the
// sum over cin in order. cout, cin and hw below 2^31, batch below 65536.
void launch_pointwise_conv(PointwiseTile tile, const float* x, const float* w, float* y,
                           int64_t batch, int64_t cout, int64_t cin, int64_t hw,
                           const ConvEpilogue& epilogue, cudaStream_t stream);

}  // namespace lumen::cuda
