// MatMul and Gemm through cuBLASLt, float32 with float32 accumulation (CUBLAS_COMPUTE_32F: no
// TF32). The algorithm is chosen once at compile time by cuBLASLt's heuristic; a Gemm bias that
// is one row is added in the GEMM's epilogue.
//
// Lumen's tensors are row-major and cuBLASLt's matrices column-major, so Y[M,N] = X[M,K] W[K,N] is
// computed as Y^T = W^T X^T: cuBLASLt's A is our W and its B is our X, read with no copy.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace lumen::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_x = false, trans_w = false;
  int64_t batch = 1;
  int64_t stride_x = 0, stride_w = 0, stride_y = 0;  // elements between batches (0: broadcast)
};

class LtGemmKernel final : public Kernel {
 public:
  // bias: a vector of n added by the epilogue; c_beta: Y = alpha*XW + beta*C with C [M, N].
  LtGemmKernel(const NodeContext& ctx, const GemmShape& s, float alpha, bool bias, float c_beta)
      : where_(ctx.where()), s_(s), alpha_(alpha), beta_(c_beta), bias_(bias) {
    CudaBackend& be = require_cuda_backend();
    if (s.m == 0 || s.n == 0) return;
    check(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F), where_);
    cublasOperation_t ta = s.trans_w ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = s.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
          where_);
    check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
          where_);
    if (bias_) {
      cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
            where_);
    }
    // Column-major views: W as (n x k) op'd, X as (k x m) op'd, Y as (n x m).
    layout(&a_, s.trans_w ? s.k : s.n, s.trans_w ? s.n : s.k, s.stride_w);
    layout(&b_, s.trans_x ? s.m : s.k, s.trans_x ? s.k : s.m, s.stride_x);
    layout(&d_, s.n, s.m, s.stride_y);
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), where_);
    size_t ws = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                               sizeof(ws)),
          where_);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(be.cublas(), op_, a_, b_, d_, d_, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(st, where_ + ": algorithm heuristic");
    if (found == 0) ctx.fail_unsupported("cuBLASLt has no algorithm for this product");
    algo_ = result.algo;
    workspace_ = result.workspaceSize;
    be.workspace().reserve(workspace_);
  }

  ~LtGemmKernel() override {
    for (auto* l : {a_, b_, d_})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (op_) cublasLtMatmulDescDestroy(op_);
  }

  void run(KernelContext& ctx) const override {
    if (s_.m == 0 || s_.n == 0) return;
    CudaBackend& be = require_cuda_backend();
    Tensor& y = ctx.outputs[0];
    const void* c = y.raw_data();
    if (bias_) {
      const void* bias = ctx.inputs[2].raw_data();
      check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                           sizeof(bias)),
            where_);
    } else if (beta_ != 0.f) {
      c = ctx.inputs[2].raw_data();
    }
    if (s_.k == 0) {
      check(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), stream_of(ctx)), where_);
      return;
    }
    check(cublasLtMatmul(be.cublas(), op_, &alpha_, ctx.inputs[1].raw_data(), a_,
                         ctx.inputs[0].raw_data(), b_, &beta_, c, d_, y.raw_data(), d_, &algo_,
                         be.workspace().ptr(), workspace_, stream_of(ctx)),
          where_);
  }

 private:
  void layout(cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t stride) {
    check(cublasLtMatrixLayoutCreate(l, CUDA_R_32F, rows, cols, rows), where_);
    if (s_.batch > 1) {
      int32_t count = static_cast<int32_t>(s_.batch);
      check(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                             sizeof(count)),
            where_);
      check(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &stride, sizeof(stride)),
            where_);
    }
  }

  std::string where_;
  GemmShape s_;
  float alpha_, beta_;
  bool bias_;
  cublasLtMatmulDesc_t op_ = nullptr;  // the bias pointer is set per run (one stream, in order)
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
};

std::string check_gemm(const NodeContext& ctx) {
  std::string why = require_float32(ctx);
  if (!why.empty()) return why;
  if (!ctx.output(0).shape.is_static()) return "the output shape is known only at run time";
  if (ctx.op() == OpKind::kGemm && ctx.has_input(2)) {
    const Shape& c = ctx.input_shape(2);
    const Shape& y = ctx.output(0).shape;
    bool row = (c.rank() == 1 && c[0] == y[1]) || (c.rank() == 2 && c[0] == 1 && c[1] == y[1]);
    bool full = c == y;
    if (!row && !full) return "C must be [N], [1, N] or [M, N]";
    if (row && !full && ctx.attr_float("beta", 1.0f) != 1.0f) return "a C row with beta != 1";
  }
  if (ctx.op() == OpKind::kMatMul) {
    const Shape& a = ctx.input_shape(0);
    const Shape& b = ctx.input_shape(1);
    if (a.rank() < 2 || b.rank() < 2) return "1-D operands";
    if (b.rank() > 2 && a.rank() > 2) {
      if (a.rank() != b.rank()) return "batch dims of different rank";
      for (int d = 0; d + 2 < a.rank(); ++d)
        if (a[d] != b[d]) return "broadcast batch dims";
    } else if (b.rank() > 2 && a.rank() == 2) {
      // X broadcast over W's batch: handled with a zero stride
    }
  }
  return "";
}

std::unique_ptr<Kernel> make_gemm(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  GemmShape s;
  s.trans_x = ctx.attr_int("transA", 0) != 0;
  s.trans_w = ctx.attr_int("transB", 0) != 0;
  s.m = s.trans_x ? x[1] : x[0];
  s.k = s.trans_x ? x[0] : x[1];
  s.n = s.trans_w ? w[0] : w[1];
  float alpha = ctx.attr_float("alpha", 1.0f), beta = ctx.attr_float("beta", 1.0f);
  bool bias = false;
  float c_beta = 0.f;
  if (ctx.has_input(2)) {
    bias = ctx.input_shape(2) != ctx.output(0).shape;
    c_beta = bias ? 0.f : beta;
  }
  return std::make_unique<LtGemmKernel>(ctx, s, alpha, bias, c_beta);
}

std::unique_ptr<Kernel> make_matmul(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  GemmShape s;
  s.k = x[x.rank() - 1];
  s.n = w[w.rank() - 1];
  if (w.rank() == 2) {
    // Every batch of X times one W: one GEMM over the rows of all batches.
    s.m = x.numel() / std::max<int64_t>(s.k, 1);
    if (s.k == 0) s.m = ctx.output(0).shape.numel() / std::max<int64_t>(s.n, 1);
  } else {
    s.m = x[x.rank() - 2];
    s.batch = w.numel() / std::max<int64_t>(s.k * s.n, 1);
    s.stride_w = s.k * s.n;
    s.stride_x = x.rank() > 2 ? s.m * s.k : 0;
    s.stride_y = s.m * s.n;
  }
  return std::make_unique<LtGemmKernel>(ctx, s, 1.0f, false, 0.f);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(Gemm, &make_gemm, &check_gemm);
LUMEN_REGISTER_CUDA_KERNEL(MatMul, &make_matmul, &check_gemm);

}  // namespace lumen::cuda
