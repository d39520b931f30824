// The int8 GEMM of int8_gemm.h. Both operands are packed in quads of k (4 bytes of a row of A,
// or of a column of B, in one 32-bit word): A per call into panels of 6 rows (s8 shifted to u8 by
// +128, its zero point with it), B at compile time into panels of 16 columns. vpmaddubsw multiplies
// a broadcast quad of A by 8 columns' quads and adds pairs into int16; vpmaddwd adds those pairs
// into int32. The zero point comes off at the end: sum((a - z) w) = sum(a w) - z sum(w).
//
// Weights within +-64 ("direct"): the int16 pair sums cannot saturate (2 * 255 * 64 < 32768); a
// 6 x 16 micro-kernel keeps 12 int32 accumulators. Weights beyond ("split"): w = 2h + l with
// h = w >> 1 in [-64, 63] and l = w & 1; the h products are exact as above and doubled by the
// vpmaddwd, the l products (at most 510 a pair) are summed in int16 over a block of at most 64
// quads (32640) and widened once; a 2 x 16 micro-kernel (8 accumulators and B's 4 registers).
// On a Zen 3 core (AVX2, no VNNI) the split kernel ran at 62 GMAC/s in L1, the int16-pair form
// (vpmaddwd only, 1 a cycle there) at 48 and the saturating single product at 91.
#include "backends/cpu/int8_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/quant_math.h"

#if LUMEN_X86
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

constexpr int64_t kNr = 16;                 // columns of a B panel (two AVX2 registers)
constexpr int64_t kMr = 6;                  // rows of an A panel
constexpr int64_t kTileRowPanels = 8;       // A panels per tile: 48 rows
constexpr int64_t kTileColPanels = 4;       // B panels per tile: 64 columns
constexpr int64_t kKcQuads = 64;            // quads of k per block (the split kernel's int16 limit)
constexpr int64_t kParallelMacs = 1 << 19;  // multiply-adds below which one thread runs
constexpr int kDirectMaxWeight = 64;        // |w| up to which the direct kernel is exact

// Four bytes in one word, the first in the low byte (the order vpmaddubsw pairs them).
int32_t quad_word(const uint8_t (&v)[4]) {
  return static_cast<int32_t>(v[0] | (static_cast<uint32_t>(v[1]) << 8) |
                              (static_cast<uint32_t>(v[2]) << 16) |
                              (static_cast<uint32_t>(v[3]) << 24));
}

// One output rounded the reference kernels' way (Int8GemmOutput).
template <typename YT>
YT requantize_one(int32_t acc, double offset, double scale, float y_zero, float lo, float hi) {
  const auto f = static_cast<float>((static_cast<double>(acc) + offset) * scale);
  return static_cast<YT>(
      static_cast<int32_t>(std::min(std::max(std::nearbyint(f) + y_zero, lo), hi)));
}

}  // namespace

Int8PackedMatrix::Int8PackedMatrix(const int8_t* b, int64_t k, int64_t n, uint8_t flip)
    : k_(k), n_(n) {
  // Element (row, col) as a signed value in [-128, 127].
  auto at = [&](int64_t row, int64_t col) {
    const int v = static_cast<uint8_t>(b[row * n + col]) ^ flip;
    return v >= 128 ? v - 256 : v;
  };
  // Column sums and the largest magnitude, row by row (contiguous reads).
  sums_ = Tensor::empty({std::max<int64_t>(n, 1)}, DType::kInt32);
  int32_t* sums = sums_.data<int32_t>();
  std::fill(sums, sums + n, 0);
  int max_abs = 0;
  for (int64_t row = 0; row < k; ++row)
    for (int64_t col = 0; col < n; ++col) {
      const int w = at(row, col);
      sums[col] += w;
      max_abs = std::max(max_abs, std::abs(w));
    }
  split_ = max_abs > kDirectMaxWeight;
  const int64_t panels = (n + kNr - 1) / kNr, nq = quads(), step = quad_step();
  data_ = Tensor::empty({std::max<int64_t>(panels * nq * step, 1)}, DType::kInt32);
  int32_t* d = data_.data<int32_t>();
  for (int64_t jp = 0; jp < panels; ++jp)
    for (int64_t q = 0; q < nq; ++q)
      for (int64_t j = 0; j < kNr; ++j) {
        const int64_t col = jp * kNr + j;
        uint8_t whole[4] = {}, hi[4] = {}, lo[4] = {};
        for (int64_t t = 0; t < 4; ++t) {
          const int64_t row = 4 * q + t;
          if (col >= n || row >= k) continue;
          const int w = at(row, col);
          whole[t] = static_cast<uint8_t>(w);
          hi[t] = static_cast<uint8_t>(w >> 1);
          lo[t] = static_cast<uint8_t>(w & 1);
        }
        int32_t* dst = d + (jp * nq + q) * step;
        if (split_) {
          dst[j] = quad_word(hi);
          dst[kNr + j] = quad_word(lo);
        } else {
          dst[j] = quad_word(whole);
        }
      }
}

const int32_t* Int8PackedMatrix::panel(int64_t q0, int64_t jp) const {
  return data_.data<int32_t>() + (jp * quads() + q0) * quad_step();
}

const int32_t* Int8PackedMatrix::column_sums() const {
  return sums_.data<int32_t>();
}

#if LUMEN_X86
LUMEN_AVX2_BEGIN
namespace {

// c (6 x 16, ldc apart) (+)= the A panel's quads [0, kc) (6 words a quad) x the B panel's (16 words
// a quad), weights within +-64. The 12 accumulators are named variables: as an array GCC kept
// half of them on the stack.
__attribute__((noinline)) void direct_kernel(const int32_t* a, int64_t kc, const int32_t* b,
                                             int32_t* c, int64_t ldc, bool load_c) {
  auto load = [&](int64_t r, int64_t h) {
    return load_c ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + r * ldc + 8 * h))
                  : _mm256_setzero_si256();
  };
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c00 = load(0, 0), c01 = load(0, 1), c10 = load(1, 0), c11 = load(1, 1);
  __m256i c20 = load(2, 0), c21 = load(2, 1), c30 = load(3, 0), c31 = load(3, 1);
  __m256i c40 = load(4, 0), c41 = load(4, 1), c50 = load(5, 0), c51 = load(5, 1);
  auto madd = [&](__m256i acc, __m256i av, __m256i bv) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(av, bv), ones));
  };
  for (int64_t q = 0; q < kc; ++q, a += kMr, b += kNr) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8));
    __m256i av = _mm256_set1_epi32(a[0]);
    c00 = madd(c00, av, b0);
    c01 = madd(c01, av, b1);
    av = _mm256_set1_epi32(a[1]);
    c10 = madd(c10, av, b0);
    c11 = madd(c11, av, b1);
    av = _mm256_set1_epi32(a[2]);
    c20 = madd(c20, av, b0);
    c21 = madd(c21, av, b1);
    av = _mm256_set1_epi32(a[3]);
    c30 = madd(c30, av, b0);
    c31 = madd(c31, av, b1);
    av = _mm256_set1_epi32(a[4]);
    c40 = madd(c40, av, b0);
    c41 = madd(c41, av, b1);
    av = _mm256_set1_epi32(a[5]);
    c50 = madd(c50, av, b0);
    c51 = madd(c51, av, b1);
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

// c (2 x 16) (+)= two rows of an A panel (6 words a quad) x a split B panel (per quad 16 words of
// h, then 16 of l), kc at most kKcQuads (the l sums' int16 limit).
__attribute__((noinline)) void split_kernel(const int32_t* a, int64_t kc, const int32_t* b,
                                            int32_t* c, int64_t ldc, bool load_c) {
  auto load = [&](int64_t r, int64_t h) {
    return load_c ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + r * ldc + 8 * h))
                  : _mm256_setzero_si256();
  };
  const __m256i twos = _mm256_set1_epi16(2);
  __m256i c00 = load(0, 0), c01 = load(0, 1), c10 = load(1, 0), c11 = load(1, 1);
  __m256i u00 = _mm256_setzero_si256(), u01 = u00, u10 = u00, u11 = u00;
  for (int64_t q = 0; q < kc; ++q, a += kMr, b += 2 * kNr) {
    const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8));
    const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 24));
    __m256i av = _mm256_set1_epi32(a[0]);
    c00 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(av, h0), twos), c00);
    c01 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(av, h1), twos), c01);
    u00 = _mm256_add_epi16(_mm256_maddubs_epi16(av, l0), u00);
    u01 = _mm256_add_epi16(_mm256_maddubs_epi16(av, l1), u01);
    av = _mm256_set1_epi32(a[1]);
    c10 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(av, h0), twos), c10);
    c11 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(av, h1), twos), c11);
    u10 = _mm256_add_epi16(_mm256_maddubs_epi16(av, l0), u10);
    u11 = _mm256_add_epi16(_mm256_maddubs_epi16(av, l1), u11);
    // Pins the accumulators to registers across iterations (GCC otherwise copies them each time
    // and spills one).
    asm(""
        : "+x"(c00), "+x"(c01), "+x"(c10), "+x"(c11), "+x"(u00), "+x"(u01), "+x"(u10), "+x"(u11));
  }
  const __m256i ones = _mm256_set1_epi16(1);
  auto store = [&](int64_t r, __m256i lo, __m256i ulo, __m256i hi, __m256i uhi) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc),
                        _mm256_add_epi32(lo, _mm256_madd_epi16(ulo, ones)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc + 8),
                        _mm256_add_epi32(hi, _mm256_madd_epi16(uhi, ones)));
  };
  store(0, c00, u00, c01, u01);
  store(1, c10, u10, c11, u11);
}

// One A panel (6 rows, those past m zero) by one B panel.
void panel_product(bool split, const int32_t* a, int64_t kc, const int32_t* b, int32_t* c,
                   int64_t ldc, bool load_c) {
  if (!split) return direct_kernel(a, kc, b, c, ldc, load_c);
  for (int64_t r = 0; r < kMr; r += 2) split_kernel(a + r, kc, b, c + r * ldc, ldc, load_c);
}

// Rows [r0, r0 + 6) of A (fewer at the end, the rest zero) as one panel: per quad q, 6 words of
// the row's bytes 4q .. 4q + 3 as u8 (s8 + 128; a byte past k zero).
template <typename AT>
void pack_a_panel(const AT* a, int64_t lda, int64_t rows, int64_t k, int32_t* dst) {
  const int64_t nq = (k + 3) / 4, full = k / 4;
  const uint32_t flip = std::is_signed_v<AT> ? 0x80808080u : 0;
  for (int64_t r = 0; r < kMr; ++r) {
    int32_t* d = dst + r;
    if (r >= rows) {
      for (int64_t q = 0; q < nq; ++q) d[q * kMr] = 0;
      continue;
    }
    const auto* row = reinterpret_cast<const uint8_t*>(a + r * lda);
    for (int64_t q = 0; q < full; ++q) {
      uint32_t w;
      std::memcpy(&w, row + 4 * q, 4);
      d[q * kMr] = static_cast<int32_t>(w ^ flip);
    }
    if (full < nq) {
      uint8_t v[4] = {};
      for (int64_t t = 0; 4 * full + t < k; ++t)
        v[t] = static_cast<uint8_t>(row[4 * full + t] ^ static_cast<uint8_t>(flip));
      d[full * kMr] = quad_word(v);
    }
  }
}

// Requantizes `rows` rows of `cols` sums (rows ldc apart in c, column 0 being output column col0)
// plus offset[col] (the bias less the zero point's share, exact in double) into out.
template <typename YT>
void requantize_tile(const int32_t* c, int64_t ldc, int64_t rows, int64_t cols, int64_t row0,
                     int64_t col0, const double* offset, const Int8GemmOutput& out) {
  const float lo = static_cast<float>(quant_min(out.dtype));
  const float hi = static_cast<float>(quant_max(out.dtype));
  const float fz = static_cast<float>(out.y_zero);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi), vz = _mm256_set1_ps(fz);
  const double* scale = out.scale + col0;
  const double* off = offset + col0;
  for (int64_t r = 0; r < rows; ++r) {
    const double ro = out.row_offset ? out.row_offset[row0 + r] : 0.0;
    const __m256d vro = _mm256_set1_pd(ro);
    const int32_t* src = c + r * ldc;
    YT* y = static_cast<YT*>(out.y) + (row0 + r) * out.ldy + col0;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j));
      __m256d d0 = _mm256_cvtepi32_pd(_mm256_castsi256_si128(v));
      __m256d d1 = _mm256_cvtepi32_pd(_mm256_extracti128_si256(v, 1));
      d0 = _mm256_add_pd(_mm256_add_pd(d0, _mm256_loadu_pd(off + j)), vro);
      d1 = _mm256_add_pd(_mm256_add_pd(d1, _mm256_loadu_pd(off + j + 4)), vro);
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
    for (; j < cols; ++j) y[j] = requantize_one<YT>(src[j], off[j] + ro, scale[j], fz, lo, hi);
  }
}

template <typename AT>
void gemm_avx2(int64_t m, const AT* a, int32_t a_zero, int64_t lda, const Int8PackedMatrix& b,
               const Int8GemmOutput& out) {
  const int64_t k = b.k(), n = b.n(), nq = b.quads();
  const int64_t row_panels = (m + kMr - 1) / kMr, col_panels = (n + kNr - 1) / kNr;
  const bool parallel = m * n * k > kParallelMacs && !omp_in_parallel();
  // The sums are of u8 A (s8 + 128): its zero point moves with it, and comes off through B's
  // column sums, with the bias, as one offset per column.
  const double zero = a_zero + (std::is_signed_v<AT> ? 128 : 0);
  std::vector<double> offset(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    offset[j] = (out.bias ? out.bias[j] : 0.0) - zero * b.column_sums()[j];
  // A packed once for all tiles: panel rp holds rows [6 rp, 6 rp + 6), nq * 6 words.
  Tensor packed = Tensor::empty({std::max<int64_t>(row_panels * nq * kMr, 1)}, DType::kInt32);
  int32_t* pa = packed.data<int32_t>();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t rp = 0; rp < row_panels; ++rp)
    pack_a_panel(a + rp * kMr * lda, lda, std::min(kMr, m - rp * kMr), k, pa + rp * nq * kMr);
  const int64_t row_tiles = (row_panels + kTileRowPanels - 1) / kTileRowPanels;
  const int64_t col_tiles = (col_panels + kTileColPanels - 1) / kTileColPanels;
  const int64_t tiles = row_tiles * col_tiles;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < tiles; ++t) {
    // Row tiles innermost: a thread's consecutive tiles share B's panels.
    const int64_t ct = t / row_tiles, rt = t % row_tiles;
    const int64_t rp0 = rt * kTileRowPanels, rp1 = std::min(row_panels, rp0 + kTileRowPanels);
    const int64_t jp0 = ct * kTileColPanels, jp1 = std::min(col_panels, jp0 + kTileColPanels);
    constexpr int64_t kLdc = kTileColPanels * kNr;
    alignas(32) int32_t c[kTileRowPanels * kMr * kLdc];
    if (nq == 0) std::fill(std::begin(c), std::end(c), 0);  // k = 0: every sum is zero
    for (int64_t q0 = 0; q0 < nq; q0 += kKcQuads) {
      const int64_t kc = std::min(kKcQuads, nq - q0);
      for (int64_t jp = jp0; jp < jp1; ++jp) {
        const int32_t* bp = b.panel(q0, jp);
        for (int64_t rp = rp0; rp < rp1; ++rp)
          panel_product(b.split(), pa + (rp * nq + q0) * kMr, kc, bp,
                        c + (rp - rp0) * kMr * kLdc + (jp - jp0) * kNr, kLdc, q0 > 0);
      }
    }
    const int64_t row0 = rp0 * kMr, rows = std::min(m, rp1 * kMr) - row0;
    const int64_t col0 = jp0 * kNr, cols = std::min(n, jp1 * kNr) - col0;
    if (out.dtype == DType::kInt8)
      requantize_tile<int8_t>(c, kLdc, rows, cols, row0, col0, offset.data(), out);
    else
      requantize_tile<uint8_t>(c, kLdc, rows, cols, row0, col0, offset.data(), out);
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
    return std::string("Lumen int8 GEMM (AVX2, ") +
           (b_.split() ? "weights as 2h + l: exact beyond +-64 without VNNI)"
                       : "weights within +-64)");
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

namespace {

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
class Int8GemmActivationKernel final : public Kernel {
 public:
  Int8GemmActivationKernel(bool a_signed, bool b_unsigned, DType out)
      : a_signed_(a_signed), b_unsigned_(b_unsigned), out_(out) {}

  void run(KernelContext& ctx) const override {
    const Tensor& a = ctx.inputs[0];
    const Tensor& b = ctx.inputs[3];
    const int64_t m = a.shape()[-2], k = a.shape()[-1], n = b.shape()[-1];
    const int64_t batch = m * n > 0 ? ctx.outputs[0].numel() / (m * n) : 0;
    if (batch == 0) return;
    const int32_t az = int_at(ctx.inputs[2], 0), yz = int_at(ctx.inputs[7], 0);
    const int32_t bz = int_at(ctx.inputs[5], 0) - (b_unsigned_ ? 128 : 0);
    const double scale = static_cast<double>(ctx.inputs[1].data<float>()[0]) *
                         ctx.inputs[4].data<float>()[0] / ctx.inputs[6].data<float>()[0];
    const std::vector<double> scales(static_cast<size_t>(n), scale);
    const auto* a_bytes = static_cast<const uint8_t*>(a.raw_data());
    const auto* b_bytes = static_cast<const uint8_t*>(b.raw_data());
    auto* y_bytes = static_cast<uint8_t*>(ctx.outputs[0].raw_data());
    const uint8_t flip = b_unsigned_ ? 0x80 : 0;
#pragma omp parallel for schedule(static) if (batch > 1 && !omp_in_parallel())
    for (int64_t t = 0; t < batch; ++t) {
      // B re-centred to s8 as it is packed.
      const Int8PackedMatrix packed(reinterpret_cast<const int8_t*>(b_bytes + t * k * n), k, n,
                                    flip);
      // sum((a - az)(b - bz)) = sum((a - az) b) - bz sum(a - az), per row.
      const uint8_t* at = a_bytes + t * m * k;
      std::vector<double> row_offset(static_cast<size_t>(m));
      for (int64_t i = 0; i < m; ++i) {
        int64_t sum = 0;
        for (int64_t j = 0; j < k; ++j)
          sum += a_signed_ ? static_cast<int8_t>(at[i * k + j]) : at[i * k + j];
        row_offset[i] = -static_cast<double>(bz) * static_cast<double>(sum - k * az);
      }
      Int8GemmOutput o;
      o.scale = scales.data();
      o.y_zero = yz;
      o.dtype = out_;
      o.y = y_bytes + t * m * n;
      o.ldy = n;
      o.row_offset = row_offset.data();
      int8_gemm(m, at, a_signed_, az, k, packed, o);
    }
  }
  bool runs_any_shape() const override {
    return true;
  }
  std::string describe() const override {
    return "Lumen int8 GEMM (AVX2, B at run time, packed per call)";
  }

 private:
  bool a_signed_, b_unsigned_;
  DType out_;
};

}  // namespace

std::unique_ptr<Kernel> make_int8_gemm_activation_matmul(bool a_signed, bool b_unsigned,
                                                         DType out) {
  return std::make_unique<Int8GemmActivationKernel>(a_signed, b_unsigned, out);
}

}  // namespace lumen::cpu
