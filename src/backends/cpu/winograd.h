// Winograd's minimal filtering (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016) for channels-last 3x3, stride-1 float32 convolutions, in two forms:
// F(2x2, 3x3), each 2x2 block of outputs from a 4x4 input tile through 16 products instead of 36,
// and F(4x4, 3x3), each 4x4 block from a 6x6 tile through 36 products instead of 144. The
// convolution is then 16 or 36 matrix products (tiles x C by C x O, on packed_gemm) between an
// input and an output transform. Where there are at least two blocks of tiles per thread, each
// thread takes a block through all three steps while it is in L2 (the products on its own thread)
// instead of three passes over the whole image with a parallel region per product: on 2 Zen 5
// cores at AVX-512, 56x56 x 64 channels in F(4x4) 0.58 -> 0.29 ms and 28x28 x 128 0.38 -> 0.25 ms
// (oneDNN's direct kernel: 0.63 and 0.56); with Lumen's kernels limited to AVX2 on the same
// cores, 0.82 -> 0.52 ms and 0.64 -> 0.44 ms.
//
// Why: on AVX2-only CPUs oneDNN 2.6's direct 3x3 kernels run at about 110 GFLOP/s on 2 cores where
// its 1x1 kernels reach 190; with 2.25 or 4 times fewer multiplications the Winograd forms are
// faster on the 3x3 layers of ResNet, GoogLeNet and DenseNet (winograd_form()). Per layer,
// interleaved on 2 cores, F(4x4) against F(2x2): 56x56 x 64 channels 1.26 against 1.76 ms, 28x28 x
// 128 0.99 against 1.39 ms, DenseNet's 56x56 128 -> 32 1.57 against 2.17 ms. F(4x4)'s transforms
// use the points 0, +-1, +-2: its float32 result differs from a direct convolution's by a few
// units in 1e-6 of the largest output.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {

enum class WinogradForm { kF2x2, kF4x4 };

// The Winograd form that is faster than oneDNN's direct kernel for a 3x3 stride-1 convolution
// with this output size and these channel counts on this machine, or none (measured; see
// winograd.cc).
std::optional<WinogradForm> winograd_form(int64_t out_h, int64_t out_w, int64_t in_channels,
                                          int64_t out_channels);

class WinogradConv {
 public:
  WinogradConv() = default;
  // Transforms the (O, C, 3, 3) row-major weights once: U = G g G^T, 16 (F(2x2)) or 36 (F(4x4))
  // packed C x O matrices.
  WinogradConv(const float* weights, int64_t out_channels, int64_t in_channels, WinogradForm form);

  // Y (N, out_h, out_w, O) = epilogue(conv(X)) for X (N, in_h, in_w, C), both channels-last, with
  // pad_top / pad_left zero rows and columns before the input (and as many after as out_h and
  // out_w need). Scratch comes from the host pool.
  void run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t pad_top,
           int64_t pad_left, int64_t out_h, int64_t out_w, float* y,
           const GemmEpilogue& epilogue) const;

  // Flushes the transformed weights from the CPU's caches (kernel_choice.h).
  void evict() const;

 private:
  int64_t in_channels_ = 0, out_channels_ = 0;
  WinogradForm form_ = WinogradForm::kF2x2;
  std::vector<PackedMatrix> u_;  // one per position of the transformed tile
};

}  // namespace lumen::cpu
