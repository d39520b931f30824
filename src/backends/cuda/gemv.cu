// Skinny float32 products (decoding: one to eight rows against a weight matrix), which cuBLASLt ran
// at about a third of the GPU's memory bandwidth on GPT-2's layers (7-12 us for 2-9 MB of weights
// on the H200, some shapes on 72 blocks). Here every block reads a run of W's rows for 64 columns
// (16 threads of four columns, 16 threads down K), so a product of a few MB spreads over about
// four blocks per multiprocessor; each block sums its run into a partial row in the scratch, and
// the last block of a column range to finish (a counter per range, reset by that block) adds the
// partials in split order, the bias, a residual and the activation: deterministic, and one launch.
#include <type_traits>

#include "backends/cuda/launch.h"
#include "backends/cuda/unary_math.cuh"

namespace lumen::cuda {
namespace {

constexpr int kThreadsX = 16;  // four columns each
constexpr int kThreadsY = 16;  // down K
constexpr int kBlockCols = kThreadsX * 4;

__device__ __forceinline__ void fma4(float4& acc, float a, const float4& w) {
  acc.x += a * w.x;
  acc.y += a * w.y;
  acc.z += a * w.z;
  acc.w += a * w.w;
}

__device__ __forceinline__ void add4(float4& acc, const float4& v) {
  acc.x += v.x;
  acc.y += v.y;
  acc.z += v.z;
  acc.w += v.w;
}

template <int kRows>
__global__ void __launch_bounds__(kThreadsX* kThreadsY)
    gemv_kernel(const float* __restrict__ x, const float* __restrict__ w,
                const float* __restrict__ bias, const float* __restrict__ residual,
                float* __restrict__ y, float* __restrict__ part, unsigned* __restrict__ counters,
                int64_t n, int64_t k, int64_t rows_per_split, UnaryOp act, float alpha,
                float beta) {
  __shared__ float4 red[kThreadsY][kRows][kThreadsX];
  __shared__ bool last;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * kThreadsX + tx) * 4;
  const bool live = col < n;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  const int64_t k1 = k0 + rows_per_split < k ? k0 + rows_per_split : k;
  float4 acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (live) {
    const float* wc = w + col;
#pragma unroll 4
    for (int64_t kk = k0 + ty; kk < k1; kk += kThreadsY) {
      const float4 wv = __ldg(reinterpret_cast<const float4*>(wc + kk * n));
#pragma unroll
      for (int r = 0; r < kRows; ++r) fma4(acc[r], __ldg(x + r * k + kk), wv);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) red[ty][r][tx] = acc[r];
  __syncthreads();
  // The finished row of columns [col, col + 4): bias, residual, activation, stored.
  auto finish = [&](int r, float4 s) {
    if (bias != nullptr) add4(s, *reinterpret_cast<const float4*>(bias + col));
    if (residual != nullptr) add4(s, *reinterpret_cast<const float4*>(residual + r * n + col));
    s.x = apply_unary(act, s.x, alpha, beta);
    s.y = apply_unary(act, s.y, alpha, beta);
    s.z = apply_unary(act, s.z, alpha, beta);
    s.w = apply_unary(act, s.w, alpha, beta);
    *reinterpret_cast<float4*>(y + r * n + col) = s;
  };
  if (gridDim.y == 1) {
    if (ty == 0 && live)
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float4 s = red[0][r][tx];
        for (int g = 1; g < kThreadsY; ++g) add4(s, red[g][r][tx]);
        finish(r, s);
      }
    return;
  }
  if (ty == 0 && live)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float4 s = red[0][r][tx];
      for (int g = 1; g < kThreadsY; ++g) add4(s, red[g][r][tx]);
      *reinterpret_cast<float4*>(part + (blockIdx.y * kRows + r) * n + col) = s;
    }
  __threadfence();
  __syncthreads();
  if (tx == 0 && ty == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  // The last block: the splits' partials (read from L2, written by other blocks), kThreadsY
  // threads down the splits, every row's partial of a split loaded at once, then summed in a
  // fixed order.
  float4 sum[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) sum[r] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (live)
    for (unsigned sp = ty; sp < gridDim.y; sp += kThreadsY) {
      float4 v[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        v[r] = __ldcg(reinterpret_cast<const float4*>(part + (sp * kRows + r) * n + col));
#pragma unroll
      for (int r = 0; r < kRows; ++r) add4(sum[r], v[r]);
    }
#pragma unroll
  for (int r = 0; r < kRows; ++r) red[ty][r][tx] = sum[r];
  __syncthreads();
  if (ty == 0 && live)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float4 s = red[0][r][tx];
      for (int g = 1; g < kThreadsY; ++g) add4(s, red[g][r][tx]);
      finish(r, s);
    }
  if (tx == 0 && ty == 0) counters[blockIdx.x] = 0;  // ready for the next launch
}

}  // namespace

GemvPlan gemv_plan(int64_t m, int64_t n, int64_t k, int multiprocessors) {
  GemvPlan plan;
  if (m < 1 || m > kGemvMaxRows || n < 1 || n % 4 != 0 || k < 1) return plan;
  plan.col_tiles = (n + kBlockCols - 1) / kBlockCols;
  const int64_t target = 4 * static_cast<int64_t>(multiprocessors > 0 ? multiprocessors : 1);
  int64_t splits = target / plan.col_tiles;
  const int64_t most = k / 16 > 1 ? k / 16 : 1;  // at least 16 rows per split
  splits = splits < 1 ? 1 : splits > most ? most : splits;
  int64_t rows = (k + splits - 1) / splits;
  rows = (rows + kThreadsY - 1) / kThreadsY * kThreadsY;
  plan.rows_per_split = rows;
  plan.splits = (k + rows - 1) / rows;
  return plan;
}

size_t gemv_scratch_bytes(const GemvPlan& plan, int64_t m, int64_t n) {
  return plan.splits > 1 ? sizeof(float) * static_cast<size_t>(plan.splits * m * n) : 0;
}

void launch_gemv(const GemvPlan& plan, int64_t m, int64_t n, int64_t k, const float* x,
                 const float* w, const float* bias, const float* residual, UnaryOp act, float alpha,
                 float beta, float* y, float* scratch, unsigned* counters, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.col_tiles), static_cast<unsigned>(plan.splits));
  const dim3 block(kThreadsX, kThreadsY);
  const int64_t rows = plan.rows_per_split;
  // One instance per row count (the accumulators live in registers).
  auto launch = [&](auto rows_tag) {
    constexpr int kRows = decltype(rows_tag)::value;
    gemv_kernel<kRows><<<grid, block, 0, stream>>>(x, w, bias, residual, y, scratch, counters, n, k,
                                                   rows, act, alpha, beta);
  };
  switch (m) {
    case 1:
      return launch(std::integral_constant<int, 1>{});
    case 2:
      return launch(std::integral_constant<int, 2>{});
    case 3:
      return launch(std::integral_constant<int, 3>{});
    case 4:
      return launch(std::integral_constant<int, 4>{});
    case 5:
      return launch(std::integral_constant<int, 5>{});
    case 6:
      return launch(std::integral_constant<int, 6>{});
    case 7:
      return launch(std::integral_constant<int, 7>{});
    default:
      return launch(std::integral_constant<int, 8>{});
  }
}

}  // namespace lumen::cuda
