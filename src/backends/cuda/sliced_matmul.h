// A float32 product of few rows, Y = act(X W + bias + Z), whose K runs as `slices` equal parts:
// one strided-batched cuBLASLt product of the parts into float32 partial results in the backend's
// workspace, then one kernel (launch_slice_sum) that sums them and applies the whole epilogue.
// cuBLASLt splits K of such products itself (BERT's at 128 rows: 4 to 20 parts), but then sums the
// parts in a launch of its own and leaves an activation it has no form for (the erf GELU), and a
// LayerNormalization of each row fused into the product (a post-LN transformer's), to further
// launches; here one launch does all. FusedMatMul takes it where measured faster.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backends/cuda/launch.h"
#include "backends/cuda/lt_matmul.h"

namespace lumen::cuda {

class SlicedMatmul {
 public:
  // The fastest slicing of `plain`'s product with this epilogue (bias: a row of N; residual: a Z
  // shaped like Y; op, alpha, beta: the activation; with `norm`, each row then normalized with
  // `epsilon`), each timed at build time against `plain` run as FusedMatMul runs it (its product,
  // then the activation launch, then the norm launch); null where none is faster or the product
  // does not qualify: float32 (not 3xTF32), one batch, X not transposed, Y packed, at most kMaxRows
  // rows, K a multiple of the slice count with kMinSliceK or more each, and with `norm` at most
  // kSliceNormMaxColumns columns.
  static std::unique_ptr<SlicedMatmul> make(const LtMatmul& plain, bool bias, bool residual,
                                            UnaryOp op, float alpha, float beta, bool norm = false,
                                            float epsilon = 0.f);

  // `plain`'s product in exactly `slices` slices with this epilogue, untimed, for a caller that
  // times its own ways (a pointwise convolution, conv.cc): Y = W_conv X_conv, whose bias runs
  // along Y's rows (`bias_per_row`: a channel per row) rather than its columns. Null where the
  // product or the slicing does not qualify (as make(), but any row count) or cuBLASLt has no
  // algorithm for it. run() then needs workspace_bytes() of the backend's workspace, which the
  // caller reserves.
  static std::unique_ptr<SlicedMatmul> with_slices(const LtMatmul& plain, int slices,
                                                   bool bias_per_row, UnaryOp op, float alpha,
                                                   float beta);
  size_t workspace_bytes() const;

  // Enqueues Y = act(X W + bias + Z) on `stream` (bias and z null where the product has none),
  // each row then normalized with norm_scale and norm_bias (null where none) when made with norm.
  void run(cudaStream_t stream, const void* x, const void* w, const void* bias, const void* z,
           void* y, const void* norm_scale = nullptr, const void* norm_bias = nullptr) const;
  // The slicing and the times measured, for `lumen plan`.
  const std::string& choice() const { return choice_; }
  int slices() const { return slices_; }

  static constexpr int64_t kMaxRows = 512;
  static constexpr int64_t kMinSliceK = 64;

 private:
  SlicedMatmul(std::unique_ptr<LtMatmul> parts, int slices, const GemmShape& whole, UnaryOp op,
               float alpha, float beta, bool norm, float epsilon);
  // run() with the partial results at `partials` (slices * M * N floats) instead of the
  // workspace, where make() times the candidates.
  void run_into(cudaStream_t stream, const void* x, const void* w, const void* bias, const void* z,
                void* y, const void* norm_scale, const void* norm_bias, float* partials) const;

  std::unique_ptr<LtMatmul> parts_;  // the batched product of the slices
  int slices_;
  GemmShape whole_;
  UnaryOp op_;
  float alpha_, beta_;
  bool norm_;
  float epsilon_;
  bool bias_per_row_ = false;
  size_t partials_offset_;  // where run()'s partial results start in the backend's workspace
  std::string choice_;
};

}  // namespace lumen::cuda
