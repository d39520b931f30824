// The packed GEMM of packed_gemm.h at AVX2: a 6 x 16 AVX2/FMA micro-kernel (12 accumulator
// registers) over B panels packed at compile time, under the tiling of packed_gemm_tiles.inc
// (blocked for the caches, tiles shared out over the OpenMP threads). packed_gemm() dispatches:
// the AVX-512 form (packed_gemm_avx512.cc) where the level in use is AVX-512, this one at AVX2,
// and below AVX2 (and off x86) a portable form the compiler vectorises.
#include "backends/cpu/packed_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/elementwise_math.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_choice.h"
#include "backends/cpu/simd_math.h"
#include "backends/cpu/simd_transpose.h"
#include "core/derived_tensors.h"

#if LUMEN_X86
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

constexpr int64_t kNr = kPackedPanelCols;  // two AVX2 registers
constexpr int64_t kParallelFlops = kGemmParallelFlops;

}  // namespace

#if LUMEN_X86
LUMEN_AVX2_BEGIN
namespace {

constexpr int64_t kPanelStep = 1;  // a micro-kernel call covers one panel (16 columns)
constexpr int64_t kKc = 256;       // rows of B per block: a 16-column panel is 16 KiB, in L1

#include "backends/cpu/packed_gemm_tiles.inc"

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
inline void row_kernel(const float* a, int64_t a_step, int64_t kc, const float* b,
                       int64_t /*panel_stride*/, float* c, int64_t cols, bool load_c) {
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
inline bool tile_kernel(const float* a, int64_t kc, const float* b, int64_t /*panel_stride*/,
                        float* c, int64_t ldc, int64_t rows, int64_t cols, bool load_c,
                        const GemmEpilogue* fin, int64_t col0, const float* pf, int64_t pf_lines,
                        int64_t pf_every) {
  if (cols != kNr) fin = nullptr;  // the bias has only cols values left
  if (rows == kMr && cols == kNr) {
    micro_kernel(a, kc, b, c, ldc, load_c, fin, col0, pf, pf_lines, pf_every);
    return fin != nullptr;
  }
  for (int64_t l = 0; l < pf_lines; ++l)
    _mm_prefetch(reinterpret_cast<const char*>(pf + l * kNr), _MM_HINT_T0);
  if (rows == 1) {
    row_kernel(a, kMr, kc, b, 0, c, cols, load_c);
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

#if LUMEN_X86
LUMEN_AVX2_BEGIN
// The activations activate8() computes, 8 values at a time over y[0, cols - cols % 8); returns
// how many it did.
static int64_t activate_rows8(float* y, int64_t cols, const GemmEpilogue& e) {
  int64_t done = 0;
  for (; done + 8 <= cols; done += 8)
    _mm256_storeu_ps(y + done, activate8(_mm256_loadu_ps(y + done), e));
  return done;
}
LUMEN_ISA_END
LUMEN_AVX512_BEGIN
// The same 16 values at a time (activate16), where the CPU level in use is AVX-512.
static int64_t activate_rows16(float* y, int64_t cols, const GemmEpilogue& e) {
  int64_t done = 0;
  for (; done + 16 <= cols; done += 16)
    _mm512_storeu_ps(y + done, activate16(_mm512_loadu_ps(y + done), e));
  return done;
}
LUMEN_ISA_END
#else
static int64_t activate_rows8(float*, int64_t, const GemmEpilogue&) {
  return 0;
}
static int64_t activate_rows16(float*, int64_t, const GemmEpilogue&) {
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
    if (has_avx512()) done = activate_rows16(y, cols, e);
    done += activate_rows8(y + done, cols - done, e);
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
namespace {
// finish_row for the AVX2 tiling, which runs only at that level: no dispatch per row.
void finish_row_isa(float* y, int64_t cols, int64_t col0, const GemmEpilogue& e) {
  finish_row_body(y, cols, col0, e, true);
}
}  // namespace
LUMEN_ISA_END
#endif

#if !defined(__aarch64__)
// packed_gemm below AVX2 on x86: per row of A and panel of B, 16 sums the compiler vectorises (SSE
// on x86-64-v2), then the epilogue through finish_row. Rows in parallel.
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
#endif

void packed_gemm(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                 int64_t ldc, const GemmEpilogue& e) {
  if (m == 0 || b.n() == 0) return;
  if (e.a_scale != nullptr && (m == 1 || !has_avx2())) {
    // The forms that do not pack A (a matrix-vector product, the portable GEMM) take A scaled
    // into a copy.
    std::vector<float> scaled(static_cast<size_t>(m * b.k()));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < b.k(); ++j) scaled[i * b.k() + j] = a[i * lda + j] * e.a_scale[j];
    GemmEpilogue plain = e;
    plain.a_scale = nullptr;
    return packed_gemm(m, scaled.data(), b.k(), b, c, ldc, plain);
  }
#if LUMEN_X86
  if (has_avx512()) return packed_gemm_avx512(m, a, lda, b, c, ldc, e);
  if (has_avx2()) return gemm_tiles(m, a, lda, b, c, ldc, e);
#endif
#if defined(__aarch64__)
  packed_gemm_neon(m, a, lda, b, c, ldc, e);
#else
  packed_gemm_portable(m, a, lda, b, c, ldc, e);
#endif
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

void PackedMatrix::evict() const {
  if (data_.defined()) evict_from_caches(data_.raw_data(), data_.nbytes());
}

const float* PackedMatrix::panel(int64_t k0, int64_t jp) const {
  return data_.data<float>() + (jp * k_ + k0) * kNr;
}

}  // namespace lumen::cpu
