// CPU kernel of MatMulNBits: Y = A x W + bias with W stored 4- or 8-bit, block-quantized along K
// (graph/matmul_nbits.h). The float weight matrix is never made whole:
//  - few rows (decode, M <= kGemvRows): a matrix-vector product streams the packed weights once,
//    converting 16 columns of 2 (4-bit) or 1 (8-bit) rows per 16-byte load to floats and summing
//    a . q per block; the block's scale and zero point are applied once per block:
//    y += scale * (sum(a_k q_k) - zero_point * sum(a_k)). Memory-bound: this sets decode speed.
//  - more rows (prefill): each thread dequantizes a chunk of K x 64 columns into a buffer that
//    stays in cache and runs a register-blocked float micro-kernel over it for every row of A.
// float16 / bfloat16 A, bias and Y are converted to and from float32 around the same kernels.
// Lumen's epilogue (a residual, then an activation: graph/matmul_nbits.h) is one pass over Y after
// them. AVX2 + FMA code, and AVX-512 code, chosen by the CPU level in use when the kernel is built
// (plain loops below AVX2). Threads split N
// (and the rows too where N has fewer 64-column tiles than threads).
//
// The weights are repacked at compile time into panels of 16 columns: per panel, 4-bit rows in
// pairs (16 bytes per pair: byte j = q(2p, j) | q(2p + 1, j) << 4) or 8-bit rows (16 bytes per
// row), K padded with zeros to whole blocks; per panel and block, 16 scales and 16 zero points
// (uint8, or float32 where the model gives float zero points): 4 + 1 bytes per block of a column
// beside its block_size / 2 bytes of 4-bit weights.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/float_rows.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/packed_gemm.h"
#include "graph/matmul_nbits.h"

#if LUMEN_X86
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

constexpr int64_t kPanel = 16;    // columns per panel
constexpr int64_t kGemvRows = 8;  // up to this many rows of A: the matrix-vector path
// Multiply-adds below which the matrix-vector path runs on one thread (about 20 us of work).
constexpr int64_t kGemvParallelMin = int64_t{1} << 18;
constexpr int64_t kTilePanels = 4;  // panels per thread tile of the prefill path (64 columns)
constexpr int64_t kChunkK = 256;    // rows of K dequantized at once by the prefill path (at least)

// Fully unrolls the loops over the rows a micro-kernel keeps in registers (GCC otherwise may keep
// a memory copy of the accumulator arrays and store to it on every step).
#define LUMEN_UNROLL _Pragma("GCC unroll 16")

// The weights in the kernel's layout (see the file comment).
struct PackedNBits {
  NBitsLayout layout;
  int64_t k_pad = 0;   // K rounded up to whole blocks (a multiple of 16)
  int64_t panels = 0;  // ceil(N / 16)
  int64_t panel_bytes = 0;
  std::vector<uint8_t> q;        // panels x panel_bytes
  std::vector<float> scale;      // (panel, block, 16)
  bool float_zero = false;       // zero points in zero_f32, else in zero_u8
  std::vector<uint8_t> zero_u8;  // (panel, block, 16)
  std::vector<float> zero_f32;   // (panel, block, 16)
  const uint8_t* panel_q(int64_t p) const { return q.data() + p * panel_bytes; }
  int64_t block_at(int64_t p, int64_t blk) const { return (p * layout.n_blocks() + blk) * kPanel; }
  const float* scales(int64_t p, int64_t blk) const { return scale.data() + block_at(p, blk); }
};

// Repacks MatMulNBits' B, scales and zero points (zp_u8 or zp_f32, or neither) into the kernel's
// layout.
PackedNBits pack_weights(const NBitsLayout& l, const uint8_t* b, const float* scales,
                         const uint8_t* zp_u8, const float* zp_f32) {
  PackedNBits w;
  w.layout = l;
  const int64_t blocks = l.n_blocks();
  w.k_pad = blocks * l.block_size;
  w.panels = (l.n + kPanel - 1) / kPanel;
  w.panel_bytes = (l.bits == 4 ? w.k_pad / 2 : w.k_pad) * kPanel;
  w.q.assign(static_cast<size_t>(w.panels * w.panel_bytes), 0);
  w.scale.assign(static_cast<size_t>(w.panels * blocks * kPanel), 0.0f);
  w.float_zero = zp_f32 != nullptr;
  if (w.float_zero)
    w.zero_f32.assign(w.scale.size(), 0.0f);
  else
    w.zero_u8.assign(w.scale.size(), 0);
  for (int64_t col = 0; col < l.n; ++col) {
    const int64_t p = col / kPanel, j = col % kPanel;
    uint8_t* dst = w.q.data() + p * w.panel_bytes;
    for (int64_t k = 0; k < l.k; ++k) {
      const uint8_t v = l.q(b, col, k);
      if (l.bits == 8)
        dst[k * kPanel + j] = v;
      else
        dst[(k / 2) * kPanel + j] |= static_cast<uint8_t>(v << (4 * (k & 1)));
    }
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t at = w.block_at(p, blk) + j;
      w.scale[at] = scales[col * blocks + blk];
      if (zp_f32)
        w.zero_f32[at] = zp_f32[col * blocks + blk];
      else
        w.zero_u8[at] =
            zp_u8 ? l.zero_point(zp_u8, col, blk) : static_cast<uint8_t>(l.default_zero_point());
    }
  }
  return w;
}

// Scratch buffer `which` of the calling thread, at least `n` floats, kept between runs (OpenMP's
// threads persist), so a run neither allocates nor faults in fresh pages. 0 and 1: the kernels'
// own; 2, 3, 4 and 5: 16-bit A, Y, bias and residual as float32 (MatMulNBitsKernel::run).
float* scratch(int which, int64_t n) {
  thread_local std::vector<float> buffers[6];
  std::vector<float>& b = buffers[which];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

// Writes `cols` (<= 16) outputs of one row from a 16-float buffer, adding the bias.
inline void store_row(float* y, const float* acc, int64_t col0, int64_t cols, const float* bias) {
  for (int64_t j = 0; j < cols; ++j) y[j] = acc[j] + (bias ? bias[col0 + j] : 0.0f);
}

// ---------------------------------------------------------------------------------------------
// Baseline (a CPU without AVX2): each panel's chunk of K dequantized by plain loops into a buffer,
// then multiplied row by row.

template <int kBits>
void run_baseline(const PackedNBits& w, const float* a, int64_t m, float* y, const float* bias) {
  const NBitsLayout& l = w.layout;
  const int64_t bs = l.block_size;
  const bool parallel = w.panels > 1 && m * l.k * l.n >= kGemvParallelMin;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t p = 0; p < w.panels; ++p) {
    float* wbuf = scratch(0, kChunkK * kPanel);
    float* acc = scratch(1, m * kPanel);
    std::fill(acc, acc + m * kPanel, 0.0f);
    const uint8_t* q = w.panel_q(p);
    for (int64_t k0 = 0; k0 < l.k; k0 += kChunkK) {
      const int64_t kc = std::min(kChunkK, l.k - k0);
      for (int64_t k = k0; k < k0 + kc; ++k) {
        const int64_t at = w.block_at(p, k / bs);
        for (int64_t j = 0; j < kPanel; ++j) {
          const int v =
              kBits == 8 ? q[k * kPanel + j] : (q[(k / 2) * kPanel + j] >> (4 * (k & 1))) & 0xF;
          const float zero = w.float_zero ? w.zero_f32[at + j] : w.zero_u8[at + j];
          wbuf[(k - k0) * kPanel + j] = (static_cast<float>(v) - zero) * w.scale[at + j];
        }
      }
      for (int64_t r = 0; r < m; ++r)
        for (int64_t k = 0; k < kc; ++k) {
          const float av = a[r * l.k + k0 + k];
          for (int64_t j = 0; j < kPanel; ++j) acc[r * kPanel + j] += av * wbuf[k * kPanel + j];
        }
    }
    const int64_t col0 = p * kPanel, cols = std::min(kPanel, l.n - col0);
    for (int64_t r = 0; r < m; ++r)
      store_row(y + r * l.n + col0, acc + r * kPanel, col0, cols, bias);
  }
}

// ---------------------------------------------------------------------------------------------
// AVX2 + FMA (x86 only, as the AVX-512 code and the drivers that call both)

#if LUMEN_X86
// Rows of A for the matrix-vector path: each copied into k_pad floats (zeros past K), with the
// sum of each block (in the calling thread's scratch).
struct PaddedRows {
  float* a = nullptr;
  float* block_sums = nullptr;
};

PaddedRows pad_rows(const float* a, int64_t rows, const PackedNBits& w) {
  const NBitsLayout& l = w.layout;
  const int64_t blocks = l.n_blocks();
  PaddedRows r;
  r.a = scratch(0, rows * w.k_pad);
  r.block_sums = scratch(1, rows * blocks);
  std::fill(r.a, r.a + rows * w.k_pad, 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(r.a + i * w.k_pad, a + i * l.k, static_cast<size_t>(l.k) * sizeof(float));
    for (int64_t blk = 0; blk < blocks; ++blk) {
      float s = 0;
      const float* x = r.a + i * w.k_pad + blk * l.block_size;
      for (int64_t k = 0; k < l.block_size; ++k) s += x[k];
      r.block_sums[i * blocks + blk] = s;
    }
  }
  return r;
}

LUMEN_AVX2_BEGIN

// The 4 float vectors of rows k..k+3 of 8 columns (half h of a panel) at q (k a multiple of 4).
template <int kBits>
inline void decode4_avx2(const uint8_t* q, int64_t k, int h, __m256* w) {
  if constexpr (kBits == 4) {
    const uint8_t* p = q + (k / 2) * kPanel + h * 8;
    const __m256i mask = _mm256_set1_epi32(0xF);
    for (int u = 0; u < 2; ++u) {
      const __m256i v =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + u * kPanel)));
      w[2 * u] = _mm256_cvtepi32_ps(_mm256_and_si256(v, mask));
      w[2 * u + 1] = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
    }
  } else {
    const uint8_t* p = q + k * kPanel + h * 8;
    for (int u = 0; u < 4; ++u)
      w[u] = _mm256_cvtepi32_ps(
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + u * kPanel))));
  }
}

// The zero points of 8 columns (half h) of panel p's block blk.
inline __m256 zeros_avx2(const PackedNBits& w, int64_t p, int64_t blk, int h) {
  const int64_t at = w.block_at(p, blk) + h * 8;
  if (w.float_zero) return _mm256_loadu_ps(w.zero_f32.data() + at);
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.zero_u8.data() + at))));
}

// y[r, panel p's columns] for kRows rows of padded A (rows k_pad apart), AVX2: each half panel
// of 8 columns with 4 independent sums per row.
template <int kBits, int kRows>
void gemv_panel_avx2(const PackedNBits& w, int64_t p, const float* a, const float* sums,
                     float* out /* kRows x 16 */) {
  const NBitsLayout& l = w.layout;
  const int64_t blocks = l.n_blocks(), bs = l.block_size;
  const uint8_t* q = w.panel_q(p);
  for (int h = 0; h < 2; ++h) {
    __m256 acc[kRows];
    LUMEN_UNROLL
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t blk = 0; blk < blocks; ++blk) {
      __m256 p0[kRows], p1[kRows], p2[kRows], p3[kRows];
      LUMEN_UNROLL
      for (int r = 0; r < kRows; ++r) p0[r] = p1[r] = p2[r] = p3[r] = _mm256_setzero_ps();
      const int64_t k0 = blk * bs;
      for (int64_t k = k0; k < k0 + bs; k += 4) {
        __m256 v[4];
        decode4_avx2<kBits>(q, k, h, v);
        LUMEN_UNROLL
        for (int r = 0; r < kRows; ++r) {
          const float* x = a + r * w.k_pad + k;
          p0[r] = _mm256_fmadd_ps(v[0], _mm256_broadcast_ss(x), p0[r]);
          p1[r] = _mm256_fmadd_ps(v[1], _mm256_broadcast_ss(x + 1), p1[r]);
          p2[r] = _mm256_fmadd_ps(v[2], _mm256_broadcast_ss(x + 2), p2[r]);
          p3[r] = _mm256_fmadd_ps(v[3], _mm256_broadcast_ss(x + 3), p3[r]);
        }
      }
      const __m256 s = _mm256_loadu_ps(w.scales(p, blk) + h * 8);
      const __m256 z = zeros_avx2(w, p, blk, h);
      LUMEN_UNROLL
      for (int r = 0; r < kRows; ++r) {
        __m256 t = _mm256_add_ps(_mm256_add_ps(p0[r], p1[r]), _mm256_add_ps(p2[r], p3[r]));
        t = _mm256_fnmadd_ps(z, _mm256_broadcast_ss(sums + r * blocks + blk), t);
        acc[r] = _mm256_fmadd_ps(t, s, acc[r]);
      }
    }
    for (int r = 0; r < kRows; ++r) _mm256_storeu_ps(out + r * kPanel + h * 8, acc[r]);
  }
}

// gemv_panel_avx2 for one row: both halves of the panel in one pass, 8 independent sums (one row
// has too few sums per half to hide the FMA latency).
template <int kBits>
void gemv_panel_avx2_row(const PackedNBits& w, int64_t p, const float* a, const float* sums,
                         float* out) {
  const NBitsLayout& l = w.layout;
  const int64_t blocks = l.n_blocks(), bs = l.block_size;
  const uint8_t* q = w.panel_q(p);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t blk = 0; blk < blocks; ++blk) {
    __m256 lo[4], hi[4];
    LUMEN_UNROLL
    for (int u = 0; u < 4; ++u) lo[u] = hi[u] = _mm256_setzero_ps();
    const int64_t k0 = blk * bs;
    for (int64_t k = k0; k < k0 + bs; k += 4) {
      __m256 v[4];
      decode4_avx2<kBits>(q, k, 0, v);
      LUMEN_UNROLL
      for (int u = 0; u < 4; ++u)
        lo[u] = _mm256_fmadd_ps(v[u], _mm256_broadcast_ss(a + k + u), lo[u]);
      decode4_avx2<kBits>(q, k, 1, v);
      LUMEN_UNROLL
      for (int u = 0; u < 4; ++u)
        hi[u] = _mm256_fmadd_ps(v[u], _mm256_broadcast_ss(a + k + u), hi[u]);
    }
    const __m256 sum = _mm256_broadcast_ss(sums + blk);
    __m256 t0 = _mm256_add_ps(_mm256_add_ps(lo[0], lo[1]), _mm256_add_ps(lo[2], lo[3]));
    __m256 t1 = _mm256_add_ps(_mm256_add_ps(hi[0], hi[1]), _mm256_add_ps(hi[2], hi[3]));
    t0 = _mm256_fnmadd_ps(zeros_avx2(w, p, blk, 0), sum, t0);
    t1 = _mm256_fnmadd_ps(zeros_avx2(w, p, blk, 1), sum, t1);
    acc0 = _mm256_fmadd_ps(t0, _mm256_loadu_ps(w.scales(p, blk)), acc0);
    acc1 = _mm256_fmadd_ps(t1, _mm256_loadu_ps(w.scales(p, blk) + 8), acc1);
  }
  _mm256_storeu_ps(out, acc0);
  _mm256_storeu_ps(out + 8, acc1);
}

// gemv_panel_avx2 for 3 or 4 rows: two sums per row (registers for 4 rows), and the per-block
// results added to `out` in memory (once per block), so one decode serves 4 rows.
template <int kBits, int kRows>
void gemv_panel_avx2_wide(const PackedNBits& w, int64_t p, const float* a, const float* sums,
                          float* out) {
  const NBitsLayout& l = w.layout;
  const int64_t blocks = l.n_blocks(), bs = l.block_size;
  const uint8_t* q = w.panel_q(p);
  std::fill(out, out + kRows * kPanel, 0.0f);
  for (int h = 0; h < 2; ++h) {
    for (int64_t blk = 0; blk < blocks; ++blk) {
      __m256 c0[kRows], c1[kRows];
      LUMEN_UNROLL
      for (int r = 0; r < kRows; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
      const int64_t k0 = blk * bs;
      for (int64_t k = k0; k < k0 + bs; k += 4) {
        __m256 v[4];
        decode4_avx2<kBits>(q, k, h, v);
        LUMEN_UNROLL
        for (int r = 0; r < kRows; ++r) {
          const float* x = a + r * w.k_pad + k;
          c0[r] = _mm256_fmadd_ps(v[0], _mm256_broadcast_ss(x), c0[r]);
          c1[r] = _mm256_fmadd_ps(v[1], _mm256_broadcast_ss(x + 1), c1[r]);
          c0[r] = _mm256_fmadd_ps(v[2], _mm256_broadcast_ss(x + 2), c0[r]);
          c1[r] = _mm256_fmadd_ps(v[3], _mm256_broadcast_ss(x + 3), c1[r]);
        }
      }
      const __m256 s = _mm256_loadu_ps(w.scales(p, blk) + h * 8);
      const __m256 z = zeros_avx2(w, p, blk, h);
      LUMEN_UNROLL
      for (int r = 0; r < kRows; ++r) {
        __m256 t = _mm256_add_ps(c0[r], c1[r]);
        t = _mm256_fnmadd_ps(z, _mm256_broadcast_ss(sums + r * blocks + blk), t);
        float* o = out + r * kPanel + h * 8;
        _mm256_storeu_ps(o, _mm256_fmadd_ps(t, s, _mm256_loadu_ps(o)));
      }
    }
  }
}

// Dequantizes rows [k0, k0 + kc) of panel p into dst (kc x 16 floats), AVX2.
template <int kBits>
void dequant_panel_avx2(const PackedNBits& w, int64_t p, int64_t k0, int64_t kc, float* dst) {
  const int64_t bs = w.layout.block_size;
  const uint8_t* q = w.panel_q(p);
  for (int64_t k = k0; k < k0 + kc; k += 4) {
    const int64_t blk = k / bs;
    for (int h = 0; h < 2; ++h) {
      const __m256 s = _mm256_loadu_ps(w.scales(p, blk) + h * 8);
      const __m256 o =
          _mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), zeros_avx2(w, p, blk, h)), s);
      __m256 v[4];
      decode4_avx2<kBits>(q, k, h, v);
      for (int u = 0; u < 4; ++u)
        _mm256_storeu_ps(dst + (k - k0 + u) * kPanel + h * 8, _mm256_fmadd_ps(v[u], s, o));
    }
  }
}

// c[r, 0:16] += sum over k < kc of a[r, k] * b[k, 0:16] for kRows rows (AVX2: 6 x 16 at most).
template <int kRows>
void micro_avx2(const float* a, int64_t lda, const float* b, int64_t kc, float* c, int64_t ldc) {
  __m256 c0[kRows], c1[kRows];
  LUMEN_UNROLL
  for (int r = 0; r < kRows; ++r) {
    c0[r] = _mm256_loadu_ps(c + r * ldc);
    c1[r] = _mm256_loadu_ps(c + r * ldc + 8);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b + k * kPanel), b1 = _mm256_loadu_ps(b + k * kPanel + 8);
    LUMEN_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
      c0[r] = _mm256_fmadd_ps(x, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(x, b1, c1[r]);
    }
  }
  LUMEN_UNROLL
  for (int r = 0; r < kRows; ++r) {
    _mm256_storeu_ps(c + r * ldc, c0[r]);
    _mm256_storeu_ps(c + r * ldc + 8, c1[r]);
  }
}

LUMEN_ISA_END

// ---------------------------------------------------------------------------------------------
// AVX-512

// GCC 12's AVX-512 conversion intrinsics start from a self-initialised "undefined" vector, which
// -Wmaybe-uninitialized reports wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
LUMEN_AVX512_BEGIN

// The 4 float vectors of rows k..k+3 of a panel's 16 columns at q (k a multiple of 4).
template <int kBits>
inline void decode4_avx512(const uint8_t* q, int64_t k, __m512* w) {
  if constexpr (kBits == 4) {
    const uint8_t* p = q + (k / 2) * kPanel;
    const __m512i mask = _mm512_set1_epi32(0xF);
    for (int u = 0; u < 2; ++u) {
      const __m512i v =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + u * kPanel)));
      w[2 * u] = _mm512_cvtepi32_ps(_mm512_and_si512(v, mask));
      w[2 * u + 1] = _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4));
    }
  } else {
    const uint8_t* p = q + k * kPanel;
    for (int u = 0; u < 4; ++u)
      w[u] = _mm512_cvtepi32_ps(
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + u * kPanel))));
  }
}

// The zero points of panel p's block blk.
inline __m512 zeros_avx512(const PackedNBits& w, int64_t p, int64_t blk) {
  const int64_t at = w.block_at(p, blk);
  if (w.float_zero) return _mm512_loadu_ps(w.zero_f32.data() + at);
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.zero_u8.data() + at))));
}

// As gemv_panel_avx2, 16 columns per vector.
template <int kBits, int kRows>
void gemv_panel_avx512(const PackedNBits& w, int64_t p, const float* a, const float* sums,
                       float* out) {
  const NBitsLayout& l = w.layout;
  const int64_t blocks = l.n_blocks(), bs = l.block_size;
  const uint8_t* q = w.panel_q(p);
  __m512 acc[kRows];
  LUMEN_UNROLL
  for (int r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < blocks; ++blk) {
    __m512 p0[kRows], p1[kRows], p2[kRows], p3[kRows];
    LUMEN_UNROLL
    for (int r = 0; r < kRows; ++r) p0[r] = p1[r] = p2[r] = p3[r] = _mm512_setzero_ps();
    const int64_t k0 = blk * bs;
    for (int64_t k = k0; k < k0 + bs; k += 4) {
      __m512 v[4];
      decode4_avx512<kBits>(q, k, v);
      LUMEN_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const float* x = a + r * w.k_pad + k;
        p0[r] = _mm512_fmadd_ps(v[0], _mm512_set1_ps(x[0]), p0[r]);
        p1[r] = _mm512_fmadd_ps(v[1], _mm512_set1_ps(x[1]), p1[r]);
        p2[r] = _mm512_fmadd_ps(v[2], _mm512_set1_ps(x[2]), p2[r]);
        p3[r] = _mm512_fmadd_ps(v[3], _mm512_set1_ps(x[3]), p3[r]);
      }
    }
    const __m512 s = _mm512_loadu_ps(w.scales(p, blk));
    const __m512 z = zeros_avx512(w, p, blk);
    LUMEN_UNROLL
    for (int r = 0; r < kRows; ++r) {
      __m512 t = _mm512_add_ps(_mm512_add_ps(p0[r], p1[r]), _mm512_add_ps(p2[r], p3[r]));
      t = _mm512_fnmadd_ps(z, _mm512_set1_ps(sums[r * blocks + blk]), t);
      acc[r] = _mm512_fmadd_ps(t, s, acc[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) _mm512_storeu_ps(out + r * kPanel, acc[r]);
}

template <int kBits>
void dequant_panel_avx512(const PackedNBits& w, int64_t p, int64_t k0, int64_t kc, float* dst) {
  const int64_t bs = w.layout.block_size;
  const uint8_t* q = w.panel_q(p);
  for (int64_t k = k0; k < k0 + kc; k += 4) {
    const int64_t blk = k / bs;
    const __m512 s = _mm512_loadu_ps(w.scales(p, blk));
    const __m512 o = _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), zeros_avx512(w, p, blk)), s);
    __m512 v[4];
    decode4_avx512<kBits>(q, k, v);
    for (int u = 0; u < 4; ++u)
      _mm512_storeu_ps(dst + (k - k0 + u) * kPanel, _mm512_fmadd_ps(v[u], s, o));
  }
}

// c[r, 0:32] += a[r, :kc] x [b0 | b1] (two dequantized panels, kc x 16 each) for kRows rows
// (12 x 32 at most: 24 accumulators).
template <int kRows>
void micro_avx512(const float* a, int64_t lda, const float* b0p, const float* b1p, int64_t kc,
                  float* c, int64_t ldc) {
  __m512 c0[kRows], c1[kRows];
  LUMEN_UNROLL
  for (int r = 0; r < kRows; ++r) {
    c0[r] = _mm512_loadu_ps(c + r * ldc);
    c1[r] = _mm512_loadu_ps(c + r * ldc + 16);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b0p + k * kPanel), b1 = _mm512_loadu_ps(b1p + k * kPanel);
    LUMEN_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + k]);
      c0[r] = _mm512_fmadd_ps(x, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(x, b1, c1[r]);
    }
  }
  LUMEN_UNROLL
  for (int r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(c + r * ldc, c0[r]);
    _mm512_storeu_ps(c + r * ldc + 16, c1[r]);
  }
}

LUMEN_ISA_END
#pragma GCC diagnostic pop

// ---------------------------------------------------------------------------------------------
// Drivers

// Calls f.template operator()<R>() for R = rows (1 <= rows <= kMax).
template <int kMax, typename F>
void with_rows(int64_t rows, F&& f) {
  if constexpr (kMax >= 1) {
    if (rows == kMax) {
      f.template operator()<kMax>();
      return;
    }
    with_rows<kMax - 1>(rows, f);
  }
}

// Y (m x N, m <= kGemvRows) for one ISA: threads split the panels.
template <int kBits, bool kAvx512>
void run_gemv(const PackedNBits& w, const float* a, int64_t m, float* y, const float* bias) {
  const NBitsLayout& l = w.layout;
  const PaddedRows rows = pad_rows(a, m, w);
  const int64_t blocks = l.n_blocks();
  constexpr int64_t kChunk = 4;  // rows per pass over a panel
  const bool parallel = w.panels > 1 && m * l.k * l.n >= kGemvParallelMin;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t p = 0; p < w.panels; ++p) {
    alignas(64) float out[kChunk * kPanel];
    const int64_t col0 = p * kPanel, cols = std::min(kPanel, l.n - col0);
    for (int64_t r0 = 0; r0 < m; r0 += kChunk) {
      const int64_t n_rows = std::min(kChunk, m - r0);
      const float* ar = rows.a + r0 * w.k_pad;
      const float* sr = rows.block_sums + r0 * blocks;
      with_rows<kChunk>(n_rows, [&]<int R>() {
        if constexpr (kAvx512)
          gemv_panel_avx512<kBits, R>(w, p, ar, sr, out);
        else if constexpr (R == 1)
          gemv_panel_avx2_row<kBits>(w, p, ar, sr, out);
        else if constexpr (R == 2)
          gemv_panel_avx2<kBits, R>(w, p, ar, sr, out);
        else
          gemv_panel_avx2_wide<kBits, R>(w, p, ar, sr, out);
      });
      for (int64_t r = 0; r < n_rows; ++r)
        store_row(y + (r0 + r) * l.n + col0, out + r * kPanel, col0, cols, bias);
    }
  }
}

// Y (m x N) for one ISA: threads take tiles of kTilePanels panels (and, where there are fewer
// tiles than threads, of a range of rows); per chunk of K the tile's weights are dequantized into
// a cache-resident buffer and each of its rows of A is multiplied with it.
template <int kBits, bool kAvx512>
void run_tiled(const PackedNBits& w, const float* a, int64_t m, float* y, const float* bias) {
  const NBitsLayout& l = w.layout;
  const int64_t chunk = std::max(kChunkK, l.block_size);
  const int64_t tiles = (w.panels + kTilePanels - 1) / kTilePanels;
  constexpr int64_t kTileCols = kTilePanels * kPanel;
  constexpr int64_t kMr = kAvx512 ? 12 : 6;
  // Row ranges per tile: enough items for the threads, at least 4 row blocks each (each range
  // dequantizes its tile again).
  const int64_t threads = omp_get_max_threads();
  const int64_t parts =
      std::max<int64_t>(1, std::min((threads + tiles - 1) / tiles, m / (4 * kMr)));
  const int64_t part_rows = ((m + parts - 1) / parts + kMr - 1) / kMr * kMr;
  const int64_t items = tiles * ((m + part_rows - 1) / part_rows);
#pragma omp parallel
  {
    float* wbuf = scratch(0, kTilePanels * chunk * kPanel);
    float* cbuf = scratch(1, part_rows * kTileCols);
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t t = item % tiles, row0 = item / tiles * part_rows;
      const int64_t rows = std::min(part_rows, m - row0);
      const int64_t p0 = t * kTilePanels, np = std::min(kTilePanels, w.panels - p0);
      std::fill(cbuf, cbuf + rows * kTileCols, 0.0f);
      for (int64_t k0 = 0; k0 < l.k; k0 += chunk) {
        // Rows past K in the last chunk are dequantized (padding) but never read.
        const int64_t kc = std::min(chunk, l.k - k0);
        const int64_t kc4 = (kc + 3) / 4 * 4;
        for (int64_t i = 0; i < np; ++i) {
          float* dst = wbuf + i * chunk * kPanel;
          if constexpr (kAvx512)
            dequant_panel_avx512<kBits>(w, p0 + i, k0, kc4, dst);
          else
            dequant_panel_avx2<kBits>(w, p0 + i, k0, kc4, dst);
        }
        for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
          const int64_t n_rows = std::min(kMr, rows - r0);
          const float* ar = a + (row0 + r0) * l.k + k0;
          float* cr = cbuf + r0 * kTileCols;
          with_rows<kMr>(n_rows, [&]<int R>() {
            if constexpr (kAvx512) {
              for (int64_t i = 0; i < np; i += 2) {
                const float* b0 = wbuf + i * chunk * kPanel;
                // An odd last panel pairs with the buffer's next one (zeros or stale: its
                // columns are never written out).
                const float* b1 = wbuf + (i + 1) * chunk * kPanel;
                micro_avx512<R>(ar, l.k, b0, b1, kc, cr + i * kPanel, kTileCols);
              }
            } else {
              for (int64_t i = 0; i < np; ++i)
                micro_avx2<R>(ar, l.k, wbuf + i * chunk * kPanel, kc, cr + i * kPanel, kTileCols);
            }
          });
        }
      }
      const int64_t col0 = p0 * kPanel, cols = std::min(np * kPanel, l.n - col0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j)
          y[(row0 + r) * l.n + col0 + j] = cbuf[r * kTileCols + j] + (bias ? bias[col0 + j] : 0.0f);
    }
  }
}
#endif  // LUMEN_X86

class MatMulNBitsKernel final : public Kernel {
 public:
  MatMulNBitsKernel(PackedNBits w, bool has_bias, bool has_residual, GemmEpilogue activation)
      : w_(std::move(w)),
        has_bias_(has_bias),
        has_residual_(has_residual),
        activation_(activation),
        isa_(isa_level()) {}

  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.inputs[kNBitsA];
    const int64_t m = a.numel() / w_.layout.k, n = w_.layout.n;
    if (m == 0) return;
    // 16-bit A, bias and Y go through float32 copies.
    const FloatRows a_rows(a), y_rows(ctx.outputs[0]);
    const float* x = a_rows.view(0, m * w_.layout.k, scratch(2, m * w_.layout.k));
    const bool y16 = ctx.outputs[0].dtype() != DType::kFloat32;
    float* y = y16 ? scratch(3, m * n) : ctx.outputs[0].data<float>();
    const float* bias =
        has_bias_ ? FloatRows(ctx.inputs[kNBitsBias]).view(0, n, scratch(4, n)) : nullptr;
    if (w_.layout.bits == 4)
      dispatch<4>(x, m, y, bias);
    else
      dispatch<8>(x, m, y, bias);
    if (has_residual_ || activation_.activation != GemmActivation::kNone) {
      const float* residual =
          has_residual_ ? FloatRows(ctx.inputs[kNBitsResidual]).view(0, m * n, scratch(5, m * n))
                        : nullptr;
#pragma omp parallel for schedule(static) if (m * n >= kParallelEpilogue)
      for (int64_t r = 0; r < m; ++r) {
        float* row = y + r * n;
        if (residual != nullptr)
          for (int64_t j = 0; j < n; ++j) row[j] += residual[r * n + j];
        finish_row(row, n, 0, activation_);
      }
    }
    if (y16) y_rows.write(y, m * n, 0);
  }

  bool reads_input(int k) const override {
    return k == kNBitsA || k == kNBitsBias || k == kNBitsResidual;
  }

  std::string describe() const override {
    return std::string(cpu_isa_name(isa_)) + " " + std::to_string(w_.layout.bits) + "-bit, block " +
           std::to_string(w_.layout.block_size);
  }

 private:
  template <int kBits>
  void dispatch(const float* x, int64_t m, float* y, const float* bias) const {
#if LUMEN_X86
    const bool gemv = m <= kGemvRows;
    if (isa_ == CpuIsa::kAvx512)
      return gemv ? run_gemv<kBits, true>(w_, x, m, y, bias)
                  : run_tiled<kBits, true>(w_, x, m, y, bias);
    if (isa_ == CpuIsa::kAvx2)
      return gemv ? run_gemv<kBits, false>(w_, x, m, y, bias)
                  : run_tiled<kBits, false>(w_, x, m, y, bias);
#endif
    run_baseline<kBits>(w_, x, m, y, bias);
  }

  // Outputs from which the residual and activation pass runs on every thread.
  static constexpr int64_t kParallelEpilogue = int64_t{1} << 16;

  PackedNBits w_;
  bool has_bias_;
  bool has_residual_;
  GemmEpilogue activation_;  // Lumen's epilogue activation (no bias: that is added above)
  CpuIsa isa_;               // the level in use when the kernel was built
};

// The epilogue activation of the node's attributes, or false where it is unknown.
bool read_activation(const NodeContext& ctx, GemmEpilogue* out) {
  return parse_gemm_epilogue(ctx.attr_string("activation", ""),
                             ctx.attr_float("activation_alpha", 0.0f),
                             ctx.attr_float("activation_beta", 0.0f), out);
}

std::string check_matmul_nbits(const NodeContext& ctx) {
  for (int i : {kNBitsB, kNBitsScales, kNBitsZeroPoints})
    if (ctx.has_input(i) && ctx.input_value(i) == nullptr)
      return "B, scales and zero_points must be constants (known when the graph is built)";
  GemmEpilogue activation;
  if (!read_activation(ctx, &activation))
    return "no activation '" + ctx.attr_string("activation", "") + "'";
  return "";
}

std::unique_ptr<Kernel> make_matmul_nbits(const NodeContext& ctx) {
  const std::string why = check_matmul_nbits(ctx);
  if (!why.empty()) ctx.fail_unsupported(why);
  NBitsLayout l;
  l.k = ctx.attr_int("K");
  l.n = ctx.attr_int("N");
  l.bits = static_cast<int>(ctx.attr_int("bits", 4));
  l.block_size = ctx.attr_int("block_size");
  const Tensor* zp = ctx.has_input(kNBitsZeroPoints) ? ctx.input_value(kNBitsZeroPoints) : nullptr;
  const uint8_t* zp_u8 = zp && zp->dtype() == DType::kUInt8 ? zp->data<uint8_t>() : nullptr;
  // Float scales and zero points of any float type, as float32.
  auto as_floats = [](const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    FloatRows(t).read(0, t.numel(), v.data());
    return v;
  };
  const std::vector<float> scales = as_floats(*ctx.input_value(kNBitsScales));
  std::vector<float> zp_f;
  if (zp && !zp_u8) zp_f = as_floats(*zp);
  PackedNBits w = pack_weights(l, ctx.input_value(kNBitsB)->data<uint8_t>(), scales.data(), zp_u8,
                               zp_f.empty() ? nullptr : zp_f.data());
  GemmEpilogue activation;
  read_activation(ctx, &activation);
  return std::make_unique<MatMulNBitsKernel>(std::move(w), ctx.has_input(kNBitsBias),
                                             ctx.has_input(kNBitsResidual), activation);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(MatMulNBits, &make_matmul_nbits, &check_matmul_nbits);

}  // namespace lumen::cpu
