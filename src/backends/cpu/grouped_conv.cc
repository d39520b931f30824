// Grouped 3x3 convolution with 8 channels per group, channels-last; the AVX2 form of its blocks
// and packing (grouped_conv_kernels.h; NEON: grouped_conv_neon.cc). A task is one group of one
// image over a band of output rows: it first copies the band's input rows of the group's 8
// channels into a zero-padded scratch (pixels 32 bytes apart, so every read below is a fixed
// offset from one pointer and no block needs edge tests), then cuts each output row into blocks
// of at most 12 pixels. A block keeps its 12 x 8 sums in registers; for each kernel row and input
// channel it holds the three weight vectors of the kernel columns and broadcasts each input value
// of the row once into every sum it feeds (3 with stride 1, 1 or 2 with stride 2), so the
// broadcasts, which issue once per cycle here, no longer bound the multiply-adds.
#include "backends/cpu/grouped_conv.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/grouped_conv_kernels.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_choice.h"
#include "lumen/error.h"

#if LUMEN_X86
#include <immintrin.h>

// The kernel is AVX2 code throughout: grouped_conv8_applies, which is not, admits it only where
// the CPU has AVX2.
LUMEN_AVX2_BEGIN
namespace lumen::cpu {
namespace {

using grouped8::BlockFn;
using grouped8::kLanes;     // channels per group, one AVX2 register
using grouped8::kMaxBlock;  // pixels per block: 12 sums + 3 weights + a broadcast = 16 registers
using grouped8::kTaps;

// N output pixels, 8 channels each, from the packed rows at q (row_stride floats apart; q is the
// input column under the first pixel's first kernel column), the group's weights w and biases b
// (8, or null).
template <int N, int S>
struct Block {
  static void run(const float* q, int64_t row_stride, const float* w, const float* b, float* y,
                  int64_t y_step, const GemmEpilogue& e) {
    const __m256 bias = b ? _mm256_loadu_ps(b) : _mm256_setzero_ps();
    __m256 acc[N];
    for (int n = 0; n < N; ++n)
      acc[n] = e.accumulate ? _mm256_add_ps(bias, _mm256_loadu_ps(y + n * y_step)) : bias;
    constexpr int64_t kCols = int64_t{N - 1} * S + kTaps;
    for (int kh = 0; kh < kTaps; ++kh, q += row_stride, w += kTaps * kLanes * kLanes) {
#pragma GCC unroll 8
      for (int ic = 0; ic < kLanes; ++ic) {
        __m256 wv[kTaps];
        for (int kw = 0; kw < kTaps; ++kw)
          wv[kw] = _mm256_loadu_ps(w + (kw * kLanes + ic) * kLanes);
#pragma GCC unroll 32
        for (int j = 0; j < kCols; ++j) {
          const __m256 v = _mm256_broadcast_ss(q + j * kLanes + ic);
#pragma GCC unroll 12
          for (int n = 0; n < N; ++n) {
            const int kw = j - n * S;
            if (kw >= 0 && kw < kTaps) acc[n] = _mm256_fmadd_ps(v, wv[kw], acc[n]);
          }
        }
      }
    }
    // ReLU (RegNet's) in registers, written out here: activate8()'s switch in this epilogue made
    // the blocks 5-12% slower. Other activations run over the stored pixels.
    if (e.activation == GemmActivation::kRelu) {
      const __m256 zero = _mm256_setzero_ps();
      for (int n = 0; n < N; ++n) acc[n] = _mm256_max_ps(acc[n], zero);
    }
    for (int n = 0; n < N; ++n) _mm256_storeu_ps(y + n * y_step, acc[n]);
    grouped8::finish_block(y, N, y_step, e);
  }
};

// grouped8::PackFn in AVX2.
void pack_rows(const float* xg, int64_t channels, int64_t in_h, int64_t in_w, int64_t ih0,
               int64_t rows, int64_t cols, int64_t pad_left, float* packed, int64_t row_stride) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = packed + r * row_stride;
    const int64_t ih = ih0 + r;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t iw = c - pad_left;
      const bool inside = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w;
      _mm256_storeu_ps(dst + c * kLanes,
                       inside ? _mm256_loadu_ps(xg + (ih * in_w + iw) * channels) : zero);
    }
  }
}

}  // namespace
LUMEN_ISA_END

namespace grouped8 {

bool has_form() {
  return has_avx2();
}

Kernels kernels() {
  using Tables = BlockTables<Block>;
  return {{Tables::kTables[0].data(), Tables::kTables[1].data()}, &pack_rows};
}

}  // namespace grouped8

}  // namespace lumen::cpu

#elif !defined(__aarch64__)
// Elsewhere than x86 and arm64 (grouped_conv_neon.cc) the kernel does not exist: the gate admits
// nothing, so run is never reached.
namespace lumen::cpu {

namespace grouped8 {

bool has_form() {
  return false;
}

Kernels kernels() {
  throw UnsupportedOp("GroupedConv8: no kernel for this CPU");
}

}  // namespace grouped8
}  // namespace lumen::cpu
#endif  // LUMEN_X86

namespace lumen::cpu {

using grouped8::kLanes;
using grouped8::kMaxBlock;
using grouped8::kTaps;

bool grouped_conv8_applies(int64_t in_channels, int64_t out_channels, int64_t group,
                           const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                           const std::vector<int64_t>& dilations) {
  return grouped8::has_form() && group > 1 && in_channels == group * kLanes &&
         out_channels == group * kLanes && kernel.size() == 2 && kernel[0] == kTaps &&
         kernel[1] == kTaps && strides.size() == 2 && strides[0] >= 1 && strides[1] >= 1 &&
         strides[1] <= 2 && dilations.size() == 2 && dilations[0] == 1 && dilations[1] == 1;
}

GroupedConv8::GroupedConv8(const float* weights, int64_t out_channels) : channels_(out_channels) {
  constexpr int64_t kVol = kTaps * kTaps;
  const int64_t groups = out_channels / kLanes;
  w_.resize(static_cast<size_t>(out_channels * kLanes * kVol));
  // ONNX's W[o][i][t] (o = g * 8 + oc, t = kh * 3 + kw) goes to w_[g][t][i][oc].
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t oc = 0; oc < kLanes; ++oc)
      for (int64_t i = 0; i < kLanes; ++i)
        for (int64_t t = 0; t < kVol; ++t)
          w_[static_cast<size_t>(((g * kVol + t) * kLanes + i) * kLanes + oc)] =
              weights[((g * kLanes + oc) * kLanes + i) * kVol + t];
}

void GroupedConv8::run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t stride_h,
                       int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t out_h,
                       int64_t out_w, float* y, const GemmEpilogue& epilogue) const {
  const grouped8::Kernels forms = grouped8::kernels();
  const int64_t groups = channels_ / kLanes;
  const int64_t blocks = (out_w + kMaxBlock - 1) / kMaxBlock;
  // A task packs and computes a pair of groups (a pair's 16 channels fill a cache line, so its
  // second packing reads what the first brought into cache) over a band of about 8 output rows,
  // fewer when that leaves under 8 tasks per thread; tasks are taken dynamically (a thread the VM
  // holds up does not keep the other waiting).
  constexpr int64_t kPair = 2;
  const int64_t pairs = (groups + kPair - 1) / kPair;
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int64_t band = std::min<int64_t>(out_h, 8);
  while (band > 1 && batch * pairs * ((out_h + band - 1) / band) < 8 * threads)
    band = (band + 1) / 2;
  const int64_t bands = (out_h + band - 1) / band;
  const int64_t tasks = batch * pairs * bands;
  // The packed band: its input rows, each with the input columns every pixel of a row reads.
  const int64_t cols = (out_w - 1) * stride_w + kTaps;
  const int64_t row_stride = cols * kLanes;
  const int64_t band_rows = (band - 1) * stride_h + kTaps;
  const grouped8::BlockFn* table = forms.blocks[stride_w - 1];
  const bool parallel = threads > 1 && tasks > 1 && out_h * out_w * channels_ > 4096;
#pragma omp parallel if (parallel)
  {
    thread_local std::vector<float> packed;
    packed.resize(static_cast<size_t>(band_rows * row_stride));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t bi = task % bands, pair = (task / bands) % pairs, n = task / (bands * pairs);
      const int64_t oh0 = bi * band, oh1 = std::min(out_h, oh0 + band);
      const int64_t ih0 = oh0 * stride_h - pad_top, rows = (oh1 - oh0 - 1) * stride_h + kTaps;
      for (int64_t g = pair * kPair; g < std::min(groups, (pair + 1) * kPair); ++g) {
        const float* xg = x + n * in_h * in_w * channels_ + g * kLanes;
        forms.pack(xg, channels_, in_h, in_w, ih0, rows, cols, pad_left, packed.data(), row_stride);
        const float* wg = w_.data() + g * kTaps * kTaps * kLanes * kLanes;
        const float* bias = epilogue.bias ? epilogue.bias + g * kLanes : nullptr;
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          const float* q = packed.data() + (oh - oh0) * stride_h * row_stride;
          float* y_row = y + ((n * out_h + oh) * out_w) * channels_ + g * kLanes;
          for (int64_t blk = 0, ow = 0; blk < blocks; ++blk) {
            const int64_t count = (out_w - ow) / (blocks - blk);
            table[count - 1](q + ow * stride_w * kLanes, row_stride, wg, bias,
                             y_row + ow * channels_, channels_, epilogue);
            ow += count;
          }
        }
      }
    }
  }
}

void GroupedConv8::evict() const {
  evict_from_caches(w_.data(), w_.size() * sizeof(float));
}

}  // namespace lumen::cpu
