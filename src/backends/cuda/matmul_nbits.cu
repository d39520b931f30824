// CUDA kernels of MatMulNBits: Y = act(A x W (+ bias) (+ residual)), W (K x N) 4- or 8-bit,
// block-quantized along K in MatMulNBits' layout (graph/matmul_nbits.h: column n's packed values
// are contiguous); the bias, residual and activation applied as each output is stored.
//
// Few rows (decode): 32 to 128 threads per output column (a warp for K up to 1024, a block of
// four warps for K above 2048), each reading 4-byte words of the column's packed values
// (coalesced: a warp reads 128 bytes of 4-bit or 256 of 8-bit weights per step), four words'
// loads (with their scales) issued before any is used: a decoding step's product costs about one
// round trip to memory. Each thread dequantizes 8 values per word and multiplies them with the
// (cached) rows of A; the column's threads sum through shuffles and shared memory.
// More rows (prefill): 64 x 64 output tiles; per step of 32 along K a block stages A's 64 x 32
// tile and the dequantized 32 x 64 weight tile in shared memory, and each thread accumulates
// 4 x 4 outputs.
#include "backends/cuda/matmul_nbits.h"
#include "backends/cuda/storage.cuh"
#include "backends/cuda/unary_math.cuh"

#include <type_traits>

namespace lumen::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kGemvThreads = 128;  // threads per block of the matrix-vector kernel
constexpr int kTile = 64;          // output rows and columns per block of the tiled kernel
constexpr int kTileK = 32;         // K per shared-memory step
constexpr int kTileThreads = 256;

// The zero point of block blk of column n (float zero points in the activations' storage T).
template <typename T, int kBits>
__device__ __forceinline__ float zero_point(const NBitsDesc& d, const void* zp, int64_t n,
                                            int64_t blk, int64_t blocks) {
  if (d.zero_points == NBitsZeroPoints::kFloat)
    return to_float(static_cast<const T*>(zp)[n * blocks + blk]);
  if (d.zero_points == NBitsZeroPoints::kPacked) {
    const auto* z = static_cast<const uint8_t*>(zp);
    const int64_t per = (blocks * kBits + 7) / 8;
    if (kBits == 8) return static_cast<float>(z[n * per + blk]);
    return static_cast<float>((z[n * per + blk / 2] >> (4 * (blk & 1))) & 0xF);
  }
  return static_cast<float>(1 << (kBits - 1));
}

// The packed bytes of unit u (values 8u .. 8u + 7) of a column: 4 bytes of 4-bit values (in .x),
// 8 of 8-bit ones.
template <int kBits>
__device__ __forceinline__ uint2 load_unit(const uint8_t* col, int64_t u) {
  if (kBits == 4) return make_uint2(__ldg(reinterpret_cast<const uint32_t*>(col) + u), 0u);
  return __ldg(reinterpret_cast<const uint2*>(col) + u);
}

// A unit's 8 quantized values as exact floats: each integer is put in the mantissa of 2^23 and
// 2^23 subtracted (a logic op and an add, where a conversion runs at a quarter of the rate).
template <int kBits>
__device__ __forceinline__ void unpack_unit(uint2 w, float* q) {
  constexpr uint32_t kMask = (1u << kBits) - 1;
  constexpr int kPerWord = 32 / kBits;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t word = i < kPerWord ? w.x : w.y;
    const uint32_t v = (word >> (kBits * (i % kPerWord))) & kMask;
    q[i] = __uint_as_float(0x4B000000u | v) - 8388608.f;
  }
}

// x[0, 8) as floats: two 16-byte loads where `vec` (float32 rows, 16-byte aligned), else one
// element at a time.
template <typename T>
__device__ __forceinline__ void load8(const T* x, bool vec, float* out) {
  if constexpr (std::is_same_v<T, float>) {
    if (vec) {
      const float4 p = *reinterpret_cast<const float4*>(x);
      const float4 q = *reinterpret_cast<const float4*>(x + 4);
      out[0] = p.x, out[1] = p.y, out[2] = p.z, out[3] = p.w;
      out[4] = q.x, out[5] = q.y, out[6] = q.z, out[7] = q.w;
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = to_float(x[i]);
}

// The epilogue of output (row, n): bias, residual, activation; stored in T.
template <typename T>
__device__ __forceinline__ void store_output(const NBitsDesc& d, float v, int64_t row, int64_t n,
                                             const T* bias, const T* residual, T* y) {
  if (bias) v += to_float(bias[n]);
  if (residual) v += to_float(residual[row * d.n + n]);
  y[row * d.n + n] = from_float<T>(apply_unary(d.act, v, d.alpha, d.beta));
}

template <typename T, int kBits, int kRows>
__global__ void __launch_bounds__(kGemvThreads)
    nbits_gemv_kernel(const __grid_constant__ NBitsDesc d, const T* __restrict__ a,
                      const uint8_t* __restrict__ b, const T* __restrict__ scales,
                      const void* __restrict__ zp, const T* __restrict__ bias,
                      const T* __restrict__ residual, T* __restrict__ y, int per_col) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int t = static_cast<int>(threadIdx.x) % per_col;  // this thread's place in its column
  const int64_t n = static_cast<int64_t>(blockIdx.x) * (kGemvThreads / per_col) +
                    static_cast<int>(threadIdx.x) / per_col;
  const bool active = n < d.n;
  const int64_t blocks = (d.k + d.block_size - 1) / d.block_size;
  const int64_t blob = d.block_size * kBits / 8;
  const int block_shift = __ffsll(d.block_size) - 1;  // block_size is a power of 2
  const uint8_t* col = b + n * blocks * blob;
  const int64_t units = active ? blocks * d.block_size / 8 : 0;
  // Rows of A start 16-byte aligned when K is a multiple of 4 and A is.
  const bool vec = d.k % 4 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0;
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
  // kUnroll units per thread at a time: their weights, scales and zero points are all requested
  // before any is used, so a column's few steps cost one round trip to memory, not one each.
  constexpr int kUnroll = 4;
  for (int64_t u0 = t; u0 < units; u0 += kUnroll * per_col) {
    uint2 packed[kUnroll];
    float s[kUnroll], z[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int64_t u = u0 + j * per_col;
      if (u >= units) break;
      const int64_t blk = (u * 8) >> block_shift;
      packed[j] = load_unit<kBits>(col, u);
      s[j] = to_float(scales[n * blocks + blk]);
      z[j] = zero_point<T, kBits>(d, zp, n, blk, blocks);
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int64_t u = u0 + j * per_col, k0 = u * 8;
      if (u >= units) break;
      float w[8];
      unpack_unit<kBits>(packed[j], w);
      const float zs = -z[j] * s[j];
#pragma unroll
      for (int i = 0; i < 8; ++i) w[i] = fmaf(w[i], s[j], zs);
      if (k0 + 8 <= d.k) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float x[8];
          load8(a + r * d.k + k0, vec, x);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r] = fmaf(x[i], w[i], acc[r]);
        }
      } else {
        for (int r = 0; r < kRows; ++r)
          for (int i = 0; i < 8 && k0 + i < d.k; ++i)
            acc[r] = fmaf(to_float(a[r * d.k + k0 + i]), w[i], acc[r]);
      }
    }
  }
  // Each warp's sums, then the first thread of a column adds its warps'.
  __shared__ float part[kRows][kGemvThreads / kWarp];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float v = acc[r];
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) part[r][warp] = v;
  }
  __syncthreads();
  if (!active || t != 0) return;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float v = 0.f;
    for (int w = 0; w < per_col / kWarp; ++w) v += part[r][warp + w];
    store_output(d, v, r, n, bias, residual, y);
  }
}

template <typename T, int kBits>
__global__ void __launch_bounds__(kTileThreads)
    nbits_tiled_kernel(const __grid_constant__ NBitsDesc d, const T* __restrict__ a,
                       const uint8_t* __restrict__ b, const T* __restrict__ scales,
                       const void* __restrict__ zp, const T* __restrict__ bias,
                       const T* __restrict__ residual, T* __restrict__ y) {
  __shared__ float as[kTileK][kTile + 1];
  __shared__ float ws[kTileK][kTile + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t blocks = (d.k + d.block_size - 1) / d.block_size;
  const int64_t blob = d.block_size * kBits / 8;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < d.k; k0 += kTileK) {
    for (int e = tid; e < kTile * kTileK; e += kTileThreads) {
      const int row = e / kTileK, kk = e % kTileK;
      const int64_t m = m0 + row, k = k0 + kk, n = n0 + row;
      as[kk][row] = m < d.m && k < d.k ? to_float(a[m * d.k + k]) : 0.f;
      float w = 0.f;
      if (n < d.n && k < d.k) {
        const int64_t blk = k / d.block_size, in = k % d.block_size;
        const uint8_t byte = b[(n * blocks + blk) * blob + in * kBits / 8];
        const int q = kBits == 8 ? byte : (byte >> (4 * (in & 1))) & 0xF;
        w = (static_cast<float>(q) - zero_point<T, kBits>(d, zp, n, blk, blocks)) *
            to_float(scales[n * blocks + blk]);
      }
      ws[kk][row] = w;
    }
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < kTileK; ++kk) {
      float x[4], w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        x[i] = as[kk][ty * 4 + i];
        w[i] = ws[kk][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(x[i], w[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t m = m0 + ty * 4 + i;
    if (m >= d.m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx * 4 + j;
      if (n < d.n) store_output(d, acc[i][j], m, n, bias, residual, y);
    }
  }
}

template <typename T, int kBits>
void launch_bits(const NBitsDesc& d, const T* a, const uint8_t* b, const T* scales, const void* zp,
                 const T* bias, const T* residual, T* y, cudaStream_t stream) {
  if (d.m <= kNBitsGemvRows) {
    // Threads per column: a warp, or as many as keep each at most 4 units of 8 values (one
    // unrolled step), up to a block (K above 2048).
    const int64_t units = (d.k + d.block_size - 1) / d.block_size * d.block_size / 8;
    const int per_col = units <= 4 * kWarp ? kWarp : units <= 8 * kWarp ? 2 * kWarp : kGemvThreads;
    const int64_t cols = kGemvThreads / per_col;
    const dim3 grid(static_cast<unsigned>((d.n + cols - 1) / cols));
    const dim3 block(kGemvThreads);
    switch (d.m) {
#define LUMEN_NBITS_ROWS(R)                                                            \
  case R:                                                                              \
    nbits_gemv_kernel<T, kBits, R>                                                     \
        <<<grid, block, 0, stream>>>(d, a, b, scales, zp, bias, residual, y, per_col); \
    break;
      LUMEN_NBITS_ROWS(1)
      LUMEN_NBITS_ROWS(2)
      LUMEN_NBITS_ROWS(3)
      LUMEN_NBITS_ROWS(4)
      LUMEN_NBITS_ROWS(5)
      LUMEN_NBITS_ROWS(6)
      LUMEN_NBITS_ROWS(7)
      LUMEN_NBITS_ROWS(8)
#undef LUMEN_NBITS_ROWS
      default:
        break;
    }
    return;
  }
  const dim3 grid(static_cast<unsigned>((d.n + kTile - 1) / kTile),
                  static_cast<unsigned>((d.m + kTile - 1) / kTile));
  nbits_tiled_kernel<T, kBits>
      <<<grid, kTileThreads, 0, stream>>>(d, a, b, scales, zp, bias, residual, y);
}

}  // namespace

void launch_matmul_nbits(const NBitsDesc& d, const void* a, const uint8_t* b, const void* scales,
                         const void* zero_points, const void* bias, const void* residual, void* y,
                         cudaStream_t stream) {
  if (d.m == 0 || d.n == 0) return;
  with_storage(d.storage, [&](auto t) {
    using T = decltype(t);
    const auto* at = static_cast<const T*>(a);
    const auto* st = static_cast<const T*>(scales);
    const auto* bt = static_cast<const T*>(bias);
    const auto* rt = static_cast<const T*>(residual);
    auto* yt = static_cast<T*>(y);
    if (d.bits == 4)
      launch_bits<T, 4>(d, at, b, st, zero_points, bt, rt, yt, stream);
    else
      launch_bits<T, 8>(d, at, b, st, zero_points, bt, rt, yt, stream);
  });
}

}  // namespace lumen::cuda
