// Launchers of smaller CUDA kernels (extra_ops.cu): CumProd, LpNormalization, LRN,
// ReverseSequence and Det. Plain C++ types, so the kernel classes (extra_ops.cc) need no CUDA C++.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/any_launch.h"
#include "backends/cuda/index_check.h"

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

// ReverseSequence of x seen as [d0, d1, inner] elements of `elem_bytes` (1, 2, 4 or 8): batch and
// time are d0 and d1 (batch_first: d0 is the batch). Within batch b the first lens[b] time steps
// are reversed, the rest copied; a length outside [0, time] is reported through `check` and that
// entry copied unchanged.
void launch_reverse_sequence(int elem_bytes, const void* x, void* y, const int64_t* lens,
                             int64_t d0, int64_t d1, int64_t inner, bool batch_first,
                             const IndexCheck& check, cudaStream_t stream);

// Det of `count` float32 matrices m x m (m at most kMaxDetSize): Gaussian elimination with partial
// pivoting in double (the CPU kernel's order of pivots and updates), a block per matrix holding it
// in shared memory.
inline constexpr int64_t kMaxDetSize = 64;
void launch_det(const float* x, float* y, int64_t count, int64_t m, cudaStream_t stream);

}  // namespace lumen::cuda
