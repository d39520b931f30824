// CPU kernels for MatMul and Gemm (float32), both on oneDNN's matmul primitive. Primitives are
// created once per node at compile time for the node's exact shapes; constant weights are
// reordered then into the layout the primitive prefers.
#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/cpu/dnnl_matmul.h"
#include "backends/cpu/gemm_choice.h"
#include "backends/cpu/gemv.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {
namespace {

// Below this many output elements the Gemm C-broadcast loop stays on one thread.
constexpr int64_t kParallelMin = 1 << 15;

// numpy.matmul on float32. Batch dimensions broadcast; the cases run as:
//   B one column without batch: A's batch folds into M, one matrix-vector product (gemv.h);
//   B without batch (or all its batch dims 1): A's batch folds into M, one 2-D matmul;
//   otherwise one batched oneDNN matmul whose size-1 batch dims broadcast;
//   when oneDNN cannot (rank over 12, or no implementation): a loop of 2-D matmuls.
class MatMulKernel final : public Kernel {
 public:
  explicit MatMulKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const Shape& as = ctx.input_shape(0);
    const Shape& bs = ctx.input_shape(1);
    int64_t m = as.rank() >= 2 ? as[-2] : 1;
    int64_t k = as[-1];
    int64_t n = bs.rank() >= 2 ? bs[-1] : 1;
    Dims a_batch(as.dims().begin(), as.dims().end() - std::min(as.rank(), 2));
    Dims b_batch(bs.dims().begin(), bs.dims().end() - std::min(bs.rank(), 2));
    size_t r = std::max(a_batch.size(), b_batch.size());
    a_batch.insert(a_batch.begin(), r - a_batch.size(), 1);
    b_batch.insert(b_batch.begin(), r - b_batch.size(), 1);
    Dims out_batch(r);
    int64_t batch = 1;
    for (size_t i = 0; i < r; ++i) {
      out_batch[i] = a_batch[i] == 1 ? b_batch[i] : a_batch[i];
      batch *= out_batch[i];
    }
    out_numel_ = batch * m * n;
    if (out_numel_ == 0) {
      mode_ = Mode::kEmpty;
      return;
    }
    if (k == 0) {
      mode_ = Mode::kZero;
      return;
    }
    const Tensor* b_value = ctx.input_value(1);
    const float* b_const = b_value ? b_value->data<float>() : nullptr;
    mode_ = Mode::kDirect;
    bool b_flat = std::all_of(b_batch.begin(), b_batch.end(), [](int64_t d) { return d == 1; });
    rows_ = batch * m;
    k_ = k;
    n_ = n;
    if (b_flat && n == 1) {
      mode_ = Mode::kVector;
      return;
    }
    const auto init_flat = [&] {
      // Here A's batch equals the output's, so [batch, M, K] is simply [batch * M, K].
      dnnl_call(where_, [&] {
        mm_.init(plain_md({batch * m, k}), plain_md({k, n}), nullptr, plain_md({batch * m, n}), {},
                 b_value);
      });
    };
    if (b_flat && b_const && bs.rank() >= 2 && lumen_kernel_candidate()) {
      // Constant weights: Lumen's packed GEMM (packed_gemm.h says why) where kernel_choice.h picks
      // it.
      packed_ = PackedMatrix::shared(*b_value, b_const, k, n, n, 1);
      if (kernel_choice_measured()) init_flat();
      choice_ = pick_gemm(
          "MatMul " + std::to_string(rows_) + "x" + std::to_string(k) + "x" + std::to_string(n),
          ctx.graph(), *b_value, rows_, k, n, {}, false, packed_, mm_, /*onednn_any_size=*/true);
      if (choice_.lumen) {
        mode_ = Mode::kPacked;
      } else if (building_for_any_shape()) {
        // A plan for many sizes: oneDNN at every row count, on the weights packed now.
        mode_ = Mode::kRows;
        by_rows_ = std::make_shared<const DnnlMatmulByRows>(mm_, rows_);
      }
      return;
    }
    if (b_flat) {
      init_flat();
      return;
    }
    if (r + 2 <= DNNL_MAX_NDIMS) {
      auto with = [&](Dims batch_dims, int64_t rows, int64_t cols) {
        batch_dims.push_back(rows);
        batch_dims.push_back(cols);
        return plain_md(batch_dims);
      };
      try {
        mm_.init(with(a_batch, m, k), with(b_batch, k, n), nullptr, with(out_batch, m, n), {},
                 b_value);
        return;
      } catch (const dnnl::error&) {
        // falls through to the loop of 2-D products
      }
    }
    mode_ = Mode::kLoop;
    a_step_ = m * k;
    b_step_ = k * n;
    y_step_ = m * n;
    for (int64_t flat = 0; flat < batch; ++flat) {
      int64_t rest = flat, a_index = 0, b_index = 0, a_scale = 1, b_scale = 1;
      for (int i = static_cast<int>(r) - 1; i >= 0; --i) {
        int64_t idx = rest % out_batch[i];
        rest /= out_batch[i];
        a_index += (a_batch[i] == 1 ? 0 : idx) * a_scale;
        b_index += (b_batch[i] == 1 ? 0 : idx) * b_scale;
        a_scale *= a_batch[i];
        b_scale *= b_batch[i];
      }
      a_index_.push_back(a_index);
      b_index_.push_back(b_index);
    }
    dnnl_call(where_, [&] {
      mm_.init(plain_md({m, k}), plain_md({k, n}), nullptr, plain_md({m, n}), {}, nullptr);
    });
  }

  bool reads_input(int k) const override {
    if (k != 1) return true;
    if (mode_ == Mode::kPacked) return false;
    return (mode_ != Mode::kDirect && mode_ != Mode::kRows) || !mm_.packed();
  }

  std::string describe() const override { return describe_choice(choice_, "packed_gemm"); }

  // The packed, by-rows and matrix-vector forms fold A's batch into the rows, which they take per
  // run.
  bool runs_any_shape() const override {
    return mode_ == Mode::kPacked || mode_ == Mode::kRows || mode_ == Mode::kVector;
  }

  void run(KernelContext& ctx) const override {
    float* y = ctx.outputs[0].data<float>();
    if (mode_ == Mode::kEmpty) return;
    if (mode_ == Mode::kZero) {
      std::fill(y, y + out_numel_, 0.0f);
      return;
    }
    const float* a = ctx.inputs[0].data<float>();
    // Rows come from the output, so one kernel serves every row count (runs_any_shape).
    const int64_t rows = ctx.outputs[0].numel() / n_;
    if (mode_ == Mode::kPacked) {
      packed_gemm(rows, a, k_, packed_, y, n_, GemmEpilogue{});
      return;
    }
    if (mode_ == Mode::kVector) {
      matrix_vector(rows, k_, a, k_, ctx.inputs[1].data<float>(), y);
      return;
    }
    // Packed constant weights (direct mode) are not kept by the executable: b is not read.
    const float* b = reads_input(1) ? ctx.inputs[1].data<float>() : nullptr;
    dnnl_call(where_, [&] {
      if (mode_ == Mode::kRows) {
        by_rows_->execute(rows, a, b, nullptr, y);
        return;
      }
      if (mode_ == Mode::kDirect) {
        mm_.execute(a, b, nullptr, y);
        return;
      }
      for (size_t i = 0; i < a_index_.size(); ++i)
        mm_.execute(a + a_index_[i] * a_step_, b + b_index_[i] * b_step_, nullptr,
                    y + static_cast<int64_t>(i) * y_step_);
    });
  }

 private:
  enum class Mode { kEmpty, kZero, kDirect, kLoop, kPacked, kVector, kRows };
  std::string where_;
  Mode mode_ = Mode::kEmpty;
  int64_t out_numel_ = 0;
  int64_t rows_ = 0, k_ = 0, n_ = 0;  // kPacked, kVector, kRows: A [rows_, k_], Y [rows_, n_]
  PackedMatrix packed_;               // kPacked: the constant B
  KernelChoice choice_;               // packed_gemm or oneDNN, and why, where both could run
  // kLoop: elements per matrix, and which A and B matrix each output matrix reads.
  int64_t a_step_ = 0, b_step_ = 0, y_step_ = 0;
  std::vector<int64_t> a_index_, b_index_;
  DnnlMatmul mm_;
  std::shared_ptr<const DnnlMatmulByRows> by_rows_;  // kRows: mm_'s product at any row count
};

// Gemm on float32: Y = alpha * op(A) * op(B) + beta * C as one oneDNN matmul, or with one output
// column and A not transposed as a matrix-vector product (gemv.h; op(B) is then a contiguous
// vector either way), or, for a constant B with A not transposed, alpha 1 and at most a bias, on
// packed_gemm where MatMul uses it (BERT-base's 12 attention output projections: 9.2-10.0% of
// FusedMatMul's time on oneDNN, 8.6-8.9% on packed_gemm, two interleaved runs each).
// Transposes are strides in the memory descriptors and alpha is the output scale. C goes in as:
//   kBias: C is [N] or [1, N] and beta == alpha: oneDNN's bias (which it scales by alpha too);
//   kSum: any other C with beta != 0: Y is first filled with beta * C broadcast, then the matmul
//         adds onto it (a sum post-op).
class GemmKernel final : public Kernel {
 public:
  explicit GemmKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const Shape& as = ctx.input_shape(0);
    const Shape& bs = ctx.input_shape(1);
    bool trans_a = ctx.attr_int("transA", 0) != 0;
    bool trans_b = ctx.attr_int("transB", 0) != 0;
    float alpha = ctx.attr_float("alpha", 1.0f);
    beta_ = ctx.attr_float("beta", 1.0f);
    m_ = trans_a ? as[1] : as[0];
    k_ = trans_a ? as[0] : as[1];
    n_ = trans_b ? bs[0] : bs[1];
    c_mode_ = CMode::kNone;
    if (ctx.has_input(2) && beta_ != 0.0f) {
      const Shape& cs = ctx.input_shape(2);
      c_rows_ = cs.rank() == 2 ? cs[0] : 1;
      c_cols_ = cs.rank() >= 1 ? cs[-1] : 1;
      bool row_vector = c_rows_ == 1 && c_cols_ == n_;
      c_mode_ = row_vector && alpha == beta_ ? CMode::kBias : CMode::kSum;
    }
    if (m_ * n_ == 0 || k_ == 0) return;
    alpha_ = alpha;
    vector_ = n_ == 1 && !trans_a;
    if (vector_) return;
    const Tensor* b_value = ctx.input_value(1);
    const float* b_const = b_value ? b_value->data<float>() : nullptr;
    // Constant B, A as given, no scale and at most a bias: packed_gemm where it is preferred
    // (as MatMul's kPacked; B is k x n, or n x k read transposed).
    const bool packable =
        b_const && lumen_kernel_candidate() && !trans_a && alpha == 1.0f && c_mode_ != CMode::kSum;
    if (packable)
      packed_ = PackedMatrix::shared(*b_value, b_const, k_, n_, trans_b ? 1 : n_, trans_b ? k_ : 1);
    if (packable && !kernel_choice_measured()) {
      use_packed_ = true;
      return;
    }
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (c_mode_ == CMode::kSum) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    Md bias_md = plain_md({1, n_});
    dnnl_call(where_, [&] {
      mm_.init(matrix_md(m_, k_, trans_a), matrix_md(k_, n_, trans_b),
               c_mode_ == CMode::kBias ? &bias_md : nullptr, plain_md({m_, n_}), attr, b_value);
    });
    if (!packable) return;
    const bool with_bias = c_mode_ == CMode::kBias;
    choice_ =
        pick_gemm("Gemm " + std::to_string(m_) + "x" + std::to_string(k_) + "x" +
                      std::to_string(n_) + (trans_b ? " B^T" : "") + (with_bias ? " bias" : ""),
                  ctx.graph(), *b_value, m_, k_, n_, {}, with_bias, packed_, mm_);
    use_packed_ = choice_.lumen;
  }

  std::string describe() const override { return describe_choice(choice_, "packed_gemm"); }

  // On packed_gemm with at most a bias, M is taken per run (A as given, so never transposed).
  bool runs_any_shape() const override {
    return use_packed_ && m_ * n_ > 0 && k_ > 0 && c_mode_ != CMode::kSum;
  }

  // Packed constant weights are not kept by the executable (when the product runs at all).
  bool reads_input(int k) const override {
    return k != 1 || m_ * n_ == 0 || vector_ || (!use_packed_ && !mm_.packed());
  }

  void run(KernelContext& ctx) const override {
    float* y = ctx.outputs[0].data<float>();
    if (m_ * n_ == 0) return;
    const float* c = c_mode_ == CMode::kNone ? nullptr : ctx.inputs[2].data<float>();
    if (k_ == 0 || c_mode_ == CMode::kSum) {
      if (c_mode_ == CMode::kNone)
        std::fill(y, y + m_ * n_, 0.0f);
      else
        fill_beta_c(c, y);
      if (k_ == 0) return;
    }
    const float* a = ctx.inputs[0].data<float>();
    const float* b = reads_input(1) ? ctx.inputs[1].data<float>() : nullptr;
    if (vector_) {
      run_vector(a, b, c, y);
      return;
    }
    if (use_packed_) {
      GemmEpilogue e;
      e.bias = c_mode_ == CMode::kBias ? c : nullptr;
      packed_gemm(ctx.outputs[0].numel() / n_, a, k_, packed_, y, n_, e);
      return;
    }
    dnnl_call(where_, [&] { mm_.execute(a, b, c_mode_ == CMode::kBias ? c : nullptr, y); });
  }

 private:
  // One output column: y = alpha * A b, plus beta * C as filled into y already (kSum) or as the
  // bias C[0] (kBias, where beta == alpha).
  void run_vector(const float* a, const float* b, const float* c, float* y) const {
    if (c_mode_ != CMode::kSum) {
      matrix_vector(m_, k_, a, k_, b, y);
      const float add = c_mode_ == CMode::kBias ? beta_ * c[0] : 0.0f;
      for (int64_t i = 0; i < m_; ++i) y[i] = alpha_ * y[i] + add;
      return;
    }
    // y holds beta * C: the product goes beside it.
    float scratch[kVectorScratch];
    for (int64_t i0 = 0; i0 < m_; i0 += kVectorScratch) {
      const int64_t rows = std::min(kVectorScratch, m_ - i0);
      matrix_vector(rows, k_, a + i0 * k_, k_, b, scratch);
      for (int64_t i = 0; i < rows; ++i) y[i0 + i] += alpha_ * scratch[i];
    }
  }

  // y[i, j] = beta * C[i or 0, j or 0], C seen as [c_rows_, c_cols_].
  void fill_beta_c(const float* c, float* y) const {
    const int64_t m = m_, n = n_, c_cols = c_cols_;
    const bool row_bcast = c_rows_ == 1, col_bcast = c_cols_ == 1 && n_ != 1;
    const float beta = beta_;
#pragma omp parallel for if (m * n > kParallelMin)
    for (int64_t i = 0; i < m; ++i) {
      const float* src = c + (row_bcast ? 0 : i * c_cols);
      float* dst = y + i * n;
      if (col_bcast) {
        const float v = beta * src[0];
        for (int64_t j = 0; j < n; ++j) dst[j] = v;
      } else {
        for (int64_t j = 0; j < n; ++j) dst[j] = beta * src[j];
      }
    }
  }

  enum class CMode { kNone, kBias, kSum };
  static constexpr int64_t kVectorScratch = 256;  // rows per matrix_vector call in kSum mode
  std::string where_;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  float alpha_ = 1.0f, beta_ = 1.0f;
  bool vector_ = false;  // one output column, A not transposed: matrix_vector
  CMode c_mode_ = CMode::kNone;
  int64_t c_rows_ = 1, c_cols_ = 1;
  DnnlMatmul mm_;
  bool use_packed_ = false;  // constant B on packed_gemm
  PackedMatrix packed_;
  KernelChoice choice_;  // packed_gemm or oneDNN, and why, where both could run
};

std::unique_ptr<Kernel> make_matmul(const NodeContext& ctx) {
  return std::make_unique<MatMulKernel>(ctx);
}

std::unique_ptr<Kernel> make_gemm(const NodeContext& ctx) {
  return std::make_unique<GemmKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(MatMul, &make_matmul, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Gemm, &make_gemm, &require_float32);

}  // namespace lumen::cpu
