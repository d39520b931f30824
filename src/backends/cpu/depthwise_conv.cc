// Depthwise convolution, channels-last. A task is one output row of one image (or, where rows are
// too few to share, a range of its channels). Where every tap of a run of output pixels lies
// inside the input horizontally, the run goes in strips of 8, 4 or 2 pixels (6 for 7-wide
// kernels) per 8-channel vector: per kernel row the kernel's weight vectors stay in registers and
// each input column is loaded once for every sum it feeds. The pixels at the edges go one by one
// over the taps that fall inside the input (padding needs no copy and no zero reads). The sums
// start from the bias (and the residual) and get the activation in registers before their one
// store; a strip runs all the channels of its pixels before the next strip, so the input lines it
// reads serve every vector from L1.
#include "backends/cpu/depthwise_conv.h"

#include <omp.h>

#include <algorithm>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_choice.h"
#include "backends/cpu/simd_math.h"
#include "lumen/error.h"

#if LUMEN_X86
#include <immintrin.h>

// The kernel is AVX2 code throughout: depthwise_conv_applies, which is not, admits it only where
// the CPU has AVX2.
LUMEN_AVX2_BEGIN
namespace lumen::cpu {
namespace {

constexpr int64_t kLanes = kDepthwiseLanes;

// Where one output pixel's valid taps lie: kernel rows [kh0, kh1) and columns [kw0, kw1), the
// input pixel of tap (0, 0) at x (which may lie outside the input; only valid taps are read).
struct Taps {
  const float* x;
  int64_t kh0, kh1, kw0, kw1;
};

// Channels [c, c + V * 8) of one output pixel.
template <int V, GemmActivation A>
[[gnu::always_inline]] inline void pixel_block(const Taps& t, int64_t x_row, int64_t x_col,
                                               const float* w, int64_t w_tap, int64_t kernel_w,
                                               const float* bias, float* y, const GemmEpilogue& e,
                                               int64_t c) {
  __m256 acc[V];
  for (int v = 0; v < V; ++v) {
    acc[v] = bias ? _mm256_loadu_ps(bias + c + v * kLanes) : _mm256_setzero_ps();
    if (e.accumulate) acc[v] = _mm256_add_ps(acc[v], _mm256_loadu_ps(y + c + v * kLanes));
  }
  for (int64_t kh = t.kh0; kh < t.kh1; ++kh) {
    const float* xr = t.x + kh * x_row + c;
    const float* wr = w + kh * kernel_w * w_tap + c;
    for (int64_t kw = t.kw0; kw < t.kw1; ++kw)
      for (int v = 0; v < V; ++v)
        acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + kw * x_col + v * kLanes),
                                 _mm256_loadu_ps(wr + kw * w_tap + v * kLanes), acc[v]);
  }
  GemmEpilogue act;
  act.activation = A;
  act.alpha = e.alpha;
  act.beta = e.beta;
  for (int v = 0; v < V; ++v) {
    if constexpr (A != GemmActivation::kNone) acc[v] = activate8(acc[v], act);
    _mm256_storeu_ps(y + c + v * kLanes, acc[v]);
  }
}

// P adjacent output pixels (stride S apart in the input) of one 8-channel vector, all taps inside
// the input horizontally: per kernel row, the KW weight vectors stay in registers and each input
// column is loaded once for every sum it feeds.
template <int KW, int S, int P, GemmActivation A>
[[gnu::always_inline]] inline void strip(const float* x, int64_t x_row, int64_t x_col, int64_t kh0,
                                         int64_t kh1, const float* w, int64_t w_tap,
                                         const float* bias, float* y, int64_t y_col,
                                         const GemmEpilogue& e) {
  __m256 acc[P];
  const __m256 b = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  for (int p = 0; p < P; ++p)
    acc[p] = e.accumulate ? _mm256_add_ps(b, _mm256_loadu_ps(y + p * y_col)) : b;
  constexpr int kCols = (P - 1) * S + KW;
  for (int64_t kh = kh0; kh < kh1; ++kh) {
    const float* xr = x + kh * x_row;
    __m256 wv[KW];
    for (int kw = 0; kw < KW; ++kw) wv[kw] = _mm256_loadu_ps(w + (kh * KW + kw) * w_tap);
#pragma GCC unroll 32
    for (int j = 0; j < kCols; ++j) {
      const __m256 xv = _mm256_loadu_ps(xr + j * x_col);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const int kw = j - p * S;
        if (kw >= 0 && kw < KW) acc[p] = _mm256_fmadd_ps(xv, wv[kw], acc[p]);
      }
    }
  }
  GemmEpilogue act;
  act.activation = A;
  act.alpha = e.alpha;
  act.beta = e.beta;
  for (int p = 0; p < P; ++p) {
    if constexpr (A != GemmActivation::kNone) acc[p] = activate8(acc[p], act);
    _mm256_storeu_ps(y + p * y_col, acc[p]);
  }
}

}  // namespace
LUMEN_ISA_END

bool depthwise_conv_applies(int64_t in_channels, int64_t out_channels, int64_t group,
                            const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& dilations) {
  return has_avx2() && group > 1 && in_channels == group && out_channels == group &&
         kernel.size() == 2 && dilations.size() == 2 && dilations[0] == 1 && dilations[1] == 1;
}

bool depthwise_conv_for_every_activation() {
  return false;
}

LUMEN_AVX2_BEGIN

namespace {

// Output pixels [ow_begin, ow_end) of one row, channels [c0, full) (whole vectors), pixel by
// pixel: the columns where a strip does not fit, or kernels without one.
template <GemmActivation A>
void pixels(const DepthwiseArgs& a, const GemmEpilogue& e, const float* x_img, int64_t ih0,
            int64_t kh0, int64_t kh1, float* y_row, int64_t c0, int64_t full, int64_t ow_begin,
            int64_t ow_end) {
  const int64_t x_col = a.channels, x_row = a.in_w * a.channels;
  for (int64_t ow = ow_begin; ow < ow_end; ++ow) {
    const int64_t iw0 = ow * a.stride_w - a.pad_left;
    const Taps t{x_img + ih0 * x_row + iw0 * x_col, kh0, kh1, std::max<int64_t>(0, -iw0),
                 std::min(a.kernel_w, a.in_w - iw0)};
    float* y_pix = y_row + ow * a.channels;
    int64_t c = c0;
    for (; c + 4 * kLanes <= full; c += 4 * kLanes)
      pixel_block<4, A>(t, x_row, x_col, a.w, a.padded, a.kernel_w, a.bias, y_pix, e, c);
    for (; c < full; c += kLanes)
      pixel_block<1, A>(t, x_row, x_col, a.w, a.padded, a.kernel_w, a.bias, y_pix, e, c);
  }
}

// Output pixels from ow on, while a whole strip of P fits before `hi`, channels [c0, full), all
// the channels of a strip before the next (so the input lines a strip reads serve every vector
// of them from L1); returns the first pixel not done.
template <int KW, int S, int P, GemmActivation A>
int64_t strips(const DepthwiseArgs& a, const GemmEpilogue& e, const float* x_img, int64_t ih0,
               int64_t kh0, int64_t kh1, float* y_row, int64_t c0, int64_t full, int64_t ow,
               int64_t hi) {
  const int64_t x_col = a.channels, x_row = a.in_w * a.channels;
  for (; ow + P <= hi; ow += P) {
    const float* x = x_img + ih0 * x_row + (ow * S - a.pad_left) * x_col;
    float* y = y_row + ow * a.channels;
    for (int64_t c = c0; c < full; c += kLanes)
      strip<KW, S, P, A>(x + c, x_row, x_col, kh0, kh1, a.w + c, a.padded,
                         a.bias ? a.bias + c : nullptr, y + c, a.channels, e);
  }
  return ow;
}

// One output row, channels [c0, full): strips of 8 pixels (6 for 7-wide kernels), then of 4 and
// 2, where every tap lies inside the input horizontally; single pixels at the edges.
template <int KW, int S, GemmActivation A>
void row_strips(const DepthwiseArgs& a, const GemmEpilogue& e, const float* x_img, int64_t ih0,
                int64_t kh0, int64_t kh1, float* y_row, int64_t c0, int64_t full) {
  constexpr int kStrip = KW <= 5 ? 8 : 6;  // pixels per strip
  // Pixels whose taps all lie inside: ow * S >= pad_left and ow * S - pad_left + KW <= in_w.
  const int64_t lo = std::min(a.out_w, (a.pad_left + S - 1) / S);
  const int64_t hi = std::clamp<int64_t>((a.in_w + a.pad_left - KW) / S + 1, lo, a.out_w);
  pixels<A>(a, e, x_img, ih0, kh0, kh1, y_row, c0, full, 0, lo);
  int64_t ow = strips<KW, S, kStrip, A>(a, e, x_img, ih0, kh0, kh1, y_row, c0, full, lo, hi);
  ow = strips<KW, S, 4, A>(a, e, x_img, ih0, kh0, kh1, y_row, c0, full, ow, hi);
  ow = strips<KW, S, 2, A>(a, e, x_img, ih0, kh0, kh1, y_row, c0, full, ow, hi);
  pixels<A>(a, e, x_img, ih0, kh0, kh1, y_row, c0, full, ow, a.out_w);
}

template <GemmActivation A>
void run_task(const DepthwiseArgs& a, const GemmEpilogue& e, int64_t task) {
  const DepthwiseTask at = depthwise_task(a, task);
  const int64_t c0 = at.c0, c1 = at.c1, ih0 = at.ih0, kh0 = at.kh0, kh1 = at.kh1;
  const int64_t x_col = a.channels, x_row = a.in_w * a.channels;
  const float* x_img = a.x + at.n * a.in_h * x_row;
  float* y_row = a.y + at.row * a.out_w * a.channels;
  const int64_t full = c0 + (c1 - c0) / kLanes * kLanes;
  using Row = void (*)(const DepthwiseArgs&, const GemmEpilogue&, const float*, int64_t, int64_t,
                       int64_t, float*, int64_t, int64_t);
  Row strips = nullptr;
  if (a.stride_w == 1 && a.kernel_w == 3) strips = &row_strips<3, 1, A>;
  if (a.stride_w == 2 && a.kernel_w == 3) strips = &row_strips<3, 2, A>;
  if (a.stride_w == 1 && a.kernel_w == 5) strips = &row_strips<5, 1, A>;
  if (a.stride_w == 2 && a.kernel_w == 5) strips = &row_strips<5, 2, A>;
  if (a.stride_w == 1 && a.kernel_w == 7) strips = &row_strips<7, 1, A>;
  if (a.stride_w == 2 && a.kernel_w == 7) strips = &row_strips<7, 2, A>;
  if (strips)
    strips(a, e, x_img, ih0, kh0, kh1, y_row, c0, full);
  else
    pixels<A>(a, e, x_img, ih0, kh0, kh1, y_row, c0, full, 0, a.out_w);
  for (int64_t ow = 0; ow < a.out_w && full < c1; ++ow) {  // channels past the last whole vector
    const int64_t iw0 = ow * a.stride_w - a.pad_left;
    const Taps t{x_img + ih0 * x_row + iw0 * x_col, kh0, kh1, std::max<int64_t>(0, -iw0),
                 std::min(a.kernel_w, a.in_w - iw0)};
    float* y_pix = y_row + ow * a.channels;
    for (int64_t c = full; c < c1; ++c) {
      float acc = (a.bias ? a.bias[c] : 0.0f) + (e.accumulate ? y_pix[c] : 0.0f);
      for (int64_t kh = t.kh0; kh < t.kh1; ++kh)
        for (int64_t kw = t.kw0; kw < t.kw1; ++kw)
          acc += t.x[kh * x_row + kw * x_col + c] * a.w[(kh * a.kernel_w + kw) * a.padded + c];
      y_pix[c] = acc;
      if (A != GemmActivation::kNone) {
        GemmEpilogue act = e;
        act.bias = nullptr;
        finish_row(y_pix + c, 1, c, act);
      }
    }
  }
}

}  // namespace

void DepthwiseConv::run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t stride_h,
                        int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t out_h,
                        int64_t out_w, float* y, const GemmEpilogue& e) const {
  const int64_t rows = batch * out_h;
  if (rows == 0 || out_w == 0 || channels_ == 0) return;
  // Rows are the tasks; where there are fewer than 4 per thread, each row is cut into channel
  // ranges of whole vectors as well.
  const int64_t threads = omp_get_max_threads();
  int64_t chunks = std::min((4 * threads + rows - 1) / rows, padded_ / (4 * kLanes));
  chunks = std::max<int64_t>(chunks, 1);
  const int64_t chunk = (padded_ / kLanes + chunks - 1) / chunks * kLanes;
  chunks = (channels_ + chunk - 1) / chunk;
  const DepthwiseArgs a{x,       in_h,      in_w,   channels_, stride_h,  stride_w,
                        pad_top, pad_left,  out_h,  out_w,     kernel_h_, kernel_w_,
                        padded_, w_.data(), e.bias, y,         chunks,    chunk};
  const bool in_registers = activates_in_registers(e.activation);
  const int64_t tasks = rows * chunks;
  const bool parallel = tasks > 1 && rows * out_w * channels_ * kernel_h_ * kernel_w_ > (1 << 15);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t task = 0; task < tasks; ++task) {
    switch (in_registers ? e.activation : GemmActivation::kNone) {
      case GemmActivation::kRelu:
        run_task<GemmActivation::kRelu>(a, e, task);
        break;
      case GemmActivation::kLeakyRelu:
        run_task<GemmActivation::kLeakyRelu>(a, e, task);
        break;
      case GemmActivation::kClip:
        run_task<GemmActivation::kClip>(a, e, task);
        break;
      case GemmActivation::kSigmoid:
        run_task<GemmActivation::kSigmoid>(a, e, task);
        break;
      case GemmActivation::kHardSwish:
        run_task<GemmActivation::kHardSwish>(a, e, task);
        break;
      case GemmActivation::kSwish:
        run_task<GemmActivation::kSwish>(a, e, task);
        break;
      case GemmActivation::kGeluErf:
        run_task<GemmActivation::kGeluErf>(a, e, task);
        break;
      case GemmActivation::kGeluTanh:
        run_task<GemmActivation::kGeluTanh>(a, e, task);
        break;
      default:
        run_task<GemmActivation::kNone>(a, e, task);
        break;
    }
    if (!in_registers) {  // the rest (Tanh, ...) over the task's outputs, bias already added
      GemmEpilogue act = e;
      act.bias = nullptr;
      const int64_t row = task / chunks, c0 = task % chunks * chunk;
      const int64_t c1 = std::min(channels_, c0 + chunk);
      for (int64_t ow = 0; ow < out_w; ++ow)
        finish_row(y + (row * out_w + ow) * channels_ + c0, c1 - c0, c0, act);
    }
  }
}

LUMEN_ISA_END
}  // namespace lumen::cpu

#elif !defined(__aarch64__)
// Elsewhere than x86 and arm64 (depthwise_conv_neon.cc) the kernel does not exist: the gate admits
// nothing, so run is never reached.
namespace lumen::cpu {

bool depthwise_conv_applies(int64_t, int64_t, int64_t, const std::vector<int64_t>&,
                            const std::vector<int64_t>&) {
  return false;
}

bool depthwise_conv_for_every_activation() {
  return false;
}

void DepthwiseConv::run(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                        int64_t, int64_t, float*, const GemmEpilogue&) const {
  throw UnsupportedOp("DepthwiseConv: no kernel for this CPU");
}

}  // namespace lumen::cpu
#endif  // LUMEN_X86

namespace lumen::cpu {

DepthwiseConv::DepthwiseConv(const float* weights, int64_t channels, int64_t kernel_h,
                             int64_t kernel_w)
    : channels_(channels),
      padded_((channels + kDepthwiseLanes - 1) / kDepthwiseLanes * kDepthwiseLanes),
      kernel_h_(kernel_h),
      kernel_w_(kernel_w),
      w_(static_cast<size_t>(kernel_h * kernel_w * padded_), 0.0f) {
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t tap = 0; tap < kernel_h * kernel_w; ++tap)
      w_[tap * padded_ + c] = weights[c * kernel_h * kernel_w + tap];
}

void DepthwiseConv::evict() const {
  evict_from_caches(w_.data(), w_.size() * sizeof(float));
}

}  // namespace lumen::cpu
