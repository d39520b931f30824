// A cuBLASLt product planned once: Y[M,N] = alpha * X[M,K] W[K,N] + beta * C (or + a bias row of
// N), row-major, optionally over strided batches; every matrix in the node's storage (float32, or
// float16 or bfloat16 on tensor cores), always with float32 accumulation (float32 as
// CUBLAS_COMPUTE_32F or 3xTF32 below, the latter never under Precision::kFloat32Strict; plain TF32
// only where the node's compile asks for it). Used
// by Gemm/MatMul, FusedMatMul, attention and convolutions.
//
// A float32 product of many rows may run as 3xTF32 where measured faster: x = x_big + x_small and
// w = w_big + w_small, each part a TF32 value (x_small = tf32(x - x_big)), and
// Y = x_big w_big + x_big w_small + x_small w_big as one TF32 tensor-core product over the parts
// laid side by side along k (3k), float32 accumulation. Accuracy (H200, k = 768): worst |error| of
// 2.2e-6 of sum |x w| against float32 SIMT's 1.4e-7 and TF32's 3e-5, inside float32's classical
// bound k 2^-24 (the tensor cores accumulate more coarsely than FMAs round); taken where TF32's
// speed pays for three products (2048 x 768 x 3072: 0.217 ms float32, 0.037 ms TF32).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backends/cuda/launch.h"
#include "graph/node_context.h"

namespace lumen::cuda {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_x = false, trans_w = false;
  int64_t batch = 1;
  int64_t stride_x = 0, stride_w = 0, stride_y = 0;  // elements between batches (0: broadcast)
  // Elements between rows of each matrix as stored (0: packed, one row after another): views of
  // a wider tensor, such as one head of a [seq, 3 * heads * depth] projection.
  int64_t ld_x = 0, ld_w = 0, ld_y = 0;
  // The alignment in bytes every pointer, row and batch start is known to have (0: cuBLASLt's
  // default assumption, 256).
  int align = 0;
  // W is a constant (a weight, packed, one batch): where the product runs as 3xTF32, its caller
  // splits W once (split_weight) and passes the parts to run(), so the choice between 3xTF32 and
  // float32 is timed without a split of W.
  bool constant_w = false;
};

class LtMatmul {
 public:
  // Picks the algorithm (cuBLASLt's heuristic candidates timed on scratch operands, the fastest
  // kept for the process per geometry) and reserves its workspace; throws UnsupportedOp
  // (naming ctx's node) when cuBLASLt has none. `bias`: a row of N added in the epilogue. The
  // storage is that of ctx's input 0 (every operand, C, bias and Y share it).
  LtMatmul(const NodeContext& ctx, const GemmShape& shape, bool bias);
  // The same product (storage, precision, bias, node) planned for `shape`: a node's product at
  // another row count, planned at run time, so by the heuristic alone (or the process's earlier
  // choice for that geometry). Throws UnsupportedOp when cuBLASLt has no algorithm for it.
  LtMatmul(const LtMatmul& like, const GemmShape& shape);
  // A product of `shape` with like's node, storage and precision, no bias, its algorithm timed
  // among cuBLASLt's candidates, never 3xTF32 (SlicedMatmul's batched product of K's slices).
  // Throws UnsupportedOp when cuBLASLt has no algorithm for it.
  static std::unique_ptr<LtMatmul> unbiased(const LtMatmul& like, const GemmShape& shape);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // Enqueues Y = alpha * X W + beta * C on `stream` (C may be Y itself or nullptr when beta is 0;
  // bias only when planned with one). K == 0 writes zeros. `w_parts`: W's 3xTF32 parts from
  // split_weight (used where the product runs as 3xTF32), else W is split on every run.
  void run(cudaStream_t stream, const void* x, const void* w, const void* c, const void* bias,
           void* y, float alpha, float beta, const void* w_parts = nullptr) const;
  // W's 3xTF32 parts (3k x n as W' below, on the GPU), made once from the constant `w` (host or
  // GPU, shaped as this product's W) for run()'s `w_parts`; every product planned like this one
  // (another row count) takes the same parts. An empty tensor where the product does not run as
  // 3xTF32 or W is not a packed constant.
  Tensor split_weight(const Tensor& w) const;

  const GemmShape& shape() const { return s_; }
  Storage storage() const { return storage_; }
  // Bytes of the backend's workspace run() uses, from its start.
  size_t workspace_size() const { return split_ ? split_total_ : workspace_; }
  // How the algorithm was chosen: the candidate taken and the times measured ("" where the
  // heuristic's one answer was taken unmeasured).
  const std::string& choice() const { return choice_; }
  // Whether the product runs as 3xTF32 (above).
  bool split_tf32() const { return split_ != nullptr; }

 private:
  // The product planned for `compute` (the 3xTF32 inner product), timed where `measure`.
  LtMatmul(std::string where, const GemmShape& shape, bool bias, Storage storage,
           cublasComputeType_t compute, bool measure);
  // Whether 3xTF32 may run `shape`: float32 storage and compute, one batch, enough rows.
  bool split_eligible(const GemmShape& shape) const;
  // run()'s product as planned by plan(), on the operands as given (no 3xTF32).
  void run_product(cudaStream_t stream, const void* x, const void* w, const void* c,
                   const void* bias, void* y, float alpha, float beta) const;
  // Enqueues W's 3xTF32 parts (W' = [big; small; big] along k) into `parts`.
  void split_w(cudaStream_t stream, const void* w, float* parts) const;
  // Plans the 3xTF32 inner product and the workspace of the split operands.
  void plan_split(bool measure);
  // Times the float32 product and the 3xTF32 path on scratch operands (W split beforehand where
  // it is a constant); drops the latter unless it is faster, and says so in choice_.
  void choose_split();
  // Creates the descriptors and takes the algorithm (from the process's cache of choices, else
  // from cuBLASLt's heuristic, its candidates timed with `measure`); false when cuBLASLt has none.
  bool plan(bool measure);
  // The index of the fastest of cuBLASLt's `found` candidates, each timed on zero-filled scratch
  // operands on a stream of its own (0, untimed, where the operands would be too large); sets
  // choice_.
  int fastest(const cublasLtMatmulHeuristicResult_t* results, int found);
  // A column-major rows x cols layout with leading dimension ld (0: rows), over `stride`-apart
  // batches.
  void layout(cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t stride, int64_t ld);

  std::string where_;
  GemmShape s_;
  bool bias_;
  Storage storage_;
  cublasComputeType_t compute_ = CUBLAS_COMPUTE_32F;
  cublasLtMatmulDesc_t op_ = nullptr;  // the bias pointer is set per run (one stream, in order)
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
  std::string choice_;
  // 3xTF32: the inner product over 3k, and the byte offsets in the workspace of the split W and X
  // (after the inner product's own workspace); workspace_size() is split_total_ then.
  std::unique_ptr<LtMatmul> split_;
  size_t split_w_ = 0, split_x_ = 0, split_total_ = 0;
};

}  // namespace lumen::cuda
