// Launchers of smaller CUDA kernels (extra_ops.cu): CumProd, LpNormalization and LRN. Plain C++
// types, so the kernel classes (extra_ops.cc) need no CUDA C++.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/any_launch.h"

namespace lumen::cuda {

// The running product of x along the middle axis of [outer, n, inner] (exclusive: each output
// leaves its own element out; reverse: from the end), in the element type `t`.
void launch_cum_prod(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                     bool exclusive, bool reverse, cudaStream_t stream);

// y = x / ||x||_p along the middle axis of [outer, n, inner] (p 1 or 2; 0 where the norm is 0),
// float types computed in float (double for float64).
void launch_lp_norm(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner, int p,
                    cudaStream_t stream);

// LRN across channels of x [batch, channels, plane] (float32):
// y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2 ...])^beta.
void launch_lrn(const float* x, float* y, int64_t batch, int64_t channels, int64_t plane,
                int64_t size, float alpha, float beta, float bias, cudaStream_t stream);

}  // namespace lumen::cuda
