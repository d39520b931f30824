// The operands of a float32 product run as three TF32 tensor-core products (3xTF32, lt_matmul.h):
// each value v split into big = v rounded to TF32 (10 mantissa bits, round to nearest, ties
// away) and small = v - big rounded to TF32, the three parts laid side by side along k.
#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {
namespace {

__device__ __forceinline__ float to_tf32(float v) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return __uint_as_float(r);
}

// dst's part p (bit p of small_mask: small, else big) of src's element (r, c): along columns,
// dst is rows x 3 cols ([p0 | p1 | p2]); along rows, 3 rows x cols ([p0; p1; p2]).
__global__ void split3_kernel(const float* __restrict__ src, int64_t rows, int64_t cols, int64_t ld,
                              bool k_along_cols, unsigned small_mask, float* __restrict__ dst) {
  const int64_t total = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    const float v = src[r * ld + c];
    const float big = to_tf32(v);
    // Infinity and NaN stay in big, with a zero small part (inf - inf would be NaN).
    const float small = isfinite(big) ? to_tf32(v - big) : 0.0f;
    for (int p = 0; p < 3; ++p) {
      const float part = (small_mask >> p) & 1u ? small : big;
      if (k_along_cols)
        dst[r * 3 * cols + p * cols + c] = part;
      else
        dst[(p * rows + r) * cols + c] = part;
    }
  }
}

}  // namespace

void launch_tf32_split3(const float* src, int64_t rows, int64_t cols, int64_t ld, bool k_along_cols,
                        unsigned small_mask, float* dst, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  split3_kernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), kThreads, 0,
                  stream>>>(src, rows, cols, ld > 0 ? ld : cols, k_along_cols, small_mask, dst);
}

}  // namespace lumen::cuda
