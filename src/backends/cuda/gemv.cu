// Skinny float32 products (decoding: one to eight rows against a weight matrix; up to 32 rows as
// groups of eight, one grid layer each, for a caller that times them), which cuBLASLt ran
// at about a third of the GPU's memory bandwidth on GPT-2's layers (7-12 us for 2-9 MB of weights
// on the H200, some shapes on 72 blocks). Here every block reads a run of W's rows for 64 columns
// (16 threads of four columns, 16 threads down K), so a product of a few MB spreads over about
// four blocks per multiprocessor; each block sums its run into a partial row in the scratch, and
// the last block of a column range to finish (a counter per range, reset by that block) adds the
// partials in split order, the bias, a residual and the activation: deterministic, and one launch.
// With a LayerNormalization epilogue (a post-LN transformer's, BERT's at 32 tokens), the last block
// of a row group to finish its column range (a second counter per group) normalizes the group's
// whole rows in place, in the same launch.
// Several products of one X (GroupedMatMul's weights) run as one launch too: their column tiles
// follow each other in the grid, each block finding its product's weight, output and epilogue.
#include <type_traits>
#include <vector>

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

// Scales each row's partial sums by that row's 1 / sqrt(mean(x^2) + eps) (the RMS-norm prologue),
// the block's threads over the whole row (from L2: every block of the launch reads the same few
// rows). Called by every thread of the block.
template <int kRows>
__device__ __forceinline__ void gemv_norm_scale(const float* __restrict__ x, int64_t k, float eps,
                                                float4 (&acc)[kRows]) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  constexpr int kWarpsPerBlock = kThreadsX * kThreadsY / 32;
  __shared__ float squares[kRows][kWarpsPerBlock];
  const int t = ty * kThreadsX + tx;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float s = 0.f;
    for (int64_t i = t; i < k; i += kThreadsX * kThreadsY) {
      const float v = __ldg(x + r * k + i);
      s += v * v;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((t & 31) == 0) squares[r][t >> 5] = s;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float total = 0.f;
#pragma unroll
    for (int wi = 0; wi < kWarpsPerBlock; ++wi) total += squares[r][wi];
    const float inv = rsqrtf(total / static_cast<float>(k) + eps);
    acc[r].x *= inv;
    acc[r].y *= inv;
    acc[r].z *= inv;
    acc[r].w *= inv;
  }
}

// The LayerNormalization epilogue: once the block has stored its columns of the group's
// `live_rows` rows of y (n columns each), it counts itself done on `counter`; the group's last
// block (every column range stored) normalizes those rows in place, a warp per row (a group has
// at most the block's 8 warps of rows), reading them from L2, and resets the counter. Called by
// every thread of a block that finished a column range.
__device__ void gemv_norm_rows_if_last(float* __restrict__ y, int64_t n, int live_rows,
                                       const GemvLayerNorm& ln, unsigned* counter) {
  static_assert(kThreadsX * kThreadsY / 32 >= kGemvMaxRows, "a warp per row of a group");
  __shared__ bool norm_last;
  __threadfence();
  __syncthreads();
  const int t = threadIdx.y * kThreadsX + threadIdx.x;
  if (t == 0) norm_last = atomicAdd(counter, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!norm_last) return;
  __threadfence();
  const int r = t >> 5, lane = t & 31;
  if (r < live_rows) {
    float* row = y + r * n;
    const float inv_n = 1.f / static_cast<float>(n);
    float s = 0.f;
    for (int64_t i = lane; i < n; i += 32) s += __ldcg(row + i);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float mean = s * inv_n;
    float q = 0.f;
    for (int64_t i = lane; i < n; i += 32) {
      const float d = __ldcg(row + i) - mean;
      q += d * d;
    }
    for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    const float rstd = rsqrtf(q * inv_n + ln.epsilon);
    for (int64_t i = lane; i < n; i += 32) {
      const float v = (__ldcg(row + i) - mean) * rstd * __ldg(ln.scale + i);
      row[i] = ln.bias != nullptr ? v + __ldg(ln.bias + i) : v;
    }
  }
  if (t == 0) *counter = 0;  // ready for the next launch
}

// `part` holds a row of part_stride partial sums per (split, row), the block's columns at the
// grid's column (tile * kBlockCols + ...), so every product of a group has its own. kGroup:
// several products or the RMS-norm prologue (products.count > 1 or norm_scale set); a lone
// product's instance has neither the product lookup nor the prologue.
template <int kRows, bool kGroup>
__global__ void __launch_bounds__(kThreadsX* kThreadsY)
    gemv_kernel(const float* __restrict__ x, const __grid_constant__ GemvProducts products,
                float* __restrict__ part, unsigned* __restrict__ counters, int64_t k,
                int64_t rows_per_split, int64_t part_stride, UnaryOp act, float alpha, float beta,
                int64_t m, GemvLayerNorm ln) {
  __shared__ float4 red[kThreadsY][kRows][kThreadsX];
  __shared__ bool last;
  const int tx = threadIdx.x, ty = threadIdx.y;
  // This block's group of rows (blockIdx.z): rows [row0, row0 + live_rows) of X and Y.
  const int64_t row0 = static_cast<int64_t>(blockIdx.z) * kRows;
  const int live_rows = m - row0 < kRows ? static_cast<int>(m - row0) : kRows;
  x += row0 * k;
  part += static_cast<int64_t>(blockIdx.z) * gridDim.y * kRows * part_stride;
  // The group's norm counter follows every group's column counters.
  unsigned* const norm_counter = counters + gridDim.z * gridDim.x + blockIdx.z;
  counters += static_cast<int64_t>(blockIdx.z) * gridDim.x;
  int p = 0;  // this block's product
  if constexpr (kGroup)
    while (p + 1 < products.count && blockIdx.x >= products.first_tile[p + 1]) ++p;
  const float* __restrict__ w = products.w[p];
  const float* __restrict__ bias = products.bias[p];
  const int64_t n = products.n[p];
  const float* __restrict__ residual =
      products.residual[p] != nullptr ? products.residual[p] + row0 * n : nullptr;
  float* __restrict__ y = products.y[p] + row0 * n;
  const int64_t col =
      ((static_cast<int64_t>(blockIdx.x) - products.first_tile[p]) * kThreadsX + tx) * 4;
  const int64_t pcol = (static_cast<int64_t>(blockIdx.x) * kThreadsX + tx) * 4;
  const bool live = col < n;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  const int64_t k1 = k0 + rows_per_split < k ? k0 + rows_per_split : k;
  float4 acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
  const float* __restrict__ gamma = kGroup ? products.norm_scale : nullptr;
  if (live && gamma == nullptr) {
    const float* wc = w + col;
#pragma unroll 4
    for (int64_t kk = k0 + ty; kk < k1; kk += kThreadsY) {
      const float4 wv = __ldg(reinterpret_cast<const float4*>(wc + kk * n));
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        fma4(acc[r], __ldg(x + (r < live_rows ? r : live_rows - 1) * k + kk), wv);
    }
  } else if (live) {  // the RMS-norm prologue: X's values scaled by gamma here, by 1/rms below
    const float* wc = w + col;
#pragma unroll 4
    for (int64_t kk = k0 + ty; kk < k1; kk += kThreadsY) {
      const float4 wv = __ldg(reinterpret_cast<const float4*>(wc + kk * n));
      const float g = __ldg(gamma + kk);
#pragma unroll
      for (int r = 0; r < kRows; ++r) fma4(acc[r], __ldg(x + r * k + kk) * g, wv);
    }
  }
  if constexpr (kGroup) {
    if (gamma != nullptr) gemv_norm_scale<kRows>(x, k, products.norm_epsilon, acc);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) red[ty][r][tx] = acc[r];
  __syncthreads();
  // The finished row of columns [col, col + 4): bias, residual, activation, stored.
  auto finish = [&](int r, float4 s) {
    if (r >= live_rows) return;
    if (bias != nullptr) add4(s, *reinterpret_cast<const float4*>(bias + col));
    if (residual != nullptr) add4(s, *reinterpret_cast<const float4*>(residual + r * n + col));
    if constexpr (!kGroup) {  // groups have no activation (and no copy of every activation's code)
      s.x = apply_unary(act, s.x, alpha, beta);
      s.y = apply_unary(act, s.y, alpha, beta);
      s.z = apply_unary(act, s.z, alpha, beta);
      s.w = apply_unary(act, s.w, alpha, beta);
    }
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
    if (ln.scale != nullptr) gemv_norm_rows_if_last(y, n, live_rows, ln, norm_counter);
    return;
  }
  if (ty == 0 && live)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float4 s = red[0][r][tx];
      for (int g = 1; g < kThreadsY; ++g) add4(s, red[g][r][tx]);
      *reinterpret_cast<float4*>(part + (blockIdx.y * kRows + r) * part_stride + pcol) = s;
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
        v[r] =
            __ldcg(reinterpret_cast<const float4*>(part + (sp * kRows + r) * part_stride + pcol));
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
  if (ln.scale != nullptr) gemv_norm_rows_if_last(y, n, live_rows, ln, norm_counter);
}

}  // namespace

GemvPlan gemv_plan(int64_t m, int64_t n, int64_t k, int multiprocessors) {
  return gemv_plan(m, std::vector<int64_t>{n}, k, multiprocessors);
}

GemvPlan gemv_plan(int64_t m, const std::vector<int64_t>& n, int64_t k, int multiprocessors) {
  GemvPlan plan;
  if (m < 1 || m > kGemvWideRows || k < 1 || n.empty() ||
      n.size() > static_cast<size_t>(kGemvMaxProducts) || (n.size() > 1 && m > kGemvMaxRows))
    return plan;
  for (int64_t cols : n) {
    if (cols < 1 || cols % 4 != 0) return GemvPlan{};
    plan.col_tiles += (cols + kBlockCols - 1) / kBlockCols;
  }
  plan.groups = (m + kGemvMaxRows - 1) / kGemvMaxRows;
  const int64_t target = 4 * static_cast<int64_t>(multiprocessors > 0 ? multiprocessors : 1);
  int64_t splits = target / (plan.col_tiles * plan.groups);
  const int64_t most = k / 16 > 1 ? k / 16 : 1;  // at least 16 rows per split
  splits = splits < 1 ? 1 : splits > most ? most : splits;
  int64_t rows = (k + splits - 1) / splits;
  rows = (rows + kThreadsY - 1) / kThreadsY * kThreadsY;
  plan.rows_per_split = rows;
  plan.splits = (k + rows - 1) / rows;
  return plan;
}

size_t gemv_scratch_bytes(const GemvPlan& plan, int64_t m) {
  const int64_t rows = plan.groups > 1 ? plan.groups * kGemvMaxRows : m;
  return plan.splits > 1
             ? sizeof(float) * static_cast<size_t>(plan.splits * rows * plan.col_tiles * kBlockCols)
             : 0;
}

size_t gemv_counters(const GemvPlan& plan) {
  return static_cast<size_t>(plan.groups * (plan.col_tiles + 1));
}

namespace {

// gemv_kernel's instance for m rows (the accumulators live in registers), or for groups of eight
// (one per grid layer) above eight rows.
template <bool kGroup>
void launch_rows(const GemvPlan& plan, int64_t m, int64_t k, const float* x,
                 const GemvProducts& products, UnaryOp act, float alpha, float beta, float* scratch,
                 unsigned* counters, const GemvLayerNorm& ln, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.col_tiles), static_cast<unsigned>(plan.splits),
                  static_cast<unsigned>(plan.groups));
  const dim3 block(kThreadsX, kThreadsY);
  const int64_t rows = plan.rows_per_split;
  const int64_t part_stride = plan.col_tiles * kBlockCols;
  auto launch = [&](auto rows_tag) {
    constexpr int kRows = decltype(rows_tag)::value;
    gemv_kernel<kRows, kGroup><<<grid, block, 0, stream>>>(x, products, scratch, counters, k, rows,
                                                           part_stride, act, alpha, beta, m, ln);
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

}  // namespace

void launch_gemv(const GemvPlan& plan, int64_t m, int64_t n, int64_t k, const float* x,
                 const float* w, const float* bias, const float* residual, UnaryOp act, float alpha,
                 float beta, float* y, float* scratch, unsigned* counters, cudaStream_t stream,
                 const GemvLayerNorm& ln) {
  GemvProducts products;
  products.count = 1;
  products.w[0] = w;
  products.bias[0] = bias;
  products.residual[0] = residual;
  products.y[0] = y;
  products.n[0] = n;
  products.first_tile[1] = plan.col_tiles;
  launch_rows<false>(plan, m, k, x, products, act, alpha, beta, scratch, counters, ln, stream);
}

GemvProducts gemv_products(const std::vector<int64_t>& n) {
  GemvProducts products;
  products.count = static_cast<int>(n.size());
  for (size_t p = 0; p < n.size(); ++p) {
    products.n[p] = n[p];
    products.first_tile[p + 1] = products.first_tile[p] + (n[p] + kBlockCols - 1) / kBlockCols;
  }
  return products;
}

void launch_gemv(const GemvPlan& plan, int64_t m, int64_t k, const float* x,
                 const GemvProducts& products, float* scratch, unsigned* counters,
                 cudaStream_t stream) {
  launch_rows<true>(plan, m, k, x, products, UnaryOp::kIdentity, 0.f, 0.f, scratch, counters,
                    GemvLayerNorm{}, stream);
}

}  // namespace lumen::cuda
