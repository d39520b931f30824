// Matrix-vector products: MatMul and Gemm with one output column. They read each element of A
// once and do one multiply-add with it, so they run at the speed memory delivers A.
//
// Why: oneDNN 2.6's matmul runs such shapes far below that. On the 16-core Xeon host of the H100
// machine, Wide & Deep's wide part ([32, 100352] x [100352, 1], 12.8 MB of A) took 5.0 ms there
// (2.6 GB/s) and its [32, 1024] x [1024, 1] output layer 0.97 ms.
#pragma once

#include <cstdint>

namespace lumen::cpu {

// y[i] = sum over j < k of a[i * lda + j] * x[j], for i < m. Splits rows, and each row's columns
// when there are fewer rows than threads, over the OpenMP threads.
void matrix_vector(int64_t m, int64_t k, const float* a, int64_t lda, const float* x, float* y);

}  // namespace lumen::cpu
