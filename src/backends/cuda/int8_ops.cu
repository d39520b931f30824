// CUDA kernels of the 8-bit integer ops (int8_ops.h): a tiled int32 matmul (16 x 16 outputs per
// block, the zero-point-shifted operands staged in shared memory), a direct convolution (a thread
// per output), QLinearAdd (a thread per element) and DynamicQuantizeLinear (one block finds the
// range, then a thread per element quantizes).
#include <cmath>
#include <cstdint>

#include "backends/cuda/any_types.cuh"
#include "backends/cuda/int8_ops.h"

namespace lumen::cuda {
namespace {

constexpr int kTile = 16;

__device__ __forceinline__ int32_t load8(Int8Ref r, int64_t i) {
  return r.is_signed ? static_cast<int32_t>(static_cast<const int8_t*>(r.data)[i])
                     : static_cast<int32_t>(static_cast<const uint8_t*>(r.data)[i]);
}

// Zero point i of a list of `count` (0: none, 1: one for all).
__device__ __forceinline__ int32_t zero_point(Int8Ref zp, int64_t count, int64_t i) {
  return count == 0 ? 0 : load8(zp, count == 1 ? 0 : i);
}

// quant_math.h's quantize_value: round half to even, NaN to the zero point, saturate.
__device__ __forceinline__ int32_t quantize(float v, int32_t zp, int32_t lo, int32_t hi) {
  const float r = rintf(v);
  if (r != r) return zp < lo ? lo : (zp > hi ? hi : zp);
  const float q = __fadd_rn(r, static_cast<float>(zp));
  if (q <= static_cast<float>(lo)) return lo;
  if (q >= static_cast<float>(hi)) return hi;
  return static_cast<int32_t>(q);
}

// Stores acc (any bias added) as y's element `at`: int32, or requantized with the scale of A's
// row `ai` and B's column (or w's output channel) `bi`.
__device__ __forceinline__ void store_out(bool requant, const Requant& r, void* y, int64_t at,
                                          int64_t acc, int64_t ai, int64_t bi) {
  if (!requant) {
    static_cast<int32_t*>(y)[at] = static_cast<int32_t>(acc);
    return;
  }
  const double scale = static_cast<double>(r.a_scale[r.a_count == 1 ? 0 : ai]) *
                       r.b_scale[r.b_count == 1 ? 0 : bi] / r.y_scale[0];
  const float v = static_cast<float>(static_cast<double>(acc) * scale);
  const int32_t zp = r.y_zero_point.data == nullptr ? 0 : load8(r.y_zero_point, 0);
  if (r.out_signed)
    static_cast<int8_t*>(y)[at] = static_cast<int8_t>(quantize(v, zp, -128, 127));
  else
    static_cast<uint8_t*>(y)[at] = static_cast<uint8_t>(quantize(v, zp, 0, 255));
}

__global__ void int_matmul_kernel(IntMatMulDesc d, Int8Ref a, Int8Ref b, Int8Ref a_zp, Int8Ref b_zp,
                                  bool requant, Requant r, void* y) {
  __shared__ int32_t as[kTile][kTile + 1];
  __shared__ int32_t bs[kTile][kTile + 1];
  const int64_t t = blockIdx.z;
  int64_t am = 0, bm = 0, rest = t;
  for (int k = d.batch_rank - 1; k >= 0; --k) {
    const int64_t c = rest % d.batch_dims[k];
    rest /= d.batch_dims[k];
    am += c * d.a_strides[k];
    bm += c * d.b_strides[k];
  }
  const int64_t row = blockIdx.y * static_cast<int64_t>(kTile) + threadIdx.y;
  const int64_t col = blockIdx.x * static_cast<int64_t>(kTile) + threadIdx.x;
  const int64_t a_base = am * d.m * d.k, b_base = bm * d.k * d.n;
  int32_t acc = 0;
  for (int64_t k0 = 0; k0 < d.k; k0 += kTile) {
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = row < d.m && ka < d.k ? load8(a, a_base + row * d.k + ka) -
                                                               zero_point(a_zp, d.a_zp_count, row)
                                                         : 0;
    bs[threadIdx.y][threadIdx.x] = kb < d.k && col < d.n ? load8(b, b_base + kb * d.n + col) -
                                                               zero_point(b_zp, d.b_zp_count, col)
                                                         : 0;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile; ++j) acc += as[threadIdx.y][j] * bs[j][threadIdx.x];
    __syncthreads();
  }
  if (row < d.m && col < d.n) store_out(requant, r, y, (t * d.m + row) * d.n + col, acc, row, col);
}

__global__ void int_conv_kernel(IntConvDesc d, Int8Ref x, Int8Ref w, Int8Ref x_zp, Int8Ref w_zp,
                                const int32_t* bias, bool requant, Requant r, void* y) {
  const int64_t os = d.window.out[0] * d.window.out[1] * d.window.out[2];
  const int64_t is = d.window.in[0] * d.window.in[1] * d.window.in[2];
  const int64_t ks = d.window.k[0] * d.window.k[1] * d.window.k[2];
  const int64_t cg = d.channels / d.group, mg = d.out_channels / d.group;
  const int32_t xzp = d.has_x_zp ? load8(x_zp, 0) : 0;
  ANY_GRID_LOOP(i, d.batch * d.out_channels * os) {
    const int64_t o = i % os, m = (i / os) % d.out_channels, nb = i / (os * d.out_channels);
    const int64_t ow = o % d.window.out[2], oh = (o / d.window.out[2]) % d.window.out[1],
                  od = o / (d.window.out[2] * d.window.out[1]);
    const int32_t wzp = zero_point(w_zp, d.w_zp_count, m);
    const int64_t g = m / mg;
    int32_t acc = 0;
    for (int64_t c = 0; c < cg; ++c) {
      const int64_t x_plane = (nb * d.channels + g * cg + c) * is;
      const int64_t w_plane = (m * cg + c) * ks;
      for (int64_t kd = 0; kd < d.window.k[0]; ++kd) {
        const int64_t id =
            od * d.window.stride[0] - d.window.pad_begin[0] + kd * d.window.dilation[0];
        if (id < 0 || id >= d.window.in[0]) continue;
        for (int64_t kh = 0; kh < d.window.k[1]; ++kh) {
          const int64_t ih =
              oh * d.window.stride[1] - d.window.pad_begin[1] + kh * d.window.dilation[1];
          if (ih < 0 || ih >= d.window.in[1]) continue;
          for (int64_t kw = 0; kw < d.window.k[2]; ++kw) {
            const int64_t iw =
                ow * d.window.stride[2] - d.window.pad_begin[2] + kw * d.window.dilation[2];
            if (iw < 0 || iw >= d.window.in[2]) continue;
            const int32_t xv =
                load8(x, x_plane + (id * d.window.in[1] + ih) * d.window.in[2] + iw) - xzp;
            const int32_t wv =
                load8(w, w_plane + (kd * d.window.k[1] + kh) * d.window.k[2] + kw) - wzp;
            acc += xv * wv;
          }
        }
      }
    }
    const int64_t total = static_cast<int64_t>(acc) + (bias != nullptr ? bias[m] : 0);
    store_out(requant, r, y, i, total, 0, m);
  }
}

template <typename T>
__global__ void qlinear_add_kernel(QAddRefs q, const T* a, const T* b, T* c, int64_t n,
                                   BroadcastDesc d, int32_t lo, int32_t hi) {
  const float as = q.a_scale[0], bs = q.b_scale[0], cs = q.c_scale[0];
  const int32_t az = q.a_zp ? static_cast<const T*>(q.a_zp)[0] : 0;
  const int32_t bz = q.b_zp ? static_cast<const T*>(q.b_zp)[0] : 0;
  const float cz = q.c_zp ? static_cast<float>(static_cast<const T*>(q.c_zp)[0]) : 0.f;
  ANY_GRID_LOOP(i, n) {
    const int64_t ia = strided_offset(i, d.rank, d.dims, d.a_strides);
    const int64_t ib = strided_offset(i, d.rank, d.dims, d.b_strides);
    const float fa = __fmul_rn(static_cast<float>(static_cast<int32_t>(a[ia]) - az), as);
    const float fb = __fmul_rn(static_cast<float>(static_cast<int32_t>(b[ib]) - bz), bs);
    const float r = rintf(__fdiv_rn(__fadd_rn(fa, fb), cs));
    float v = r != r ? cz : __fadd_rn(r, cz);
    v = fminf(fmaxf(v, static_cast<float>(lo)), static_cast<float>(hi));
    c[i] = static_cast<T>(static_cast<int32_t>(v));
  }
}

constexpr int kRangeThreads = 1024;

// One block: the range of x (with 0), then scale and zero point into params (and the outputs).
__global__ void dynamic_range_kernel(const float* x, int64_t n, float* scale_out, uint8_t* zp_out,
                                     float* params) {
  __shared__ float los[kRangeThreads], his[kRangeThreads];
  float lo = 0.f, hi = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += kRangeThreads) {
    const float v = x[i];
    lo = v < lo ? v : lo;  // a NaN compares false: skipped, as std::min(lo, v) skips it
    hi = hi < v ? v : hi;
  }
  los[threadIdx.x] = lo;
  his[threadIdx.x] = hi;
  __syncthreads();
  for (int s = kRangeThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) {
      los[threadIdx.x] = fminf(los[threadIdx.x], los[threadIdx.x + s]);
      his[threadIdx.x] = fmaxf(his[threadIdx.x], his[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float scale = __fdiv_rn(__fsub_rn(his[0], los[0]), 255.f);
    int32_t zp = 0;
    if (scale > 0.f) zp = quantize(__fdiv_rn(__fsub_rn(0.f, los[0]), scale), 0, 0, 255);
    params[0] = scale;
    params[1] = static_cast<float>(zp);
    if (scale_out) *scale_out = scale;
    if (zp_out) *zp_out = static_cast<uint8_t>(zp);
  }
}

__global__ void dynamic_quantize_kernel(const float* x, int64_t n, uint8_t* y,
                                        const float* params) {
  const float scale = params[0];
  const int32_t zp = static_cast<int32_t>(params[1]);
  ANY_GRID_LOOP(i, n) {
    y[i] = static_cast<uint8_t>(scale > 0.f ? quantize(__fdiv_rn(x[i], scale), zp, 0, 255) : 0);
  }
}

}  // namespace

void launch_int_matmul(const IntMatMulDesc& d, Int8Ref a, Int8Ref b, Int8Ref a_zp, Int8Ref b_zp,
                       const Requant* rq, void* y, cudaStream_t stream) {
  if (d.m == 0 || d.n == 0 || d.batches == 0) return;
  const dim3 block(kTile, kTile);
  const dim3 grid(static_cast<unsigned>((d.n + kTile - 1) / kTile),
                  static_cast<unsigned>((d.m + kTile - 1) / kTile),
                  static_cast<unsigned>(d.batches));
  int_matmul_kernel<<<grid, block, 0, stream>>>(d, a, b, a_zp, b_zp, rq != nullptr,
                                                rq ? *rq : Requant{}, y);
}

void launch_int_conv(const IntConvDesc& d, Int8Ref x, Int8Ref w, Int8Ref x_zp, Int8Ref w_zp,
                     const int32_t* bias, const Requant* rq, void* y, cudaStream_t stream) {
  const int64_t total =
      d.batch * d.out_channels * d.window.out[0] * d.window.out[1] * d.window.out[2];
  if (total == 0) return;
  int_conv_kernel<<<any_blocks(total), kAnyThreads, 0, stream>>>(
      d, x, w, x_zp, w_zp, bias, rq != nullptr, rq ? *rq : Requant{}, y);
}

void launch_qlinear_add(bool is_signed, const QAddRefs& refs, const void* a, const void* b, void* c,
                        int64_t n, const BroadcastDesc& desc, cudaStream_t stream) {
  if (n == 0) return;
  if (is_signed)
    qlinear_add_kernel<int8_t><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        refs, static_cast<const int8_t*>(a), static_cast<const int8_t*>(b), static_cast<int8_t*>(c),
        n, desc, -128, 127);
  else
    qlinear_add_kernel<uint8_t><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        refs, static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b),
        static_cast<uint8_t*>(c), n, desc, 0, 255);
}

void launch_dynamic_quantize(const float* x, int64_t n, uint8_t* y, float* scale,
                             uint8_t* zero_point, void* params, cudaStream_t stream) {
  auto* p = static_cast<float*>(params);
  dynamic_range_kernel<<<1, kRangeThreads, 0, stream>>>(x, n, scale, zero_point, p);
  if (n > 0) dynamic_quantize_kernel<<<any_blocks(n), kAnyThreads, 0, stream>>>(x, n, y, p);
}

}  // namespace lumen::cuda
