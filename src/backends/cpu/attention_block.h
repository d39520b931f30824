// The float32 building blocks of the CPU attention kernels (FusedAttention and StridedAttention in
// attention.cc, ONNX Attention in attention_op.cc): a register-blocked block product and the
// softmax exponentials.
#pragma once

#include <cstdint>

namespace lumen::cpu {

// out[r][c] = scales[r] * sum_d a[r][d] * b[d][c] for `rows` rows of a (row stride lda), `depth`
// and `cols` columns of b (row stride ldb); out has row stride ldo. Computed as kPanel-row tiles
// two vectors wide (the accumulators stay in registers across the depth loop), then smaller row
// panels, then the column edge row by row.
using BlockProduct = void (*)(const float* a, int64_t lda, const float* b, int64_t ldb,
                              int64_t rows, int64_t depth, int64_t cols, const float* scales,
                              float* out, int64_t ldo);

// The block product for the CPU level in use (lumen/cpu_isa.h): AVX-512, AVX2 or the baseline.
BlockProduct attention_block_product();
// The column width of that product's full tiles (32 with AVX-512, 16 with AVX2): operands padded
// to a multiple of it have no column edge.
int64_t attention_block_lanes();

// s[j] = e^(s[j] - shift) for j < n, returning the sum; s has room for n rounded up to 8 (the
// lanes past n are written, not summed). -inf gives exactly 0, NaN stays NaN.
float exp_shifted_sum8(float* s, float shift, int64_t n);

}  // namespace lumen::cpu
