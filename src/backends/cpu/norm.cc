// CPU kernels of BatchNormalization (inference) and LayerNormalization (float32).
// BatchNorm folds its four per-channel inputs into y = x * a[c] + b[c]; LayerNorm takes the mean
// and variance of each row with the corrected two-pass method (blocked float sums, added in
// double).
#include <cmath>
#include <memory>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"

namespace lumen::cpu {
namespace {

class BatchNormKernel final : public Kernel {
 public:
  explicit BatchNormKernel(const NodeContext& ctx) : epsilon_(ctx.attr_float("epsilon", 1e-5f)) {
    const Shape& x = ctx.input_shape(0);
    batch_ = x.dims()[0];
    channels_ = x.dims()[1];
    for (int d = 2; d < x.rank(); ++d) spatial_ *= x.dims()[d];
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    const float* scale = ctx.inputs[1].data<float>();
    const float* bias = ctx.inputs[2].data<float>();
    const float* mean = ctx.inputs[3].data<float>();
    const float* var = ctx.inputs[4].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t channels = channels_, spatial = spatial_;
    std::vector<float> a(static_cast<size_t>(channels));
    std::vector<float> b(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      a[c] = static_cast<float>(scale[c] / std::sqrt(static_cast<double>(var[c]) + epsilon_));
      b[c] = bias[c] - mean[c] * a[c];
    }
    const int64_t planes = batch_ * channels;
    const bool parallel = planes * spatial > kNormParallelWork;
    const auto plane = [&](int64_t p) {
      const float ac = a[p % channels];
      const float bc = b[p % channels];
      const float* in = x + p * spatial;
      float* out = y + p * spatial;
#pragma omp simd
      for (int64_t i = 0; i < spatial; ++i) out[i] = in[i] * ac + bc;
    };
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < planes; ++p) isa_call(plane, p);
  }

  int in_place_input() const override {
    return 0;
  }

 private:
  float epsilon_;
  int64_t batch_ = 1;
  int64_t channels_ = 1;
  int64_t spatial_ = 1;
};

// Expands a Scale or B tensor that broadcasts onto the normalised dims `norm` into a dense row.
std::vector<float> expand_param(const Tensor& t, const Shape& norm) {
  std::vector<float> out(static_cast<size_t>(norm.numel()));
  const float* p = t.data<float>();
  const Shape& s = t.shape();
  std::vector<int64_t> strides(norm.rank(), 0);
  int64_t acc = 1;
  for (int k = 1; k <= s.rank(); ++k) {
    int64_t d = s.dims()[s.rank() - k];
    if (k <= norm.rank() && d != 1) strides[norm.rank() - k] = acc;
    acc *= d;
  }
  std::vector<int64_t> idx(norm.rank(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t src = 0;
    for (int d = 0; d < norm.rank(); ++d) src += idx[d] * strides[d];
    out[i] = p[src];
    for (int d = norm.rank() - 1; d >= 0; --d) {
      if (++idx[d] < norm.dims()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

class LayerNormKernel final : public Kernel {
 public:
  explicit LayerNormKernel(const NodeContext& ctx)
      : epsilon_(ctx.attr_float("epsilon", 1e-5f)),
        axis_(normalize_axis(ctx.attr_int("axis", -1), ctx.input_shape(0).rank())) {}

  // Rows and the normalized dims are taken from X per run.
  bool runs_any_shape() const override { return true; }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    float* mean_out = ctx.outputs.size() > 1 ? ctx.outputs[1].data<float>() : nullptr;
    float* inv_out = ctx.outputs.size() > 2 ? ctx.outputs[2].data<float>() : nullptr;
    const std::vector<int64_t>& dims = ctx.inputs[0].shape().dims();
    int64_t rows = 1;
    for (int d = 0; d < axis_; ++d) rows *= dims[d];
    const Shape norm_shape(std::vector<int64_t>(dims.begin() + axis_, dims.end()));
    const int64_t n = norm_shape.numel();
    if (rows == 0) return;
    std::vector<float> scale_dense, bias_dense;
    const float* scale = ctx.inputs[1].data<float>();
    if (ctx.inputs[1].numel() != n) {
      scale_dense = expand_param(ctx.inputs[1], norm_shape);
      scale = scale_dense.data();
    }
    const float* bias = nullptr;
    if (ctx.inputs.size() > 2 && ctx.inputs[2].defined()) {
      bias = ctx.inputs[2].data<float>();
      if (ctx.inputs[2].numel() != n) {
        bias_dense = expand_param(ctx.inputs[2], norm_shape);
        bias = bias_dense.data();
      }
    }
    const float eps = epsilon_;
    const bool parallel = rows * n > kNormParallelWork;
    const auto row = [&](int64_t r) {
      layer_norm_row(x + r * n, y + r * n, n, scale, bias, eps, mean_out ? mean_out + r : nullptr,
                     inv_out ? inv_out + r : nullptr);
    };
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < rows; ++r) isa_call(row, r);
  }

 private:
  float epsilon_;
  int axis_ = 0;  // the first normalized dim
};

std::unique_ptr<Kernel> make_batch_norm(const NodeContext& ctx) {
  return std::make_unique<BatchNormKernel>(ctx);
}

std::unique_ptr<Kernel> make_layer_norm(const NodeContext& ctx) {
  return std::make_unique<LayerNormKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(BatchNormalization, &make_batch_norm, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(LayerNormalization, &make_layer_norm, &require_float32);

}  // namespace lumen::cpu
