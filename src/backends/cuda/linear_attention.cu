// CUDA kernels of LinearAttention and CausalConvWithState.
//
// LinearAttention: one block per (batch, KV head, 32 state columns), the recurrent form token by
// token. Columns of the state evolve independently (linear_attention.cc on the CPU says why), so
// a block owns its 32 columns for the whole sequence: thread (x, y) holds column x of rows
// y, y + R, y + 2R, ... (R = blockDim.y row groups of up to kRows rows) in registers. Per token
// the block stages k, the group's q rows and the decay factors in shared memory; each thread
// decays its rows and adds its share of S^T k, the shares meet in shared memory (delta rules),
// then each thread writes k (x) u into its rows and its share of q^T S is summed the same way.
//
// CausalConvWithState: one thread per output element (the k taps of its channel over
// [past or zeros, x]), and one per present_state element (a copy of the padded sequence's tail).
#include "backends/cuda/linear_attention.h"
#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

constexpr int kCols = 32;                    // state columns per block (one per lane)
constexpr int kRows = kLinearAttentionRows;  // state rows per thread, in registers
// Most threads per block: 16 row groups (d_k <= 256), at most 128 registers a thread.
constexpr int kMaxThreads = kCols * static_cast<int>(kLinearAttentionMaxDk / kRows);

template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    linear_attention_kernel(const __grid_constant__ LinearAttentionDesc d, const T* __restrict__ q,
                            const T* __restrict__ k, const T* __restrict__ v,
                            const T* __restrict__ past, const T* __restrict__ decay,
                            const T* __restrict__ beta, T* __restrict__ out,
                            T* __restrict__ present) {
  extern __shared__ float smem[];
  const int groups = blockDim.y;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * kCols + tx, threads = groups * kCols;
  const int dk = static_cast<int>(d.dk);
  const int64_t dv = d.dv, hkv = d.kv_heads, hq = d.q_heads, group = hq / hkv;
  const int64_t col_blocks = (dv + kCols - 1) / kCols;
  const int64_t bh = blockIdx.x / col_blocks;
  const int64_t b = bh / hkv, h = bh % hkv;
  const int64_t col = (blockIdx.x % col_blocks) * kCols + tx;
  const bool live = col < dv;
  float* ks = smem;                       // [dk]
  float* es = ks + dk;                    // [dk] exp(decay), per-key decay
  float* qs = es + dk;                    // [group][dk]
  float* red = qs + group * dk;           // [groups][kCols]
  float* scalars = red + groups * kCols;  // head decay factor, beta

  float s[kRows];
  const int64_t state_at = bh * dk * dv + col;
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
    const int i = m * groups + ty;
    s[m] = past != nullptr && live && i < dk ? to_float(past[state_at + i * dv]) : 0.f;
  }

  for (int64_t t = 0; t < d.seq; ++t) {
    const int64_t bt = b * d.seq + t;
    __syncthreads();  // the previous token's reads of shared memory are done
    const int64_t kv_row = (bt * hkv + h) * dk;
    for (int idx = tid; idx < dk; idx += threads) {
      ks[idx] = to_float(k[kv_row + idx]);
      if (d.gated && d.per_key_decay) es[idx] = expf(to_float(decay[kv_row + idx]));
    }
    const int64_t q_row = (bt * hq + h * group) * dk;  // the group's query heads are adjacent
    for (int64_t idx = tid; idx < group * dk; idx += threads) qs[idx] = to_float(q[q_row + idx]);
    if (tid == 0) {
      scalars[0] = d.gated && !d.per_key_decay ? expf(to_float(decay[bt * hkv + h])) : 1.f;
      scalars[1] = d.delta ? to_float(beta[d.beta_per_head ? bt * hkv + h : bt]) : 1.f;
    }
    __syncthreads();
    const float vj = live ? to_float(v[(bt * hkv + h) * dv + col]) : 0.f;
    float u = vj;
    if (d.gated || d.delta) {
      float part = 0.f;
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        const int i = m * groups + ty;
        if (i < dk) {
          if (d.gated) s[m] *= d.per_key_decay ? es[i] : scalars[0];
          part += s[m] * ks[i];
        }
      }
      if (d.delta) {
        red[tid] = part;
        __syncthreads();
        float retrieved = 0.f;
        for (int y = 0; y < groups; ++y) retrieved += red[y * kCols + tx];
        u = scalars[1] * (vj - retrieved);
      }
    }
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      const int i = m * groups + ty;
      if (i < dk) s[m] += ks[i] * u;
    }
    for (int64_t g = 0; g < group; ++g) {
      const float* qg = qs + g * dk;
      float part = 0.f;
#pragma unroll
      for (int m = 0; m < kRows; ++m) {
        const int i = m * groups + ty;
        if (i < dk) part += qg[i] * s[m];
      }
      __syncthreads();  // red's previous sums are read
      red[tid] = part;
      __syncthreads();
      if (ty == 0 && live) {
        float o = 0.f;
        for (int y = 0; y < groups; ++y) o += red[y * kCols + tx];
        out[(bt * hq + h * group + g) * dv + col] = from_float<T>(d.scale * o);
      }
    }
  }

  if (present != nullptr && live) {
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      const int i = m * groups + ty;
      if (i < dk) present[state_at + i * dv] = from_float<T>(s[m]);
    }
  }
}

template <typename T>
__global__ void causal_conv_kernel(const __grid_constant__ CausalConvDesc d,
                                   const T* __restrict__ x, const T* __restrict__ w,
                                   const T* __restrict__ bias, const T* __restrict__ past,
                                   T* __restrict__ y, T* __restrict__ present, int64_t outputs,
                                   int64_t total) {
  const int64_t taps = d.kernel, carry = d.kernel - 1, length = d.length;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // Position p of row r of the padded sequence [past or zeros (k - 1), x (L)].
    auto padded = [&](int64_t r, int64_t p) {
      if (p >= carry) return to_float(x[r * length + p - carry]);
      return past != nullptr ? to_float(past[r * carry + p]) : 0.f;
    };
    if (idx < outputs) {
      const int64_t row = idx / length, t = idx % length, c = row % d.channels;
      float acc = bias != nullptr ? to_float(bias[c]) : 0.f;
      for (int64_t j = 0; j < taps; ++j) acc += to_float(w[c * taps + j]) * padded(row, t + j);
      if (d.silu) acc = acc / (1.f + expf(-acc));
      y[idx] = from_float<T>(acc);
    } else {
      const int64_t s = idx - outputs, row = s / carry, i = s % carry;
      present[s] = from_float<T>(padded(row, length + i));
    }
  }
}

}  // namespace

void launch_linear_attention(Storage st, const LinearAttentionDesc& d, const void* q, const void* k,
                             const void* v, const void* past, const void* decay, const void* beta,
                             void* out, void* present, cudaStream_t stream) {
  const int64_t col_blocks = (d.dv + kCols - 1) / kCols;
  const int64_t blocks = d.batch * d.kv_heads * col_blocks;
  if (blocks == 0) return;
  const int groups = static_cast<int>((d.dk + kRows - 1) / kRows);
  const size_t smem = linear_attention_smem_bytes(d);
  const dim3 block(kCols, groups > 0 ? groups : 1);
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    linear_attention_kernel<T><<<static_cast<unsigned>(blocks), block, smem, stream>>>(
        d, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
        static_cast<const T*>(past), static_cast<const T*>(decay), static_cast<const T*>(beta),
        static_cast<T*>(out), static_cast<T*>(present));
  });
}

void launch_causal_conv(Storage st, const CausalConvDesc& d, const void* x, const void* w,
                        const void* bias, const void* past, void* y, void* present,
                        cudaStream_t stream) {
  const int64_t rows = d.batch * d.channels;
  const int64_t outputs = rows * d.length;
  const int64_t total = outputs + (present != nullptr ? rows * (d.kernel - 1) : 0);
  if (total == 0) return;
  constexpr int kThreads = 256;
  const int64_t want = (total + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(want < (1 << 20) ? want : (1 << 20));
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    causal_conv_kernel<T><<<grid, kThreads, 0, stream>>>(
        d, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias),
        static_cast<const T*>(past), static_cast<T*>(y), static_cast<T*>(present), outputs, total);
  });
}

}  // namespace lumen::cuda
