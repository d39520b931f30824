// Channels-last depthwise 2-D convolutions (one input and one output channel per group: the
// MobileNet, EfficientNet, ShuffleNet and ConvNeXt layers), any kernel size, stride and padding,
// with the bias, a residual and the activation applied in registers as each output is written.
//
// Why: where oneDNN 2.6 cannot apply the activation in its AVX2 kernel at a good speed (Swish,
// Sigmoid, Tanh), it runs as a second pass over the output. EfficientNet-B0's depthwise layers
// with Swish in registers here, against oneDNN + that pass (in one process, alternating, medians
// of 40 runs): 32 channels 3x3 at 112x112 236 -> 190 us, 96 channels stride 2 237 -> 190 us,
// 5x5 at 28x28 161 -> 138 us; the whole model's steps 8.41 -> 8.13 ms. Without such an activation
// oneDNN's kernel is the faster one (MobileNet-V2's steps 4.31 against 4.38 ms), so the
// convolution kernel uses this one for those activations only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {

// The weights' channels are padded to a multiple of this many (one AVX2 vector, two NEON ones).
inline constexpr int64_t kDepthwiseLanes = 8;

// Whether DepthwiseConv handles a convolution with these channels, groups and 2-D kernel, strides
// and dilations on this machine (AVX2: the same machines as packed_gemm; arm64, NEON:
// depthwise_conv_neon.cc): one channel per group in and out, no dilation.
bool depthwise_conv_applies(int64_t in_channels, int64_t out_channels, int64_t group,
                            const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& dilations);

// Whether DepthwiseConv is a candidate whatever the activation (not only for those oneDNN applies
// in a pass of its own), the faster of it and oneDNN's measured per node (kernel_choice.h): at
// AVX-512, where oneDNN's depthwise kernels are AVX-512 too, and on arm64, where Debian's oneDNN
// runs depthwise convolutions in its reference code.
bool depthwise_conv_for_every_activation();

// One depthwise convolution as DepthwiseConv::run hands it to a form's tasks: tasks are output
// rows, each cut into `chunks` ranges of `chunk` channels.
struct DepthwiseArgs {
  const float* x;
  int64_t in_h, in_w, channels, stride_h, stride_w, pad_top, pad_left, out_h, out_w;
  int64_t kernel_h, kernel_w, padded;
  const float* w;
  const float* bias;
  float* y;
  int64_t chunks, chunk;  // channel ranges per row and their width (whole vectors)
};

// Where task `task` works: image n, output row oh (row = n * out_h + oh), channels [c0, c1);
// kernel rows [kh0, kh1) lie inside the input, whose row ih0 is under kernel row 0.
struct DepthwiseTask {
  int64_t row, c0, c1, n, oh, ih0, kh0, kh1;
};
inline DepthwiseTask depthwise_task(const DepthwiseArgs& a, int64_t task) {
  DepthwiseTask t;
  t.row = task / a.chunks;
  t.c0 = task % a.chunks * a.chunk;
  t.c1 = std::min(a.channels, t.c0 + a.chunk);
  t.n = t.row / a.out_h;
  t.oh = t.row % a.out_h;
  t.ih0 = t.oh * a.stride_h - a.pad_top;
  t.kh0 = std::max<int64_t>(0, -t.ih0);
  t.kh1 = std::min(a.kernel_h, a.in_h - t.ih0);
  return t;
}

// Task `task` of depthwise_task()'s split at one instruction set (depthwise_conv_body.inc): with
// `in_registers` (activates_in_registers) the activation is applied in registers, else by
// finish_row over the task's outputs. x86 only.
void depthwise_task_avx2(const DepthwiseArgs& a, const GemmEpilogue& e, bool in_registers,
                         int64_t task);
void depthwise_task_avx512(const DepthwiseArgs& a, const GemmEpilogue& e, bool in_registers,
                           int64_t task);

class DepthwiseConv {
 public:
  DepthwiseConv() = default;
  // Keeps the (C, 1, kernel_h, kernel_w) row-major weights as kernel_h x kernel_w rows of C
  // channels (padded to whole vectors with zeros).
  DepthwiseConv(const float* weights, int64_t channels, int64_t kernel_h, int64_t kernel_w);

  // Y (N, out_h, out_w, C) = epilogue(conv(X)) for X (N, in_h, in_w, C), both channels-last, with
  // the given strides and pad_top / pad_left zero rows and columns before the input (and as many
  // after as out_h and out_w need).
  void run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t stride_h,
           int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t out_h, int64_t out_w,
           float* y, const GemmEpilogue& epilogue) const;

  // Flushes the transformed weights from the CPU's caches (kernel_choice.h).
  void evict() const;

 private:
  int64_t channels_ = 0;
  int64_t padded_ = 0;  // channels rounded up to whole vectors
  int64_t kernel_h_ = 0;
  int64_t kernel_w_ = 0;
  std::vector<float> w_;  // [kh][kw][padded channel]
};

}  // namespace lumen::cpu
