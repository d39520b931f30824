// The CUDA backend's own kernels: element-wise, normalisation, pooling, softmax, data movement.
// One thread per output element unless noted; grid-stride loops so any size launches. Each kernel
// is a template over its tensors' element type T (float or __half, storage.cuh) and computes in
// float32.
#include <cfloat>

#include "backends/cuda/index_check.cuh"
#include "backends/cuda/launch.h"
#include "backends/cuda/online_softmax.cuh"
#include "backends/cuda/storage.cuh"
#include "backends/cuda/unary_math.cuh"

namespace lumen::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

#define GRID_LOOP(i, n)                                                                  \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

template <typename T>
__global__ void unary_kernel(UnaryOp op, float alpha, float beta, const T* x, T* y, int64_t n) {
  GRID_LOOP(i, n) y[i] = from_float<T>(apply_unary(op, to_float(x[i]), alpha, beta));
}

template <typename S, typename D>
__global__ void cast_kernel(const S* x, D* y, int64_t n) {
  GRID_LOOP(i, n) y[i] = from_float<D>(to_float(x[i]));
}

__device__ __forceinline__ float apply_binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kPow:
      return powf(a, b);
    case BinaryOp::kMin:
      return min_nan(a, b);
    case BinaryOp::kMax:
      return max_nan(a, b);
  }
  return a;
}

template <typename T>
__global__ void binary_same_kernel(BinaryOp op, const T* a, const T* b, T* y, int64_t n) {
  GRID_LOOP(i, n) y[i] = from_float<T>(apply_binary(op, to_float(a[i]), to_float(b[i])));
}

template <typename T>
__global__ void binary_broadcast_kernel(BinaryOp op, const T* a, const T* b, T* y, int64_t n,
                                        BroadcastDesc d) {
  GRID_LOOP(i, n) {
    int64_t rest = i, ia = 0, ib = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      int64_t c = rest % d.dims[k];
      rest /= d.dims[k];
      ia += c * d.a_strides[k];
      ib += c * d.b_strides[k];
    }
    y[i] = from_float<T>(apply_binary(op, to_float(a[ia]), to_float(b[ib])));
  }
}

template <typename T>
__global__ void channel_affine_kernel(const T* x, const float* scale, const float* shift, T* y,
                                      int64_t n, int64_t channels, int64_t inner) {
  GRID_LOOP(i, n) {
    int64_t c = (i / inner) % channels;
    y[i] = from_float<T>(to_float(x[i]) * scale[c] + shift[c]);
  }
}

// I: the index type, 32-bit whenever n fits (the channel of each element is a division).
template <typename T, typename I>
__global__ void conv_epilogue_kernel(T* y, I n, I channels, I inner, ConvEpilogue e) {
  const T* bias = static_cast<const T*>(e.bias);
  const T* residual = static_cast<const T*>(e.residual);
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<I>(blockDim.x) * gridDim.x) {
    float v = to_float(y[i]);
    if (bias != nullptr) v += to_float(bias[(i / inner) % channels]);
    if (residual != nullptr) v += to_float(residual[i]);
    y[i] = from_float<T>(apply_unary(e.op, v, e.alpha, e.beta));
  }
}

// One thread per column element; consecutive threads walk the output positions, so reads of x
// and writes of col are both close to contiguous.
template <typename T>
__global__ void im2col_kernel(Conv2dDesc d, const T* __restrict__ x, T* __restrict__ col,
                              int64_t n) {
  const int64_t hw = d.out_h * d.out_w;
  GRID_LOOP(i, n) {
    const int64_t p = i % hw;
    const int64_t row = (i / hw) % (d.in_channels * d.k_h * d.k_w);
    const int64_t b = i / (hw * d.in_channels * d.k_h * d.k_w);
    const int64_t q = row % d.k_w, r = (row / d.k_w) % d.k_h, c = row / (d.k_w * d.k_h);
    const int64_t ih = (p / d.out_w) * d.stride_h - d.pad_h + r * d.dil_h;
    const int64_t iw = (p % d.out_w) * d.stride_w - d.pad_w + q * d.dil_w;
    col[i] = ih >= 0 && ih < d.in_h && iw >= 0 && iw < d.in_w
                 ? x[((b * d.in_channels + c) * d.in_h + ih) * d.in_w + iw]
                 : from_float<T>(0.f);
  }
}

// One thread per output element; KH/KW fixed at compile time for the common 3x3 and 5x5 (0: read
// from the descriptor).
template <typename T, int KH, int KW>
__global__ void depthwise_conv_kernel(Conv2dDesc d, const T* __restrict__ x,
                                      const T* __restrict__ w, T* __restrict__ y, int64_t n,
                                      ConvEpilogue e) {
  const T* bias = static_cast<const T*>(e.bias);
  const T* residual = static_cast<const T*>(e.residual);
  const int kh_n = KH > 0 ? KH : d.k_h;
  const int kw_n = KW > 0 ? KW : d.k_w;
  const int64_t out_c = d.in_channels * d.multiplier;
  GRID_LOOP(i, n) {
    const int64_t ow = i % d.out_w;
    const int64_t oh = (i / d.out_w) % d.out_h;
    const int64_t oc = (i / (d.out_w * d.out_h)) % out_c;
    const int64_t b = i / (d.out_w * d.out_h * out_c);
    const T* xp = x + (b * d.in_channels + oc / d.multiplier) * d.in_h * d.in_w;
    const T* wp = w + oc * kh_n * kw_n;
    const int64_t ih0 = oh * d.stride_h - d.pad_h, iw0 = ow * d.stride_w - d.pad_w;
    float acc = bias != nullptr ? to_float(bias[oc]) : 0.f;
#pragma unroll
    for (int kh = 0; kh < kh_n; ++kh) {
      const int64_t ih = ih0 + kh * d.dil_h;
      if (ih < 0 || ih >= d.in_h) continue;
#pragma unroll
      for (int kw = 0; kw < kw_n; ++kw) {
        const int64_t iw = iw0 + kw * d.dil_w;
        if (iw < 0 || iw >= d.in_w) continue;
        acc += to_float(xp[ih * d.in_w + iw]) * to_float(wp[kh * kw_n + kw]);
      }
    }
    if (residual != nullptr) acc += to_float(residual[i]);
    y[i] = from_float<T>(apply_unary(e.op, acc, e.alpha, e.beta));
  }
}

// The same with a 2-D tile of one output plane per block (blockIdx.z: image * out channels +
// channel), so each thread finds its position without 64-bit divisions and holds its channel's
// KH x KW weights in registers; for planes and grids whose sizes fit 32-bit indices.
template <typename T, int KH, int KW>
__global__ void depthwise_conv_tiled_kernel(Conv2dDesc d, const T* __restrict__ x,
                                            const T* __restrict__ w, T* __restrict__ y,
                                            ConvEpilogue e) {
  const int ow = blockIdx.x * blockDim.x + threadIdx.x;
  const int oh = blockIdx.y * blockDim.y + threadIdx.y;
  const int out_w = static_cast<int>(d.out_w), out_h = static_cast<int>(d.out_h);
  if (ow >= out_w || oh >= out_h) return;
  const int in_w = static_cast<int>(d.in_w), in_h = static_cast<int>(d.in_h);
  const int multiplier = static_cast<int>(d.multiplier);
  const int out_c = static_cast<int>(d.in_channels) * multiplier;
  const int plane = blockIdx.z, oc = plane % out_c, b = plane / out_c;
  const T* xp = x + (static_cast<int64_t>(b) * d.in_channels + oc / multiplier) * in_h * in_w;
  float wr[KH * KW];
#pragma unroll
  for (int k = 0; k < KH * KW; ++k) wr[k] = to_float(w[oc * KH * KW + k]);
  const T* bias = static_cast<const T*>(e.bias);
  float acc = bias != nullptr ? to_float(bias[oc]) : 0.f;
  const int ih0 = oh * d.stride_h - d.pad_h, iw0 = ow * d.stride_w - d.pad_w;
#pragma unroll
  for (int kh = 0; kh < KH; ++kh) {
    const int ih = ih0 + kh * d.dil_h;
    if (ih < 0 || ih >= in_h) continue;
    const T* row = xp + ih * in_w;
#pragma unroll
    for (int kw = 0; kw < KW; ++kw) {
      const int iw = iw0 + kw * d.dil_w;
      if (iw >= 0 && iw < in_w) acc += to_float(row[iw]) * wr[kh * KW + kw];
    }
  }
  const int64_t i = (static_cast<int64_t>(plane) * out_h + oh) * out_w + ow;
  const T* residual = static_cast<const T*>(e.residual);
  if (residual != nullptr) acc += to_float(residual[i]);
  y[i] = from_float<T>(apply_unary(e.op, acc, e.alpha, e.beta));
}

// The tiled kernel's block for an out_h x out_w plane: up to 32 columns wide, 256 threads at most,
// no wider or taller than the plane needs (in powers of two).
dim3 depthwise_block(int64_t out_h, int64_t out_w) {
  unsigned bx = 1, by = 1;
  while (bx < 32 && bx < out_w) bx *= 2;
  while (bx * by < 256 && by < out_h) by *= 2;
  return dim3(bx, by);
}

template <typename T>
__global__ void pool2d_kernel(Pool2dDesc d, const T* x, T* y, int64_t n) {
  GRID_LOOP(i, n) {
    int64_t ow = i % d.out_w;
    int64_t oh = (i / d.out_w) % d.out_h;
    int64_t p = i / (d.out_w * d.out_h);
    const T* plane = x + p * d.in_h * d.in_w;
    int64_t h0 = oh * d.s_h - d.pad_t, w0 = ow * d.s_w - d.pad_l;
    float acc = d.max ? -FLT_MAX : 0.f;
    int64_t count = 0, padded = 0;
    for (int64_t kh = 0; kh < d.k_h; ++kh) {
      int64_t h = h0 + kh * d.d_h;
      for (int64_t kw = 0; kw < d.k_w; ++kw) {
        int64_t w = w0 + kw * d.d_w;
        if (h >= -d.pad_t && h < d.in_h + d.pad_b && w >= -d.pad_l && w < d.in_w + d.pad_r)
          ++padded;
        if (h < 0 || h >= d.in_h || w < 0 || w >= d.in_w) continue;
        float v = to_float(plane[h * d.in_w + w]);
        acc = d.max ? fmaxf(acc, v) : acc + v;
        ++count;
      }
    }
    if (!d.max) acc /= static_cast<float>(d.count_include_pad ? padded : (count ? count : 1));
    y[i] = from_float<T>(acc);
  }
}

// One block per row; a tree reduction in shared memory.
template <typename T>
__global__ void row_reduce_kernel(const T* x, T* y, int64_t rows, int64_t n, bool max) {
  __shared__ float part[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * n;
    float acc = max ? -INFINITY : 0.f;  // a row of -inf has the maximum -inf
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      acc = max ? max_nan(acc, to_float(row[j])) : acc + to_float(row[j]);
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s)
        part[threadIdx.x] = max ? max_nan(part[threadIdx.x], part[threadIdx.x + s])
                                : part[threadIdx.x] + part[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) y[r] = from_float<T>(max ? part[0] : part[0] / static_cast<float>(n));
    __syncthreads();
  }
}

__device__ float block_reduce(float v, bool max, float* shared) {
  // Within each warp by shuffles, then every warp combines the warps' results from `shared` (one
  // slot per warp): two barriers, not one per halving. blockDim.x is a multiple of 32.
  auto combine = [max](float a, float b) { return max ? fmaxf(a, b) : a + b; };
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the slots may still be read by the previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? shared[lane] : (max ? -INFINITY : 0.f);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Softmax along a contiguous axis (inner == 1): one block per row.
template <typename T>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t n, bool log) {
  __shared__ float shared[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * n;
    T* out = y + r * n;
    float m = -FLT_MAX;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, to_float(in[j]));
    m = block_reduce(m, true, shared);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += expf(to_float(in[j]) - m);
    s = block_reduce(s, false, shared);
    float ls = logf(s);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float v = to_float(in[j]);
      out[j] = from_float<T>(log ? v - m - ls : expf(v - m) / s);
    }
  }
}

// Softmax along a strided axis: one thread per (outer, inner) column.
template <typename T>
__global__ void softmax_strided_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                                       bool log) {
  GRID_LOOP(i, outer * inner) {
    int64_t o = i / inner, in = i % inner;
    const T* col = x + o * n * inner + in;
    T* dst = y + o * n * inner + in;
    float m = -FLT_MAX;
    for (int64_t j = 0; j < n; ++j) m = fmaxf(m, to_float(col[j * inner]));
    float s = 0.f;
    for (int64_t j = 0; j < n; ++j) s += expf(to_float(col[j * inner]) - m);
    float ls = logf(s);
    for (int64_t j = 0; j < n; ++j) {
      const float v = to_float(col[j * inner]);
      dst[j * inner] = from_float<T>(log ? v - m - ls : expf(v - m) / s);
    }
  }
}

// One block per row. A row of at most kLayerNormCached values per thread is read from memory once
// and kept in registers for the mean, the variance and the output; a longer row is read three
// times.
constexpr int kLayerNormCached = 8;

template <typename T>
__global__ void layer_norm_kernel(const T* x, const T* scale, const T* bias, T* y, int64_t rows,
                                  int64_t n, float eps) {
  __shared__ float shared[kThreads / 32];
  const bool cached = n <= static_cast<int64_t>(kLayerNormCached) * blockDim.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * n;
    T* out = y + r * n;
    float s = 0.f;
    float v[kLayerNormCached];
    if (cached) {
#pragma unroll
      for (int i = 0; i < kLayerNormCached; ++i) {
        const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
        v[i] = j < n ? to_float(in[j]) : 0.f;
        s += v[i];
      }
    } else {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += to_float(in[j]);
    }
    const float mean = block_reduce(s, false, shared) / static_cast<float>(n);
    float q = 0.f;
    if (cached) {
#pragma unroll
      for (int i = 0; i < kLayerNormCached; ++i) {
        const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
        const float c = j < n ? v[i] - mean : 0.f;
        q += c * c;
      }
    } else {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const float c = to_float(in[j]) - mean;
        q += c * c;
      }
    }
    const float inv = rsqrtf(block_reduce(q, false, shared) / static_cast<float>(n) + eps);
    auto store = [&](int64_t j, float value) {
      out[j] = from_float<T>((value - mean) * inv * to_float(scale[j]) +
                             (bias ? to_float(bias[j]) : 0.f));
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < kLayerNormCached; ++i) {
        const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
        if (j < n) store(j, v[i]);
      }
    } else {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) store(j, to_float(in[j]));
    }
  }
}

// Rows of at most 32 * kPerLane values: one warp per row, the row in registers, the sums by
// shuffles within the warp (no block barriers), kLayerNormWarps rows per block. BERT's 128 x 768
// rows took 4.6 us each as one 256-thread block per row (four barriers per row).
constexpr int kLayerNormWarps = 4;

template <typename T, int kPerLane>
__global__ void layer_norm_warp_kernel(const T* x, const T* scale, const T* bias, T* y,
                                       int64_t rows, int n, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t r = blockIdx.x * static_cast<int64_t>(kLayerNormWarps) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const T* in = x + r * n;
  T* out = y + r * n;
  // Scale and bias are read with x, before any store: y may alias x, so a load after a store
  // would wait for it (one memory round trip per value, 10 us for BERT's rows).
  float v[kPerLane], w[kPerLane], b[kPerLane];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int j = lane + 32 * i;
    v[i] = j < n ? to_float(in[j]) : 0.f;
    w[i] = j < n ? to_float(scale[j]) : 0.f;
    b[i] = j < n && bias ? to_float(bias[j]) : 0.f;
    s += v[i];
  }
  const float mean = warp_sum(s) / static_cast<float>(n);
  float q = 0.f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int j = lane + 32 * i;
    const float c = j < n ? v[i] - mean : 0.f;
    q += c * c;
  }
  const float inv = rsqrtf(warp_sum(q) / static_cast<float>(n) + eps);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int j = lane + 32 * i;
    if (j < n) out[j] = from_float<T>((v[i] - mean) * inv * w[i] + b[i]);
  }
}

template <typename T, int kPerLane>
void launch_layer_norm_warps(const T* x, const T* scale, const T* bias, T* y, int64_t rows,
                             int64_t n, float eps, cudaStream_t stream) {
  const int64_t blocks = (rows + kLayerNormWarps - 1) / kLayerNormWarps;
  layer_norm_warp_kernel<T, kPerLane>
      <<<static_cast<unsigned>(blocks), 32 * kLayerNormWarps, 0, stream>>>(
          x, scale, bias, y, rows, static_cast<int>(n), eps);
}

struct PermuteDesc {
  int rank;
  int64_t dims[kMaxRank];
  int64_t strides[kMaxRank];
};

// I: the index type, 32-bit whenever every offset fits (64-bit division is several times slower).
template <typename T, typename I>
__global__ void permute_kernel(const T* x, T* y, PermuteDesc d, I n) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<I>(blockDim.x) * gridDim.x) {
    I rest = i, src = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const I dim = static_cast<I>(d.dims[k]);
      src += (rest % dim) * static_cast<I>(d.strides[k]);
      rest /= dim;
    }
    y[i] = x[src];
  }
}

template <typename T>
void launch_permute_typed(const void* x, void* y, const PermuteDesc& d, int64_t n,
                          cudaStream_t stream) {
  int64_t reach = n;
  for (int k = 0; k < d.rank; ++k)
    reach += (d.dims[k] - 1) * (d.strides[k] < 0 ? -d.strides[k] : d.strides[k]);
  if (reach < (int64_t{1} << 31))
    permute_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), d, static_cast<int32_t>(n));
  else
    permute_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x),
                                                           static_cast<T*>(y), d, n);
}

template <typename T, typename I>
__global__ void gather_kernel(const T* x, const I* idx, T* y, int64_t outer, int64_t axis_n,
                              int64_t inner, int64_t num, IndexCheck check) {
  GRID_LOOP(i, outer * num * inner) {
    int64_t in = i % inner;
    int64_t j = (i / inner) % num;
    int64_t o = i / (inner * num);
    const int64_t given = static_cast<int64_t>(idx[j]);
    const int64_t k = given < 0 ? given + axis_n : given;
    if (k < 0 || k >= axis_n) {
      y[i] = T{};
      report_bad_index(check, given, -axis_n, axis_n);
    } else {
      y[i] = x[(o * axis_n + k) * inner + in];
    }
  }
}

}  // namespace

void launch_unary(Storage st, UnaryOp op, float alpha, float beta, const void* x, void* y,
                  int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    unary_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, alpha, beta, static_cast<const T*>(x),
                                                         static_cast<T*>(y), n);
  });
}

void launch_cast(Storage from, const void* x, Storage to, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(from, [&](auto from_tag) {
    using S = decltype(from_tag);
    with_storage(to, [&](auto to_tag) {
      using D = decltype(to_tag);
      cast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const S*>(x),
                                                          static_cast<D*>(y), n);
    });
  });
}

void launch_binary(Storage st, BinaryOp op, const void* a, const void* b, void* y, int64_t n,
                   const BroadcastDesc& desc, cudaStream_t stream) {
  if (n == 0) return;
  bool same = true;
  int64_t stride = 1;
  for (int k = desc.rank - 1; k >= 0; --k) {
    if (desc.dims[k] != 1 && (desc.a_strides[k] != stride || desc.b_strides[k] != stride))
      same = false;
    stride *= desc.dims[k];
  }
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* ta = static_cast<const T*>(a);
    const T* tb = static_cast<const T*>(b);
    if (same)
      binary_same_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, ta, tb, static_cast<T*>(y), n);
    else
      binary_broadcast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, ta, tb,
                                                                      static_cast<T*>(y), n, desc);
  });
}

void launch_channel_affine(Storage st, const void* x, const float* scale, const float* shift,
                           void* y, int64_t outer, int64_t channels, int64_t inner,
                           cudaStream_t stream) {
  int64_t n = outer * channels * inner;
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    channel_affine_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), scale, shift, static_cast<T*>(y), n, channels, inner);
  });
}

void launch_im2col(Storage st, const Conv2dDesc& desc, const void* x, void* col,
                   cudaStream_t stream) {
  int64_t n = desc.batch * desc.in_channels * desc.k_h * desc.k_w * desc.out_h * desc.out_w;
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    im2col_kernel<<<blocks_for(n), kThreads, 0, stream>>>(desc, static_cast<const T*>(x),
                                                          static_cast<T*>(col), n);
  });
}

void launch_conv_epilogue(Storage st, void* y, int64_t outer, int64_t channels, int64_t inner,
                          const ConvEpilogue& epilogue, cudaStream_t stream) {
  int64_t n = outer * channels * inner;
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    if (n < (int64_t{1} << 31))
      conv_epilogue_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
          static_cast<T*>(y), static_cast<uint32_t>(n), static_cast<uint32_t>(channels),
          static_cast<uint32_t>(inner), epilogue);
    else
      conv_epilogue_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(y), n, channels,
                                                                   inner, epilogue);
  });
}

void launch_depthwise_conv(Storage st, const Conv2dDesc& desc, const void* x, const void* w,
                           void* y, const ConvEpilogue& epilogue, cudaStream_t stream) {
  int64_t n = desc.batch * desc.in_channels * desc.multiplier * desc.out_h * desc.out_w;
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tx = static_cast<const T*>(x);
    const T* tw = static_cast<const T*>(w);
    T* ty = static_cast<T*>(y);
    const int64_t planes = desc.batch * desc.in_channels * desc.multiplier;
    const bool tiled = planes <= 65535 && desc.out_h <= int64_t{65535} * 8 &&
                       desc.in_h * desc.in_w < (int64_t{1} << 31) &&
                       desc.out_h * desc.out_w < (int64_t{1} << 31) &&
                       planes * desc.k_h * desc.k_w < (int64_t{1} << 31);
    const dim3 block = depthwise_block(desc.out_h, desc.out_w);
    const dim3 grid(static_cast<unsigned>((desc.out_w + block.x - 1) / block.x),
                    static_cast<unsigned>((desc.out_h + block.y - 1) / block.y),
                    static_cast<unsigned>(planes));
    if (tiled && desc.k_h == 3 && desc.k_w == 3)
      depthwise_conv_tiled_kernel<T, 3, 3><<<grid, block, 0, stream>>>(desc, tx, tw, ty, epilogue);
    else if (tiled && desc.k_h == 5 && desc.k_w == 5)
      depthwise_conv_tiled_kernel<T, 5, 5><<<grid, block, 0, stream>>>(desc, tx, tw, ty, epilogue);
    else if (desc.k_h == 3 && desc.k_w == 3)
      depthwise_conv_kernel<T, 3, 3>
          <<<blocks_for(n), kThreads, 0, stream>>>(desc, tx, tw, ty, n, epilogue);
    else if (desc.k_h == 5 && desc.k_w == 5)
      depthwise_conv_kernel<T, 5, 5>
          <<<blocks_for(n), kThreads, 0, stream>>>(desc, tx, tw, ty, n, epilogue);
    else
      depthwise_conv_kernel<T, 0, 0>
          <<<blocks_for(n), kThreads, 0, stream>>>(desc, tx, tw, ty, n, epilogue);
  });
}

void launch_pool2d(Storage st, const Pool2dDesc& desc, const void* x, void* y,
                   cudaStream_t stream) {
  int64_t n = desc.planes * desc.out_h * desc.out_w;
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    pool2d_kernel<<<blocks_for(n), kThreads, 0, stream>>>(desc, static_cast<const T*>(x),
                                                          static_cast<T*>(y), n);
  });
}

void launch_row_reduce(Storage st, const void* x, void* y, int64_t rows, int64_t n, bool max,
                       cudaStream_t stream) {
  if (rows == 0) return;
  int blocks = static_cast<int>(rows < 65535 ? rows : 65535);
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    row_reduce_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                       rows, n, max);
  });
}

void launch_softmax(Storage st, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                    bool log, cudaStream_t stream) {
  if (outer * n * inner == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tx = static_cast<const T*>(x);
    T* ty = static_cast<T*>(y);
    if (inner == 1) {
      int blocks = static_cast<int>(outer < 65535 ? outer : 65535);
      softmax_rows_kernel<<<blocks, kThreads, 0, stream>>>(tx, ty, outer, n, log);
    } else {
      softmax_strided_kernel<<<blocks_for(outer * inner), kThreads, 0, stream>>>(tx, ty, outer, n,
                                                                                 inner, log);
    }
  });
}

void launch_layer_norm(Storage st, const void* x, const void* scale, const void* bias, void* y,
                       int64_t rows, int64_t n, float epsilon, cudaStream_t stream) {
  if (rows == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    const T* tx = static_cast<const T*>(x);
    const T* ts = static_cast<const T*>(scale);
    const T* tb = static_cast<const T*>(bias);
    T* ty = static_cast<T*>(y);
    // A warp per row while the row fits 32 registers per lane and the grid stays in range.
    if (rows / kLayerNormWarps < (int64_t{1} << 31) - 1 && n <= 1024) {
      if (n <= 256)
        launch_layer_norm_warps<T, 8>(tx, ts, tb, ty, rows, n, epsilon, stream);
      else if (n <= 512)
        launch_layer_norm_warps<T, 16>(tx, ts, tb, ty, rows, n, epsilon, stream);
      else
        launch_layer_norm_warps<T, 32>(tx, ts, tb, ty, rows, n, epsilon, stream);
      return;
    }
    const int blocks = static_cast<int>(rows < 65535 ? rows : 65535);
    layer_norm_kernel<<<blocks, kThreads, 0, stream>>>(tx, ts, tb, ty, rows, n, epsilon);
  });
}

void launch_permute(const void* x, void* y, int element_bytes, int rank, const int64_t* dims,
                    const int64_t* in_strides, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  // The output's dims in order with their input strides: size-1 dims left out, and each dim merged
  // into the one before it where together they read one evenly strided run.
  PermuteDesc d{};
  int r = 0;
  for (int k = 0; k < rank; ++k) {
    if (dims[k] == 1) continue;
    if (r > 0 && d.strides[r - 1] == in_strides[k] * dims[k]) {
      d.dims[r - 1] *= dims[k];
      d.strides[r - 1] = in_strides[k];
      continue;
    }
    d.dims[r] = dims[k];
    d.strides[r] = in_strides[k];
    ++r;
  }
  if (r == 0) {
    d.dims[0] = 1;
    d.strides[0] = 1;
    r = 1;
  }
  d.rank = r;
  // Where the innermost dim reads a contiguous run, the copy moves the widest unit (16 or 8
  // bytes) that every run, stride and both pointers are aligned to.
  int es = element_bytes;
  if (d.strides[r - 1] == 1) {
    for (int w : {16, 8}) {
      if (w <= es) break;
      bool fits = (d.dims[r - 1] * es) % w == 0 && reinterpret_cast<uintptr_t>(x) % w == 0 &&
                  reinterpret_cast<uintptr_t>(y) % w == 0;
      for (int k = 0; k + 1 < r; ++k) fits = fits && (d.strides[k] * es) % w == 0;
      if (!fits) continue;
      const int f = w / es;
      d.dims[r - 1] /= f;
      for (int k = 0; k + 1 < r; ++k) d.strides[k] /= f;
      n /= f;
      es = w;
      break;
    }
  }
  switch (es) {
    case 1:
      launch_permute_typed<uint8_t>(x, y, d, n, stream);
      break;
    case 2:
      launch_permute_typed<uint16_t>(x, y, d, n, stream);
      break;
    case 4:
      launch_permute_typed<uint32_t>(x, y, d, n, stream);
      break;
    case 8:
      launch_permute_typed<uint64_t>(x, y, d, n, stream);
      break;
    default:
      launch_permute_typed<uint4>(x, y, d, n, stream);
  }
}

void launch_gather(const void* x, const void* indices, bool indices_int64, void* y,
                   int element_bytes, int64_t outer, int64_t axis_n, int64_t inner,
                   int64_t num_indices, const IndexCheck& check, cudaStream_t stream) {
  int64_t n = outer * num_indices * inner;
  if (n == 0) return;
  int blocks = blocks_for(n);
#define LUMEN_GATHER(T)                                                                            \
  if (indices_int64)                                                                               \
    gather_kernel<<<blocks, kThreads, 0, stream>>>(                                                \
        static_cast<const T*>(x), static_cast<const int64_t*>(indices), static_cast<T*>(y), outer, \
        axis_n, inner, num_indices, check);                                                        \
  else                                                                                             \
    gather_kernel<<<blocks, kThreads, 0, stream>>>(                                                \
        static_cast<const T*>(x), static_cast<const int32_t*>(indices), static_cast<T*>(y), outer, \
        axis_n, inner, num_indices, check);
  switch (element_bytes) {
    case 1:
      LUMEN_GATHER(uint8_t) break;
    case 2:
      LUMEN_GATHER(uint16_t) break;
    case 4:
      LUMEN_GATHER(uint32_t) break;
    default:
      LUMEN_GATHER(uint64_t) break;
  }
#undef LUMEN_GATHER
}

}  // namespace lumen::cuda
