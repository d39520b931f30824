// The float32 building blocks of the CPU attention kernels (attention_block.h): register-blocked
// micro-kernels sized for AVX2 (or AVX-512 where the CPU has it; plain SSE on older CPUs):
// kPanel query rows times two vectors of columns (12 vector accumulators, GCC vector extensions)
// advanced by one rank-1 update per step.
#include "backends/cpu/attention_block.h"

#include <cmath>
#include <cstring>

#include "backends/cpu/isa.h"
#include "backends/cpu/simd_math.h"

namespace lumen::cpu {
namespace {

constexpr int kPanel = 6;          // query rows per full micro-kernel call
constexpr int64_t kMaxLanes = 32;  // widest tile: two AVX-512 vectors

// Eight and sixteen floats. Loaded and stored through memcpy (an unaligned vector move): an
// alignment attribute on the typedef would be dropped when it is passed as a template argument.
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));

template <typename V>
[[gnu::always_inline]] inline void load(V* v, const float* p) {
  std::memcpy(v, p, sizeof(V));
}

template <typename V>
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

// out[r][j] = scales[r] * sum_d a[r][d] * b[d][j] for kRows rows of a (stride lda) and two
// vectors' worth of columns of b (stride ldb); out has stride ldo. The kRows x 2 accumulators (12
// registers for kRows = 6) stay in registers across the depth loop. Always inlined, so that it is
// compiled for the instruction set of the block_product it serves.
template <typename V, int kRows>
[[gnu::always_inline]] inline void panel_full(const float* a, int64_t lda, const float* b,
                                              int64_t ldb, int64_t depth, const float* scales,
                                              float* out, int64_t ldo) {
  constexpr int kW = sizeof(V) / sizeof(float);
  V acc[kRows][2];
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = V{};
  for (int64_t d = 0; d < depth; ++d) {
    V b0, b1;
    load(&b0, b + d * ldb);
    load(&b1, b + d * ldb + kW);
    for (int r = 0; r < kRows; ++r) {
      const float av = a[r * lda + d];
      acc[r][0] += av * b0;
      acc[r][1] += av * b1;
    }
  }
  for (int r = 0; r < kRows; ++r) {
    store<V>(out + r * ldo, acc[r][0] * scales[r]);
    store<V>(out + r * ldo + kW, acc[r][1] * scales[r]);
  }
}

// The same for one row and len (< kMaxLanes) columns: the right edge of a product.
[[gnu::always_inline]] inline void panel_edge(const float* a, const float* b, int64_t ldb,
                                              int64_t depth, int64_t len, float scale, float* out) {
  float acc[kMaxLanes] = {};
  for (int64_t d = 0; d < depth; ++d) {
    const float av = a[d];
    const float* brow = b + d * ldb;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) acc[j] += av * brow[j];
  }
  for (int64_t j = 0; j < len; ++j) out[j] = acc[j] * scale;
}

// out[r][c] = scales[r] * sum_d a[r][d] * b[d][c] for `rows` rows and `cols` columns: full
// kPanel-row tiles two vectors wide, then smaller row panels, then the column edge row by row.
template <typename V>
[[gnu::always_inline]] inline void block_product(const float* a, int64_t lda, const float* b,
                                                 int64_t ldb, int64_t rows, int64_t depth,
                                                 int64_t cols, const float* scales, float* out,
                                                 int64_t ldo) {
  constexpr int64_t kLanes = 2 * sizeof(V) / sizeof(float);
  const int64_t full_cols = cols / kLanes * kLanes;
  for (int64_t c = 0; c < full_cols; c += kLanes) {
    int64_t r = 0;
    for (; r + kPanel <= rows; r += kPanel)
      panel_full<V, kPanel>(a + r * lda, lda, b + c, ldb, depth, scales + r, out + r * ldo + c,
                            ldo);
    for (; r + 3 <= rows; r += 3)
      panel_full<V, 3>(a + r * lda, lda, b + c, ldb, depth, scales + r, out + r * ldo + c, ldo);
    for (; r < rows; ++r)
      panel_full<V, 1>(a + r * lda, lda, b + c, ldb, depth, scales + r, out + r * ldo + c, ldo);
  }
  if (full_cols < cols)
    for (int64_t r = 0; r < rows; ++r)
      panel_edge(a + r * lda, b + full_cols, ldb, depth, cols - full_cols, scales[r],
                 out + r * ldo + full_cols);
}

// The x86-64-v2 baseline (each Vec8 in two SSE registers), and other architectures.
void block_product_baseline(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows,
                            int64_t depth, int64_t cols, const float* scales, float* out,
                            int64_t ldo) {
  block_product<Vec8>(a, lda, b, ldb, rows, depth, cols, scales, out, ldo);
}

#if LUMEN_X86
// AVX2 + FMA.
LUMEN_TARGET_AVX2 void block_product_avx2(const float* a, int64_t lda, const float* b, int64_t ldb,
                                          int64_t rows, int64_t depth, int64_t cols,
                                          const float* scales, float* out, int64_t ldo) {
  block_product<Vec8>(a, lda, b, ldb, rows, depth, cols, scales, out, ldo);
}

// AVX-512, chosen at kernel build time where the CPU has it: twice the width, as oneDNN's own
// matmul uses on such machines (measured on [12, 128, 64] causal attention, one thread: AVX2
// 0.77 ms against 0.55 ms for oneDNN MatMul + Softmax + MatMul).
LUMEN_TARGET_AVX512 void block_product_avx512(const float* a, int64_t lda, const float* b,
                                              int64_t ldb, int64_t rows, int64_t depth,
                                              int64_t cols, const float* scales, float* out,
                                              int64_t ldo) {
  block_product<Vec16>(a, lda, b, ldb, rows, depth, cols, scales, out, ldo);
}
#endif

}  // namespace

BlockProduct attention_block_product() {
#if LUMEN_X86
  if (has_avx512()) return &block_product_avx512;
  if (has_avx2()) return &block_product_avx2;
#endif
  return &block_product_baseline;
}

int64_t attention_block_lanes() {
  return has_avx512() ? 32 : 16;
}

// s[j] = e^(s[j] - shift) for j < n, returning the sum; s has room for n rounded up to 8 (the
// lanes past n are written, not summed). -inf gives 0 (exp8's clamp alone would give e^-87.3), NaN
// stays NaN. exp8 instead of norm_math.h's portable exp (vectorised by the compiler, in two
// passes): vit_b_16's attention steps 956-994 -> 888-916 us each (12 alternating runs in one
// process).
#if LUMEN_X86
LUMEN_AVX2_BEGIN
float exp_shifted_sum8_avx2(float* s, float shift, int64_t n) {
  const __m256 sh = _mm256_set1_ps(shift), minus_inf = _mm256_set1_ps(-INFINITY);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; j += 8) {
    const __m256 x = _mm256_sub_ps(_mm256_loadu_ps(s + j), sh);
    __m256 e = _mm256_and_ps(exp8(x), _mm256_cmp_ps(x, minus_inf, _CMP_NEQ_UQ));
    _mm256_storeu_ps(s + j, e);
    if (n - j < 8) {
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - j)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      e = _mm256_and_ps(e, _mm256_castsi256_ps(live));
    }
    acc = _mm256_add_ps(acc, e);
  }
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

LUMEN_ISA_END
#endif

float exp_shifted_sum8(float* s, float shift, int64_t n) {
#if LUMEN_X86
  if (has_avx2()) return exp_shifted_sum8_avx2(s, shift, n);
#endif
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const float x = s[j] - shift;
    s[j] = x == -INFINITY ? 0.0f : std::exp(x);
    sum += s[j];
  }
  return sum;
}

}  // namespace lumen::cpu
