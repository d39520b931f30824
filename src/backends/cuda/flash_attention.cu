// FusedAttention on tensor cores for 16-bit storage (float16 or bfloat16) and heads of 64 or 128:
// FlashAttention-2's schedule (Dao, 2023) on the warp-level mma.sync.m16n8k16 instruction, float32
// accumulation. A block of kWarps warps takes 16 * kRowTiles query rows per warp; it walks the
// head's keys in tiles of kBlockN, each tile of K and of V staged in shared memory by asynchronous
// copies (cp.async) into one buffer while the other is consumed. Per tile a warp computes its
// scores S = Q K^T in registers, folds them into its rows' running maximum and sum (the online
// softmax, in base 2: exp2 of scores pre-multiplied by log2(e)), and adds P V to its output
// accumulator, P rounded to the storage type and handed from the scores' accumulator registers to
// the next product's operand registers without leaving them (the two fragment layouts agree).
// Shared-memory rows are padded by 16 bytes so that ldmatrix's eight row reads hit distinct banks.
// The same kernel reads strided views (StridedAttention) through head and row strides; contiguous
// tensors get an instantiation with those strides fixed at compile time.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>
#include <mutex>
#include <type_traits>

#include "backends/cuda/attention_mask.cuh"
#include "backends/cuda/launch.h"
#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

// The kernel's mask forms: none; one row of values over the keys shared by every query row of a
// head (mask_q_stride 0, mask_k_stride 1: a key-padding mask); any broadcast of [.., Sq, Sk].
constexpr int kNoMask = 0, kMaskPerKey = 1, kMaskPerRow = 2;

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory, asynchronously; zeros where !valid (nothing is read).
__device__ __forceinline__ void copy16_async(void* dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(bytes));
}

__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most `kPending` of this thread's committed copy groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Four 8x8 matrices of 16-bit values from shared memory: lanes 8i..8i+7 give matrix i's rows.
__device__ __forceinline__ void load_matrices(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}

// The same, each matrix transposed.
__device__ __forceinline__ void load_matrices_transposed(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}

// d = a (16x16, row-major) * b (16x8, column-major) + c, float32 accumulators (d and c may be the
// same array).
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1, const float (&c)[4]) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]),
          "f"(c[2]), "f"(c[3]));
  }
}

// 2^x by the special-function unit (denormal results flushed to zero), as FlashAttention does.
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats rounded to T, `lo` in the low 16 bits.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

template <int kD, int kWarps, int kRowTiles, int kBlockN>
struct FlashTile {
  static constexpr int kBlockM = kWarps * 16 * kRowTiles;  // query rows per block
  static constexpr int kStride = kD + 8;                   // a padded shared-memory row
  static constexpr size_t kSmemElems =
      static_cast<size_t>(kBlockM + 4 * kBlockN) * kStride;  // Q, then K and V twice each
};

// Grid: x over the blocks of kBlockM query rows, y over the heads (st.heads; head h's mask is that
// of head first_head + h of desc's leading dims).
template <typename T, int kD, int kWarps, int kRowTiles, int kBlockN, int kMinBlocks, int kMask,
          bool kDense>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks)
    flash_attention_kernel(const __grid_constant__ AttentionDesc d,
                           const __grid_constant__ HeadStrides st, int64_t first_head,
                           const T* __restrict__ q, const T* __restrict__ k,
                           const T* __restrict__ v, const T* __restrict__ mask, T* __restrict__ y) {
  using Tile = FlashTile<kD, kWarps, kRowTiles, kBlockN>;
  constexpr int kBlockM = Tile::kBlockM, kStride = Tile::kStride;
  constexpr int kChunks = kD / 8;  // 16-byte pieces of a row
  constexpr int kThreads = kWarps * 32;
  constexpr int kKeyTiles = kBlockN / 8;  // n-tiles of the scores
  constexpr int kDepthTiles = kD / 8;     // n-tiles of the output
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  T* qs = reinterpret_cast<T*>(smem_bytes);  // [kBlockM][kStride]
  T* ks = qs + kBlockM * kStride;            // [2][kBlockN][kStride]
  T* vs = ks + 2 * kBlockN * kStride;        // [2][kBlockN][kStride]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t b = blockIdx.y;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBlockM;
  const int64_t kvb = b / d.kv_group;
  // kDense: Q, K, V and Y contiguous, their strides known here (so no registers hold them).
  const int64_t q_row = kDense ? kD : st.q_row, k_row = kDense ? kD : st.k_row;
  const int64_t v_row = kDense ? kD : st.v_row, y_row = kDense ? kD : st.y_row;
  const T* qb = q + b * (kDense ? d.sq * kD : st.q_head);
  const T* kb = k + kvb * (kDense ? d.sk * kD : st.k_head);
  const T* vb = v + kvb * (kDense ? d.sk * kD : st.v_head);

  // `rows` rows of a [*, kD] tensor from row `first` on (zeros from row `limit` on) into `dst`.
  // Thread tid copies the 16-byte piece `piece` of rows stage_row + i * kRowStep (kThreads is a
  // multiple of kChunks), so its offsets are fixed and only the tile's base moves.
  constexpr int kRowStep = kThreads / kChunks;
  const int stage_row = tid / kChunks, piece = (tid % kChunks) * 8;
  auto stage = [&](T* dst, const T* src, int64_t row_stride, int64_t first, int64_t limit,
                   auto rows_tag) {
    constexpr int kRows = decltype(rows_tag)::value;
    const int64_t left = limit - first;  // rows of the source from `first` on
    const T* from = src + (first + stage_row) * row_stride + piece;
    const int64_t step = kRowStep * row_stride;
    T* to = dst + stage_row * kStride + piece;
#pragma unroll
    for (int i = 0; i < kRows / kRowStep; ++i) {
      const bool valid = stage_row + i * kRowStep < left;
      copy16_async(to + i * kRowStep * kStride, valid ? from + i * step : src, valid);
    }
  };
  using BlockRows = std::integral_constant<int, kBlockM>;
  using TileRows = std::integral_constant<int, kBlockN>;
  // Copy groups, in commit order: Q with K's tile 0, V's tile 0, then per tile t the next tile's
  // K and V (groups left empty after the last tile, so that every wait is "all but the newest").
  const int64_t tiles = (d.sk + kBlockN - 1) / kBlockN;
  stage(qs, qb, q_row, row0, d.sq, BlockRows{});
  stage(ks, kb, k_row, 0, d.sk, TileRows{});
  commit_copies();
  stage(vs, vb, v_row, 0, d.sk, TileRows{});
  commit_copies();

  const int warp_row = warp * 16 * kRowTiles;  // the warp's first row within the block
  const int quad = lane >> 2, pair = (lane & 3) * 2;
  // Per row tile rt and half h, this thread's row is warp_row + 16 rt + quad + 8 h.
  const T* mask_rows[kRowTiles][2] = {};
  if constexpr (kMask == kMaskPerRow) {
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = row0 + warp_row + 16 * rt + quad + 8 * h;
        mask_rows[rt][h] = mask_row_of(d, mask, first_head + b, row < d.sq ? row : d.sq - 1);
      }
  }
  const T* mask_keys = kMask == kMaskPerKey ? mask_row_of(d, mask, first_head + b, 0) : nullptr;
  float o[kRowTiles][kDepthTiles][4];
  float row_max[kRowTiles][2], row_sum[kRowTiles][2];  // row_sum: this thread's keys only
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int n = 0; n < kDepthTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[rt][n][e] = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_max[rt][h] = -INFINITY;
      row_sum[rt][h] = 0.f;
    }
  }
  const float scale_log2 = d.scale * kLog2e;

  for (int64_t t = 0; t < tiles; ++t) {
    const int buf = static_cast<int>(t & 1);
    wait_copies<1>();  // K's tile t (and Q) is in
    __syncthreads();
    if (t + 1 < tiles)
      stage(ks + (buf ^ 1) * kBlockN * kStride, kb, k_row, (t + 1) * kBlockN, d.sk, TileRows{});
    commit_copies();

    // S = Q K^T for the warp's rows and the tile's keys.
    const T* kt = ks + buf * kBlockN * kStride;
    float s[kRowTiles][kKeyTiles][4];
    const float kZeros[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t a[kRowTiles][4];
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt)
        load_matrices(
            a[rt], qs + (warp_row + 16 * rt + (lane & 15)) * kStride + kk * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int np = 0; np < kBlockN / 16; ++np) {
        uint32_t bk[4];  // keys 16np + 0..7 then + 8..15, each over depth 16kk + 0..7 and 8..15
        load_matrices(bk, kt + (np * 16 + (lane >> 4) * 8 + (lane & 7)) * kStride + kk * 16 +
                              ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          if (kk == 0) {  // the first step starts from zeros
            mma16816<T>(s[rt][2 * np], a[rt], bk[0], bk[1], kZeros);
            mma16816<T>(s[rt][2 * np + 1], a[rt], bk[2], bk[3], kZeros);
          } else {
            mma16816<T>(s[rt][2 * np], a[rt], bk[0], bk[1], s[rt][2 * np]);
            mma16816<T>(s[rt][2 * np + 1], a[rt], bk[2], bk[3], s[rt][2 * np + 1]);
          }
        }
      }
    }

    // The online softmax over the tile, in base 2. Without a mask the scores stay raw (the scale
    // is positive) and exp2(s * scale_log2 - max) is one multiply-add; with one, each score
    // becomes s * scale_log2 + mask * log2(e) first.
    const int64_t key0 = t * kBlockN;
    if constexpr (kMask == kMaskPerKey) {
      // One mask row for every query row (a key-padding mask): this thread's 16 keys' values,
      // loaded once for all its rows.
      const T* m = mask_keys + key0;
      float add[kKeyTiles][2];
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = n * 8 + pair + e;
          add[n][e] = key0 + j < d.sk ? to_float(m[j]) * kLog2e : 0.f;
        }
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[rt][n][e] = fmaf(s[rt][n][e], scale_log2, add[n][e & 1]);
    }
    if constexpr (kMask == kMaskPerRow) {
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const T* m = mask_rows[rt][h] + key0 * d.mask_k_stride;
#pragma unroll
          for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int j = n * 8 + pair + e;
              const float add = key0 + j < d.sk ? to_float(m[j * d.mask_k_stride]) : 0.f;
              s[rt][n][2 * h + e] = fmaf(s[rt][n][2 * h + e], scale_log2, add * kLog2e);
            }
        }
    }
    const float mul = kMask != kNoMask ? 1.f : scale_log2;
    if (key0 + kBlockN > d.sk) {  // the last tile, partly past the keys
      const int live = static_cast<int>(d.sk - key0);
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (n * 8 + pair + (e & 1) >= live) s[rt][n][e] = -INFINITY;
    }
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // Tree reductions: the row's values are independent, and dependent chains stall.
        float part[kKeyTiles];
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n) part[n] = fmaxf(s[rt][n][2 * h], s[rt][n][2 * h + 1]);
#pragma unroll
        for (int w = kKeyTiles / 2; w > 0; w /= 2)
#pragma unroll
          for (int n = 0; n < w; ++n) part[n] = fmaxf(part[n], part[n + w]);
        float mx = part[0];
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(row_max[rt][h], mx * mul);
        // A row masked out so far keeps zero weight instead of exp2(nan).
        const float base = m_new == -INFINITY ? 0.f : m_new;
        const float correction = exp2_fast(row_max[rt][h] - base);
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e)
            s[rt][n][2 * h + e] = exp2_fast(fmaf(s[rt][n][2 * h + e], mul, -base));
          part[n] = s[rt][n][2 * h] + s[rt][n][2 * h + 1];
        }
#pragma unroll
        for (int w = kKeyTiles / 2; w > 0; w /= 2)
#pragma unroll
          for (int n = 0; n < w; ++n) part[n] += part[n + w];
        const float sum = part[0];
        row_sum[rt][h] = row_sum[rt][h] * correction + sum;
        row_max[rt][h] = m_new;
#pragma unroll
        for (int n = 0; n < kDepthTiles; ++n) {
          o[rt][n][2 * h] *= correction;
          o[rt][n][2 * h + 1] *= correction;
        }
      }

    wait_copies<1>();  // V's tile t is in
    __syncthreads();
    if (t + 1 < tiles)
      stage(vs + (buf ^ 1) * kBlockN * kStride, vb, v_row, (t + 1) * kBlockN, d.sk, TileRows{});
    commit_copies();

    // O += P V: P's accumulator registers, rounded to T, are the product's A operand.
    const T* vt = vs + buf * kBlockN * kStride;
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t a[kRowTiles][4];
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) {
        a[rt][0] = pack2<T>(s[rt][2 * kk][0], s[rt][2 * kk][1]);
        a[rt][1] = pack2<T>(s[rt][2 * kk][2], s[rt][2 * kk][3]);
        a[rt][2] = pack2<T>(s[rt][2 * kk + 1][0], s[rt][2 * kk + 1][1]);
        a[rt][3] = pack2<T>(s[rt][2 * kk + 1][2], s[rt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kD / 16; ++dp) {
        uint32_t bv[4];  // depth 16dp + 0..7 over keys 16kk + 0..7 and 8..15, then depth + 8..15
        load_matrices_transposed(bv, vt + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride +
                                         dp * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          mma16816<T>(o[rt][2 * dp], a[rt], bv[0], bv[1], o[rt][2 * dp]);
          mma16816<T>(o[rt][2 * dp + 1], a[rt], bv[2], bv[3], o[rt][2 * dp + 1]);
        }
      }
    }
  }
  wait_copies<0>();

  // Y = O / (the row's sum over the four threads that share it).
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = row_sum[rt][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.f / sum;
      const int64_t row = row0 + warp_row + 16 * rt + quad + 8 * h;
      if (row >= d.sq) continue;
      T* out = y + b * (kDense ? d.sq * kD : st.y_head) + row * y_row + pair;
#pragma unroll
      for (int n = 0; n < kDepthTiles; ++n) {
        *reinterpret_cast<uint32_t*>(out + n * 8) =
            pack2<T>(o[rt][n][2 * h] * inv, o[rt][n][2 * h + 1] * inv);
      }
    }
}

// One instantiation of the kernel (its head size, warps, row tiles per warp, keys per tile and the
// blocks per multiprocessor its registers are capped for): with and without a mask, for contiguous
// tensors and for views.
template <typename T, int kD, int kWarps, int kRowTiles, int kBlockN, int kMinBlocks>
struct FlashKernel {
  using Tile = FlashTile<kD, kWarps, kRowTiles, kBlockN>;
  static constexpr size_t kSmem = Tile::kSmemElems * sizeof(T);
  static constexpr int kBlockM = Tile::kBlockM;
  template <int kMask, bool kDense>
  static constexpr auto kKernel =
      flash_attention_kernel<T, kD, kWarps, kRowTiles, kBlockN, kMinBlocks, kMask, kDense>;

  // Raises the kernels' dynamic shared-memory limit to what they use.
  static void allow_smem() {
    for (auto kernel :
         {kKernel<kNoMask, false>, kKernel<kMaskPerKey, false>, kKernel<kMaskPerRow, false>,
          kKernel<kNoMask, true>, kKernel<kMaskPerKey, true>, kKernel<kMaskPerRow, true>})
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kSmem));
  }
  // Blocks of the unmasked kernel one multiprocessor holds at once (after allow_smem).
  static int slots() {
    static const int count = [] {
      int n = 0;
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kKernel<kNoMask, true>, kWarps * 32,
                                                        kSmem) != cudaSuccess)
        return 1;
      return n > 0 ? n : 1;
    }();
    return count;
  }
  static void launch(const AttentionDesc& desc, const HeadStrides& st, bool dense,
                     int64_t first_head, const T* q, const T* k, const T* v, const T* mask, T* y,
                     cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((desc.sq + kBlockM - 1) / kBlockM),
                    static_cast<unsigned>(st.heads));
    const int form = mask == nullptr                                      ? kNoMask
                     : desc.mask_q_stride == 0 && desc.mask_k_stride == 1 ? kMaskPerKey
                                                                          : kMaskPerRow;
    const auto pick = [&](auto dense_tag) {
      constexpr bool kD2 = decltype(dense_tag)::value;
      return form == kNoMask       ? kKernel<kNoMask, kD2>
             : form == kMaskPerKey ? kKernel<kMaskPerKey, kD2>
                                   : kKernel<kMaskPerRow, kD2>;
    };
    const auto kernel = dense ? pick(std::true_type{}) : pick(std::false_type{});
    kernel<<<grid, kWarps * 32, kSmem, stream>>>(desc, st, first_head, q, k, v, mask, y);
  }
};

// Heads of 64: blocks of 128 rows (two row tiles per warp, so that each K and V fragment read from
// shared memory feeds two products), as many as the registers allow (two per multiprocessor) or
// with registers capped for three; blocks of 64 rows for grids that would leave multiprocessors
// idle. Heads of 128: 128 rows, or 64 for small grids.
template <typename T>
using Tall64 = FlashKernel<T, 64, 4, 2, 64, 1>;
template <typename T>
using Tall64Dense = FlashKernel<T, 64, 4, 2, 64, 3>;
template <typename T>
using Short64 = FlashKernel<T, 64, 4, 1, 64, 1>;
template <typename T>
using Tall128 = FlashKernel<T, 128, 4, 2, 64, 1>;
template <typename T>
using Short128 = FlashKernel<T, 128, 4, 1, 64, 1>;

template <typename T>
void allow_all_smem() {
  Tall64<T>::allow_smem();
  Tall64Dense<T>::allow_smem();
  Short64<T>::allow_smem();
  Tall128<T>::allow_smem();
  Short128<T>::allow_smem();
}

int multiprocessors() {
  static const int count = [] {
    int device = 0, n = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return 1;
    return n > 0 ? n : 1;
  }();
  return count;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Which block shape runs `desc`, from the blocks of 128 rows each multiprocessor must run (its
// load). A load of at most `short_load` leaves multiprocessors idle: 64-row blocks spread it. Else
// the time is about the rounds of resident blocks times the blocks per round: with 2 slots a load
// of 3 takes two rounds, with 3 one (measured on the H200: the register-capped kernel is about 3%
// slower per block, from its spills).
enum class Shape64 { kTall, kTallDense, kShort };

template <typename T>
Shape64 choose64(const AttentionDesc& desc, int64_t heads) {
  const int64_t sms = multiprocessors();
  const int64_t blocks = heads * ((desc.sq + 127) / 128);
  const int64_t load = (blocks + sms - 1) / sms;
  if (load <= 2) return Shape64::kShort;
  const int64_t two = Tall64<T>::slots(), three = Tall64Dense<T>::slots();
  const double cost_two = static_cast<double>((load + two - 1) / two * two);
  const double cost_three = 1.03 * static_cast<double>((load + three - 1) / three * three);
  return cost_three < cost_two ? Shape64::kTallDense : Shape64::kTall;
}

}  // namespace

bool flash_attention_fits(Storage st, const AttentionDesc& desc) {
  if (st == Storage::kFloat32 || desc.k_transposed) return false;
  if (desc.depth != desc.depth_v || (desc.depth != 64 && desc.depth != 128)) return false;
  if (desc.sq <= kAttentionSplitMaxRows || desc.sk == 0) return false;
  if (desc.batch <= 0 || desc.batch > 65535 || desc.kv_group <= 0) return false;
  if (!(desc.scale > 0.f)) return false;  // the unmasked kernel takes each tile's maximum unscaled
  static std::once_flag once;
  std::call_once(once, [] {
    allow_all_smem<__half>();
    allow_all_smem<__nv_bfloat16>();
  });
  return true;
}

namespace {

bool flash_strides_fit(const HeadStrides& s) {
  for (int64_t e : {s.q_head, s.q_row, s.k_head, s.k_row, s.v_head, s.v_row, s.y_head, s.y_row})
    if (e % 8 != 0) return false;
  return s.heads > 0 && s.heads <= 65535;
}

HeadStrides contiguous_heads(const AttentionDesc& desc) {
  HeadStrides s;
  s.heads = desc.batch;
  s.q_head = desc.sq * desc.depth;
  s.k_head = desc.sk * desc.depth;
  s.v_head = desc.sk * desc.depth_v;
  s.y_head = desc.sq * desc.depth_v;
  s.q_row = s.k_row = desc.depth;
  s.v_row = s.y_row = desc.depth_v;
  return s;
}

// The launch both entry points share; dense: `strides` are contiguous_heads(desc).
bool launch_heads(Storage st, const AttentionDesc& desc, const HeadStrides& strides, bool dense,
                  int64_t first_head, const void* q, const void* k, const void* v, const void* mask,
                  void* y, cudaStream_t stream) {
  if (!flash_attention_fits(st, desc) || !flash_strides_fit(strides)) return false;
  for (const void* p : {q, k, v, static_cast<const void*>(y)})
    if (!aligned16(p)) return false;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, float>) {
      auto go = [&](auto kernel) {
        decltype(kernel)::launch(desc, strides, dense, first_head, static_cast<const T*>(q),
                                 static_cast<const T*>(k), static_cast<const T*>(v),
                                 static_cast<const T*>(mask), static_cast<T*>(y), stream);
      };
      if (desc.depth == 128) {
        if (strides.heads * ((desc.sq + 127) / 128) <= multiprocessors())
          go(Short128<T>{});
        else
          go(Tall128<T>{});
        return;
      }
      switch (choose64<T>(desc, strides.heads)) {
        case Shape64::kTall:
          go(Tall64<T>{});
          break;
        case Shape64::kTallDense:
          go(Tall64Dense<T>{});
          break;
        case Shape64::kShort:
          go(Short64<T>{});
          break;
      }
    }
  });
  return true;
}

}  // namespace

bool launch_flash_attention(Storage st, const AttentionDesc& desc, const void* q, const void* k,
                            const void* v, const void* mask, void* y, cudaStream_t stream) {
  return launch_heads(st, desc, contiguous_heads(desc), true, 0, q, k, v, mask, y, stream);
}

bool launch_flash_attention(Storage st, const AttentionDesc& desc, const HeadStrides& strides,
                            int64_t first_head, const void* q, const void* k, const void* v,
                            const void* mask, void* y, cudaStream_t stream) {
  const HeadStrides c = contiguous_heads(desc);
  const bool dense =
      strides.heads == c.heads && strides.q_head == c.q_head && strides.q_row == c.q_row &&
      strides.k_head == c.k_head && strides.k_row == c.k_row && strides.v_head == c.v_head &&
      strides.v_row == c.v_row && strides.y_head == c.y_head && strides.y_row == c.y_row;
  return launch_heads(st, desc, strides, dense, first_head, q, k, v, mask, y, stream);
}

}  // namespace lumen::cuda
