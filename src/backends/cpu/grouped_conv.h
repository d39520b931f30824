// Channels-last grouped convolutions with 8 input and 8 output channels per group (RegNet's
// 3x3 layers, ResNeXt-like blocks): each group's 8 outputs of a pixel are one AVX2 register (two
// NEON ones), and a row of up to 12 pixels is accumulated in registers, one weight load and one
// broadcast per multiply-add.
//
// Why: oneDNN 2.6's avx2 kernel for these layers ran at 25-39 GFLOP/s on 2 cores (RegNet-Y-400MF's
// 48 -> 48 stride-2 layer at 112x112: 0.85 ms, 14x14 x 208: 0.15 ms); see grouped_conv.cc for
// this kernel's numbers.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {

// Whether GroupedConv8 handles a convolution with these channels, groups and 2-D kernel, strides
// and dilations on this machine (AVX2: the same machines as packed_gemm; arm64: NEON,
// grouped_conv_neon.cc): 3x3 kernels, width stride 1 or 2, no dilation.
bool grouped_conv8_applies(int64_t in_channels, int64_t out_channels, int64_t group,
                           const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                           const std::vector<int64_t>& dilations);

class GroupedConv8 {
 public:
  GroupedConv8() = default;
  // Keeps the (O, 8, 3, 3) row-major weights per group as 3 x 3 x 8 vectors of the group's 8
  // outputs.
  GroupedConv8(const float* weights, int64_t out_channels);

  // Y (N, out_h, out_w, O) = epilogue(conv(X)) for X (N, in_h, in_w, O), both channels-last, with
  // the given strides and pad_top / pad_left zero rows and columns before the input (and as many
  // after as out_h and out_w need).
  void run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t stride_h,
           int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t out_h, int64_t out_w,
           float* y, const GemmEpilogue& epilogue) const;

  // Flushes the transformed weights from the CPU's caches (kernel_choice.h).
  void evict() const;

 private:
  int64_t channels_ = 0;
  std::vector<float> w_;  // [group][kh][kw][input channel][output channel of 8]
};

}  // namespace lumen::cpu
