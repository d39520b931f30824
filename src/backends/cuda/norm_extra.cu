// CUDA kernels of RMSNormalization, GroupNormalization, RotaryEmbedding, Swish, SwiGLU and
// MeanVarianceNormalization (see norm_extra.h). Templates over the storage type T (float, __half,
// __nv_bfloat16; storage.cuh), computing in float32 (MeanVarianceNormalization's statistics in
// double).
#include <cfloat>
#include <cmath>

#include "backends/cuda/any_types.cuh"
#include "backends/cuda/block_reduce.cuh"
#include "backends/cuda/index_check.cuh"
#include "backends/cuda/norm_extra.h"
#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

// ---- RMSNormalization ----

// One warp per row (rows of up to 1024 values).
template <typename T>
__global__ void rms_norm_warp_kernel(const T* __restrict__ x, const T* __restrict__ scale,
                                     T* __restrict__ y, int64_t rows, int64_t n, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t step = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t r = first; r < rows; r += step) {
    const T* in = x + r * n;
    T* out = y + r * n;
    float s = 0.f;
    for (int64_t j = lane; j < n; j += 32) {
      const float v = to_float(in[j]);
      s += v * v;
    }
    const float inv = rsqrtf(warp_sum(s) / static_cast<float>(n) + eps);
    for (int64_t j = lane; j < n; j += 32)
      out[j] = from_float<T>(to_float(in[j]) * inv * to_float(scale[j]));
  }
}

// One block per row.
template <typename T>
__global__ void rms_norm_block_kernel(const T* __restrict__ x, const T* __restrict__ scale,
                                      T* __restrict__ y, int64_t rows, int64_t n, float eps) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * n;
    T* out = y + r * n;
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float v = to_float(in[j]);
      s += v * v;
    }
    const float inv = rsqrtf(block_sum(s, shared) / static_cast<float>(n) + eps);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      out[j] = from_float<T>(to_float(in[j]) * inv * to_float(scale[j]));
  }
}

// ---- GroupNormalization ----

// Block b takes piece b % chunks of group b / chunks: writes (mean, sum of squared deviations).
template <typename T>
__global__ void group_stats_kernel(const T* __restrict__ x, float2* __restrict__ partial,
                                   int64_t group_size, int64_t chunk_len, int64_t chunks) {
  __shared__ float shared[32];
  const int64_t g = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const int64_t begin = c * chunk_len;
  const int64_t end = begin + chunk_len < group_size ? begin + chunk_len : group_size;
  const T* p = x + g * group_size;
  // Sums of x - x0 (the piece's first value): values far from zero keep their precision.
  const float shift = to_float(p[begin]);
  float s = 0.f;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) s += to_float(p[i]) - shift;
  const float mean = shift + block_sum(s, shared) / static_cast<float>(end - begin);
  float m2 = 0.f;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float d = to_float(p[i]) - mean;
    m2 += d * d;
  }
  m2 = block_sum(m2, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = make_float2(mean, m2);
}

// Merges the statistics (count, mean, sum of squared deviations) of b into a: Chan, Golub and
// LeVeque's pairwise formula.
__device__ __forceinline__ void merge_stats(double& n, double& mean, double& m2, double nb,
                                            double mean_b, double m2_b) {
  const double total = n + nb;
  if (total == 0.0) return;
  const double delta = mean_b - mean;
  mean += delta * nb / total;
  m2 += m2_b + delta * delta * n * nb / total;
  n = total;
}

// Block b combines the pieces of group b / chunks (the first warp, each lane a strided share of
// them, then a butterfly across the lanes) and normalises piece b % chunks. I: the index type
// within a group (32-bit when the group fits).
template <typename T, typename I>
__global__ void group_norm_apply_kernel(const T* __restrict__ x, const T* __restrict__ scale,
                                        const T* __restrict__ bias, T* __restrict__ y,
                                        const float2* __restrict__ partial, GroupNormDesc d) {
  __shared__ float stats[2];
  const int64_t group_size = d.channels / d.groups * d.spatial;
  const int64_t g = blockIdx.x / d.chunks, c = blockIdx.x % d.chunks;
  if (threadIdx.x < 32) {
    double n = 0.0, mean = 0.0, m2 = 0.0;
    for (int64_t k = threadIdx.x; k < d.chunks; k += 32) {
      const int64_t left = group_size - k * d.chunk_len;
      const float2 pb = partial[g * d.chunks + k];
      merge_stats(n, mean, m2, static_cast<double>(left < d.chunk_len ? left : d.chunk_len), pb.x,
                  pb.y);
    }
    for (int o = 16; o > 0; o >>= 1) {
      const double on = __shfl_xor_sync(0xffffffffu, n, o);
      const double om = __shfl_xor_sync(0xffffffffu, mean, o);
      const double o2 = __shfl_xor_sync(0xffffffffu, m2, o);
      merge_stats(n, mean, m2, on, om, o2);
    }
    if (threadIdx.x == 0) {
      stats[0] = static_cast<float>(mean);
      stats[1] = static_cast<float>(1.0 / sqrt(m2 / n + d.epsilon));
    }
  }
  __syncthreads();
  const float mean = stats[0], inv = stats[1];
  const I begin = static_cast<I>(c * d.chunk_len);
  const I len = static_cast<I>(d.chunk_len);
  const I size = static_cast<I>(group_size);
  const I end = begin + len < size ? begin + len : size;
  const I spatial = static_cast<I>(d.spatial);
  const int64_t channel0 = (g % d.groups) * (d.channels / d.groups);
  const T* in = x + g * group_size;
  T* out = y + g * group_size;
  for (I i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const int64_t ch = channel0 + i / spatial;
    out[i] =
        from_float<T>((to_float(in[i]) - mean) * inv * to_float(scale[ch]) + to_float(bias[ch]));
  }
}

// ---- RotaryEmbedding: one thread per output value ----

// I: the index type, 32-bit whenever every offset fits (64-bit division is several times slower).
template <typename T, typename I>
__global__ void rotary_kernel(const T* __restrict__ x, const T* __restrict__ cos_cache,
                              const T* __restrict__ sin_cache, const int64_t* __restrict__ pos,
                              T* __restrict__ y, RotaryDesc d, I n, IndexCheck check) {
  const I half = static_cast<I>(d.rotary_dim / 2), rd = static_cast<I>(d.rotary_dim);
  const I head_size = static_cast<I>(d.head_size), heads = static_cast<I>(d.heads);
  const I seq = static_cast<I>(d.seq);
  for (I e = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<I>(blockDim.x) * gridDim.x) {
    const I j = e % head_size;
    if (j >= rd) {
      y[e] = x[e];
      continue;
    }
    const I rest = e / head_size;
    // (b, s, h, j) for 3-D X, (b, h, s, j) for 4-D.
    const I s = d.three_d ? (rest / heads) % seq : rest % seq;
    const I b = rest / (heads * seq);
    const I token = b * seq + s;
    int64_t row = token;
    if (pos != nullptr) {
      row = pos[token];
      if (row < 0 || row >= d.max_position) {
        y[e] = from_float<T>(__int_as_float(0x7fc00000));  // NaN: the position is not cached
        report_bad_index(check, row, 0, d.max_position);
        continue;
      }
    }
    const T* head = x + (e - j);
    I i, lo, hi;
    bool first;
    if (d.interleaved) {
      i = j >> 1;
      lo = 2 * i;
      hi = lo + 1;
      first = (j & 1) == 0;
    } else {
      first = j < half;
      i = first ? j : j - half;
      lo = i;
      hi = i + half;
    }
    const float c = to_float(cos_cache[row * half + i]);
    const float sn = to_float(sin_cache[row * half + i]);
    const float a = to_float(head[lo]), bb = to_float(head[hi]);
    y[e] = from_float<T>(first ? c * a - sn * bb : sn * a + c * bb);
  }
}

// ---- Swish, SwiGLU ----

template <typename T>
__global__ void swish_kernel(float alpha, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const float v = to_float(a[i]);
    float r = v / (1.f + expf(-alpha * v));
    if (b != nullptr) r *= to_float(b[i]);
    y[i] = from_float<T>(r);
  }
}

// The sum of v over the block in double (blockDim.x == kThreads); every thread gets it.
__device__ double block_sum_double(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

// One block per group (kept index): the group's elements are the reduced dims' offsets from
// the kept index's base.
template <typename T>
__global__ void mvn_kernel(ReduceDesc d, const T* x, T* y) {
  __shared__ double shared[kThreads];
  const int64_t base =
      strided_offset(static_cast<int64_t>(blockIdx.x), d.out_rank, d.out_dims, d.out_strides);
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < d.red_n; j += kThreads)
    sum += to_float(x[base + strided_offset(j, d.red_rank, d.red_dims, d.red_strides)]);
  const double mean = block_sum_double(sum, shared) / static_cast<double>(d.red_n);
  double sq = 0.0;
  for (int64_t j = threadIdx.x; j < d.red_n; j += kThreads) {
    const double v =
        to_float(x[base + strided_offset(j, d.red_rank, d.red_dims, d.red_strides)]) - mean;
    sq += v * v;
  }
  const double den = sqrt(block_sum_double(sq, shared) / static_cast<double>(d.red_n)) + 1e-9;
  for (int64_t j = threadIdx.x; j < d.red_n; j += kThreads) {
    const int64_t at = base + strided_offset(j, d.red_rank, d.red_dims, d.red_strides);
    y[at] = from_float<T>(static_cast<float>((to_float(x[at]) - mean) / den));
  }
}

}  // namespace

void launch_rms_norm(Storage st, const void* x, const void* scale, void* y, int64_t rows, int64_t n,
                     float epsilon, cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tx = static_cast<const T*>(x);
    const T* ts = static_cast<const T*>(scale);
    T* ty = static_cast<T*>(y);
    // A warp per row where rows are many; a block per row where they are few (a decoding step's
    // one row of 1024 took 8.4 us on one warp under ncu on the H200).
    if (n <= 1024 && rows >= 1024) {
      const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
      rms_norm_warp_kernel<<<static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8), kThreads, 0,
                             stream>>>(tx, ts, ty, rows, n, epsilon);
    } else {
      const int blocks = static_cast<int>(rows < 65535 * 8 ? rows : 65535 * 8);
      rms_norm_block_kernel<<<blocks, kThreads, 0, stream>>>(tx, ts, ty, rows, n, epsilon);
    }
  });
}

GroupNormDesc group_norm_desc(int64_t batch, int64_t channels, int64_t groups, int64_t spatial,
                              float epsilon) {
  GroupNormDesc d;
  d.batch = batch;
  d.channels = channels;
  d.groups = groups;
  d.spatial = spatial;
  d.epsilon = epsilon;
  const int64_t group_size = channels / groups * spatial;
  const int64_t num_groups = batch * groups;
  if (group_size == 0 || num_groups == 0) return d;
  // About 2048 blocks in all, pieces of at least 4096 values, at most 1024 pieces per group.
  constexpr int64_t kTargetBlocks = 2048, kMinPiece = 4096, kMaxPieces = 1024;
  int64_t chunks = (group_size + kMinPiece - 1) / kMinPiece;
  const int64_t fill = (kTargetBlocks + num_groups - 1) / num_groups;
  chunks = chunks < fill ? chunks : fill;
  chunks = chunks < kMaxPieces ? chunks : kMaxPieces;
  chunks = chunks > 0 ? chunks : 1;
  d.chunk_len = (group_size + chunks - 1) / chunks;
  d.chunks = (group_size + d.chunk_len - 1) / d.chunk_len;  // no empty piece
  return d;
}

size_t group_norm_workspace_bytes(const GroupNormDesc& d) {
  return static_cast<size_t>(d.batch * d.groups * d.chunks) * sizeof(float2);
}

void launch_group_norm(Storage st, const GroupNormDesc& d, const void* x, const void* scale,
                       const void* bias, void* y, void* workspace, cudaStream_t stream) {
  const int64_t group_size = d.channels / d.groups * d.spatial;
  const int64_t blocks = d.batch * d.groups * d.chunks;
  if (group_size == 0 || blocks == 0) return;
  float2* partial = static_cast<float2*>(workspace);
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tx = static_cast<const T*>(x);
    group_stats_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        tx, partial, group_size, d.chunk_len, d.chunks);
    const T* ts = static_cast<const T*>(scale);
    const T* tb = static_cast<const T*>(bias);
    T* ty = static_cast<T*>(y);
    if (group_size < (int64_t{1} << 31))
      group_norm_apply_kernel<T, uint32_t>
          <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(tx, ts, tb, ty, partial, d);
    else
      group_norm_apply_kernel<T, int64_t>
          <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(tx, ts, tb, ty, partial, d);
  });
}

void launch_rotary_embedding(Storage st, const RotaryDesc& d, const void* x, const void* cos,
                             const void* sin, const int64_t* position_ids, void* y,
                             const IndexCheck& check, cudaStream_t stream) {
  const int64_t n = d.batch * d.heads * d.seq * d.head_size;
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tx = static_cast<const T*>(x);
    const T* tc = static_cast<const T*>(cos);
    const T* ts = static_cast<const T*>(sin);
    // Offsets into the caches are 64-bit either way.
    if (n < (int64_t{1} << 31))
      rotary_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
          tx, tc, ts, position_ids, static_cast<T*>(y), d, static_cast<uint32_t>(n), check);
    else
      rotary_kernel<<<blocks_for(n), kThreads, 0, stream>>>(tx, tc, ts, position_ids,
                                                            static_cast<T*>(y), d, n, check);
  });
}

void launch_mvn(Storage st, const ReduceDesc& d, const void* x, void* y, cudaStream_t stream) {
  if (d.out_n == 0 || d.red_n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    mvn_kernel<<<static_cast<unsigned>(d.out_n), kThreads, 0, stream>>>(d, static_cast<const T*>(x),
                                                                        static_cast<T*>(y));
  });
}

void launch_swish(Storage st, float alpha, const void* a, const void* b, void* y, int64_t n,
                  cudaStream_t stream) {
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    swish_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
        alpha, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), n);
  });
}

}  // namespace lumen::cuda
