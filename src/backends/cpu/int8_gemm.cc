// The int8 GEMM of int8_gemm.h: A is packed per call into panels of 6 rows of int16 pairs (its zero
// point subtracted), B at compile time into panels of 16 columns; a 6 x 16 AVX2 micro-kernel keeps
// 12 int32 accumulators in registers (vpmaddwd + vpaddd per 8 columns and pair of k), and each tile
// is requantized from a buffer on the stack while it is still in cache.
#include "backends/cpu/int8_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "backends/cpu/isa.h"
#include "backends/cpu/quant_math.h"

#if LUMEN_X86
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

constexpr int64_t kNr = 16;                 // columns of a B panel (two AVX2 registers)
constexpr int64_t kMr = 6;                  // rows of an A panel (one micro-kernel call)
constexpr int64_t kTileRowPanels = 8;       // A panels per tile: 48 rows
constexpr int64_t kTileColPanels = 4;       // B panels per tile: 64 columns
constexpr int64_t kKcPairs = 128;           // pairs of k per block: a panel's block is 8 KiB, in L1
constexpr int64_t kParallelMacs = 1 << 19;  // multiply-adds below which one thread runs

// Two int16 in one int32 word, the first in the low half (the order vpmaddwd pairs them).
int32_t pair_word(int32_t lo, int32_t hi) {
  return static_cast<int32_t>((static_cast<uint32_t>(static_cast<uint16_t>(lo))) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}

// One output rounded the reference kernels' way (Int8GemmOutput).
template <typename YT>
YT requantize_one(int32_t acc, int32_t bias, double scale, float y_zero, float lo, float hi) {
  const auto f = static_cast<float>((static_cast<double>(acc) + bias) * scale);
  return static_cast<YT>(
      static_cast<int32_t>(std::min(std::max(std::nearbyint(f) + y_zero, lo), hi)));
}

}  // namespace

Int8PackedMatrix::Int8PackedMatrix(const int8_t* b, int64_t k, int64_t n) : k_(k), n_(n) {
  const int64_t panels = (n + kNr - 1) / kNr, np = pairs();
  data_ = Tensor::empty({std::max<int64_t>(panels * np * kNr, 1)}, DType::kInt32);
  int32_t* d = data_.data<int32_t>();
  for (int64_t jp = 0; jp < panels; ++jp)
    for (int64_t p = 0; p < np; ++p)
      for (int64_t j = 0; j < kNr; ++j) {
        const int64_t col = jp * kNr + j, r0 = 2 * p, r1 = 2 * p + 1;
        const int32_t v0 = col < n ? b[r0 * n + col] : 0;
        const int32_t v1 = col < n && r1 < k ? b[r1 * n + col] : 0;
        d[(jp * np + p) * kNr + j] = pair_word(v0, v1);
      }
}

const int32_t* Int8PackedMatrix::panel(int64_t p0, int64_t jp) const {
  return data_.data<int32_t>() + (jp * pairs() + p0) * kNr;
}

#if LUMEN_X86
LUMEN_AVX2_BEGIN
namespace {

// c (6 x 16, ldc apart) (+)= the A panel's pairs [0, kc) (6 words per pair) x the B panel's (16
// words per pair). The 12 accumulators are named variables: as an array GCC kept half of them on
// the stack (33 GMAC/s on one Zen core, 3x below this form).
inline void micro_kernel(const int32_t* a, int64_t kc, const int32_t* b, int32_t* c, int64_t ldc,
                         bool load_c) {
  auto load = [&](int64_t r, int64_t h) {
    return load_c ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + r * ldc + 8 * h))
                  : _mm256_setzero_si256();
  };
  __m256i c00 = load(0, 0), c01 = load(0, 1), c10 = load(1, 0), c11 = load(1, 1);
  __m256i c20 = load(2, 0), c21 = load(2, 1), c30 = load(3, 0), c31 = load(3, 1);
  __m256i c40 = load(4, 0), c41 = load(4, 1), c50 = load(5, 0), c51 = load(5, 1);
  for (int64_t p = 0; p < kc; ++p, a += kMr, b += kNr) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8));
    __m256i av = _mm256_set1_epi32(a[0]);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(av, b0));
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[1]);
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(av, b0));
    c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[2]);
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(av, b0));
    c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[3]);
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(av, b0));
    c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[4]);
    c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(av, b0));
    c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a[5]);
    c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(av, b0));
    c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(av, b1));
  }
  auto store = [&](int64_t r, __m256i lo, __m256i hi) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc + 8), hi);
  };
  store(0, c00, c01);
  store(1, c10, c11);
  store(2, c20, c21);
  store(3, c30, c31);
  store(4, c40, c41);
  store(5, c50, c51);
}

// The same for one row (a matrix-vector product: the other five would be zero rows).
inline void row_kernel(const int32_t* a, int64_t kc, const int32_t* b, int32_t* c, bool load_c) {
  __m256i c0 =
      load_c ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)) : _mm256_setzero_si256();
  __m256i c1 =
      load_c ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 8)) : _mm256_setzero_si256();
  for (int64_t p = 0; p < kc; ++p, a += kMr, b += kNr) {
    const __m256i av = _mm256_set1_epi32(a[0]);
    c0 = _mm256_add_epi32(
        c0, _mm256_madd_epi16(av, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b))));
    c1 = _mm256_add_epi32(
        c1, _mm256_madd_epi16(av, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8))));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), c0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8), c1);
}

// A panel's rows past m are zero in the packed A and land in the tile buffer's spare rows, so
// every panel but a lone row runs the 6-row kernel.
void run_micro_kernel(int64_t rows, const int32_t* a, int64_t kc, const int32_t* b, int32_t* c,
                      int64_t ldc, bool load_c) {
  if (rows == 1)
    row_kernel(a, kc, b, c, load_c);
  else
    micro_kernel(a, kc, b, c, ldc, load_c);
}

// Rows [r0, r0 + 6) of A (fewer at the end, the rest zero) minus a_zero as one panel: per pair p,
// 6 words (pair_word of columns 2p and 2p + 1; a column past k is zero).
template <typename AT>
void pack_a_panel(const AT* a, int64_t lda, int64_t rows, int64_t k, int32_t a_zero, int32_t* dst) {
  const int64_t np = (k + 1) / 2, full = k / 2;
  for (int64_t r = 0; r < kMr; ++r) {
    int32_t* d = dst + r;
    if (r >= rows) {
      for (int64_t p = 0; p < np; ++p) d[p * kMr] = 0;
      continue;
    }
    const AT* row = a + r * lda;
    int64_t p = 0;
    // 16 columns (8 pairs) at a time: widen to int16, subtract the zero point, store 8 words.
    const __m256i zero = _mm256_set1_epi16(static_cast<int16_t>(a_zero));
    for (; p + 8 <= full; p += 8) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * p));
      __m256i wide;
      if constexpr (std::is_signed_v<AT>)
        wide = _mm256_cvtepi8_epi16(bytes);
      else
        wide = _mm256_cvtepu8_epi16(bytes);
      alignas(32) int32_t words[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(words), _mm256_sub_epi16(wide, zero));
      for (int64_t i = 0; i < 8; ++i) d[(p + i) * kMr] = words[i];
    }
    for (; p < np; ++p) {
      const int32_t v0 = row[2 * p] - a_zero;
      const int32_t v1 = 2 * p + 1 < k ? row[2 * p + 1] - a_zero : 0;
      d[p * kMr] = pair_word(v0, v1);
    }
  }
}

// Requantizes `rows` rows of `cols` sums (rows ldc apart in c, column 0 being output column col0)
// into out.
template <typename YT>
void requantize_tile(const int32_t* c, int64_t ldc, int64_t rows, int64_t cols, int64_t row0,
                     int64_t col0, const Int8GemmOutput& out) {
  const float lo = static_cast<float>(quant_min(out.dtype));
  const float hi = static_cast<float>(quant_max(out.dtype));
  const float fz = static_cast<float>(out.y_zero);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi), vz = _mm256_set1_ps(fz);
  const double* scale = out.scale + col0;
  const int32_t* bias = out.bias ? out.bias + col0 : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* src = c + r * ldc;
    YT* y = static_cast<YT*>(out.y) + (row0 + r) * out.ldy + col0;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j));
      __m256d d0 = _mm256_cvtepi32_pd(_mm256_castsi256_si128(v));
      __m256d d1 = _mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1));
      if (bias) {
        const __m256i bv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + j));
        d0 = _mm256_add_pd(d0, _mm256_cvtepi32_pd(_mm256_castsi256_si128(bv)));
        d1 = _mm256_add_pd(d1, _mm256_cvtepi32_pd(_mm256_extracti128_si256(bv, 1)));
      }
      d0 = _mm256_mul_pd(d0, _mm256_loadu_pd(scale + j));
      d1 = _mm256_mul_pd(d1, _mm256_loadu_pd(scale + j + 4));
      __m256 f = _mm256_set_m128(_mm256_cvtpd_ps(d1), _mm256_cvtpd_ps(d0));
      f = _mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      f = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(f, vz), vlo), vhi);
      const __m256i q = _mm256_cvtps_epi32(f);
      const __m128i q16 =
          _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      __m128i q8;
      if constexpr (std::is_signed_v<YT>)
        q8 = _mm_packs_epi16(q16, q16);
      else
        q8 = _mm_packus_epi16(q16, q16);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(y + j), q8);
    }
    for (; j < cols; ++j)
      y[j] = requantize_one<YT>(src[j], bias ? bias[j] : 0, scale[j], fz, lo, hi);
  }
}

template <typename AT>
void gemm_avx2(int64_t m, const AT* a, int32_t a_zero, int64_t lda, const Int8PackedMatrix& b,
               const Int8GemmOutput& out) {
  const int64_t k = b.k(), n = b.n(), np = b.pairs();
  const int64_t row_panels = (m + kMr - 1) / kMr, col_panels = (n + kNr - 1) / kNr;
  const bool parallel = m * n * k > kParallelMacs && !omp_in_parallel();
  // A packed once for all tiles: panel rp holds rows [6 rp, 6 rp + 6), np * 6 words.
  Tensor packed = Tensor::empty({std::max<int64_t>(row_panels * np * kMr, 1)}, DType::kInt32);
  int32_t* pa = packed.data<int32_t>();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t rp = 0; rp < row_panels; ++rp)
    pack_a_panel(a + rp * kMr * lda, lda, std::min(kMr, m - rp * kMr), k, a_zero,
                 pa + rp * np * kMr);
  const int64_t row_tiles = (row_panels + kTileRowPanels - 1) / kTileRowPanels;
  const int64_t col_tiles = (col_panels + kTileColPanels - 1) / kTileColPanels;
  const int64_t tiles = row_tiles * col_tiles;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < tiles; ++t) {
    // Column tiles outermost per thread's share: neighbouring tiles share B's panels.
    const int64_t ct = t / row_tiles, rt = t % row_tiles;
    const int64_t rp0 = rt * kTileRowPanels, rp1 = std::min(row_panels, rp0 + kTileRowPanels);
    const int64_t jp0 = ct * kTileColPanels, jp1 = std::min(col_panels, jp0 + kTileColPanels);
    constexpr int64_t kLdc = kTileColPanels * kNr;
    alignas(32) int32_t c[kTileRowPanels * kMr * kLdc];
    for (int64_t p0 = 0; p0 < np; p0 += kKcPairs) {
      const int64_t kc = std::min(kKcPairs, np - p0);
      for (int64_t jp = jp0; jp < jp1; ++jp) {
        const int32_t* bp = b.panel(p0, jp);
        for (int64_t rp = rp0; rp < rp1; ++rp)
          run_micro_kernel(std::min(kMr, m - rp * kMr), pa + (rp * np + p0) * kMr, kc, bp,
                           c + (rp - rp0) * kMr * kLdc + (jp - jp0) * kNr, kLdc, p0 > 0);
      }
    }
    const int64_t row0 = rp0 * kMr, rows = std::min(m, rp1 * kMr) - row0;
    const int64_t col0 = jp0 * kNr, cols = std::min(n, jp1 * kNr) - col0;
    if (out.dtype == DType::kInt8)
      requantize_tile<int8_t>(c, kLdc, rows, cols, row0, col0, out);
    else
      requantize_tile<uint8_t>(c, kLdc, rows, cols, row0, col0, out);
  }
}

}  // namespace
LUMEN_ISA_END
#endif

void int8_gemm(int64_t m, const void* a, bool a_signed, int32_t a_zero, int64_t lda,
               const Int8PackedMatrix& b, const Int8GemmOutput& out) {
#if LUMEN_X86
  if (has_avx2()) {
    if (a_signed)
      gemm_avx2(m, static_cast<const int8_t*>(a), a_zero, lda, b, out);
    else
      gemm_avx2(m, static_cast<const uint8_t*>(a), a_zero, lda, b, out);
    return;
  }
#endif
  (void)m, (void)a, (void)a_signed, (void)a_zero, (void)lda, (void)b, (void)out;
  throw UnsupportedOp("int8_gemm: needs AVX2");
}

namespace {

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point; everything
// but a read at compile time.
class Int8GemmMatMulKernel final : public Kernel {
 public:
  Int8GemmMatMulKernel(const Tensor& b, bool a_signed, int32_t a_zero, std::vector<double> scale,
                       int32_t y_zero, DType out)
      : b_(b.data<int8_t>(), b.shape()[0], b.shape()[1]),
        scale_(std::move(scale)),
        a_signed_(a_signed),
        a_zero_(a_zero),
        y_zero_(y_zero),
        out_(out) {}

  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.inputs[0];
    const int64_t rows = a.numel() / b_.k();
    if (rows == 0) return;
    Int8GemmOutput out;
    out.scale = scale_.data();
    out.y_zero = y_zero_;
    out.dtype = out_;
    out.y = ctx.outputs[0].raw_data();
    out.ldy = b_.n();
    int8_gemm(rows, a.raw_data(), a_signed_, a_zero_, b_.k(), b_, out);
  }
  bool reads_input(int k) const override { return k != 3; }
  bool runs_any_shape() const override { return true; }
  std::string describe() const override {
    return "Lumen int8 GEMM (AVX2, int16 pairs: exact without VNNI)";
  }

 private:
  Int8PackedMatrix b_;
  std::vector<double> scale_;
  bool a_signed_;
  int32_t a_zero_, y_zero_;
  DType out_;
};

}  // namespace

std::unique_ptr<Kernel> make_int8_gemm_matmul(const Tensor& b, bool a_signed, int32_t a_zero,
                                              std::vector<double> scale, int32_t y_zero,
                                              DType out) {
  return std::make_unique<Int8GemmMatMulKernel>(b, a_signed, a_zero, std::move(scale), y_zero, out);
}

}  // namespace lumen::cpu
