// Lumen's own float32 GEMM for AVX2 + FMA machines: B (the weights) is packed once, at compile
// time, into the micro-kernel's column panels; A is packed per call block by block, either from a
// row-major matrix or, for a channels-last convolution, gathered straight from the input's windows
// (an implicit im2col, so no column buffer is ever made). Bias, a residual already in C and an
// activation are applied while each output tile is still in cache.
//
// Why: on AVX2-only CPUs oneDNN 2.6 runs matmul and inner product through its jit sgemm, which
// repacks B on every call (64x1024x1024 at 89 GFLOP/s on 2 Zen cores, ONNX Runtime's MLAS 119),
// and its avx2 convolutions keep their weights blocked but not their activations. On AVX-512
// machines oneDNN's brgemm kernels are faster than this and stay in use (prefer_packed_gemm()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lumen::cpu {

// Whether the CPU kernels use packed_gemm instead of oneDNN for matrix products and convolutions.
bool prefer_packed_gemm();

// The activation an epilogue applies to each output.
enum class GemmActivation {
  kNone, kRelu, kLeakyRelu, kClip, kSigmoid, kTanh, kHardSwish, kSwish, kGeluErf, kGeluTanh
};

// The activation named as FusedConv / FusedMatMul carry it ("" is none); false when unknown.
bool parse_gemm_activation(const std::string& name, GemmActivation* out);

// What is applied to each output as it is written: y = act(sum + bias[col] (+ y's old value)).
struct GemmEpilogue {
  const float* bias = nullptr;  // one per output column, or null
  bool accumulate = false;      // C holds a residual to add (read before it is overwritten)
  GemmActivation activation = GemmActivation::kNone;
  float alpha = 0.0f;  // LeakyRelu's slope, Clip's min
  float beta = 0.0f;   // Clip's max
};

// B (k x n) in the micro-kernel's layout: per block of kKc rows, one panel of 16 columns after
// another, each panel's rows contiguous; columns past n are zero.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // Packs b[i, j] = b[i * row_stride + j * col_stride] for i < k, j < n.
  PackedMatrix(const float* b, int64_t k, int64_t n, int64_t row_stride, int64_t col_stride);
  // Packs a convolution's weights, (O, I, kh, kw) row-major, as the B of the channels-last
  // implicit GEMM: row (kh, kw, i) with i fastest, column o.
  static PackedMatrix from_conv_weights(const float* w, int64_t out_channels, int64_t in_channels,
                                        int64_t kh, int64_t kw);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  bool empty() const { return data_.empty(); }
  // The panel of columns [16 * jp, 16 * jp + 16) in the block of rows starting at row k0.
  const float* panel(int64_t k0, int64_t jp) const;

 private:
  int64_t k_ = 0, n_ = 0, panels_ = 0;
  std::vector<float> data_;
};

// C[m x n] (rows ldc apart) = epilogue(A x B), A m x b.k() row-major with rows lda apart.
void packed_gemm(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                 int64_t ldc, const GemmEpilogue& epilogue);

// The window of a 2-D channels-last convolution with one group.
struct ConvWindow {
  int64_t batch = 1, in_h = 0, in_w = 0, channels = 0;  // input (N, H, W, C)
  int64_t out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t dilation_h = 1, dilation_w = 1;
};

// Y (N, out_h, out_w, b.n()) = epilogue(conv(X, W)) for X (N, in_h, in_w, channels), both
// channels-last; b from PackedMatrix::from_conv_weights.
void packed_conv(const ConvWindow& window, const float* x, const PackedMatrix& b, float* y,
                 const GemmEpilogue& epilogue);

}  // namespace lumen::cpu
