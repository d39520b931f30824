// FusedAttention on the GPU, in the manner of FlashAttention (Dao et al., 2022): the scores are
// never written out. A block of kWarps warps takes one query row per warp; it walks the keys in
// chunks of 32, staging each chunk of K and V in shared memory, and every warp updates its row's
// running maximum, running sum and output accumulator with the chunk (the online softmax of
// Milakov and Gimelshein, 2018). Lane j of a warp scores key j of the chunk; lane t then owns the
// output columns t, t + 32, ... Q, K, V, the mask and Y are float or __half (storage.cuh); the
// staging, scores and accumulators are float32 throughout.
//
// With few query rows per head (decoding: one new token over a key/value cache) that kernel gives a
// whole head to one warp, which walks every key alone while most multiprocessors idle (GPT-2's 12
// heads over 257 keys took 40 us a layer on the H200). There the keys are split instead, as in
// flash-decoding (Dao et al., 2023): a warp per (query row, run of 32-key tiles) keeps its own
// running maximum, sum and accumulator, and a second kernel merges a row's splits, each weighted by
// exp(its maximum - the row's).
//
// With 16-bit storage and heads of 64 or 128, flash_attention.cu's tensor-core kernel takes the
// rows instead of the one-warp-per-row kernel.
#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/attention_mask.cuh"
#include "backends/cuda/launch.h"
#include "backends/cuda/online_softmax.cuh"
#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kChunk = 32;

// One query row per warp, kWarps rows per block. kD: the head size when fixed at compile time
// (32, 64 or 128, for both Q/K and V), or 0 to read d.depth and d.depth_v.
template <typename T, int kD>
__global__ void __launch_bounds__(kWarps * 32)
    attention_kernel(const __grid_constant__ AttentionDesc d, const T* __restrict__ q,
                     const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ mask,
                     T* __restrict__ y) {
  constexpr int kCols = (kD > 0 ? kD : kAttentionMaxDepth) / 32;  // output columns per lane
  extern __shared__ float smem[];
  const int dk = kD > 0 ? kD : static_cast<int>(d.depth);
  const int dv = kD > 0 ? kD : static_cast<int>(d.depth_v);
  float* ks = smem;                    // [kChunk][dk + 1] (padded: lane j reads row j)
  float* vs = ks + kChunk * (dk + 1);  // [kChunk][dv]
  float* qs = vs + kChunk * dv;        // [kWarps][dk]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t blocks_per_head = (d.sq + kWarps - 1) / kWarps;
  const int64_t b = blockIdx.x / blocks_per_head;
  const int64_t row0 = (blockIdx.x % blocks_per_head) * kWarps;
  const int64_t row = row0 + warp;
  const T* qb = q + b * d.sq * dk;
  const int64_t kvb = d.kv_group == 1 ? b : b / d.kv_group;  // the key/value heads' index
  const T* kb = k + kvb * d.sk * dk;
  const T* vb = v + kvb * d.sk * dv;

  const T* mask_row = mask == nullptr ? nullptr : mask_row_of(d, mask, b, row < d.sq ? row : 0);
  // The block's query rows, scaled once.
  for (int idx = threadIdx.x; idx < kWarps * dk; idx += blockDim.x) {
    const int64_t r = row0 + idx / dk;
    qs[idx] = r < d.sq ? to_float(qb[r * dk + idx % dk]) * d.scale : 0.f;
  }
  const float* qrow = qs + warp * dk;
  float m = -INFINITY, l = 0.f, acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.f;
  for (int64_t j0 = 0; j0 < d.sk; j0 += kChunk) {
    __syncthreads();  // the previous chunk is consumed (and qs written, the first time)
    for (int idx = threadIdx.x; idx < kChunk * dk; idx += blockDim.x) {
      int j, c;
      if (d.k_transposed) {  // K^T [dk][sk]: consecutive threads read consecutive keys
        j = idx % kChunk;
        c = idx / kChunk;
      } else {
        j = idx / dk;
        c = idx % dk;
      }
      const int64_t key = j0 + j;
      float val = 0.f;
      if (key < d.sk) val = to_float(d.k_transposed ? kb[c * d.sk + key] : kb[key * dk + c]);
      ks[j * (dk + 1) + c] = val;
    }
    for (int idx = threadIdx.x; idx < kChunk * dv; idx += blockDim.x) {
      const int64_t key = j0 + idx / dv;
      vs[idx] = key < d.sk ? to_float(vb[key * dv + idx % dv]) : 0.f;
    }
    __syncthreads();
    const int64_t key = j0 + lane;
    const float* krow = ks + lane * (dk + 1);
    float s = 0.f;
#pragma unroll 16
    for (int c = 0; c < dk; ++c) s += qrow[c] * krow[c];
    if (key >= d.sk)
      s = -INFINITY;
    else if (mask_row != nullptr)
      s += to_float(mask_row[key * d.mask_k_stride]);
    const float p = online_softmax_step(s, m, l, acc);
    const int n_keys = d.sk - j0 < kChunk ? static_cast<int>(d.sk - j0) : kChunk;
    for (int j = 0; j < n_keys; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const float* vrow = vs + j * dv;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        if (kD > 0 || lane + 32 * c < dv) acc[c] += pj * vrow[lane + 32 * c];
    }
  }
  if (row >= d.sq) return;
  T* out = y + (b * d.sq + row) * dv;
  const float inv = 1.f / l;
#pragma unroll
  for (int c = 0; c < kCols; ++c)
    if (kD > 0 || lane + 32 * c < dv) out[lane + 32 * c] = from_float<T>(acc[c] * inv);
}

// One warp per score row: max, sum of exponentials, then the probabilities in place.
template <typename T>
__global__ void attention_softmax_kernel(const __grid_constant__ AttentionDesc d, T* s,
                                         const T* __restrict__ mask) {
  const int lane = threadIdx.x & 31;
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= d.batch * d.sq) return;
  const int64_t b = r / d.sq, i = r % d.sq;
  const T* mask_row = mask == nullptr ? nullptr : mask_row_of(d, mask, b, i);
  T* row = s + r * d.sk;
  // The scaled, masked score of key j (recomputed rather than stored, so half scores are rounded
  // only once, as probabilities).
  auto score = [&](int64_t j) {
    float v = to_float(row[j]) * d.scale;
    if (mask_row != nullptr) v += to_float(mask_row[j * d.mask_k_stride]);
    return v;
  };
  float m = -INFINITY;
  for (int64_t j = lane; j < d.sk; j += 32) m = fmaxf(m, score(j));
  m = warp_max(m);
  float sum = 0.f;
  for (int64_t j = lane; j < d.sk; j += 32) sum += m == -INFINITY ? 0.f : expf(score(j) - m);
  const float inv = 1.f / warp_sum(sum);
  for (int64_t j = lane; j < d.sk; j += 32)
    row[j] = from_float<T>(m == -INFINITY ? 0.f : expf(score(j) - m) * inv);
}

// Keys per tile of the split kernel (one per lane) and the most splits a row gets.
constexpr int kTile = 32;
constexpr int kMaxSplits = 64;
// Warps (independent splits) per block: one, so that a few rows' splits spread over the SMs.
constexpr int kSplitWarps = 1;
constexpr int kMergeBatch = 4;  // splits whose partial outputs a merge loads at once

// One warp per (query row, split): the split's tiles of 32 keys, lane j scoring key j of a tile.
// With one split the row is finished here; else the warp's maximum, sum and unnormalised output go
// to `part` for attention_merge_kernel.
template <typename T, int kD>
__global__ void __launch_bounds__(kSplitWarps * 32)
    attention_split_kernel(const __grid_constant__ AttentionDesc d, const T* __restrict__ q,
                           const T* __restrict__ k, const T* __restrict__ v,
                           const T* __restrict__ mask, T* __restrict__ y, float* __restrict__ part,
                           int splits, int tiles_per_split) {
  constexpr int kCols = (kD > 0 ? kD : kAttentionMaxDepth) / 32;
  __shared__ float q_all[kSplitWarps][kAttentionMaxDepth];
  const int dk = kD > 0 ? kD : static_cast<int>(d.depth);
  const int dv = kD > 0 ? kD : static_cast<int>(d.depth_v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t rows = d.batch * d.sq;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kSplitWarps + warp;
  if (gw >= rows * splits) return;  // a whole warp: no block-wide barrier follows
  const int64_t r = gw / splits;
  const int split = static_cast<int>(gw % splits);
  const int64_t b = r / d.sq, i = r % d.sq;
  float* qs = q_all[warp];
  for (int c = lane; c < dk; c += 32) qs[c] = to_float(q[r * dk + c]) * d.scale;
  __syncwarp();
  const T* mask_row = mask == nullptr ? nullptr : mask_row_of(d, mask, b, i);
  const int64_t kvb = d.kv_group == 1 ? b : b / d.kv_group;  // the key/value heads' index
  const T* kb = k + kvb * d.sk * dk;
  const T* vb = v + kvb * d.sk * dv;
  const int64_t tiles = (d.sk + kTile - 1) / kTile;
  const int64_t t0 = static_cast<int64_t>(split) * tiles_per_split;
  const int64_t t1 = t0 + tiles_per_split < tiles ? t0 + tiles_per_split : tiles;
  float m = -INFINITY, l = 0.f, acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.f;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t key = t * kTile + lane;
    float s = -INFINITY;
    if (key < d.sk) {
      float dot = 0.f;
      if (d.k_transposed) {  // K^T [dk][sk]: the lanes read consecutive keys
#pragma unroll 16
        for (int c = 0; c < dk; ++c) dot += qs[c] * to_float(kb[c * d.sk + key]);
      } else {
        const T* krow = kb + key * dk;
        if constexpr (kD > 0 && std::is_same_v<T, float>) {
          if (reinterpret_cast<uintptr_t>(krow) % 16 == 0) {  // the row in one batch of loads
            float4 kv[kD / 4];
#pragma unroll
            for (int c = 0; c < kD / 4; ++c) kv[c] = reinterpret_cast<const float4*>(krow)[c];
#pragma unroll
            for (int c = 0; c < kD / 4; ++c)
              dot += qs[4 * c] * kv[c].x + qs[4 * c + 1] * kv[c].y + qs[4 * c + 2] * kv[c].z +
                     qs[4 * c + 3] * kv[c].w;
          } else {
#pragma unroll 16
            for (int c = 0; c < dk; ++c) dot += qs[c] * to_float(krow[c]);
          }
        } else {
#pragma unroll 16
          for (int c = 0; c < dk; ++c) dot += qs[c] * to_float(krow[c]);
        }
      }
      s = dot;
      if (mask_row != nullptr) s += to_float(mask_row[key * d.mask_k_stride]);
    }
    const float p = online_softmax_step(s, m, l, acc);
    const int n_keys = d.sk - t * kTile < kTile ? static_cast<int>(d.sk - t * kTile) : kTile;
    const T* vt = vb + t * kTile * dv;
    if (n_keys == kTile) {  // a whole tile: unrolled, so its loads are in flight together
#pragma unroll
      for (int j = 0; j < kTile; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int c = 0; c < kCols; ++c)
          if (kD > 0 || lane + 32 * c < dv) acc[c] += pj * to_float(vt[j * dv + lane + 32 * c]);
      }
    } else {
      for (int j = 0; j < n_keys; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int c = 0; c < kCols; ++c)
          if (kD > 0 || lane + 32 * c < dv) acc[c] += pj * to_float(vt[j * dv + lane + 32 * c]);
      }
    }
  }
  if (splits == 1) {
    const float inv = 1.f / l;
#pragma unroll
    for (int c = 0; c < kCols; ++c)
      if (kD > 0 || lane + 32 * c < dv) y[r * dv + lane + 32 * c] = from_float<T>(acc[c] * inv);
    return;
  }
  float* pm = part;
  float* pl = part + rows * splits;
  float* pacc = pl + rows * splits;
  if (lane == 0) {
    pm[gw] = m;
    pl[gw] = l;
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c)
    if (kD > 0 || lane + 32 * c < dv) pacc[gw * dv + lane + 32 * c] = acc[c];
}

// One warp per query row: Y = sum_s w_s acc_s / sum_s w_s l_s with w_s = exp(m_s - max_s m_s)
// (0 for a split whose keys were all masked out).
template <typename T>
__global__ void attention_merge_kernel(const __grid_constant__ AttentionDesc d,
                                       const float* __restrict__ part, int splits,
                                       T* __restrict__ y) {
  constexpr int kCols = kAttentionMaxDepth / 32;
  const int lane = threadIdx.x & 31;
  const int64_t rows = d.batch * d.sq;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int dv = static_cast<int>(d.depth_v);
  const float* pm = part + r * splits;
  const float* pl = part + rows * splits + r * splits;
  const float* pacc = part + 2 * rows * splits + r * splits * dv;
  // Lanes over the splits (at most kMaxSplits = 64: two each) for the maximum and the weights.
  const float m0 = lane < splits ? pm[lane] : -INFINITY;
  const float m1 = lane + 32 < splits ? pm[lane + 32] : -INFINITY;
  const float top = warp_max(fmaxf(m0, m1));
  const float w0 = m0 == -INFINITY ? 0.f : expf(m0 - top);
  const float w1 = m1 == -INFINITY ? 0.f : expf(m1 - top);
  const float l = warp_sum(w0 * (lane < splits ? pl[lane] : 0.f) +
                           w1 * (lane + 32 < splits ? pl[lane + 32] : 0.f));
  float acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.f;
  for (int s0 = 0; s0 < splits; s0 += kMergeBatch) {
    float v[kMergeBatch][kCols];
    float w[kMergeBatch];
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j) {
      const int s = s0 + j;
      w[j] = __shfl_sync(0xffffffffu, s < 32 ? w0 : w1, s & 31);
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        v[j][c] = s < splits && lane + 32 * c < dv ? pacc[s * dv + lane + 32 * c] : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kMergeBatch; ++j)
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[c] += w[j] * v[j][c];
  }
  const float inv = 1.f / l;
#pragma unroll
  for (int c = 0; c < kCols; ++c)
    if (lane + 32 * c < dv) y[r * dv + lane + 32 * c] = from_float<T>(acc[c] * inv);
}

// The split kernel's plan for `desc`: splits per row and tiles per split (splits 0: not used).
struct SplitPlan {
  int splits = 0;
  int tiles_per_split = 0;
};

SplitPlan split_plan(const AttentionDesc& desc) {
  SplitPlan plan;
  if (desc.sq > kAttentionSplitMaxRows || desc.sk == 0 || desc.batch == 0) return plan;
  const int64_t tiles = (desc.sk + kTile - 1) / kTile;
  const int64_t per = (tiles + kMaxSplits - 1) / kMaxSplits;
  plan.tiles_per_split = static_cast<int>(per);
  plan.splits = static_cast<int>((tiles + per - 1) / per);
  return plan;
}

}  // namespace

size_t attention_scratch_bytes(const AttentionDesc& desc) {
  const SplitPlan plan = split_plan(desc);
  if (plan.splits <= 1) return 0;
  return sizeof(float) * static_cast<size_t>(desc.batch * desc.sq * plan.splits) *
         static_cast<size_t>(desc.depth_v + 2);
}

void launch_attention_softmax(Storage st, const AttentionDesc& desc, void* scores, const void* mask,
                              cudaStream_t stream) {
  const int64_t rows = desc.batch * desc.sq;
  if (rows == 0 || desc.sk == 0) return;
  constexpr int kRowsPerBlock = 8;
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    attention_softmax_kernel<<<grid, kRowsPerBlock * 32, 0, stream>>>(desc, static_cast<T*>(scores),
                                                                      static_cast<const T*>(mask));
  });
}

void launch_attention(Storage st, const AttentionDesc& desc, const void* q, const void* k,
                      const void* v, const void* mask, void* y, void* scratch,
                      cudaStream_t stream) {
  if (desc.batch == 0 || desc.sq == 0 || desc.depth_v == 0) return;
  const SplitPlan plan = split_plan(desc);
  const bool split = plan.splits == 1 || (plan.splits > 1 && scratch != nullptr);
  const int64_t d = desc.depth_v == desc.depth ? desc.depth : 0;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tq = static_cast<const T*>(q);
    const T* tk = static_cast<const T*>(k);
    const T* tv = static_cast<const T*>(v);
    const T* tm = static_cast<const T*>(mask);
    T* ty = static_cast<T*>(y);
    if (split) {
      const int64_t rows = desc.batch * desc.sq;
      const auto grid = static_cast<unsigned>((rows * plan.splits + kSplitWarps - 1) / kSplitWarps);
      auto* part = static_cast<float*>(scratch);
      auto launch_split = [&](auto depth_tag) {
        constexpr int kD = decltype(depth_tag)::value;
        attention_split_kernel<T, kD><<<grid, kSplitWarps * 32, 0, stream>>>(
            desc, tq, tk, tv, tm, ty, part, plan.splits, plan.tiles_per_split);
      };
      if (d == 64)
        launch_split(std::integral_constant<int, 64>{});
      else if (d == 128)
        launch_split(std::integral_constant<int, 128>{});
      else
        launch_split(std::integral_constant<int, 0>{});
      if (plan.splits > 1) {
        constexpr int kRowsPerBlock = 4;
        const auto merge_grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
        attention_merge_kernel<T>
            <<<merge_grid, kRowsPerBlock * 32, 0, stream>>>(desc, part, plan.splits, ty);
      }
      return;
    }
    if (launch_flash_attention(st, desc, q, k, v, mask, y, stream)) return;
    const unsigned grid = static_cast<unsigned>(desc.batch * ((desc.sq + kWarps - 1) / kWarps));
    const size_t smem =
        sizeof(float) * (kChunk * (desc.depth + 1) + kChunk * desc.depth_v + kWarps * desc.depth);
    auto launch_rows = [&](auto depth_tag) {
      constexpr int kD = decltype(depth_tag)::value;
      attention_kernel<T, kD><<<grid, kWarps * 32, smem, stream>>>(desc, tq, tk, tv, tm, ty);
    };
    if (d == 64)
      launch_rows(std::integral_constant<int, 64>{});
    else if (d == 32)
      launch_rows(std::integral_constant<int, 32>{});
    else if (d == 128)
      launch_rows(std::integral_constant<int, 128>{});
    else
      launch_rows(std::integral_constant<int, 0>{});
  });
}

}  // namespace lumen::cuda
