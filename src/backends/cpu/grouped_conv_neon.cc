// GroupedConv8's NEON form (arm64; grouped_conv_kernels.h): a group's 8 output channels of a pixel
// are two 4-float registers, so a block of up to 12 pixels keeps 24 sums, the 6 weight vectors of
// one kernel row and input channel, and one broadcast input value in aarch64's 32 registers. Each
// input value of a kernel row is broadcast once into every sum it feeds, as in the AVX2 form.
#include "backends/cpu/grouped_conv.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "backends/cpu/grouped_conv_kernels.h"

namespace lumen::cpu {
namespace {

using grouped8::BlockFn;
using grouped8::kLanes;
using grouped8::kMaxBlock;
using grouped8::kTaps;

template <int N, int S>
struct Block {
  static void run(const float* q, int64_t row_stride, const float* w, const float* b, float* y,
                  int64_t y_step, const GemmEpilogue& e) {
    const float32x4_t zero = vdupq_n_f32(0.0f);
    const float32x4_t bias_lo = b ? vld1q_f32(b) : zero, bias_hi = b ? vld1q_f32(b + 4) : zero;
    float32x4_t lo[N], hi[N];
    for (int n = 0; n < N; ++n) {
      lo[n] = e.accumulate ? vaddq_f32(bias_lo, vld1q_f32(y + n * y_step)) : bias_lo;
      hi[n] = e.accumulate ? vaddq_f32(bias_hi, vld1q_f32(y + n * y_step + 4)) : bias_hi;
    }
    constexpr int64_t kCols = int64_t{N - 1} * S + kTaps;
    for (int kh = 0; kh < kTaps; ++kh, q += row_stride, w += kTaps * kLanes * kLanes) {
#pragma GCC unroll 8
      for (int ic = 0; ic < kLanes; ++ic) {
        float32x4_t w_lo[kTaps], w_hi[kTaps];
        for (int kw = 0; kw < kTaps; ++kw) {
          w_lo[kw] = vld1q_f32(w + (kw * kLanes + ic) * kLanes);
          w_hi[kw] = vld1q_f32(w + (kw * kLanes + ic) * kLanes + 4);
        }
#pragma GCC unroll 32
        for (int j = 0; j < kCols; ++j) {
          const float32x4_t v = vld1q_dup_f32(q + j * kLanes + ic);
#pragma GCC unroll 12
          for (int n = 0; n < N; ++n) {
            const int kw = j - n * S;
            if (kw >= 0 && kw < kTaps) {
              lo[n] = vfmaq_f32(lo[n], v, w_lo[kw]);
              hi[n] = vfmaq_f32(hi[n], v, w_hi[kw]);
            }
          }
        }
      }
    }
    if (e.activation == GemmActivation::kRelu)
      for (int n = 0; n < N; ++n) {
        lo[n] = vmaxq_f32(lo[n], zero);
        hi[n] = vmaxq_f32(hi[n], zero);
      }
    for (int n = 0; n < N; ++n) {
      vst1q_f32(y + n * y_step, lo[n]);
      vst1q_f32(y + n * y_step + 4, hi[n]);
    }
    grouped8::finish_block(y, N, y_step, e);
  }
};

// grouped8::PackFn in NEON.
void pack_rows(const float* xg, int64_t channels, int64_t in_h, int64_t in_w, int64_t ih0,
               int64_t rows, int64_t cols, int64_t pad_left, float* packed, int64_t row_stride) {
  const float32x4_t zero = vdupq_n_f32(0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = packed + r * row_stride;
    const int64_t ih = ih0 + r;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t iw = c - pad_left;
      const bool inside = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w;
      const float* src = xg + (ih * in_w + iw) * channels;
      vst1q_f32(dst + c * kLanes, inside ? vld1q_f32(src) : zero);
      vst1q_f32(dst + c * kLanes + 4, inside ? vld1q_f32(src + 4) : zero);
    }
  }
}

}  // namespace

namespace grouped8 {

bool has_form() {
  return true;
}

Kernels kernels() {
  using Tables = BlockTables<Block>;
  return {{Tables::kTables[0].data(), Tables::kTables[1].data()}, &pack_rows};
}

}  // namespace grouped8
}  // namespace lumen::cpu
#endif  // defined(__aarch64__)
