// Channels-last strided convolutions as one matrix product per image: the patches of every
// output pixel gathered into rows (im2col), multiplied by the weights packed once for
// packed_gemm, with the bias, residual and activation applied as packed_gemm writes the output.
//
// Why: oneDNN 2.6's avx2 kernel ran ResNet's 3x3 stride-2 layers at 78-105 GFLOP/s on 2 cores
// (128 -> 128 channels from 56x56: 2.2-3.1 ms), where packed_gemm multiplies their im2col
// matrices (784 x 1152 x 128 and so on) at 130-165 GFLOP/s.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {

// Whether Im2colConv takes a dense (one group) 2-D convolution with these input channels,
// kernel, strides and dilations on this machine (the packed_gemm machines): strided (a stride
// of 2 or more on some axis), no dilation, a kernel larger than 1x1 and 64 or more channels.
bool im2col_conv_applies(int64_t in_channels, int64_t group, const std::vector<int64_t>& kernel,
                         const std::vector<int64_t>& strides,
                         const std::vector<int64_t>& dilations);

class Im2colConv {
 public:
  Im2colConv() = default;
  // Packs the (O, C, kh, kw) row-major weights as the (kh * kw * C) x O matrix the patches
  // multiply.
  Im2colConv(const float* weights, int64_t out_channels, int64_t in_channels, int64_t kernel_h,
             int64_t kernel_w);

  // Y (N, out_h, out_w, O) = epilogue(conv(X)) for X (N, in_h, in_w, C), both channels-last,
  // with the given strides and pad_top / pad_left zero rows and columns before the input (and
  // as many after as out_h and out_w need).
  void run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t stride_h,
           int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t out_h, int64_t out_w,
           float* y, const GemmEpilogue& epilogue) const;

  // Flushes the transformed weights from the CPU's caches (kernel_choice.h).
  void evict() const;

 private:
  int64_t channels_ = 0, kernel_h_ = 0, kernel_w_ = 0;
  PackedMatrix weights_;  // (kh * kw * C) x O, rows in (kh, kw, C) order
};

}  // namespace lumen::cpu
