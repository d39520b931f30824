// Lumen's own int8 GEMM for x86 CPUs with AVX2 but without VNNI, for products with constant s8
// weights (QLinearMatMul). Exact at every weight value, u8 or s8 activations.
//
// Why: without VNNI oneDNN multiplies u8 x s8 with vpmaddubsw, whose pairwise int16 add saturates
// beyond weights of +-64 (quant_dnnl.h), so full-range weights take it two products of split
// halves, and s8 activations have no exact form at all. Here full-range weights are split inside
// one micro-kernel (w = 2h + l, the l products summed in int16 before they are widened), and s8
// activations are shifted to u8 (int8_gemm.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/kernel.h"
#include "lumen/tensor.h"

namespace lumen::cpu {

// B (k x n, s8) in the micro-kernels' layout: panels of 16 columns; in a panel, per quad of rows
// (4q .. 4q + 3), 16 words, word j holding column j's four bytes (row 4q in the low byte). Weights
// beyond +-64 are stored split (int8_gemm.cc): per quad 16 words of h = w >> 1, then 16 of
// l = w & 1. Rows past k and columns past n are zero. Keeps B's column sums for A's zero point.
class Int8PackedMatrix {
 public:
  Int8PackedMatrix() = default;
  // Packs the row-major b[i * n + j], i < k, j < n, each byte taken as b ^ flip (a flip of 0x80
  // re-centres uint8 data to int8: b - 128), in one pass over b.
  Int8PackedMatrix(const int8_t* b, int64_t k, int64_t n, uint8_t flip = 0);
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  // Quads of rows (k / 4 rounded up).
  int64_t quads() const { return (k_ + 3) / 4; }
  // Whether the weights are stored split (some beyond +-64).
  bool split() const { return split_; }
  // Words per quad in a panel (16, or 32 split).
  int64_t quad_step() const { return split_ ? 32 : 16; }
  // Quad q0 of the panel of columns [16 * jp, 16 * jp + 16); the quads after it follow.
  const int32_t* panel(int64_t q0, int64_t jp) const;
  // sum over i of b[i, j], one per column.
  const int32_t* column_sums() const;

 private:
  int64_t k_ = 0, n_ = 0;
  bool split_ = false;
  Tensor data_, sums_;
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
  const double* row_offset = nullptr;  // one per row, added to its sums, or null
};

// out = requantize((A - a_zero) x B) for A (m x b.k(), rows lda apart) of uint8, or int8 when
// a_signed. Exact: the sums of a * b are int32 for k up to 65536. Only where the CPU
// level in use is at least AVX2 (has_avx2()); m > 0. Shares its tiles out over the OpenMP threads.
void int8_gemm(int64_t m, const void* a, bool a_signed, int32_t a_zero, int64_t lda,
               const Int8PackedMatrix& b, const Int8GemmOutput& out);

// The kernel of a QLinearMatMul whose B is the constant s8 matrix `b` [k, n] with zero zero point
// and whose other parameters are per-tensor constants (y's per-column requantize scale `scale`,
// a_zero, y_zero): int8_gemm over any number of A's rows. Only where has_avx2().
std::unique_ptr<Kernel> make_int8_gemm_matmul(const Tensor& b, bool a_signed, int32_t a_zero,
                                              std::vector<double> scale, int32_t y_zero, DType out);

// The kernel of a QLinearMatMul of two activations, A [..., m, k] by B [..., k, n] with the same
// batch dims (attention's Q.K^T and P.V), per-tensor parameters read at run time: per batch
// matrix, B is re-centred to s8 (a uint8 B less 128, its zero point with it) and packed, and the
// product is int8_gemm's, with B's zero point through the sums of A's rows. Only where has_avx2().
std::unique_ptr<Kernel> make_int8_gemm_activation_matmul(bool a_signed, bool b_unsigned, DType out);

}  // namespace lumen::cpu
