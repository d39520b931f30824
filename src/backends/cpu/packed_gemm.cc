// The packed GEMM of packed_gemm.h: a 6 x 16 AVX2/FMA micro-kernel (12 accumulator registers)
// over B panels packed at compile time, blocked for the caches (kKc rows of B per block, at most
// kMc rows of A per tile, so a tile's packed A block stays in L2 while each 16-column B panel
// stays in L1), tiles shared out over the OpenMP threads. The micro-kernel is AVX2 code:
// prefer_packed_gemm admits packed_gemm as the default GEMM only where the CPU level in use is
// AVX2. Below AVX2 (and off x86) packed_gemm runs a portable form the compiler vectorises, for the
// callers that take it at every level (the one-pixel convolutions).
#include "backends/cpu/packed_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/elementwise_math.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/simd_math.h"
#include "backends/cpu/simd_transpose.h"
#include "core/derived_tensors.h"

#if LUMEN_X86
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

constexpr int64_t kNr = 16;  // columns of a packed panel (two AVX2 registers)
// Multiply-adds (times 2) below which a product runs on one thread.
constexpr int64_t kParallelFlops = 1 << 20;

}  // namespace

#if LUMEN_X86
LUMEN_AVX2_BEGIN
namespace {

constexpr int64_t kMr = 6;    // rows of C per micro-kernel call (of kNr columns)
constexpr int64_t kKc = 256;  // rows of B per block: a 16-column panel is 16 KiB, in L1
constexpr int64_t kMc = 96;   // rows of A per tile: a 96 x 256 block is 96 KiB, in L2
constexpr int64_t kLargeB = int64_t{32} << 20;  // bytes of B beyond which it streams from DRAM
constexpr int64_t kTileC = int64_t{256} << 10;  // most bytes of C per tile (half of L2)
// Floats of B ahead of a matrix-vector product's reads that it prefetches (1 KiB).
constexpr int64_t kRowPrefetch = 256;

// Copies `rows` (at most 6) rows of kc elements, lda apart, into a (kc x 6) panel:
// dst[kk * 6 + r], zero past `rows`. Packed, the micro-kernel reads A as one contiguous stream
// (in place, rows 4 KiB apart would share L1 sets and evict each other).
inline void pack_a(const float* a, int64_t lda, int64_t rows, int64_t kc, float* dst) {
  int64_t kk = 0;
  if (rows == kMr) {
    // Eight columns at a time: an 8 x 8 transpose of the six rows and two zero rows, each
    // transposed column stored 6 floats apart (its last two lanes are overwritten by the next
    // store, or not stored at the panel's end).
    for (; kk + 8 <= kc; kk += 8, dst += 8 * kMr) {
      __m256 m[8];
      for (int64_t r = 0; r < kMr; ++r) m[r] = _mm256_loadu_ps(a + r * lda + kk);
      m[6] = m[7] = _mm256_setzero_ps();
      transpose_8x8(m);
      for (int64_t col = 0; col < 7; ++col) _mm256_storeu_ps(dst + col * kMr, m[col]);
      if (kk + 8 < kc)
        _mm256_storeu_ps(dst + 7 * kMr, m[7]);
      else  // the panel's end: six lanes only, the next panel may be another thread's
        _mm256_maskstore_ps(dst + 7 * kMr, _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0), m[7]);
    }
  }
  for (; kk < kc; ++kk, dst += kMr)
    for (int64_t r = 0; r < kMr; ++r) dst[r] = r < rows ? a[r * lda + kk] : 0.0f;
}

// The epilogue on two registers of one row (columns col0 .. col0 + 16 of the bias), for an
// activation activate8() computes: applied in registers, it saves a finish_row() call per row,
// which costs more than the products when k is small (a 1x1 convolution with 16 to 32 inputs).
inline void finish_pair(__m256& lo, __m256& hi, const float* bias, const GemmEpilogue& e) {
  if (bias) {
    lo = _mm256_add_ps(lo, _mm256_loadu_ps(bias));
    hi = _mm256_add_ps(hi, _mm256_loadu_ps(bias + 8));
  }
  lo = activate8(lo, e);
  hi = activate8(hi, e);
}

// acc (6 x 16, rows ldc apart in c) (+)= sum over kk < kc of a[kk][0..6) x b[kk][0..16), then
// the epilogue `fin` (its activation one activate8() computes, its bias at column col0) when given.
// Meanwhile pf_lines lines of 16 floats from pf on are prefetched into L1, one every pf_every
// steps of k (the rest at the end).
inline void micro_kernel(const float* a, int64_t kc, const float* b, float* c, int64_t ldc,
                         bool load_c, const GemmEpilogue* fin = nullptr, int64_t col0 = 0,
                         const float* pf = nullptr, int64_t pf_lines = 0, int64_t pf_every = 1) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  if (load_c) {
    c00 = _mm256_loadu_ps(c + 0 * ldc), c01 = _mm256_loadu_ps(c + 0 * ldc + 8);
    c10 = _mm256_loadu_ps(c + 1 * ldc), c11 = _mm256_loadu_ps(c + 1 * ldc + 8);
    c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
    c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
    c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
  } else {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
  }
  const auto step = [&]() __attribute__((always_inline)) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00), c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10), c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20), c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30), c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40), c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50), c51 = _mm256_fmadd_ps(av, b1, c51);
    a += kMr;
    b += kNr;
  };
  int64_t kk = 0;
  if (pf_lines > 0) {
    int64_t line = 0;
    for (; line < pf_lines && kk + pf_every <= kc; ++line) {
      _mm_prefetch(reinterpret_cast<const char*>(pf + line * kNr), _MM_HINT_T0);
      for (const int64_t end = kk + pf_every; kk < end; ++kk) step();
    }
    for (; line < pf_lines; ++line)
      _mm_prefetch(reinterpret_cast<const char*>(pf + line * kNr), _MM_HINT_T0);
  }
  for (; kk < kc; ++kk) step();
  if (fin) {
    const float* bias = fin->bias ? fin->bias + col0 : nullptr;
    finish_pair(c00, c01, bias, *fin);
    finish_pair(c10, c11, bias, *fin);
    finish_pair(c20, c21, bias, *fin);
    finish_pair(c30, c31, bias, *fin);
    finish_pair(c40, c41, bias, *fin);
    finish_pair(c50, c51, bias, *fin);
  }
  _mm256_storeu_ps(c + 0 * ldc, c00), _mm256_storeu_ps(c + 0 * ldc + 8, c01);
  _mm256_storeu_ps(c + 1 * ldc, c10), _mm256_storeu_ps(c + 1 * ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20), _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30), _mm256_storeu_ps(c + 3 * ldc + 8, c31);
  _mm256_storeu_ps(c + 4 * ldc, c40), _mm256_storeu_ps(c + 4 * ldc + 8, c41);
  _mm256_storeu_ps(c + 5 * ldc, c50), _mm256_storeu_ps(c + 5 * ldc + 8, c51);
}

// The micro-kernel for the last row panel of a tile when it has 2 to 5 rows (the packed panel
// still 6 wide, its last rows zero): only those rows are multiplied and stored, where the 6-row
// kernel through a buffer spent 6 rows' multiply-adds (BERT's 128-row products end on a panel of
// 2 rows, GPT-2's too, the 64-row MLP on 4). With 2 or 3 rows, 4 or 6 chains of multiply-adds
// cannot fill the two FMA units (4 cycles of latency each), so even and odd steps of k go to two
// sets of sums, added at the end: bert_tiny 1.8%, bert_base 0.7% faster (whole models, the two
// forms alternated in one process, 4 rounds).
template <int R>
inline void partial_kernel(const float* a, int64_t kc, const float* b, float* c, int64_t ldc,
                           bool load_c, const GemmEpilogue* fin, int64_t col0) {
  constexpr int kSets = R <= 3 ? 2 : 1;
  __m256 lo[kSets][R], hi[kSets][R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    lo[0][r] = load_c ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
    hi[0][r] = load_c ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
    if constexpr (kSets == 2) lo[1][r] = hi[1][r] = _mm256_setzero_ps();
  }
  const auto step = [&](int set, const float* ak, const float* bk) __attribute__((always_inline)) {
    const __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(ak + r);
      lo[set][r] = _mm256_fmadd_ps(av, b0, lo[set][r]);
      hi[set][r] = _mm256_fmadd_ps(av, b1, hi[set][r]);
    }
  };
  int64_t kk = 0;
  for (; kk + kSets <= kc; kk += kSets, a += kSets * kMr, b += kSets * kNr) {
#pragma GCC unroll 2
    for (int set = 0; set < kSets; ++set) step(set, a + set * kMr, b + set * kNr);
  }
  if (kk < kc) step(0, a, b);
  const float* bias = fin && fin->bias ? fin->bias + col0 : nullptr;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if constexpr (kSets == 2) {
      lo[0][r] = _mm256_add_ps(lo[0][r], lo[1][r]);
      hi[0][r] = _mm256_add_ps(hi[0][r], hi[1][r]);
    }
    if (fin) finish_pair(lo[0][r], hi[0][r], bias, *fin);
    _mm256_storeu_ps(c + r * ldc, lo[0][r]);
    _mm256_storeu_ps(c + r * ldc + 8, hi[0][r]);
  }
}

// One row of C (16 columns, cols of them stored): c (+)= sum over kk of a[kk * a_step] x
// b[kk][0..16), four steps of k at a time into eight accumulators. A single row (a matrix-vector
// product, as in a batch-1 MLP) is bound by reading B from memory: the 6-row kernel would spend
// 12 multiply-adds per 64 bytes of B, this one 2, so it keeps up with DRAM.
inline void row_kernel(const float* a, int64_t a_step, int64_t kc, const float* b, float* c,
                       int64_t cols, bool load_c) {
  __m256 acc[8];
  for (__m256& v : acc) v = _mm256_setzero_ps();
  int64_t kk = 0;
  for (; kk + 4 <= kc; kk += 4, a += 4 * a_step, b += 4 * kNr) {
    // 1 KiB ahead: the hardware prefetchers stop at 4 KiB page boundaries, so without it each
    // page of B began with misses (wide_deep's 4096 x 4096 product at batch 1: 6-9% faster,
    // whole model compiled twice in one process, alternating; 512 B or 2-4 KiB ahead gained less).
    for (int64_t l = 0; l < 4; ++l)
      _mm_prefetch(reinterpret_cast<const char*>(b + kRowPrefetch + l * kNr), _MM_HINT_T0);
    for (int64_t u = 0; u < 4; ++u) {
      const __m256 av = _mm256_broadcast_ss(a + u * a_step);
      acc[2 * u] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + u * kNr), acc[2 * u]);
      acc[2 * u + 1] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + u * kNr + 8), acc[2 * u + 1]);
    }
  }
  for (; kk < kc; ++kk, a += a_step, b += kNr) {
    const __m256 av = _mm256_broadcast_ss(a);
    acc[0] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b), acc[0]);
    acc[1] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + 8), acc[1]);
  }
  alignas(32) float sum[kNr];
  _mm256_store_ps(sum, _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[4], acc[6])));
  _mm256_store_ps(sum + 8,
                  _mm256_add_ps(_mm256_add_ps(acc[1], acc[3]), _mm256_add_ps(acc[5], acc[7])));
  for (int64_t j = 0; j < cols; ++j) c[j] = load_c ? c[j] + sum[j] : sum[j];
}

// The micro-kernel on a tile of rows x cols (at most 6 x 16) of C: whole tiles go straight to C,
// single rows to the row kernel, 2 to 5 rows of 16 columns to partial_kernel, narrower ones
// through a 6 x 16 buffer. With `fin` (the last block of k, an activation activate8() computes) a
// tile of 16 columns is finished too; the return value says whether it was. pf_lines lines from pf
// are prefetched: by micro_kernel over its steps, otherwise first.
inline bool tile_kernel(const float* a, int64_t kc, const float* b, float* c, int64_t ldc,
                        int64_t rows, int64_t cols, bool load_c, const GemmEpilogue* fin,
                        int64_t col0, const float* pf, int64_t pf_lines, int64_t pf_every) {
  if (cols != kNr) fin = nullptr;  // the bias has only cols values left
  if (rows == kMr && cols == kNr) {
    micro_kernel(a, kc, b, c, ldc, load_c, fin, col0, pf, pf_lines, pf_every);
    return fin != nullptr;
  }
  for (int64_t l = 0; l < pf_lines; ++l)
    _mm_prefetch(reinterpret_cast<const char*>(pf + l * kNr), _MM_HINT_T0);
  if (rows == 1) {
    row_kernel(a, kMr, kc, b, c, cols, load_c);
    return false;
  }
  if (cols == kNr) {  // 2 to 5 rows
    using Partial = void (*)(const float*, int64_t, const float*, float*, int64_t, bool,
                             const GemmEpilogue*, int64_t);
    static constexpr Partial kPartial[kMr] = {
        nullptr,           nullptr, &partial_kernel<2>, &partial_kernel<3>, &partial_kernel<4>,
        &partial_kernel<5>};
    kPartial[rows](a, kc, b, c, ldc, load_c, fin, col0);
    return fin != nullptr;
  }
  alignas(32) float buf[kMr * kNr] = {};
  if (load_c)
    for (int64_t r = 0; r < rows; ++r) std::memcpy(buf + r * kNr, c + r * ldc, cols * 4);
  micro_kernel(a, kc, b, buf, kNr, load_c, fin, col0);
  for (int64_t r = 0; r < rows; ++r) std::memcpy(c + r * ldc, buf + r * kNr, cols * 4);
  return fin != nullptr;
}

}  // namespace

LUMEN_ISA_END
#endif  // LUMEN_X86

bool prefer_packed_gemm() {
  return cpu_isa() == CpuIsa::kAvx2;
}

#if LUMEN_X86
LUMEN_AVX2_BEGIN

// finish_row for packed_gemm_avx2, which runs only at the AVX2 level: no dispatch per row.
void finish_row_avx2(float* y, int64_t cols, int64_t col0, const GemmEpilogue& e);

// Tiles of at most kMc rows by a share of the columns, over the OpenMP threads; per tile, block
// by block of k, A's block is packed once and each B panel runs down the tile's rows.
static void packed_gemm_avx2(int64_t m, const float* a, int64_t lda, const PackedMatrix& b,
                             float* c, int64_t ldc, const GemmEpilogue& e) {
  const int64_t n = b.n(), k = b.k();  // m, n > 0: packed_gemm returns before
  const int64_t panels = (n + kNr - 1) / kNr;
  // Tiles of whole 6-row panels, at most kMc rows, spread evenly (their heights differ by at most
  // one panel), by shares of the column panels; the tile count a multiple of the threads where
  // the columns are too few to share.
  const int64_t row_panels = (m + kMr - 1) / kMr;
  // Each tile of rows reads all of B once: where B is larger than the caches (GPT-2's 768 x 50257
  // vocabulary projection, 154 MB), tiles of up to twice kMc rows halve that traffic (128 x 768 x
  // 50257 on 2 threads: 129-145 -> 146-159 GFLOP/s, three interleaved runs).
  const int64_t b_bytes = k * n * static_cast<int64_t>(sizeof(float));
  const int64_t mc = b_bytes > kLargeB ? 2 * kMc : kMc;
  int64_t m_tiles = (m + mc - 1) / mc;
  const bool parallel =
      2 * m * n * k > kParallelFlops && omp_get_max_threads() > 1 && !omp_in_parallel();
  const int64_t threads = parallel ? omp_get_max_threads() : 1;
  // About 8 tiles per thread, taken dynamically, each with at least 8 column panels (A is packed
  // once per tile): on a machine whose cores are shared (a VM with steal time), a thread that is
  // held up leaves its tiles to the others instead of keeping them waiting at the end. Against
  // 2 static tiles per thread, medians over interleaved runs on 2 threads (two runs each):
  // 197x768x3072 117 -> 127 and 114 -> 125 GFLOP/s, 3136x96x384 120 -> 134 and 116 -> 130,
  // 128x768x3072 133 -> 136 and 133 -> 143, 64x1024x1024 115 -> 113 and 116 -> 114.
  int64_t n_tiles = std::min(std::max<int64_t>(1, panels / 8),
                             std::max<int64_t>(1, (8 * threads + m_tiles - 1) / m_tiles));
  // A tile's C is loaded and stored once per block of k: kept to 256 KB, it stays in L2 between
  // blocks. GPT-2's vocabulary product (128 x 768 x 50257) had tiles of 128 x 3152 (1.6 MB) that
  // went to memory and back for each of its 3 blocks; in tiles of at most 256 KB it ran
  // in 58.1-58.7 ms instead of 63.5 (two runs of 12, alternating in one process).
  const int64_t tile_rows = (row_panels + m_tiles - 1) / m_tiles * kMr;
  const int64_t max_panels = std::max<int64_t>(8, kTileC / (tile_rows * kNr * 4));
  n_tiles = std::max(n_tiles, (panels + max_panels - 1) / max_panels);
  const int64_t panels_per_tile = (panels + n_tiles - 1) / n_tiles;
  n_tiles = (panels + panels_per_tile - 1) / panels_per_tile;
  if ((m_tiles * n_tiles) % threads != 0)
    m_tiles = std::min(row_panels, (m_tiles * n_tiles + threads - 1) / threads * threads / n_tiles);
  const int64_t tiles = m_tiles * n_tiles;

  // Where several column shares would each pack the same rows of A, A is packed once for all of
  // them (in parallel, before the tiles): block of k by block, row panel by row panel.
  const bool share_a = parallel && n_tiles > 1 && m > 1 && k > 0;
  thread_local std::vector<float> shared_a;
  if (share_a) shared_a.resize(static_cast<size_t>(row_panels * k * kMr));
  float* const packed_all = shared_a.data();
  const int64_t pack_tasks = share_a ? (k + kKc - 1) / kKc * row_panels : 0;
  const auto pack_task = [&](int64_t task) {
    const int64_t k0 = task / row_panels * kKc, ip = task % row_panels, r0 = ip * kMr;
    const int64_t kc = std::min(kKc, k - k0);
    pack_a(a + r0 * lda + k0, lda, std::min(kMr, m - r0), kc,
           packed_all + k0 * row_panels * kMr + ip * kc * kMr);
  };

  const bool finishes = e.bias || e.activation != GemmActivation::kNone;
  const bool fin_here = finishes && activates_in_registers(e.activation);
  const auto run_tile = [&](int64_t t) {
    const int64_t mt = t / n_tiles, nt = t % n_tiles;
    const int64_t p0 = mt * row_panels / m_tiles, p1 = (mt + 1) * row_panels / m_tiles;
    const int64_t row0 = p0 * kMr, rows = std::min(p1 * kMr, m) - row0;
    if (rows <= 0) return;
    const int64_t jp0 = nt * panels_per_tile, jp1 = std::min(panels, jp0 + panels_per_tile);
    if (m == 1) {
      // A matrix-vector product: each panel of B read once, top to bottom, as one stream (A
      // unpacked, no blocks of k).
      for (int64_t jp = jp0; jp < jp1; ++jp) {
        const int64_t col0 = jp * kNr, cols = std::min(kNr, n - col0);
        row_kernel(a, 1, k, b.panel(0, jp), c + col0, cols, e.accumulate);
        if (finishes) finish_row_avx2(c + col0, cols, col0, e);
      }
      return;
    }
    const int64_t m_panels = (rows + kMr - 1) / kMr;
    thread_local std::vector<float> packed_a;
    if (!share_a) packed_a.resize(static_cast<size_t>(m_panels * kKc * kMr));
    if (k == 0) {  // nothing to multiply: C is the residual (or zero), then the epilogue
      for (int64_t r = 0; r < rows; ++r) {
        float* y = c + (row0 + r) * ldc;
        const int64_t col0 = jp0 * kNr, cols = std::min(n, jp1 * kNr) - col0;
        if (!e.accumulate) std::fill(y + col0, y + col0 + cols, 0.0f);
        finish_row_avx2(y + col0, cols, col0, e);
      }
      return;
    }
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0);
      const bool first = k0 == 0, last = k0 + kc == k;
      const float* tile_a = packed_a.data();
      if (share_a) {
        tile_a = packed_all + k0 * row_panels * kMr + p0 * kc * kMr;
      } else {
        for (int64_t ip = 0; ip < m_panels; ++ip) {
          const int64_t r0 = row0 + ip * kMr;
          pack_a(a + r0 * lda + k0, lda, std::min(kMr, m - r0), kc, &packed_a[ip * kc * kMr]);
        }
      }
      for (int64_t jp = jp0; jp < jp1; ++jp) {
        const float* panel = b.panel(k0, jp);
        const int64_t col0 = jp * kNr, cols = std::min(kNr, n - col0);
        // The panel this tile runs next (the next column panel, or the first of the next block
        // of k) is prefetched into L1 while this one runs, a share of its rows during each
        // micro-kernel call. Issued before each call as a burst, the prefetches stalled the core
        // (2.6% of bert_base's cycles, on the instruction after them) and paid only for B of
        // 2 MB or more; spread over the call's steps of k (micro_kernel's pf), they pay for any
        // B. Whole models compiled twice in one process, run alternately, burst for B of 2 MB
        // and up against spread for all: bert_base 3.0%, vit_b_16 2.8%, mlp20 1.9%, bert_tiny
        // 6-9%, googlenet 1.9%, resnet50 0.8% faster.
        const float* next = jp + 1 < jp1   ? b.panel(k0, jp + 1)
                            : k0 + kKc < k ? b.panel(k0 + kKc, jp0)
                                           : nullptr;
        const int64_t next_rows = jp + 1 < jp1 ? kc : std::min(kKc, k - k0 - kKc);
        const int64_t chunk = (next_rows + m_panels - 1) / m_panels;
        const int64_t pf_every = std::max<int64_t>(1, kc / std::max<int64_t>(1, chunk));
        for (int64_t ip = 0; ip < m_panels; ++ip) {
          const int64_t pf0 = std::min(next_rows, ip * chunk);
          const int64_t pf_lines = next ? std::min(next_rows, pf0 + chunk) - pf0 : 0;
          const int64_t r0 = row0 + ip * kMr, prow = std::min(kMr, m - r0);
          float* tile = c + r0 * ldc + col0;
          const bool done =
              tile_kernel(tile_a + ip * kc * kMr, kc, panel, tile, ldc, prow, cols,
                          !first || e.accumulate, fin_here && last ? &e : nullptr, col0,
                          next ? next + pf0 * kNr : nullptr, pf_lines, pf_every);
          if (last && finishes && !done)
            for (int64_t r = 0; r < prow; ++r) finish_row_avx2(tile + r * ldc, cols, col0, e);
        }
      }
    }
  };
  // Called inside a parallel region, the product runs on the calling thread without opening a
  // region of its own: even a one-thread region costs microseconds.
  if (parallel) {
#pragma omp parallel
    {
      if (share_a) {
#pragma omp for schedule(static)
        for (int64_t task = 0; task < pack_tasks; ++task) pack_task(task);
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < tiles; ++t) run_tile(t);
    }
  } else {
    for (int64_t t = 0; t < tiles; ++t) run_tile(t);
  }
}

// The activations activate8() computes, 8 values at a time over y[0, cols - cols % 8); returns
// how many it did.
static int64_t activate_rows8(float* y, int64_t cols, const GemmEpilogue& e) {
  int64_t done = 0;
  for (; done + 8 <= cols; done += 8)
    _mm256_storeu_ps(y + done, activate8(_mm256_loadu_ps(y + done), e));
  return done;
}
LUMEN_ISA_END
#else
static int64_t activate_rows8(float*, int64_t, const GemmEpilogue&) {
  return 0;
}
#endif  // LUMEN_X86

namespace {

// finish_row's work, inlined into a baseline and an AVX2 copy (isa_call).
// `avx2`: whether activate8 may run (the CPU level in use has AVX2).
[[gnu::always_inline]] inline void finish_row_body(float* y, int64_t cols, int64_t col0,
                                                   const GemmEpilogue& e, bool avx2) {
  if (e.bias) {
    const float* bias = e.bias + col0;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) y[j] += bias[j];
  }
  // The activations activate8() computes (but the trivial ones), 8 at a time; the rest of the
  // row and the other activations below.
  int64_t done = 0;
  if (e.activation != GemmActivation::kNone && e.activation != GemmActivation::kRelu &&
      activates_in_registers(e.activation) && avx2) {
    done = activate_rows8(y, cols, e);
    y += done;
    cols -= done;
  }
  const float alpha = e.alpha, beta = e.beta;
  switch (e.activation) {
    case GemmActivation::kNone:
      break;
    case GemmActivation::kRelu:
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) y[j] = select(y[j] > 0.0f, y[j], 0.0f);
      break;
    case GemmActivation::kLeakyRelu:
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) y[j] = select(y[j] < 0.0f, alpha * y[j], y[j]);
      break;
    case GemmActivation::kClip:
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) {
        float v = select(y[j] < alpha, alpha, y[j]);
        y[j] = select(v > beta, beta, v);
      }
      break;
    case GemmActivation::kSigmoid:
      for (int64_t j = 0; j < cols; ++j) y[j] = sigmoid_f(y[j]);
      break;
    case GemmActivation::kTanh:
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) y[j] = tanh_f(y[j]);
      break;
    case GemmActivation::kHardSwish:
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) {
        float g = y[j] * (1.0f / 6.0f) + 0.5f;
        g = select(g < 0.0f, 0.0f, g);
        g = select(g > 1.0f, 1.0f, g);
        y[j] *= g;
      }
      break;
    case GemmActivation::kSwish:
      for (int64_t j = 0; j < cols; ++j) y[j] *= sigmoid_f(y[j]);
      break;
    case GemmActivation::kGeluErf:
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j)
        y[j] = 0.5f * y[j] * (1.0f + erf_f(y[j] * 0.70710678118654752f));
      break;
    case GemmActivation::kGeluTanh:
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) {
        const float v = y[j];
        y[j] = 0.5f * v * (1.0f + tanh_f(0.79788456080286536f * (v + 0.044715f * v * v * v)));
      }
      break;
  }
}

}  // namespace

void finish_row(float* y, int64_t cols, int64_t col0, const GemmEpilogue& e) {
  const bool avx2 = has_avx2();
  const auto body = [&] { finish_row_body(y, cols, col0, e, avx2); };
  isa_call(body);
}

#if LUMEN_X86
LUMEN_AVX2_BEGIN
void finish_row_avx2(float* y, int64_t cols, int64_t col0, const GemmEpilogue& e) {
  finish_row_body(y, cols, col0, e, true);
}
LUMEN_ISA_END
#endif

// packed_gemm below AVX2: per row of A and panel of B, 16 sums the compiler vectorises (SSE on
// x86-64-v2, NEON on arm64), then the epilogue through finish_row. Rows in parallel.
static void packed_gemm_portable(int64_t m, const float* a, int64_t lda, const PackedMatrix& b,
                                 float* c, int64_t ldc, const GemmEpilogue& e) {
  const int64_t n = b.n(), k = b.k(), panels = (n + kNr - 1) / kNr;
  const bool parallel = 2 * m * n * k > kParallelFlops && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < m; ++i) {
    const float* row = a + i * lda;
    float* y = c + i * ldc;
    for (int64_t jp = 0; jp < panels; ++jp) {
      const float* panel = b.panel(0, jp);
      const int64_t cols = std::min(kNr, n - jp * kNr);
      float acc[kNr] = {};
      for (int64_t kk = 0; kk < k; ++kk) {
        const float x = row[kk];
        const float* w = panel + kk * kNr;
#pragma omp simd
        for (int64_t j = 0; j < kNr; ++j) acc[j] += x * w[j];
      }
      float* out = y + jp * kNr;
      for (int64_t j = 0; j < cols; ++j) out[j] = e.accumulate ? out[j] + acc[j] : acc[j];
    }
    finish_row(y, n, 0, e);
  }
}

void packed_gemm(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                 int64_t ldc, const GemmEpilogue& e) {
  if (m == 0 || b.n() == 0) return;
#if LUMEN_X86
  if (has_avx2()) return packed_gemm_avx2(m, a, lda, b, c, ldc, e);
#endif
  packed_gemm_portable(m, a, lda, b, c, ldc, e);
}

bool parse_gemm_epilogue(const std::string& activation, float alpha, float beta,
                         GemmEpilogue* out) {
  static const std::pair<const char*, GemmActivation> kNames[] = {
      {"", GemmActivation::kNone},
      {"Relu", GemmActivation::kRelu},
      {"LeakyRelu", GemmActivation::kLeakyRelu},
      {"Clip", GemmActivation::kClip},
      {"Sigmoid", GemmActivation::kSigmoid},
      {"Tanh", GemmActivation::kTanh},
      {"HardSwish", GemmActivation::kHardSwish},
      {"Swish", GemmActivation::kSwish},
      {"GeluErf", GemmActivation::kGeluErf},
      {"GeluTanh", GemmActivation::kGeluTanh}};
  for (const auto& [n, a] : kNames)
    if (activation == n) {
      out->activation = a;
      out->alpha = alpha;
      out->beta = beta;
      return true;
    }
  return false;
}

PackedMatrix::PackedMatrix(const float* b, int64_t k, int64_t n, int64_t row_stride,
                           int64_t col_stride)
    : k_(k), n_(n), panels_((n + kNr - 1) / kNr) {
  data_ = Tensor::empty(Shape{std::max<int64_t>(k * panels_ * kNr, 1)}, DType::kFloat32);
  float* data = data_.data<float>();
  // Only the last panel has columns past n, which must read as zeros; the copy below is the first
  // touch of everything else (for large weights, in parallel).
  if (n % kNr != 0 || k == 0) {
    float* last = data + (panels_ == 0 ? 0 : (panels_ - 1) * k * kNr);
    std::fill(last, data + data_.numel(), 0.0f);
  }
  // Panel by panel, each k x 16 panel contiguous: whole rows of 16 are copied, or whole columns
  // when B is stored transposed. In parallel: GPT-2's 768 x 50257 head is 154 MB.
  if (k == 0) return;  // nothing to copy (and b may be null)
#pragma omp parallel for schedule(static) if (k * n > (1 << 20))
  for (int64_t jp = 0; jp < panels_; ++jp) {
    float* panel = data + jp * k * kNr;
    const int64_t cols = std::min(kNr, n - jp * kNr);
    const float* src = b + jp * kNr * col_stride;
    if (col_stride == 1) {
      for (int64_t kk = 0; kk < k; ++kk)
        std::memcpy(panel + kk * kNr, src + kk * row_stride, cols * sizeof(float));
    } else {
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t kk = 0; kk < k; ++kk)
          panel[kk * kNr + j] = src[j * col_stride + kk * row_stride];
    }
  }
}

PackedMatrix PackedMatrix::shared(const Tensor& source, const float* b, int64_t k, int64_t n,
                                  int64_t row_stride, int64_t col_stride) {
  const auto at = reinterpret_cast<const char*>(b) - static_cast<const char*>(source.raw_data());
  const std::string how = "packed_gemm at " + std::to_string(at) + " " + std::to_string(k) + "x" +
                          std::to_string(n) + " strides " + std::to_string(row_stride) + "," +
                          std::to_string(col_stride);
  PackedMatrix out;
  out.k_ = k;
  out.n_ = n;
  out.panels_ = (n + kNr - 1) / kNr;
  out.data_ = derived_tensor(source, how,
                             [&] { return PackedMatrix(b, k, n, row_stride, col_stride).data_; });
  return out;
}

const float* PackedMatrix::panel(int64_t k0, int64_t jp) const {
  return data_.data<float>() + (jp * k_ + k0) * kNr;
}

}  // namespace lumen::cpu
