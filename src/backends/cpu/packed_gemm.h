// Lumen's own float32 GEMM for matrix products with constant weights: B (the weights) is packed
// once, at compile time, into column panels; A is packed per call, block by block. Bias, a
// residual already in C and an activation are applied while each output tile is still in cache.
// Micro-kernels for AVX2 + FMA (6 x 16), AVX-512 (6 x 32, packed_gemm_avx512.cc) and NEON on arm64
// (6 x 16, packed_gemm_neon.cc) over the same panels, and a portable form below AVX2 on x86.
//
// Why: on AVX2-only CPUs oneDNN 2.6 runs matmul through its jit sgemm, which repacks B on every
// call: 64x1024x1024 ran at 89 GFLOP/s on 2 Zen cores (this GEMM: 135), and the 20-layer MLP of
// the zoo took 30.5 ms against 18.5 ms. On AVX-512 machines oneDNN's brgemm kernels pack their
// weights too, and each node takes the faster of the two as measured (kernel_choice.h).
#pragma once

#include <cstdint>
#include <string>

#include "lumen/tensor.h"

namespace lumen::cpu {

// Columns of a packed panel (PackedMatrix).
inline constexpr int64_t kPackedPanelCols = 16;
// Multiply-adds (times 2) below which a product runs on one thread.
inline constexpr int64_t kGemmParallelFlops = int64_t{1} << 20;

// The activation an epilogue applies to each output.
enum class GemmActivation {
  kNone,
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kTanh,
  kHardSwish,
  kSwish,
  kGeluErf,
  kGeluTanh
};

// What is applied to each output as it is written: y = act(sum + bias[col] (+ y's old value)).
struct GemmEpilogue {
  const float* bias = nullptr;  // one per output column, or null
  bool accumulate = false;      // C holds a residual to add (read before it is overwritten)
  GemmActivation activation = GemmActivation::kNone;
  float alpha = 0.0f;  // LeakyRelu's slope, Clip's min
  float beta = 0.0f;   // Clip's max
  // Read before the product, not applied to outputs: A's column j is multiplied by a_scale[j]
  // as A is packed (a squeeze-and-excitation's channel scale feeding a pointwise convolution,
  // fused there instead of a pass of its own over the pixels), or null.
  const float* a_scale = nullptr;
};

// Sets out's activation, alpha and beta from FusedConv / FusedMatMul's attributes "activation"
// ("" is none), "activation_alpha" and "activation_beta"; false when the activation is unknown.
bool parse_gemm_epilogue(const std::string& activation, float alpha, float beta, GemmEpilogue* out);

// Adds the bias and applies the activation to `cols` outputs of one row whose first column is
// col0 (the epilogue's last steps; `accumulate` is the caller's).
void finish_row(float* y, int64_t cols, int64_t col0, const GemmEpilogue& epilogue);

// B (k x n) in the micro-kernel's layout: one panel of 16 columns after another, each panel's k
// rows of 16 contiguous (a block of rows of a panel is then contiguous too, and a matrix-vector
// product reads each panel as one stream); columns past n are zero.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // Packs b[i, j] = b[i * row_stride + j * col_stride] for i < k, j < n.
  PackedMatrix(const float* b, int64_t k, int64_t n, int64_t row_stride, int64_t col_stride);
  // The same for b inside the constant tensor `source` (a graph weight), shared with every other
  // packing of the same tensor the same way in the process (core/derived_tensors.h).
  static PackedMatrix shared(const Tensor& source, const float* b, int64_t k, int64_t n,
                             int64_t row_stride, int64_t col_stride);
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  // Row k0 of the panel of columns [16 * jp, 16 * jp + 16); the rows after it follow, 16 apart.
  const float* panel(int64_t k0, int64_t jp) const;
  // Flushes the packed data from the CPU's caches (kernel_choice.h).
  void evict() const;

 private:
  int64_t k_ = 0, n_ = 0, panels_ = 0;
  // From the host pool, which also takes back the weights compile releases once packed, so a
  // model's packed copies reuse their memory (peak resident memory stays near one copy).
  Tensor data_;
};

// C[m x n] (rows ldc apart) = epilogue(A x B), A m x b.k() row-major with rows lda apart.
void packed_gemm(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                 int64_t ldc, const GemmEpilogue& epilogue);

// packed_gemm's AVX-512 form (packed_gemm_avx512.cc): only where the CPU level in use is AVX-512,
// and with m, n > 0.
void packed_gemm_avx512(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                        int64_t ldc, const GemmEpilogue& epilogue);

// packed_gemm's NEON form (packed_gemm_neon.cc): arm64 only, with m, n > 0 and no a_scale.
void packed_gemm_neon(int64_t m, const float* a, int64_t lda, const PackedMatrix& b, float* c,
                      int64_t ldc, const GemmEpilogue& epilogue);

}  // namespace lumen::cpu
