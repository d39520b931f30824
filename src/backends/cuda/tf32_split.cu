// The operands of a float32 product run as three TF32 tensor-core products (3xTF32, lt_matmul.h):
// each value v split into big = v rounded to TF32 (10 mantissa bits, round to nearest, ties
// away) and small = v - big rounded to TF32, the three parts laid side by side along k.
#include <cstdint>
#include <type_traits>

#include "backends/cuda/launch.h"

namespace lumen::cuda {
namespace {

__device__ __forceinline__ float to_tf32(float v) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return __uint_as_float(r);
}

// big and small of one value. Infinity and NaN stay in big, with a zero small part (inf - inf
// would be NaN).
__device__ __forceinline__ void split_one(float v, float& big, float& small) {
  big = to_tf32(v);
  small = isfinite(big) ? to_tf32(v - big) : 0.0f;
}

// dst's part p (bit p of small_mask: small, else big) of src's element (r, c): along columns,
// dst is rows x 3 cols ([p0 | p1 | p2]); along rows, 3 rows x cols ([p0; p1; p2]). Rows over the
// grid's y, columns over its x, kWidth columns per thread (4: float4 loads and stores, where cols,
// ld and both pointers allow).
template <int kWidth>
__global__ void split3_kernel(const float* __restrict__ src, int64_t rows, int64_t cols, int64_t ld,
                              bool k_along_cols, unsigned small_mask, float* __restrict__ dst) {
  using Vec = typename std::conditional<kWidth == 4, float4, float>::type;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x * kWidth;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kWidth;
         c < cols; c += step) {
      const Vec v = *reinterpret_cast<const Vec*>(src + r * ld + c);
      Vec big, small;
      if constexpr (kWidth == 4) {
        split_one(v.x, big.x, small.x);
        split_one(v.y, big.y, small.y);
        split_one(v.z, big.z, small.z);
        split_one(v.w, big.w, small.w);
      } else {
        split_one(v, big, small);
      }
      for (int p = 0; p < 3; ++p) {
        const int64_t at = k_along_cols ? r * 3 * cols + p * cols + c : (p * rows + r) * cols + c;
        *reinterpret_cast<Vec*>(dst + at) = (small_mask >> p) & 1u ? small : big;
      }
    }
  }
}

}  // namespace

void launch_tf32_split3(const float* src, int64_t rows, int64_t cols, int64_t ld, bool k_along_cols,
                        unsigned small_mask, float* dst, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  if (ld <= 0) ld = cols;
  constexpr int kThreads = 256;
  const bool vec = cols % 4 == 0 && ld % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  const int width = vec ? 4 : 1;
  const int64_t x_blocks = (cols / width + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(x_blocks < 64 ? x_blocks : 64),
                  static_cast<unsigned>(rows < 65535 ? rows : 65535));
  if (vec)
    split3_kernel<4>
        <<<grid, kThreads, 0, stream>>>(src, rows, cols, ld, k_along_cols, small_mask, dst);
  else
    split3_kernel<1>
        <<<grid, kThreads, 0, stream>>>(src, rows, cols, ld, k_along_cols, small_mask, dst);
}

}  // namespace lumen::cuda
