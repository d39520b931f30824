// FusedAttention on the GPU, in the manner of FlashAttention (Dao et al., 2022): the scores are
// never written out. A block of kWarps warps takes kRowsPerWarp query rows per warp; it walks the
// keys in chunks of 32, staging each chunk of K and V in shared memory, and every warp updates its
// rows' running maximum, running sum and output accumulator with the chunk (the online softmax of
// Milakov and Gimelshein, 2018). Lane j of a warp scores key j of the chunk; lane t then owns the
// output columns t, t + 32, ... float32 throughout.
#include <cfloat>

#include "backends/cuda/launch.h"

namespace lumen::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 2;
constexpr int kChunk = 32;
constexpr int kCols = kAttentionMaxDepth / 32;  // output columns per lane

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void attention_kernel(const __grid_constant__ AttentionDesc d, const float* q,
                                 const float* k, const float* v, const float* mask, float* y) {
  extern __shared__ float smem[];
  const int64_t dk = d.depth, dv = d.depth_v;
  float* ks = smem;                    // [kChunk][dk + 1] (padded: lane j reads row j)
  float* vs = ks + kChunk * (dk + 1);  // [kChunk][dv]
  float* qs = vs + kChunk * dv;        // [kWarps * kRowsPerWarp][dk]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t rows_per_block = kWarps * kRowsPerWarp;
  const int64_t blocks_per_head = (d.sq + rows_per_block - 1) / rows_per_block;
  const int64_t b = blockIdx.x / blocks_per_head;
  const int64_t row0 = (blockIdx.x % blocks_per_head) * rows_per_block;
  const float* qb = q + b * d.sq * dk;
  const float* kb = k + b * d.sk * dk;
  const float* vb = v + b * d.sk * dv;

  int64_t mask_base = 0;
  if (mask != nullptr) {
    int64_t rest = b;
    for (int j = d.lead_rank - 1; j >= 0; --j) {
      mask_base += (rest % d.lead_dims[j]) * d.mask_lead_strides[j];
      rest /= d.lead_dims[j];
    }
  }
  // The block's query rows, scaled once.
  for (int64_t idx = threadIdx.x; idx < rows_per_block * dk; idx += blockDim.x) {
    const int64_t r = row0 + idx / dk;
    qs[idx] = r < d.sq ? qb[r * dk + idx % dk] * d.scale : 0.f;
  }
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kCols];
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
    for (int c = 0; c < kCols; ++c) acc[r][c] = 0.f;
  }
  for (int64_t j0 = 0; j0 < d.sk; j0 += kChunk) {
    __syncthreads();  // the previous chunk is consumed (and qs written, the first time)
    for (int64_t idx = threadIdx.x; idx < kChunk * dk; idx += blockDim.x) {
      int64_t j, c;
      if (d.k_transposed) {  // K^T [dk][sk]: consecutive threads read consecutive keys
        j = idx % kChunk;
        c = idx / kChunk;
      } else {
        j = idx / dk;
        c = idx % dk;
      }
      const int64_t key = j0 + j;
      float val = 0.f;
      if (key < d.sk) val = d.k_transposed ? kb[c * d.sk + key] : kb[key * dk + c];
      ks[j * (dk + 1) + c] = val;
    }
    for (int64_t idx = threadIdx.x; idx < kChunk * dv; idx += blockDim.x) {
      const int64_t key = j0 + idx / dv;
      vs[idx] = key < d.sk ? vb[key * dv + idx % dv] : 0.f;
    }
    __syncthreads();
    const int64_t key = j0 + lane;
    float s[kRowsPerWarp];
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = 0.f;
    const float* krow = ks + lane * (dk + 1);
    for (int64_t c = 0; c < dk; ++c) {
      const float kv = krow[c];
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += qs[(warp * kRowsPerWarp + r) * dk + c] * kv;
    }
    const int64_t n_keys = d.sk - j0 < kChunk ? d.sk - j0 : kChunk;
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t row = row0 + warp * kRowsPerWarp + r;
      if (key >= d.sk) {
        s[r] = -INFINITY;
      } else if (mask != nullptr && row < d.sq) {
        s[r] += mask[mask_base + row * d.mask_q_stride + key * d.mask_k_stride];
      }
      const float m_new = fmaxf(m[r], warp_max(s[r]));
      // A row masked out so far (every score -inf) keeps zero weight instead of exp(nan).
      const float p = m_new == -INFINITY ? 0.f : __expf(s[r] - m_new);
      const float correction = m_new == -INFINITY ? 1.f : __expf(m[r] - m_new);
      l[r] = l[r] * correction + warp_sum(p);
      for (int c = 0; c < kCols; ++c) acc[r][c] *= correction;
      for (int64_t j = 0; j < n_keys; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, static_cast<int>(j));
        const float* vrow = vs + j * dv;
        for (int c = 0; c < kCols; ++c) {
          const int64_t col = lane + 32 * c;
          if (col < dv) acc[r][c] += pj * vrow[col];
        }
      }
      m[r] = m_new;
    }
  }
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row0 + warp * kRowsPerWarp + r;
    if (row >= d.sq) continue;
    float* out = y + (b * d.sq + row) * dv;
    const float inv = 1.f / l[r];
    for (int c = 0; c < kCols; ++c) {
      const int64_t col = lane + 32 * c;
      if (col < dv) out[col] = acc[r][c] * inv;
    }
  }
}

}  // namespace

void launch_attention(const AttentionDesc& desc, const float* q, const float* k, const float* v,
                      const float* mask, float* y, cudaStream_t stream) {
  if (desc.batch == 0 || desc.sq == 0 || desc.depth_v == 0) return;
  const int64_t rows_per_block = kWarps * kRowsPerWarp;
  const int64_t blocks = desc.batch * ((desc.sq + rows_per_block - 1) / rows_per_block);
  const size_t smem = sizeof(float) * (kChunk * (desc.depth + 1) + kChunk * desc.depth_v +
                                       rows_per_block * desc.depth);
  attention_kernel<<<static_cast<unsigned>(blocks), kWarps * 32, smem, stream>>>(desc, q, k, v,
                                                                                 mask, y);
}

}  // namespace lumen::cuda
