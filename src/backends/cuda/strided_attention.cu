// StridedAttention's fused kernel for short key sequences (BERT-length encoders): one launch per
// batch index instead of two strided products and a softmax. A block of kWarps warps takes
// kRowsPerWarp query rows per warp of one head; it stages the head's whole K and V in shared memory
// once (float32; float32 tensors by asynchronous copies, cp.async, all in flight at once), and
// each warp scores its rows against every key (lane j takes keys j, j + 32, ...), takes the masked
// softmax by warp shuffles and accumulates P V (lane t owns kD / 32 adjacent output columns). Q,
// K, V and Y are read and written through their views' head and row strides (depth contiguous).
// H200, BERT-base's 12 heads of 128 keys and depth 64: 7.7 us for 8 warps of 2 rows, the fastest of
// ten block shapes (8.7 us for 4 warps of 4); of that, 2.5 us to launch and stage K and V, 3.2 us
// for the scores and softmax and 1.9 us for P V, which wait on shared-memory loads (each staged K
// or V element feeds 2 multiply-adds). A register-tiled form (each lane 4 rows by 2 keys, the keys
// split over the warps and the partial P V summed through shared memory) was slower: 7.9 us.
#include <cuda_pipeline.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/attention_mask.cuh"
#include "backends/cuda/launch.h"
#include "backends/cuda/online_softmax.cuh"
#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kMaxKeysPerLane = kStridedAttentionMaxKeys / 32;

size_t smem_bytes(int64_t sk, int kd) {
  return sizeof(float) * static_cast<size_t>(sk * (kd + 4) + sk * kd + kWarps * kRowsPerWarp * kd +
                                             kWarps * sk * kRowsPerWarp);
}

template <typename T, int kD>
__global__ void __launch_bounds__(kWarps * 32)
    strided_attention_kernel(const __grid_constant__ AttentionDesc d,
                             const __grid_constant__ HeadStrides st, const T* __restrict__ q,
                             const T* __restrict__ k, const T* __restrict__ v,
                             const T* __restrict__ mask, T* __restrict__ y, int64_t outer_index,
                             bool aligned16) {
  constexpr int kCols = kD / 32;  // output columns per lane
  constexpr int kKs = kD + 4;     // K's padded row: float4 reads by 8 lanes hit distinct banks
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int sk = static_cast<int>(d.sk);
  float* ks = smem;                             // [sk][kKs]
  float* vs = ks + sk * kKs;                    // [sk][kD]
  float* qs = vs + sk * kD;                     // [kWarps][kRowsPerWarp][kD], scaled
  float* ps = qs + kWarps * kRowsPerWarp * kD;  // [kWarps][sk][kRowsPerWarp]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t blocks_per_head = (d.sq + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t o = blockIdx.x / blocks_per_head / st.heads;  // of st.outers batch indices
  const int64_t h = blockIdx.x / blocks_per_head % st.heads;
  const int64_t row0 = (blockIdx.x % blocks_per_head) * kRowsPerBlock + warp * kRowsPerWarp;
  q += o * st.q_outer;
  y += o * st.y_outer;
  const T* kh = k + o * st.k_outer + h * st.k_head;
  const T* vh = v + o * st.v_outer + h * st.v_head;
  if constexpr (std::is_same_v<T, float>) {
    // Every copy in flight before any is waited for; 16 bytes at a time where K's and V's rows
    // and heads start 16-byte aligned (aligned16), else 4.
    if (aligned16) {
      constexpr int kQuads = kD / 4;
      for (int e = threadIdx.x; e < sk * kQuads; e += blockDim.x) {
        const int j = e / kQuads, c = (e % kQuads) * 4;
        __pipeline_memcpy_async(ks + j * kKs + c, kh + j * st.k_row + c, 16);
        __pipeline_memcpy_async(vs + j * kD + c, vh + j * st.v_row + c, 16);
      }
    } else {
      for (int e = threadIdx.x; e < sk * kD; e += blockDim.x) {
        const int j = e / kD, c = e % kD;
        __pipeline_memcpy_async(ks + j * kKs + c, kh + j * st.k_row + c, 4);
        __pipeline_memcpy_async(vs + j * kD + c, vh + j * st.v_row + c, 4);
      }
    }
    __pipeline_commit();
  } else {
    for (int e = threadIdx.x; e < sk * kD; e += blockDim.x) {
      const int j = e / kD, c = e % kD;
      ks[j * kKs + c] = to_float(kh[j * st.k_row + c]);
      vs[j * kD + c] = to_float(vh[j * st.v_row + c]);
    }
  }
  float* my_q = qs + warp * kRowsPerWarp * kD;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = row0 + r;
    for (int c = lane; c < kD; c += 32)
      my_q[r * kD + c] = i < d.sq ? to_float(q[h * st.q_head + i * st.q_row + c]) * d.scale : 0.f;
  }
  if constexpr (std::is_same_v<T, float>) __pipeline_wait_prior(0);
  __syncthreads();
  if (row0 >= d.sq) return;

  // Scores: s[r][t] for key lane + 32 t.
  float s[kRowsPerWarp][kMaxKeysPerLane];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < kMaxKeysPerLane; ++t) s[r][t] = 0.f;
#pragma unroll 4
  for (int c = 0; c < kD; c += 4) {
    float4 qv[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      qv[r] = *reinterpret_cast<const float4*>(my_q + r * kD + c);
#pragma unroll
    for (int t = 0; t < kMaxKeysPerLane; ++t) {
      const int j = lane + 32 * t;
      if (j < sk) {
        const float4 kv = *reinterpret_cast<const float4*>(ks + j * kKs + c);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r)
          s[r][t] += qv[r].x * kv.x + qv[r].y * kv.y + qv[r].z * kv.z + qv[r].w * kv.w;
      }
    }
  }
  // Masked softmax per row; the probabilities go to ps[j][r] for the product with V.
  float* my_p = ps + warp * sk * kRowsPerWarp;
  float inv[kRowsPerWarp];
  const int64_t b = (outer_index + o) * st.heads + h;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = row0 + r < d.sq ? row0 + r : d.sq - 1;
    const T* mrow = mask == nullptr ? nullptr : mask_row_of(d, mask, b, i);
    float m = -INFINITY;
#pragma unroll
    for (int t = 0; t < kMaxKeysPerLane; ++t) {
      const int j = lane + 32 * t;
      if (j < sk) {
        if (mrow != nullptr) s[r][t] += to_float(mrow[j * d.mask_k_stride]);
        m = fmaxf(m, s[r][t]);
      }
    }
    m = warp_max(m);
    float l = 0.f;
#pragma unroll
    for (int t = 0; t < kMaxKeysPerLane; ++t) {
      const int j = lane + 32 * t;
      if (j < sk) {
        const float p = m == -INFINITY ? 0.f : expf(s[r][t] - m);
        my_p[j * kRowsPerWarp + r] = p;
        l += p;
      }
    }
    l = warp_sum(l);
    inv[r] = m == -INFINITY ? 0.f : 1.f / l;  // a fully masked row gives zeros
  }
  __syncwarp();
  float acc[kRowsPerWarp][kCols] = {};
  for (int j = 0; j < sk; ++j) {
    const float2 p = *reinterpret_cast<const float2*>(my_p + j * kRowsPerWarp);
    const float pr[kRowsPerWarp] = {p.x, p.y};
#pragma unroll
    for (int u = 0; u < kCols; ++u) {
      const float vv = vs[j * kD + lane * kCols + u];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) acc[r][u] += pr[r] * vv;
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = row0 + r;
    if (i >= d.sq) break;
    T* yr = y + h * st.y_head + i * st.y_row + lane * kCols;
#pragma unroll
    for (int u = 0; u < kCols; ++u) yr[u] = from_float<T>(acc[r][u] * inv[r]);
  }
}

static_assert(kRowsPerWarp == 2, "the probabilities are read as one float2 per key");

template <typename T, int kD>
bool allow_shared_memory(int bytes) {
  return cudaFuncSetAttribute(strided_attention_kernel<T, kD>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) == cudaSuccess;
}

template <int kD>
bool prepare(int64_t sk) {
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess)
    return false;
  // One limit for every key count (what the longest takes, or the device's most): a node built
  // later for fewer keys must not lower the limit an earlier node launches with.
  const size_t most =
      std::min(smem_bytes(kStridedAttentionMaxKeys, kD), static_cast<size_t>(optin));
  if (smem_bytes(sk, kD) > most) return false;
  const int limit = static_cast<int>(most);
  return allow_shared_memory<float, kD>(limit) && allow_shared_memory<__half, kD>(limit) &&
         allow_shared_memory<__nv_bfloat16, kD>(limit);
}

}  // namespace

bool prepare_strided_attention(const AttentionDesc& d) {
  if (d.depth != d.depth_v || d.sk < 1 || d.sk > kStridedAttentionMaxKeys) return false;
  switch (d.depth) {
    case 32:
      return prepare<32>(d.sk);
    case 64:
      return prepare<64>(d.sk);
    case 128:
      return prepare<128>(d.sk);
    default:
      return false;
  }
}

void launch_strided_attention(Storage st, const AttentionDesc& d, const HeadStrides& s,
                              const void* q, const void* k, const void* v, const void* mask,
                              void* y, int64_t outer_index, bool aligned16, cudaStream_t stream) {
  if (d.sq == 0 || s.heads == 0) return;
  const int64_t blocks = s.outers * s.heads * ((d.sq + kRowsPerBlock - 1) / kRowsPerBlock);
  const size_t bytes = smem_bytes(d.sk, static_cast<int>(d.depth));
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tq = static_cast<const T*>(q);
    const T* tk = static_cast<const T*>(k);
    const T* tv = static_cast<const T*>(v);
    const T* tm = static_cast<const T*>(mask);
    T* ty = static_cast<T*>(y);
    const dim3 grid(static_cast<unsigned>(blocks));
    if (d.depth == 32)
      strided_attention_kernel<T, 32>
          <<<grid, kWarps * 32, bytes, stream>>>(d, s, tq, tk, tv, tm, ty, outer_index, aligned16);
    else if (d.depth == 64)
      strided_attention_kernel<T, 64>
          <<<grid, kWarps * 32, bytes, stream>>>(d, s, tq, tk, tv, tm, ty, outer_index, aligned16);
    else
      strided_attention_kernel<T, 128>
          <<<grid, kWarps * 32, bytes, stream>>>(d, s, tq, tk, tv, tm, ty, outer_index, aligned16);
  });
}

}  // namespace lumen::cuda
