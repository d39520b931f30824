// MatMul, Gemm and FusedMatMul through cuBLASLt (LtMatmul), float32 (no TF32 unless asked) or
// float16, with float32 accumulation. The algorithm is chosen once at compile time by cuBLASLt's
// heuristic; a bias that is one row is added in the GEMM's epilogue, a FusedMatMul's residual Z as
// cuBLASLt's C (beta 1), and its activation by one in-place launch, or, where measured faster
// for few rows, the whole epilogue in the launch that sums K's slices (SlicedMatmul). Skinny
// float32 products (up to kGemvMaxRows rows, decoding) run gemv.cu's kernel instead, with bias,
// residual and activation in its epilogue; a FusedMatMul of up to kGemvWideRows rows (a short
// sequence's) takes it too, with its row norm in the same launch, where measured faster. A product
// of a constant 2-D weight runs at any row count (a shape family's sizes), each new count planned
// once (RowMatmuls). GroupedMatMul: its members' MatMul kernels, and at the planned row count,
// where every member qualifies, one launch of the skinny kernel over all of them.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/lt_matmul.h"
#include "backends/cuda/norm_extra.h"
#include "backends/cuda/sliced_matmul.h"
#include "backends/matmul_members.h"

namespace lumen::cuda {
namespace {

// gemv.cu's kernel for one node's product, where its shape qualifies: float32, one batch, neither
// operand transposed, at most `max_rows` rows (kGemvMaxRows or kGemvWideRows), N a multiple of 4.
// Owns the column ranges' counters; its partial rows go to the backend's workspace.
class SkinnyGemv {
 public:
  // Null where the shape does not qualify.
  static std::unique_ptr<SkinnyGemv> make(const NodeContext& ctx, const GemmShape& s,
                                          int64_t max_rows = kGemvMaxRows) {
    if (ctx.input_dtype(0) != DType::kFloat32 || s.batch != 1 || s.trans_x || s.trans_w ||
        s.m > max_rows)
      return nullptr;
    int device = 0, sms = 0;
    check(cudaGetDevice(&device), ctx.where());
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), ctx.where());
    const GemvPlan plan = gemv_plan(s.m, s.n, s.k, sms);
    if (plan.splits == 0) return nullptr;
    return std::unique_ptr<SkinnyGemv>(new SkinnyGemv(ctx, s, plan));
  }
  ~SkinnyGemv() { cudaFree(counters_); }
  SkinnyGemv(const SkinnyGemv&) = delete;
  SkinnyGemv& operator=(const SkinnyGemv&) = delete;

  // Enqueues Y = act(X W + bias + residual) (bias and residual may be null), each row then
  // normalized where ln.scale is set; false (nothing enqueued) when a pointer is not 16-byte
  // aligned.
  bool run(cudaStream_t stream, const void* x, const void* w, const void* bias,
           const void* residual, void* y, UnaryOp act, float alpha, float beta,
           const GemvLayerNorm& ln = {}) const {
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (!aligned(w) || !aligned(y) || !aligned(bias) || !aligned(residual)) return false;
    auto* scratch = static_cast<float*>(
        scratch_bytes_ > 0 ? require_cuda_backend().workspace().ptr() : nullptr);
    launch_gemv(plan_, s_.m, s_.n, s_.k, static_cast<const float*>(x), static_cast<const float*>(w),
                static_cast<const float*>(bias), static_cast<const float*>(residual), act, alpha,
                beta, static_cast<float*>(y), scratch, counters_, stream, ln);
    check_launch(where_);
    return true;
  }
  const GemmShape& shape() const { return s_; }

 private:
  SkinnyGemv(const NodeContext& ctx, const GemmShape& s, const GemvPlan& plan)
      : where_(ctx.where()), s_(s), plan_(plan), scratch_bytes_(gemv_scratch_bytes(plan, s.m)) {
    if (scratch_bytes_ > 0) require_cuda_backend().workspace().reserve(scratch_bytes_);
    const size_t bytes = sizeof(unsigned) * gemv_counters(plan);
    check(cudaMalloc(&counters_, bytes), where_);
    check(cudaMemset(counters_, 0, bytes), where_);
  }

  std::string where_;
  GemmShape s_;
  GemvPlan plan_;
  size_t scratch_bytes_ = 0;
  unsigned* counters_ = nullptr;
};

// A node's product at the row count of each run: the one planned at compile time, or one planned
// at run time for a new count (at most kMaxCounts kept per node). Only for products whose other
// sizes cannot change between a shape family's sizes: a constant 2-D W, X's rows contiguous.
class RowMatmuls {
 public:
  RowMatmuls(const NodeContext& ctx, const GemmShape& s, bool bias)
      : planned_(std::make_shared<LtMatmul>(ctx, with_constant_w(ctx, s), bias)),
        any_rows_(s.batch == 1 && !s.trans_x && ctx.input_value(1) != nullptr &&
                  ctx.input_shape(1).rank() == 2) {
    if (planned_->shape().constant_w) w_parts_ = planned_->split_weight(*ctx.input_value(1));
  }

  const GemmShape& shape() const { return planned_->shape(); }
  bool any_rows() const { return any_rows_; }
  // How the planned product's algorithm was chosen (LtMatmul::choice).
  const std::string& choice() const { return planned_->choice(); }
  // The rows of this run's product: Y's elements over N where any row count runs, else the
  // planned count.
  int64_t rows(const KernelContext& ctx) const {
    const int64_t n = planned_->shape().n;
    if (!any_rows_) return planned_->shape().m;
    return n == 0 ? 0 : ctx.outputs[0].numel() / n;
  }

  // W's 3xTF32 parts, split once at compile time, for run()'s `w_parts` (null where the product
  // does not run as 3xTF32).
  const void* w_parts() const { return w_parts_.defined() ? w_parts_.raw_data() : nullptr; }

  // The product for `rows` rows (planned now if new; on the run's thread, before any recording of
  // the plan that runs it, since a plan's first run goes step by step).
  std::shared_ptr<const LtMatmul> at(int64_t rows) const {
    if (rows == planned_->shape().m) return planned_;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = others_.find(rows);
    if (it != others_.end()) return it->second;
    if (others_.size() >= kMaxCounts) others_.clear();
    GemmShape s = planned_->shape();
    s.m = rows;
    auto made = std::make_shared<const LtMatmul>(*planned_, s);
    others_.emplace(rows, made);
    return made;
  }

 private:
  // s, with constant_w set where W is a packed constant of one batch.
  static GemmShape with_constant_w(const NodeContext& ctx, GemmShape s) {
    const Tensor* w = ctx.input_value(1);
    s.constant_w = w != nullptr && s.batch == 1 && s.ld_w == 0 && w->numel() == s.k * s.n;
    return s;
  }

  static constexpr size_t kMaxCounts = 64;
  std::shared_ptr<const LtMatmul> planned_;
  bool any_rows_;
  Tensor w_parts_;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, std::shared_ptr<const LtMatmul>> others_;
};

class LtGemmKernel final : public Kernel {
 public:
  // bias: a vector of n added by the epilogue; c_beta: Y = alpha*XW + beta*C with C [M, N].
  LtGemmKernel(const NodeContext& ctx, const GemmShape& s, float alpha, bool bias, float c_beta)
      : matmul_(ctx, s, bias), alpha_(alpha), beta_(c_beta), bias_(bias) {
    if (alpha == 1.f && c_beta == 0.f) gemv_ = SkinnyGemv::make(ctx, s);
  }

  void run(KernelContext& ctx) const override {
    const int64_t rows = matmul_.rows(ctx);
    if (rows == matmul_.shape().m && gemv_ &&
        gemv_->run(stream_of(ctx), ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(),
                   bias_ ? ctx.inputs[2].raw_data() : nullptr, nullptr, ctx.outputs[0].raw_data(),
                   UnaryOp::kIdentity, 0.f, 0.f))
      return;
    const void* c = nullptr;
    const void* bias = nullptr;
    if (bias_)
      bias = ctx.inputs[2].raw_data();
    else if (beta_ != 0.f)
      c = ctx.inputs[2].raw_data();
    matmul_.at(rows)->run(stream_of(ctx), ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(), c,
                          bias, ctx.outputs[0].raw_data(), alpha_, beta_, matmul_.w_parts());
  }

  bool runs_any_shape() const override { return matmul_.any_rows(); }
  std::string describe() const override { return matmul_.choice(); }

 private:
  RowMatmuls matmul_;
  float alpha_, beta_;
  bool bias_;
  std::unique_ptr<SkinnyGemv> gemv_;
};

std::string check_gemm(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  const Shape& x0 = ctx.input_shape(0);
  if (ctx.op() == OpKind::kGemm && x0.rank() == 2 &&
      x0[ctx.attr_int("transA", 0) != 0 ? 0 : 1] == 0)
    return "an empty inner dimension";  // Y = beta * C, which the CPU kernel computes
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

// FusedMatMul: Y = act(op(A) op(B) + bias + Z), each operand's batch either full or broadcast; the
// residual Z (input 3) is shaped like Y; with a norm scale (input 4), each row of Y then
// normalized: in the launch that sums K's slices where SlicedMatmul is taken, else a launch of
// launch_layer_norm over Y in place.
class FusedMatMulKernel final : public Kernel {
 public:
  FusedMatMulKernel(const NodeContext& ctx, const GemmShape& s, bool bias, bool residual)
      : where_(ctx.where()),
        matmul_(ctx, s, bias),
        bias_(bias),
        residual_(residual),
        norm_(ctx.num_inputs() > 4 && ctx.has_input(4)),
        norm_bias_(ctx.num_inputs() > 5 && ctx.has_input(5)),
        epsilon_(ctx.attr_float("norm_epsilon", 1e-5f)) {
    if (!fused_activation(ctx, &act_, &alpha_, &beta_))
      ctx.fail_unsupported("CUDA: activation '" + ctx.attr_string("activation", "") + "'");
    storage_ = storage_of(ctx.output(0).dtype);
    gemv_ = SkinnyGemv::make(ctx, s);
    if (gemv_) return;
    sliced_ = SlicedMatmul::make(*matmul_.at(matmul_.shape().m), bias, residual, act_, alpha_,
                                 beta_, norm_, epsilon_);
    auto wide = SkinnyGemv::make(ctx, s, kGemvWideRows);
    if (wide && wide_gemv_wins(*wide)) {
      gemv_ = std::move(wide);
      sliced_.reset();
    }
  }

  void run(KernelContext& ctx) const override {
    cudaStream_t stream = stream_of(ctx);
    void* y = ctx.outputs[0].raw_data();
    const void* bias = bias_ ? ctx.inputs[2].raw_data() : nullptr;
    const void* z = residual_ ? ctx.inputs[3].raw_data() : nullptr;
    const void* norm_scale = norm_ ? ctx.inputs[4].raw_data() : nullptr;
    const void* norm_bias = norm_bias_ ? ctx.inputs[5].raw_data() : nullptr;
    const int64_t rows = matmul_.rows(ctx);
    if (rows == matmul_.shape().m && sliced_) {
      sliced_->run(stream, ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(), bias, z, y,
                   norm_scale, norm_bias);
      check_launch(where_);
      return;
    }
    const GemvLayerNorm ln{static_cast<const float*>(norm_scale),
                           static_cast<const float*>(norm_bias), epsilon_};
    const bool done = rows == matmul_.shape().m && gemv_ &&
                      gemv_->run(stream, ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(), bias,
                                 z, y, act_, alpha_, beta_, ln);
    if (done) return;  // with the row norm, where there is one
    matmul_.at(rows)->run(stream, ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(), z, bias, y,
                          1.f, residual_ ? 1.f : 0.f, matmul_.w_parts());
    if (act_ != UnaryOp::kIdentity) {
      launch_unary(storage_, act_, alpha_, beta_, y, y, ctx.outputs[0].numel(), stream);
      check_launch(where_);
    }
    if (norm_) {
      const int64_t n = matmul_.shape().n;
      launch_layer_norm(storage_, y, norm_scale, norm_bias, y, ctx.outputs[0].numel() / n, n,
                        epsilon_, stream);
      check_launch(where_);
    }
  }

  bool runs_any_shape() const override { return matmul_.any_rows(); }
  std::string describe() const override {
    if (gemv_ && !wide_choice_.empty()) return wide_choice_;
    const std::string way = sliced_ ? sliced_->choice() : matmul_.choice();
    return wide_choice_.empty() ? way : way + "; " + wide_choice_;
  }

 private:
  // Times `wide` (gemv.cu's kernel over groups of rows, with the whole epilogue and the row norm)
  // against the way this node runs without it (sliced_, else the product, then its activation and
  // norm launches), on operands of zeros, the best of three; true where it takes at most
  // kWideShare of that time. The outcome is kept per shape and epilogue for the process.
  bool wide_gemv_wins(const SkinnyGemv& wide) {
    constexpr float kWideShare = 0.95f;
    const GemmShape& s = wide.shape();
    int device = 0;
    check(cudaGetDevice(&device), where_);
    char key[160];
    std::snprintf(key, sizeof(key), "%d:%lld,%lld,%lld,%d,%d,%d,%d,%d", device,
                  static_cast<long long>(s.m), static_cast<long long>(s.n),
                  static_cast<long long>(s.k), bias_ ? 1 : 0, residual_ ? 1 : 0,
                  static_cast<int>(act_), norm_ ? 1 : 0, norm_bias_ ? 1 : 0);
    static MeasuredPairs measured;
    const std::pair<float, float> times = measured.get(key, [&] {
      const Device dev = Device::cuda();
      const Tensor x = Tensor::zeros(Shape{s.m * s.k}, DType::kFloat32, dev);
      const Tensor w = Tensor::zeros(Shape{s.k * s.n}, DType::kFloat32, dev);
      const Tensor y = Tensor::zeros(Shape{s.m * s.n}, DType::kFloat32, dev);
      const Tensor z = Tensor::zeros(Shape{s.m * s.n}, DType::kFloat32, dev);
      const Tensor row = Tensor::zeros(Shape{s.n}, DType::kFloat32, dev);
      const float* bp = bias_ ? static_cast<const float*>(row.raw_data()) : nullptr;
      const float* zp = residual_ ? static_cast<const float*>(z.raw_data()) : nullptr;
      const float* sp = norm_ ? static_cast<const float*>(row.raw_data()) : nullptr;
      const float* nb = norm_bias_ ? static_cast<const float*>(row.raw_data()) : nullptr;
      check(cudaStreamSynchronize(require_cuda_backend().stream().handle()), where_);
      TimingStream own(where_);
      float other_ms = 1e30f, wide_ms = 1e30f;
      for (int round = 0; round < 3; ++round) {
        other_ms = std::min(other_ms,
                            time_on_stream(
                                own.handle,
                                [&] {
                                  if (sliced_) {
                                    sliced_->run(own.handle, x.raw_data(), w.raw_data(), bp, zp,
                                                 y.raw_data(), sp, nb);
                                    return;
                                  }
                                  matmul_.at(s.m)->run(own.handle, x.raw_data(), w.raw_data(), zp,
                                                       bp, y.raw_data(), 1.f, residual_ ? 1.f : 0.f,
                                                       matmul_.w_parts());
                                  if (act_ != UnaryOp::kIdentity)
                                    launch_unary(storage_, act_, alpha_, beta_, y.raw_data(),
                                                 y.raw_data(), s.m * s.n, own.handle);
                                  if (norm_)
                                    launch_layer_norm(storage_, y.raw_data(), sp, nb, y.raw_data(),
                                                      s.m, s.n, epsilon_, own.handle);
                                },
                                where_.c_str()));
        wide_ms = std::min(wide_ms, time_on_stream(
                                        own.handle,
                                        [&] {
                                          wide.run(own.handle, x.raw_data(), w.raw_data(), bp, zp,
                                                   y.raw_data(), act_, alpha_, beta_,
                                                   GemvLayerNorm{sp, nb, epsilon_});
                                        },
                                        where_.c_str()));
      }
      check(cudaStreamSynchronize(own.handle), where_);
      return std::make_pair(wide_ms, other_ms);
    });
    const bool wins = times.first <= kWideShare * times.second;
    char text[200];
    std::snprintf(text, sizeof(text),
                  "skinny kernel over %lld rows in groups of %lld%s: %.4f ms against %.4f ms%s",
                  static_cast<long long>(s.m), static_cast<long long>(kGemvMaxRows),
                  norm_ ? ", row norm in the same launch" : "", static_cast<double>(times.first),
                  static_cast<double>(times.second), wins ? "" : ", not taken");
    wide_choice_ = text;
    return wins;
  }

  std::string where_;
  RowMatmuls matmul_;
  bool bias_, residual_;
  bool norm_, norm_bias_;  // inputs 4 and 5: each row of Y normalized last
  float epsilon_;
  UnaryOp act_ = UnaryOp::kIdentity;
  float alpha_ = 0.f, beta_ = 0.f;
  Storage storage_ = Storage::kFloat32;
  std::unique_ptr<SkinnyGemv> gemv_;      // up to kGemvMaxRows rows, or more where measured faster
  std::string wide_choice_;               // why gemv_ runs above kGemvMaxRows rows
  std::unique_ptr<SlicedMatmul> sliced_;  // at the planned rows, where measured faster
};

int64_t batch_numel(const Shape& s) {
  int64_t n = 1;
  for (int d = 0; d + 2 < s.rank(); ++d) n *= s[d];
  return n;
}

std::string check_fused_matmul(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  UnaryOp op{};
  float a = 0.f, b = 0.f;
  if (!fused_activation(ctx, &op, &a, &b))
    return "no activation '" + ctx.attr_string("activation", "") + "'";
  const int64_t batch = batch_numel(ctx.output(0).shape);
  for (int i = 0; i < 2; ++i) {
    int64_t n = batch_numel(ctx.input_shape(i));
    if (n != 1 && n != batch) return "batch dims broadcast both ways";
  }
  const Shape& x = ctx.input_shape(0);
  if ((ctx.attr_int("trans_a", 0) == 1 ? x[-2] : x[-1]) == 0) return "an empty inner dimension";
  return "";
}

std::unique_ptr<Kernel> make_fused_matmul(const NodeContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  const Shape& y = ctx.output(0).shape;
  GemmShape s;
  s.trans_x = ctx.attr_int("trans_a", 0) == 1;
  s.trans_w = ctx.attr_int("trans_b", 0) == 1;
  s.m = y[-2];
  s.n = y[-1];
  s.k = s.trans_x ? a[-2] : a[-1];
  const int64_t batch = batch_numel(y), batch_a = batch_numel(a), batch_b = batch_numel(b);
  if (batch_b == 1 && !s.trans_x && batch_a == batch) {
    s.m *= batch;  // every batch of A times one B: one GEMM over all rows
  } else if (batch > 1) {
    s.batch = batch;
    s.stride_x = batch_a == 1 ? 0 : s.m * s.k;
    s.stride_w = batch_b == 1 ? 0 : s.k * s.n;
    s.stride_y = s.m * s.n;
  }
  const bool bias = ctx.num_inputs() > 2 && ctx.has_input(2);
  const bool residual = ctx.num_inputs() > 3 && ctx.has_input(3);
  return std::make_unique<FusedMatMulKernel>(ctx, s, bias, residual);
}

// GroupedMatMul: Y_i = A B_i. Each member is the MatMul kernel a lone MatMul of B_i gets; at the
// row count planned, with at most kGemvMaxProducts members that gemv.cu's kernel takes, one launch
// of it covers them all (a decoding step's query, key and value projections). With the RMS-norm
// prologue that launch normalizes A as it reads it; the members' way normalizes A into a buffer of
// the planned rows first (such a group runs at those rows only).
class GroupedMatMulKernel final : public Kernel {
 public:
  explicit GroupedMatMulKernel(const NodeContext& ctx)
      : where_(ctx.where()),
        members_(matmul_members(ctx)),
        norm_(ctx.has_attr("rms_norm_epsilon")),
        epsilon_(ctx.attr_float("rms_norm_epsilon", 0.0f)) {
    const KernelEntry* matmul = find_kernel(OpKind::kMatMul);
    kernels_ = member_kernels(ctx, members_, matmul == nullptr ? nullptr : matmul->make);
    const Shape& a = ctx.input_shape(0);
    k_ = a[-1];
    rows_ = k_ == 0 ? 0 : a.numel() / k_;
    for (int i = 1; i <= ctx.num_outputs(); ++i) n_.push_back(ctx.input_shape(i)[1]);
    if (norm_) normed_ = Tensor::empty(ctx.input_shape(0), ctx.input_dtype(0), Device::cuda());
    storage_ = storage_of(ctx.input_dtype(0));
    if (ctx.input_dtype(0) != DType::kFloat32) return;
    int device = 0, sms = 0;
    check(cudaGetDevice(&device), where_);
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), where_);
    if (rows_ > kGemvMaxRows) return;
    plan_ = gemv_plan(rows_, n_, k_, sms);
    if (plan_.splits == 0) return;
    products_ = gemv_products(n_);
    products_.norm_epsilon = epsilon_;
    scratch_bytes_ = gemv_scratch_bytes(plan_, rows_);
    if (scratch_bytes_ > 0) require_cuda_backend().workspace().reserve(scratch_bytes_);
    const size_t bytes = sizeof(unsigned) * gemv_counters(plan_);
    check(cudaMalloc(&counters_, bytes), where_);
    check(cudaMemset(counters_, 0, bytes), where_);
  }
  ~GroupedMatMulKernel() override { cudaFree(counters_); }
  GroupedMatMulKernel(const GroupedMatMulKernel&) = delete;
  GroupedMatMulKernel& operator=(const GroupedMatMulKernel&) = delete;

  void run(KernelContext& ctx) const override {
    const int64_t rows = n_[0] == 0 ? 0 : ctx.outputs[0].numel() / n_[0];
    if (rows == rows_ && plan_.splits > 0 && run_together(ctx)) return;
    Tensor a = ctx.inputs[0];
    if (norm_) {
      if (rows != rows_)
        throw InvalidArgument(where_ + ": the RMS-norm prologue runs at " + std::to_string(rows_) +
                              " rows only, got " + std::to_string(rows));
      launch_rms_norm(storage_, a.raw_data(), ctx.inputs[n_.size() + 1].raw_data(),
                      normed_.raw_data(), rows_, k_, epsilon_, stream_of(ctx));
      check_launch(where_);
      a = normed_;
    }
    run_members(kernels_, ctx, a);
  }

  bool runs_any_shape() const override { return !norm_ && members_run_any_shape(kernels_); }

  std::string describe() const override {
    return plan_.splits > 0 ? "one skinny launch over " + std::to_string(n_.size()) +
                                  " products at " + std::to_string(rows_) + " rows"
                            : "";
  }

 private:
  // One launch over every member; false (nothing enqueued) where a pointer is not 16-byte aligned.
  bool run_together(KernelContext& ctx) const {
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    GemvProducts products = products_;
    for (size_t i = 0; i < n_.size(); ++i) {
      products.w[i] = static_cast<const float*>(ctx.inputs[i + 1].raw_data());
      products.y[i] = static_cast<float*>(ctx.outputs[i].raw_data());
      if (!aligned(products.w[i]) || !aligned(products.y[i])) return false;
    }
    if (norm_)
      products.norm_scale = static_cast<const float*>(ctx.inputs[n_.size() + 1].raw_data());
    auto* scratch = static_cast<float*>(
        scratch_bytes_ > 0 ? require_cuda_backend().workspace().ptr() : nullptr);
    launch_gemv(plan_, rows_, k_, static_cast<const float*>(ctx.inputs[0].raw_data()), products,
                scratch, counters_, stream_of(ctx));
    check_launch(where_);
    return true;
  }

  std::string where_;
  std::vector<MatMulMember> members_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  bool norm_;
  float epsilon_;
  Tensor normed_;  // A normalized, for the members' way
  Storage storage_ = Storage::kFloat32;
  int64_t k_ = 0, rows_ = 0;
  std::vector<int64_t> n_;
  GemvPlan plan_;
  GemvProducts products_;  // the members' column tiles (and epsilon); pointers filled per run
  size_t scratch_bytes_ = 0;
  unsigned* counters_ = nullptr;
};

std::string check_grouped_matmul(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  for (int i = 1; i <= ctx.num_outputs(); ++i)
    if (ctx.input_value(i) == nullptr) return "weight " + std::to_string(i) + " not a constant";
  return "";
}

std::unique_ptr<Kernel> make_grouped_matmul(const NodeContext& ctx) {
  return std::make_unique<GroupedMatMulKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(GroupedMatMul, &make_grouped_matmul, &check_grouped_matmul);
LUMEN_REGISTER_CUDA_KERNEL(FusedMatMul, &make_fused_matmul, &check_fused_matmul);
LUMEN_REGISTER_CUDA_KERNEL(Gemm, &make_gemm, &check_gemm);
LUMEN_REGISTER_CUDA_KERNEL(MatMul, &make_matmul, &check_gemm);

}  // namespace lumen::cuda
