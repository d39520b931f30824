// ONNX Attention on the GPU, the FusedAttention kernel's way (attention.cu: FlashAttention-style,
// the scores never written out) extended to the op's bias and layouts. A block of kWarps warps
// takes kWarps query rows of one batch index and one kv head: the rows of the G query heads that
// share that kv head, head by head, so grouped- and multi-query attention stage each kv head's
// keys once for all of them. The block walks the keys in chunks of 32 (past keys first, then K's),
// staging each chunk of K and V in shared memory, skipping chunks no row of the block attends
// (past a causal frontier or the valid keys, before a window); lane j of a warp scores key j of
// the chunk and the warp updates its row's running maximum, sum and output (online softmax).
// Operands and mask are float, __half or __nv_bfloat16 (storage.cuh), the bool mask bytes; the
// arithmetic is float32.
#include <cfloat>

#include "backends/cuda/attention_op.h"
#include "backends/cuda/online_softmax.cuh"
#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kChunk = 32;

// The keys [lo, hi) query i may attend before attn_mask (graph/schemas/attention.h's
// attention_key_range).
__device__ __forceinline__ void key_range(const AttentionOpDesc& d, int64_t i, int64_t nonpad,
                                          int64_t* lo, int64_t* hi) {
  const int64_t offset = d.has_past ? d.past_len : d.has_nonpad ? nonpad - d.q_len : 0;
  const int64_t p = offset + i;
  int64_t a = 0, b = d.total_len;
  if (d.has_nonpad && nonpad < b) b = nonpad < 0 ? 0 : nonpad;
  if (d.mask_kind != 0 && d.mask_len < b) b = d.mask_len;
  if (d.causal && p + 1 < b) b = p + 1;
  if (d.right_window >= 0 && p + d.right_window + 1 < b) b = p + d.right_window + 1;
  if (d.left_window >= 0 && p - d.left_window > a) a = p - d.left_window;
  *lo = a;
  *hi = b;
}

// Row j of the keys (or values) of kv head h in batch b: past's, then the new tensor's.
template <typename T>
__device__ __forceinline__ const T* kv_row(const T* past, AttnStrides ps, const T* cur,
                                           AttnStrides cs, int64_t past_len, int64_t b, int64_t h,
                                           int64_t j) {
  if (j < past_len) return past + b * ps.batch + h * ps.head + j * ps.row;
  return cur + b * cs.batch + h * cs.head + (j - past_len) * cs.row;
}

// kD: the head size when fixed at compile time (64 or 128, for both Q/K and V), or 0 to read
// d.depth and d.depth_v.
template <typename T, int kD>
__global__ void __launch_bounds__(kWarps * 32)
    attention_op_kernel(const __grid_constant__ AttentionOpDesc d, const T* __restrict__ q,
                        const T* __restrict__ k, const T* __restrict__ v,
                        const void* __restrict__ mask, const T* __restrict__ past_k,
                        const T* __restrict__ past_v, const int64_t* __restrict__ nonpad,
                        T* __restrict__ y) {
  constexpr int kCols = (kD > 0 ? kD : kAttentionOpMaxDepth) / 32;  // output columns per lane
  extern __shared__ float smem[];
  const int dk = kD > 0 ? kD : static_cast<int>(d.depth);
  const int dv = kD > 0 ? kD : static_cast<int>(d.depth_v);
  float* ks = smem;                    // [kChunk][dk + 1] (padded: lane j reads row j)
  float* vs = ks + kChunk * (dk + 1);  // [kChunk][dv]
  float* qs = vs + kChunk * dv;        // [kWarps][dk]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t group_rows = d.group * d.q_len;
  const int64_t blocks_per_head = (group_rows + kWarps - 1) / kWarps;
  const int64_t bh = blockIdx.x / blocks_per_head;
  const int64_t b = bh / d.kv_heads, h = bh % d.kv_heads;
  const int64_t row0 = (blockIdx.x % blocks_per_head) * kWarps;
  const int64_t n = d.has_nonpad ? nonpad[b] : 0;

  // This warp's row, and the keys the whole block attends (every thread computes the same).
  const int64_t row = row0 + warp;
  const bool live = row < group_rows;
  const int64_t qh = h * d.group + (live ? row / d.q_len : 0), qi = live ? row % d.q_len : 0;
  int64_t lo, hi;
  key_range(d, qi, n, &lo, &hi);
  int64_t block_lo = d.total_len, block_hi = 0;
  for (int r = 0; r < kWarps; ++r) {
    if (row0 + r >= group_rows) break;
    int64_t a, z;
    key_range(d, (row0 + r) % d.q_len, n, &a, &z);
    if (a < z) {
      block_lo = a < block_lo ? a : block_lo;
      block_hi = z > block_hi ? z : block_hi;
    }
  }
  // The block's query rows, scaled once.
  for (int idx = threadIdx.x; idx < kWarps * dk; idx += blockDim.x) {
    const int64_t r = row0 + idx / dk;
    float val = 0.f;
    if (r < group_rows) {
      const int64_t rh = h * d.group + r / d.q_len, ri = r % d.q_len;
      val = to_float(q[b * d.q.batch + rh * d.q.head + ri * d.q.row + idx % dk]) * d.scale;
    }
    qs[idx] = val;
  }
  const float* qrow = qs + warp * dk;
  const char* mask_row = nullptr;
  if (d.mask_kind != 0 && live) {
    const int64_t es = d.mask_kind == 1 ? 1 : sizeof(T);
    mask_row = static_cast<const char*>(mask) + (b * d.mask_b + qh * d.mask_h + qi * d.mask_r) * es;
  }
  float m = -INFINITY, l = 0.f, acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.f;
  const int64_t first = block_lo / kChunk * kChunk;
  for (int64_t j0 = first; j0 < block_hi; j0 += kChunk) {
    __syncthreads();  // the previous chunk is consumed (and qs written, the first time)
    for (int idx = threadIdx.x; idx < kChunk * dk; idx += blockDim.x) {
      const int j = idx / dk, c = idx % dk;
      const int64_t key = j0 + j;
      float val = 0.f;
      if (key < d.total_len)
        val = to_float(kv_row(past_k, d.past_k, k, d.k, d.past_len, b, h, key)[c]);
      ks[j * (dk + 1) + c] = val;
    }
    for (int idx = threadIdx.x; idx < kChunk * dv; idx += blockDim.x) {
      const int j = idx / dv, c = idx % dv;
      const int64_t key = j0 + j;
      float val = 0.f;
      if (key < d.total_len)
        val = to_float(kv_row(past_v, d.past_v, v, d.v, d.past_len, b, h, key)[c]);
      vs[idx] = val;
    }
    __syncthreads();
    const int64_t key = j0 + lane;
    const float* krow = ks + lane * (dk + 1);
    float s = 0.f;
#pragma unroll 16
    for (int c = 0; c < dk; ++c) s += qrow[c] * krow[c];
    if (d.softcap > 0.f) s = d.softcap * tanhf(s / d.softcap);
    if (!live || key < lo || key >= hi) {
      s = -INFINITY;
    } else if (d.mask_kind == 1) {
      if (mask_row[key] == 0) s = -INFINITY;
    } else if (d.mask_kind == 2) {
      s += to_float(reinterpret_cast<const T*>(mask_row)[key]);
    }
    const float p = online_softmax_step(s, m, l, acc);
    const int n_keys = d.total_len - j0 < kChunk ? static_cast<int>(d.total_len - j0) : kChunk;
    for (int j = 0; j < n_keys; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      if (pj == 0.f) continue;  // masked keys add nothing, whatever their values hold
      const float* vrow = vs + j * dv;
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        if (kD > 0 || lane + 32 * c < dv) acc[c] += pj * vrow[lane + 32 * c];
    }
  }
  if (!live) return;
  T* out = y + b * d.y.batch + qh * d.y.head + qi * d.y.row;
  const float inv = l > 0.f ? 1.f / l : 0.f;  // a row with no key attended is zeros
#pragma unroll
  for (int c = 0; c < kCols; ++c)
    if (kD > 0 || lane + 32 * c < dv) out[lane + 32 * c] = from_float<T>(acc[c] * inv);
}

template <typename T>
__global__ void present_kernel(const __grid_constant__ AttentionOpDesc d, int64_t depth,
                               const T* __restrict__ past, AttnStrides ps,
                               const T* __restrict__ cur, AttnStrides cs, T* __restrict__ present,
                               int64_t n) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = e % depth, r = e / depth;
    const int64_t j = r % d.total_len, bh = r / d.total_len;
    present[e] = kv_row(past, ps, cur, cs, d.past_len, bh / d.kv_heads, bh % d.kv_heads, j)[c];
  }
}

}  // namespace

void launch_attention_op(Storage st, const AttentionOpDesc& d, const void* q, const void* k,
                         const void* v, const void* mask, const void* past_k, const void* past_v,
                         const int64_t* nonpad, void* y, cudaStream_t stream) {
  const int64_t group_rows = d.group * d.q_len;
  if (d.batch == 0 || group_rows == 0 || d.depth_v == 0) return;
  const int64_t blocks = d.batch * d.kv_heads * ((group_rows + kWarps - 1) / kWarps);
  const size_t smem =
      sizeof(float) * (kChunk * (d.depth + 1) + kChunk * d.depth_v + kWarps * d.depth);
  const unsigned grid = static_cast<unsigned>(blocks);
  const int64_t fixed = d.depth_v == d.depth ? d.depth : 0;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tq = static_cast<const T*>(q);
    const T* tk = static_cast<const T*>(k);
    const T* tv = static_cast<const T*>(v);
    const T* tpk = static_cast<const T*>(past_k);
    const T* tpv = static_cast<const T*>(past_v);
    T* ty = static_cast<T*>(y);
    if (fixed == 64)
      attention_op_kernel<T, 64>
          <<<grid, kWarps * 32, smem, stream>>>(d, tq, tk, tv, mask, tpk, tpv, nonpad, ty);
    else if (fixed == 128)
      attention_op_kernel<T, 128>
          <<<grid, kWarps * 32, smem, stream>>>(d, tq, tk, tv, mask, tpk, tpv, nonpad, ty);
    else
      attention_op_kernel<T, 0>
          <<<grid, kWarps * 32, smem, stream>>>(d, tq, tk, tv, mask, tpk, tpv, nonpad, ty);
  });
}

void launch_attention_present(Storage st, const AttentionOpDesc& d, int64_t depth, const void* past,
                              AttnStrides past_s, const void* cur, AttnStrides cur_s, void* present,
                              cudaStream_t stream) {
  const int64_t n = d.batch * d.kv_heads * d.total_len * depth;
  if (n == 0) return;
  constexpr int kThreads = 256;
  const int64_t want = (n + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(want < 4096 ? want : 4096);
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    present_kernel<T><<<grid, kThreads, 0, stream>>>(d, depth, static_cast<const T*>(past), past_s,
                                                     static_cast<const T*>(cur), cur_s,
                                                     static_cast<T*>(present), n);
  });
}

}  // namespace lumen::cuda
