// CPU kernel of FusedMatMul: Y = activation(op(A) x op(B) + bias + Z) as one oneDNN matmul, the
// bias as the primitive's bias, the residual Z as a sum post-op and the activation as an eltwise
// post-op, applied while each output tile
// is written; op() (trans_a / trans_b) is a stride swap in the memory descriptor, never a copy.
// A norm epilogue (inputs 4 and 5) normalizes each row of Y afterwards, as LayerNormalization does
// (norm_math.h), while the product's rows are still in cache.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/dnnl_matmul.h"
#include "backends/cpu/gemm_choice.h"
#include "backends/cpu/gemv.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"
#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu {
namespace {

// The node's residual (a sum post-op: the primitive adds what Y holds) and activation as oneDNN
// post-ops (empty for neither).
dnnl::post_ops activation_post_ops(const NodeContext& ctx, bool residual) {
  dnnl::post_ops ops;
  if (residual) ops.append_sum(1.0f);
  std::string act = ctx.attr_string("activation", "");
  float alpha = ctx.attr_float("activation_alpha", 0.0f);
  float beta = ctx.attr_float("activation_beta", 0.0f);
  auto add = [&](dnnl::algorithm alg, float a, float b) { ops.append_eltwise(1.0f, alg, a, b); };
  if (act.empty()) return ops;
  if (act == "Relu")
    add(dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  else if (act == "LeakyRelu")
    add(dnnl::algorithm::eltwise_relu, alpha, 0.0f);
  else if (act == "Clip")
    add(dnnl::algorithm::eltwise_clip, alpha, beta);
  else if (act == "Sigmoid")
    add(dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
  else if (act == "Tanh")
    add(dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f);
  else if (act == "HardSwish")
    add(dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f);
  else if (act == "Swish")
    add(dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
  else if (act == "GeluErf")
    add(dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  else if (act == "GeluTanh")
    add(dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
  else
    ctx.fail_unsupported("activation '" + act + "' has no oneDNN post-op");
  return ops;
}

// A [batch..., rows, cols] operand stored densely as [batch..., rows, cols], or as
// [batch..., cols, rows] when `transposed`.
Md operand_md(Dims batch, int64_t rows, int64_t cols, bool transposed) {
  Dims dims = batch;
  dims.push_back(rows);
  dims.push_back(cols);
  Dims strides(dims.size());
  strides[dims.size() - 2] = transposed ? 1 : cols;
  strides[dims.size() - 1] = transposed ? rows : 1;
  int64_t step = rows * cols;
  for (int i = static_cast<int>(batch.size()) - 1; i >= 0; --i) {
    strides[i] = step;
    step *= std::max<int64_t>(batch[i], 1);
  }
  return Md(dims, dnnl::memory::data_type::f32, strides);
}

// [1, ..., 1, n] of rank `rank`: the bias, broadcast over every row and batch.
Md bias_md(size_t rank, int64_t n) {
  Dims dims(rank, 1);
  dims.back() = n;
  return plain_md(dims);
}

// The cases run as MatMulKernel's do (gemm.cc): B without batch and A not transposed folds A's
// batch into M (one 2-D matmul; with one output column, one matrix-vector product, gemv.h);
// otherwise one batched matmul whose size-1 batch dims broadcast;
// when oneDNN has no implementation for that, a loop of 2-D matmuls with the same epilogue.
class FusedMatMulKernel final : public Kernel {
 public:
  explicit FusedMatMulKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const Shape& as = ctx.input_shape(0);
    const Shape& bs = ctx.input_shape(1);
    bool trans_a = ctx.attr_int("trans_a", 0) == 1;
    bool trans_b = ctx.attr_int("trans_b", 0) == 1;
    int64_t m = trans_a ? as[-1] : as[-2];
    int64_t k = trans_a ? as[-2] : as[-1];
    int64_t n = trans_b ? bs[-2] : bs[-1];
    Dims a_batch(as.dims().begin(), as.dims().end() - 2);
    Dims b_batch(bs.dims().begin(), bs.dims().end() - 2);
    size_t r = std::max(a_batch.size(), b_batch.size());
    a_batch.insert(a_batch.begin(), r - a_batch.size(), 1);
    b_batch.insert(b_batch.begin(), r - b_batch.size(), 1);
    Dims out_batch(r);
    int64_t batch = 1;
    for (size_t i = 0; i < r; ++i) {
      out_batch[i] = a_batch[i] == 1 ? b_batch[i] : a_batch[i];
      batch *= out_batch[i];
    }
    has_bias_ = ctx.has_input(2);
    residual_ = ctx.num_inputs() > 3 && ctx.has_input(3);
    norm_ = ctx.num_inputs() > 4 && ctx.has_input(4);
    norm_bias_ = ctx.num_inputs() > 5 && ctx.has_input(5);
    norm_epsilon_ = ctx.attr_float("norm_epsilon", 1e-5f);
    columns_ = n;
    out_numel_ = batch * m * n;
    if (out_numel_ == 0) {
      mode_ = Mode::kEmpty;
      return;
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(activation_post_ops(ctx, residual_));
    if (k == 0) {
      // Y = activation(bias or 0): a 1x1 product of zeros carries the epilogue row by row.
      mode_ = Mode::kZeroK;
      rows_ = batch * m;
      n_ = n;
      dnnl_call(where_, [&] {
        Md bias = bias_md(2, n);
        mm_.init(plain_md({rows_, 1}), plain_md({1, n}), has_bias_ ? &bias : nullptr,
                 plain_md({rows_, n}), attr, nullptr);
      });
      return;
    }
    const Tensor* b_value = ctx.input_value(1);
    const float* b_const = b_value ? b_value->data<float>() : nullptr;
    mode_ = Mode::kDirect;
    bool b_flat = std::all_of(b_batch.begin(), b_batch.end(), [](int64_t d) { return d == 1; });
    const bool epilogue_known = parse_gemm_epilogue(
        ctx.attr_string("activation", ""), ctx.attr_float("activation_alpha", 0.0f),
        ctx.attr_float("activation_beta", 0.0f), &epilogue_);
    if (b_flat && !trans_a && n == 1 && epilogue_known) {
      // One output column (a wide-and-deep model's linear part over 262,144 features): A is
      // read once at the speed memory delivers it, where oneDNN's matmul and the packed GEMM
      // took 2.8 ms for a [32, 262144] A (12 GB/s) on 2 Zen 5 cores. B ([k, 1] or [1, k]) is k
      // contiguous floats either way.
      mode_ = Mode::kVector;
      k_ = k;
      any_shape_ = b_const != nullptr;  // k is then the weight's
      return;
    }
    const auto init_flat = [&] {
      Md bias = bias_md(2, n);
      dnnl_call(where_, [&] {
        mm_.init(plain_md({batch * m, k}), matrix_md(k, n, trans_b), has_bias_ ? &bias : nullptr,
                 plain_md({batch * m, n}), attr, b_value);
      });
    };
    if (b_flat && !trans_a && b_const && lumen_kernel_candidate() && epilogue_known) {
      // Constant weights: Lumen's packed GEMM (packed_gemm.h says why) where kernel_choice.h
      // picks it, starting from what Y holds when there is a residual.
      epilogue_.accumulate = residual_;
      rows_ = batch * m;
      n_ = n;
      k_ = k;
      packed_ = PackedMatrix::shared(*b_value, b_const, k, n, trans_b ? 1 : n, trans_b ? k : 1);
      if (kernel_choice_measured()) init_flat();
      choice_ = pick_gemm("FusedMatMul " + std::to_string(rows_) + "x" + std::to_string(k) + "x" +
                              std::to_string(n) + (trans_b ? " B^T " : " ") +
                              ctx.attr_string("activation", "") + (has_bias_ ? " bias" : "") +
                              (residual_ ? " residual" : ""),
                          ctx.graph(), *b_value, rows_, k, n, epilogue_, has_bias_, packed_, mm_,
                          /*onednn_any_size=*/true);
      if (choice_.lumen) {
        mode_ = Mode::kPacked;
      } else if (building_for_any_shape()) {
        // A plan for many sizes: oneDNN at every row count, on the weights packed now.
        mode_ = Mode::kRows;
        by_rows_ = std::make_shared<const DnnlMatmulByRows>(mm_, rows_);
      }
      return;
    }
    if (b_flat && !trans_a) {
      init_flat();
      return;
    }
    if (r + 2 <= DNNL_MAX_NDIMS) {
      try {
        Md bias = bias_md(r + 2, n);
        mm_.init(operand_md(a_batch, m, k, trans_a), operand_md(b_batch, k, n, trans_b),
                 has_bias_ ? &bias : nullptr, operand_md(out_batch, m, n, false), attr, b_value);
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
    Md bias = bias_md(2, n);
    dnnl_call(where_, [&] {
      mm_.init(matrix_md(m, k, trans_a), matrix_md(k, n, trans_b), has_bias_ ? &bias : nullptr,
               plain_md({m, n}), attr, nullptr);
    });
  }

  bool reads_input(int k) const override {
    if (k != 1) return true;
    if (mode_ == Mode::kPacked) return false;
    return (mode_ != Mode::kDirect && mode_ != Mode::kRows) || !mm_.packed();
  }

  std::string describe() const override {
    return mode_ == Mode::kVector ? "matrix_vector" : describe_choice(choice_, "packed_gemm");
  }

  // Y may be written over a dying residual Z: the sum post-op (or the packed GEMM) then reads Z
  // where it lies.
  int in_place_input() const override { return residual_ ? 3 : -1; }

  // The packed, by-rows and vector forms fold A's batch into the rows, which they take per run.
  bool runs_any_shape() const override {
    return mode_ == Mode::kPacked || mode_ == Mode::kRows || any_shape_;
  }

  void run(KernelContext& ctx) const override {
    run_product(ctx);
    if (!norm_ || ctx.outputs[0].numel() == 0) return;
    float* y = ctx.outputs[0].data<float>();
    const float* scale = ctx.inputs[4].data<float>();
    const float* bias = norm_bias_ ? ctx.inputs[5].data<float>() : nullptr;
    const int64_t n = columns_, rows = ctx.outputs[0].numel() / n;
    const float eps = norm_epsilon_;
    const auto row = [&](int64_t r) {
      layer_norm_row(y + r * n, y + r * n, n, scale, bias, eps, nullptr, nullptr);
    };
#pragma omp parallel for schedule(static) if (rows * n > kNormParallelWork)
    for (int64_t r = 0; r < rows; ++r) isa_call(row, r);
  }

 private:
  // Y = activation(op(A) x op(B) + bias + Z): everything but the norm.
  void run_product(KernelContext& ctx) const {
    float* y = ctx.outputs[0].data<float>();
    if (mode_ == Mode::kEmpty) return;
    const int64_t out_numel = ctx.outputs[0].numel();
    // The residual is summed from Y: copied there unless Y was planned over it (in place).
    if (residual_ && ctx.inputs[3].raw_data() != y)
      std::memcpy(y, ctx.inputs[3].raw_data(), static_cast<size_t>(out_numel) * sizeof(float));
    const float* bias = has_bias_ ? ctx.inputs[2].data<float>() : nullptr;
    if (mode_ == Mode::kZeroK) {
      std::vector<float> zeros(static_cast<size_t>(rows_ + n_), 0.0f);
      dnnl_call(where_, [&] { mm_.execute(zeros.data(), zeros.data() + rows_, bias, y); });
      return;
    }
    const float* a = ctx.inputs[0].data<float>();
    if (mode_ == Mode::kVector) {
      run_vector(out_numel, a, ctx.inputs[1].data<float>(), bias, y);
      return;
    }
    if (mode_ == Mode::kPacked) {
      GemmEpilogue e = epilogue_;
      e.bias = bias;
      packed_gemm(out_numel / n_, a, k_, packed_, y, n_, e);
      return;
    }
    // Packed constant weights (direct mode) are not kept by the executable: b is not read.
    const float* b = reads_input(1) ? ctx.inputs[1].data<float>() : nullptr;
    dnnl_call(where_, [&] {
      if (mode_ == Mode::kRows) {
        by_rows_->execute(out_numel / n_, a, b, bias, y);
        return;
      }
      if (mode_ == Mode::kDirect) {
        mm_.execute(a, b, bias, y);
        return;
      }
      for (size_t i = 0; i < a_index_.size(); ++i)
        mm_.execute(a + a_index_[i] * a_step_, b + b_index_[i] * b_step_, bias,
                    y + static_cast<int64_t>(i) * y_step_);
    });
  }

  // y = activation(A b + bias + Z) for `rows` rows of A, Z as copied into y already.
  void run_vector(int64_t rows, const float* a, const float* b, const float* bias, float* y) const {
    GemmEpilogue e = epilogue_;
    e.bias = bias;
    float scratch[kVectorRows];
    for (int64_t i0 = 0; i0 < rows; i0 += kVectorRows) {
      const int64_t count = std::min(kVectorRows, rows - i0);
      float* out = y + i0;
      matrix_vector(count, k_, a + i0 * k_, k_, b, residual_ ? scratch : out);
      for (int64_t i = 0; i < count; ++i) {
        if (residual_) out[i] += scratch[i];
        finish_row(out + i, 1, 0, e);
      }
    }
  }

  enum class Mode { kEmpty, kZeroK, kDirect, kLoop, kPacked, kVector, kRows };
  static constexpr int64_t kVectorRows = 1024;  // rows per matrix_vector call
  std::string where_;
  Mode mode_ = Mode::kEmpty;
  bool has_bias_ = false;
  bool residual_ = false;   // input 3, Z, added before the activation
  bool norm_ = false;       // input 4, the norm scale: each row of Y normalized last
  bool norm_bias_ = false;  // input 5, the norm bias
  float norm_epsilon_ = 1e-5f;
  int64_t columns_ = 0;  // N, Y's last dimension
  int64_t out_numel_ = 0;
  int64_t rows_ = 0, n_ = 0;  // kZeroK, kPacked, kRows: the output seen as [rows_, n_]
  int64_t k_ = 0;             // kPacked, kVector: A's columns
  bool any_shape_ = false;    // kVector with a constant B
  PackedMatrix packed_;       // kPacked: the constant B
  GemmEpilogue epilogue_;     // kPacked: the activation (the bias is bound per run)
  KernelChoice choice_;       // packed_gemm or oneDNN, and why, where both could run
  // kLoop: elements per matrix, and which A and B matrix each output matrix reads.
  int64_t a_step_ = 0, b_step_ = 0, y_step_ = 0;
  std::vector<int64_t> a_index_, b_index_;
  DnnlMatmul mm_;
  std::shared_ptr<const DnnlMatmulByRows> by_rows_;  // kRows: mm_'s product at any row count
};

std::unique_ptr<Kernel> make_fused_matmul(const NodeContext& ctx) {
  return std::make_unique<FusedMatMulKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(FusedMatMul, &make_fused_matmul, &require_float32);

}  // namespace lumen::cpu
