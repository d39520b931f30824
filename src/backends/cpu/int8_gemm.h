// Lumen's own int8 GEMM for x86 CPUs with AVX2 but without VNNI, for products with constant s8
// weights (QLinearMatMul). Exact at every weight value, u8 or s8 activations.
//
// Why: without VNNI oneDNN multiplies u8 x s8 with vpmaddubsw, whose pairwise int16 add saturates
// beyond weights of +-64 (quant_dnnl.h), so full-range weights need two products, and s8
// activations none at all. Here A minus its zero point and B are widened to int16 and multiplied
// with vpmaddwd, which adds each pair of int16 products into int32 exactly: 16 multiply-adds per
// instruction, the same rate per multiply instruction as the saturating vpmaddubsw + vpmaddwd
// pair that ONNX Runtime's MLAS and oneDNN issue for 32.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/kernel.h"
#include "lumen/tensor.h"

namespace lumen::cpu {

// B (k x n, s8) in the micro-kernel's layout: panels of 16 columns; in a panel, per pair of rows
// (2p, 2p + 1), 16 int32 words, word j holding column j's two values as int16 (low half row 2p),
// so one vpmaddwd multiplies a broadcast pair of A's columns by 8 columns. Rows past k and
// columns past n are zero.
class Int8PackedMatrix {
 public:
  Int8PackedMatrix() = default;
  // Packs the row-major b[i * n + j], i < k, j < n.
  Int8PackedMatrix(const int8_t* b, int64_t k, int64_t n);
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  // Pairs of rows (k / 2 rounded up).
  int64_t pairs() const { return (k_ + 1) / 2; }
  // Pair p0 of the panel of columns [16 * jp, 16 * jp + 16); the pairs after it follow, 16 words
  // apart.
  const int32_t* panel(int64_t p0, int64_t jp) const;

 private:
  int64_t k_ = 0, n_ = 0;
  Tensor data_;
};

// How the int32 sums become 8-bit outputs, as the reference kernels round (quant_dnnl.cc's
// Requantize): y = saturate(round_half_even(float((acc + bias[c]) * scale[c])) + y_zero).
struct Int8GemmOutput {
  const double* scale = nullptr;  // one per column
  const int32_t* bias = nullptr;  // one per column, or null
  int32_t y_zero = 0;
  DType dtype = DType::kUInt8;  // kUInt8 or kInt8
  void* y = nullptr;            // m rows of n outputs, ldy apart
  int64_t ldy = 0;
};

// out = requantize((A - a_zero) x B) for A (m x b.k(), rows lda apart) of uint8, or int8 when
// a_signed. The sums are exact in int32 (|a - a_zero| <= 255, |b| <= 128). Only where the CPU
// level in use is at least AVX2 (has_avx2()); m > 0. Shares its tiles out over the OpenMP threads.
void int8_gemm(int64_t m, const void* a, bool a_signed, int32_t a_zero, int64_t lda,
               const Int8PackedMatrix& b, const Int8GemmOutput& out);

// The kernel of a QLinearMatMul whose B is the constant s8 matrix `b` [k, n] with zero zero point
// and whose other parameters are per-tensor constants (y's per-column requantize scale `scale`,
// a_zero, y_zero): int8_gemm over any number of A's rows. Only where has_avx2().
std::unique_ptr<Kernel> make_int8_gemm_matmul(const Tensor& b, bool a_signed, int32_t a_zero,
                                              std::vector<double> scale, int32_t y_zero, DType out);

}  // namespace lumen::cpu
