// Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2016) for channels-last 3x3, stride-1 float32 convolutions: each 2x2 block of
// outputs comes from a 4x4 input tile through 16 products instead of 36, so the convolution is 16
// matrix products (tiles x C by C x O, on packed_gemm) between an input and an output transform.
//
// Why: on AVX2-only CPUs oneDNN 2.6's direct 3x3 kernels run at about 110 GFLOP/s on 2 cores where
// its 1x1 kernels reach 190; with 2.25 times fewer multiplications the Winograd form is faster on
// the 3x3 layers of ResNet and GoogLeNet with 64 channels or more (winograd_pays()).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {

// Whether a 3x3 stride-1 convolution with this output size and these channel counts is faster as
// Winograd than as oneDNN's direct kernel on this machine (measured; see winograd.cc).
bool winograd_pays(int64_t out_h, int64_t out_w, int64_t in_channels, int64_t out_channels);

class WinogradConv {
 public:
  WinogradConv() = default;
  // Transforms the (O, C, 3, 3) row-major weights once: U = G g G^T, 16 packed C x O matrices.
  WinogradConv(const float* weights, int64_t out_channels, int64_t in_channels);

  // Y (N, out_h, out_w, O) = epilogue(conv(X)) for X (N, in_h, in_w, C), both channels-last, with
  // pad_top / pad_left zero rows and columns before the input (and as many after as out_h and
  // out_w need). Scratch comes from the host pool.
  void run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t pad_top,
           int64_t pad_left, int64_t out_h, int64_t out_w, float* y,
           const GemmEpilogue& epilogue) const;

 private:
  int64_t in_channels_ = 0, out_channels_ = 0;
  std::vector<PackedMatrix> u_;  // 16: one per position of the 4x4 transformed tile
};

}  // namespace lumen::cpu
