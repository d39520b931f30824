// DepthwiseConv's NEON form (arm64): channels-last, one output pixel at a time, 16 channels (four
// vectors of 4) per pass over its taps, then 4, then single channels; only the taps that fall
// inside the input are read (padding needs no copy). The sums start from the bias (and the
// residual); ReLU is applied in registers before the one store, other activations by finish_row
// over the task's outputs. Tasks are output rows of one image, cut into channel ranges where rows
// are fewer than 4 per thread, as in the AVX2 form.
#include "backends/cpu/depthwise_conv.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <omp.h>

#include <algorithm>

namespace lumen::cpu {
namespace {

// Channels [c, c + 4 * V) of one output pixel over taps rows [kh0, kh1) and columns [kw0, kw1);
// x points at the input pixel of tap (0, 0).
template <int V>
inline void pixel_block(const DepthwiseArgs& a, const GemmEpilogue& e, const float* x, int64_t kh0,
                        int64_t kh1, int64_t kw0, int64_t kw1, float* y, int64_t c, bool relu) {
  const int64_t x_col = a.channels, x_row = a.in_w * a.channels;
  float32x4_t acc[V];
  for (int v = 0; v < V; ++v) {
    acc[v] = a.bias != nullptr ? vld1q_f32(a.bias + c + 4 * v) : vdupq_n_f32(0.0f);
    if (e.accumulate) acc[v] = vaddq_f32(acc[v], vld1q_f32(y + c + 4 * v));
  }
  for (int64_t kh = kh0; kh < kh1; ++kh) {
    const float* xr = x + kh * x_row + c;
    const float* wr = a.w + kh * a.kernel_w * a.padded + c;
    for (int64_t kw = kw0; kw < kw1; ++kw)
      for (int v = 0; v < V; ++v)
        acc[v] = vfmaq_f32(acc[v], vld1q_f32(xr + kw * x_col + 4 * v),
                           vld1q_f32(wr + kw * a.padded + 4 * v));
  }
  for (int v = 0; v < V; ++v) {
    if (relu) acc[v] = vmaxq_f32(acc[v], vdupq_n_f32(0.0f));
    vst1q_f32(y + c + 4 * v, acc[v]);
  }
}

void run_task(const DepthwiseArgs& a, const GemmEpilogue& e, int64_t task, bool relu) {
  const DepthwiseTask at = depthwise_task(a, task);
  const int64_t c0 = at.c0, c1 = at.c1, ih0 = at.ih0, kh0 = at.kh0, kh1 = at.kh1;
  const int64_t x_col = a.channels, x_row = a.in_w * a.channels;
  const float* x_img = a.x + at.n * a.in_h * x_row;
  float* y_row = a.y + at.row * a.out_w * a.channels;
  for (int64_t ow = 0; ow < a.out_w; ++ow) {
    const int64_t iw0 = ow * a.stride_w - a.pad_left;
    const int64_t kw0 = std::max<int64_t>(0, -iw0), kw1 = std::min(a.kernel_w, a.in_w - iw0);
    const float* x = x_img + ih0 * x_row + iw0 * x_col;
    float* y = y_row + ow * a.channels;
    int64_t c = c0;
    for (; c + 16 <= c1; c += 16) pixel_block<4>(a, e, x, kh0, kh1, kw0, kw1, y, c, relu);
    for (; c + 4 <= c1; c += 4) pixel_block<1>(a, e, x, kh0, kh1, kw0, kw1, y, c, relu);
    for (; c < c1; ++c) {
      float acc = (a.bias != nullptr ? a.bias[c] : 0.0f) + (e.accumulate ? y[c] : 0.0f);
      for (int64_t kh = kh0; kh < kh1; ++kh)
        for (int64_t kw = kw0; kw < kw1; ++kw)
          acc += x[kh * x_row + kw * x_col + c] * a.w[(kh * a.kernel_w + kw) * a.padded + c];
      y[c] = relu ? std::max(acc, 0.0f) : acc;
    }
  }
}

}  // namespace

bool depthwise_conv_applies(int64_t in_channels, int64_t out_channels, int64_t group,
                            const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& dilations) {
  return group > 1 && in_channels == group && out_channels == group && kernel.size() == 2 &&
         dilations.size() == 2 && dilations[0] == 1 && dilations[1] == 1;
}

bool depthwise_conv_for_every_activation() {
  return true;
}

void DepthwiseConv::run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t stride_h,
                        int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t out_h,
                        int64_t out_w, float* y, const GemmEpilogue& e) const {
  const int64_t rows = batch * out_h;
  if (rows == 0 || out_w == 0 || channels_ == 0) return;
  const int64_t threads = omp_get_max_threads();
  int64_t chunks = std::min((4 * threads + rows - 1) / rows, padded_ / 16);
  chunks = std::max<int64_t>(chunks, 1);
  const int64_t chunk = (padded_ / 4 + chunks - 1) / chunks * 4;  // whole vectors of 4
  chunks = (channels_ + chunk - 1) / chunk;
  const DepthwiseArgs a{x,       in_h,      in_w,   channels_, stride_h,  stride_w,
                        pad_top, pad_left,  out_h,  out_w,     kernel_h_, kernel_w_,
                        padded_, w_.data(), e.bias, y,         chunks,    chunk};
  const bool relu = e.activation == GemmActivation::kRelu;
  const bool after = !relu && e.activation != GemmActivation::kNone;
  const int64_t tasks = rows * chunks;
  const bool parallel = tasks > 1 && rows * out_w * channels_ * kernel_h_ * kernel_w_ > (1 << 15);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t task = 0; task < tasks; ++task) {
    run_task(a, e, task, relu);
    if (after) {  // the activation over the task's outputs, bias already added
      GemmEpilogue act = e;
      act.bias = nullptr;
      const int64_t row = task / chunks, c0 = task % chunks * chunk;
      const int64_t c1 = std::min(channels_, c0 + chunk);
      for (int64_t ow = 0; ow < out_w; ++ow)
        finish_row(y + (row * out_w + ow) * channels_ + c0, c1 - c0, c0, act);
    }
  }
}

}  // namespace lumen::cpu
#endif  // defined(__aarch64__)
