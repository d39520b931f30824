// CPU kernels of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (float32 scores, int64 or
// int32 targets, optional float32 class weights). Scores [N, C, d1, ...] are seen as [N, C, D]
// and targets as N * D rows. Targets are read and checked first (ignore_index becomes -1), then
// each row's loss is written, then reduced in double precision.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"

namespace lumen::cpu {
namespace {

enum class Reduction { kNone, kSum, kMean };

// Elements of D processed together by the strided log-softmax.
constexpr int64_t kInnerChunk = 256;

// Shift for a log-softmax row maximum: a non-finite maximum (all -inf, or an inf) has no finite
// shift, so 0 is used and the result follows IEEE rules; NaN stays NaN.
inline float finite_shift(float m) {
  return std::isfinite(m) ? m : (std::isnan(m) ? m : 0.0f);
}

class LossKernel final : public Kernel {
 public:
  LossKernel(const NodeContext& ctx, bool softmax) : where_(ctx.where()), softmax_(softmax) {
    const Shape& x = ctx.input_shape(0);
    n_ = x.dims()[0];
    c_ = x.dims()[1];
    for (int d = 2; d < x.rank(); ++d) inner_ *= x.dims()[d];
    const std::string r = ctx.attr_string("reduction", "mean");
    reduction_ = r == "none" ? Reduction::kNone : r == "sum" ? Reduction::kSum : Reduction::kMean;
    has_ignore_ = ctx.has_attr("ignore_index");
    if (has_ignore_) ignore_index_ = ctx.attr_int("ignore_index");
  }

  void run(KernelContext& ctx) const override {
    const int64_t rows = n_ * inner_;
    Tensor cls = Tensor::empty(Shape{rows}, DType::kInt64);
    int64_t* k = cls.data<int64_t>();
    const Tensor& target = ctx.inputs[1];
    if (target.dtype() == DType::kInt64)
      read_targets(target.data<int64_t>(), k, rows);
    else
      read_targets(target.data<int32_t>(), k, rows);

    const float* x = ctx.inputs[0].data<float>();
    const float* w = nullptr;
    if (ctx.inputs.size() > 2 && ctx.inputs[2].defined()) w = ctx.inputs[2].data<float>();
    Tensor scratch;
    float* loss;
    if (reduction_ == Reduction::kNone) {
      loss = ctx.outputs[0].data<float>();
    } else {
      scratch = Tensor::empty(Shape{rows}, DType::kFloat32);
      loss = scratch.data<float>();
    }
    if (softmax_) {
      float* lp = nullptr;
      if (ctx.outputs.size() > 1 && ctx.outputs[1].defined()) lp = ctx.outputs[1].data<float>();
      if (inner_ == 1)
        cross_entropy_rows(x, k, w, loss, lp);
      else
        cross_entropy_strided(x, k, w, loss, lp);
    } else {
      nll(x, k, w, loss);
    }
    if (reduction_ == Reduction::kNone) return;
    double total = sum_floats(loss, rows);
    if (reduction_ == Reduction::kMean) {
      // Mean divides by the total weight of the rows not ignored (their count without weights);
      // with none left it is 0/0 = NaN, as in the ONNX reference.
      double denom = 0.0;
      for (int64_t i = 0; i < rows; ++i)
        if (k[i] >= 0) denom += w ? static_cast<double>(w[k[i]]) : 1.0;
      total /= denom;
    }
    ctx.outputs[0].data<float>()[0] = static_cast<float>(total);
  }

 private:
  // Copies targets to class indices, -1 for ignored rows; throws on any other out-of-range value.
  template <typename T>
  void read_targets(const T* t, int64_t* k, int64_t rows) const {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t v = static_cast<int64_t>(t[i]);
      if (has_ignore_ && v == ignore_index_) {
        k[i] = -1;
      } else if (v < 0 || v >= c_) {
        throw InvalidArgument(where_ + ": target " + std::to_string(v) + " at position " +
                              std::to_string(i) + " is out of range [0, " + std::to_string(c_) +
                              ")" + (has_ignore_ ? " and is not ignore_index" : ""));
      } else {
        k[i] = v;
      }
    }
  }

  bool parallel() const { return n_ * c_ * inner_ > kNormParallelWork; }

  void nll(const float* x, const int64_t* k, const float* w, float* loss) const {
    const int64_t c = c_, inner = inner_;
#pragma omp parallel for schedule(static) if (parallel())
    for (int64_t n = 0; n < n_; ++n) {
      for (int64_t d = 0; d < inner; ++d) {
        const int64_t cls = k[n * inner + d];
        loss[n * inner + d] = cls < 0 ? 0.0f : -x[(n * c + cls) * inner + d] * (w ? w[cls] : 1.0f);
      }
    }
  }

  // Contiguous rows of C scores (no trailing dims).
  void cross_entropy_rows(const float* x, const int64_t* k, const float* w, float* loss,
                          float* lp) const {
    const int64_t c = c_;
#pragma omp parallel for schedule(static) if (parallel())
    for (int64_t r = 0; r < n_; ++r) {
      const float* row = x + r * c;
      const float m = finite_shift(max_floats(row, c));
      float s = 0.0f;
      if (lp) {
        s = exp_shifted_sum(row, m, lp + r * c, c);
      } else {
        float tmp[kExpChunk];
        for (int64_t b = 0; b < c; b += kExpChunk)
          s += exp_shifted_sum(row + b, m, tmp, std::min(kExpChunk, c - b));
      }
      // (x - m) - log(s), not x - (m + log(s)): the latter rounds away small values for large x.
      const float log_s = std::log(s);
      if (lp) {
        float* out = lp + r * c;
#pragma omp simd
        for (int64_t i = 0; i < c; ++i) out[i] = (row[i] - m) - log_s;
      }
      const int64_t cls = k[r];
      loss[r] = cls < 0 ? 0.0f : -((row[cls] - m) - log_s) * (w ? w[cls] : 1.0f);
    }
  }

  // Scores with trailing dims: the class axis has stride D, so chunks of up to kInnerChunk
  // adjacent positions are processed together and the inner loops run contiguous.
  void cross_entropy_strided(const float* x, const int64_t* k, const float* w, float* loss,
                             float* lp) const {
    const int64_t c = c_, inner = inner_;
    const int64_t chunks = (inner + kInnerChunk - 1) / kInnerChunk;
#pragma omp parallel for schedule(static) if (parallel())
    for (int64_t task = 0; task < n_ * chunks; ++task) {
      const int64_t n = task / chunks;
      const int64_t j0 = (task % chunks) * kInnerChunk;
      const int64_t len = std::min(kInnerChunk, inner - j0);
      const int64_t base = n * c * inner + j0;
      float m[kInnerChunk], s[kInnerChunk], t[kInnerChunk];
      for (int64_t j = 0; j < len; ++j) {
        m[j] = -INFINITY;
        s[j] = 0.0f;
      }
      for (int64_t r = 0; r < c; ++r) {
        const float* row = x + base + r * inner;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) m[j] = row[j] > m[j] ? row[j] : m[j];
      }
      for (int64_t j = 0; j < len; ++j) m[j] = finite_shift(m[j]);
      for (int64_t r = 0; r < c; ++r) {
        const float* row = x + base + r * inner;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) t[j] = clamp_exp_arg(row[j] - m[j]);
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) s[j] += exp_in_range(t[j]);
      }
      for (int64_t j = 0; j < len; ++j) s[j] = std::log(s[j]);
      if (lp) {
        for (int64_t r = 0; r < c; ++r) {
          const float* row = x + base + r * inner;
          float* out = lp + base + r * inner;
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) out[j] = (row[j] - m[j]) - s[j];
        }
      }
      for (int64_t j = 0; j < len; ++j) {
        const int64_t cls = k[n * inner + j0 + j];
        loss[n * inner + j0 + j] =
            cls < 0 ? 0.0f : -((x[base + cls * inner + j] - m[j]) - s[j]) * (w ? w[cls] : 1.0f);
      }
    }
  }

  std::string where_;
  bool softmax_;
  int64_t n_ = 1;
  int64_t c_ = 1;
  int64_t inner_ = 1;
  Reduction reduction_ = Reduction::kMean;
  bool has_ignore_ = false;
  int64_t ignore_index_ = 0;
};

// Scores and weights must be float32; targets int64 or int32 (checked by the schema).
std::string check_loss(const NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32)
    return std::string("input 0 is ") + dtype_name(ctx.input_dtype(0)) +
           "; the CPU kernel takes float32";
  if (ctx.has_input(2) && ctx.input_dtype(2) != DType::kFloat32)
    return std::string("input 2 is ") + dtype_name(ctx.input_dtype(2)) +
           "; the CPU kernel takes float32";
  return "";
}

std::unique_ptr<Kernel> make_nll_loss(const NodeContext& ctx) {
  return std::make_unique<LossKernel>(ctx, false);
}

std::unique_ptr<Kernel> make_softmax_cross_entropy(const NodeContext& ctx) {
  return std::make_unique<LossKernel>(ctx, true);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(NegativeLogLikelihoodLoss, &make_nll_loss, &check_loss);
LUMEN_REGISTER_CPU_KERNEL(SoftmaxCrossEntropyLoss, &make_softmax_cross_entropy, &check_loss);

}  // namespace lumen::cpu
