// Launcher of the CUDA kernels of MatMulNBits (matmul_nbits.cu), in plain C++ types for the
// kernel class (matmul_nbits.cc). The weights stay in MatMulNBits' own layout
// (graph/matmul_nbits.h), which already keeps each column's packed values contiguous.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// How a MatMulNBits node's zero points are given.
enum class NBitsZeroPoints : uint8_t { kDefault, kPacked, kFloat };

// One MatMulNBits product: A (m x k), B, scales, zero points, bias and residual as the op takes
// them (device pointers; zero_points, bias and residual may be null), Y (m x n) =
// act(A x W + bias + residual). A, scales, float zero points, bias, residual and Y have storage
// `storage` (float32, or 16-bit under a float16/bfloat16 compile).
struct NBitsDesc {
  int64_t m = 0, k = 0, n = 0, block_size = 32;
  int bits = 4;
  NBitsZeroPoints zero_points = NBitsZeroPoints::kDefault;
  Storage storage = Storage::kFloat32;
  UnaryOp act = UnaryOp::kIdentity;
  float alpha = 0.f, beta = 0.f;  // the activation's parameters
};

// Rows of A up to which the matrix-vector kernel runs (one warp per output column, reading each
// packed weight once); above it a tiled kernel dequantizes weight tiles into shared memory.
inline constexpr int64_t kNBitsGemvRows = 8;

// Y = act(A x dequantize(B) (+ bias) (+ residual)) on `stream`.
void launch_matmul_nbits(const NBitsDesc& d, const void* a, const uint8_t* b, const void* scales,
                         const void* zero_points, const void* bias, const void* residual, void* y,
                         cudaStream_t stream);

}  // namespace lumen::cuda
