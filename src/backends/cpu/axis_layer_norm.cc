// CPU kernel of AxisLayerNorm (schema in graph/schemas/axis_layer_norm.cc): X seen as
// [outer, C, inner], each of the outer * inner columns of C elements normalized on its own, the
// output in X's layout or with C moved last ([outer, inner, C]). A block of up to kColumns
// adjacent columns at a time, so every pass over C reads contiguous runs of the block. Float32;
// statistics in double over float terms, two passes (mean, then the squared deviations).
#include <algorithm>
#include <cmath>
#include <memory>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kColumns = 64;
constexpr int64_t kParallelWork = int64_t{1} << 15;

class AxisLayerNormKernel final : public Kernel {
 public:
  explicit AxisLayerNormKernel(const NodeContext& ctx)
      : epsilon_(ctx.attr_float("epsilon", 1e-5f)), axis_last_(ctx.attr_int("axis_last", 0) != 0) {
    const Shape& x = ctx.input_shape(0);
    const int axis = normalize_axis(ctx.attr_int("axis"), x.rank());
    for (int d = 0; d < axis; ++d) outer_ *= x.dims()[d];
    for (int d = axis + 1; d < x.rank(); ++d) inner_ *= x.dims()[d];
    channels_ = x.dims()[axis];
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    const float* scale = ctx.inputs[1].data<float>();
    const float* bias =
        ctx.inputs.size() > 2 && ctx.inputs[2].defined() ? ctx.inputs[2].data<float>() : nullptr;
    float* y = ctx.outputs[0].data<float>();
    const int64_t blocks_per_outer = (inner_ + kColumns - 1) / kColumns;
    const int64_t tasks = outer_ * blocks_per_outer;
    const bool parallel = outer_ * inner_ * channels_ > kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o = t / blocks_per_outer, i0 = (t % blocks_per_outer) * kColumns;
      normalize_block(x, scale, bias, y, o, i0, std::min(kColumns, inner_ - i0));
    }
  }

 private:
  // Columns [i0, i0 + n) of outer index o.
  void normalize_block(const float* x, const float* scale, const float* bias, float* y, int64_t o,
                       int64_t i0, int64_t n) const {
    const float* base = x + o * channels_ * inner_ + i0;
    double sum[kColumns] = {}, dev[kColumns] = {};
    for (int64_t c = 0; c < channels_; ++c)
      for (int64_t i = 0; i < n; ++i) sum[i] += base[c * inner_ + i];
    float mean[kColumns], inv[kColumns];
    for (int64_t i = 0; i < n; ++i) mean[i] = static_cast<float>(sum[i] / channels_);
    for (int64_t c = 0; c < channels_; ++c)
      for (int64_t i = 0; i < n; ++i) {
        const double d = base[c * inner_ + i] - mean[i];
        dev[i] += d * d;
      }
    for (int64_t i = 0; i < n; ++i)
      inv[i] = static_cast<float>(1.0 / std::sqrt(dev[i] / channels_ + epsilon_));
    for (int64_t c = 0; c < channels_; ++c) {
      const float s = scale[c], b = bias == nullptr ? 0.0f : bias[c];
      for (int64_t i = 0; i < n; ++i) {
        const float v = (base[c * inner_ + i] - mean[i]) * inv[i] * s + b;
        if (axis_last_)
          y[((o * inner_) + i0 + i) * channels_ + c] = v;
        else
          y[(o * channels_ + c) * inner_ + i0 + i] = v;
      }
    }
  }

  float epsilon_;
  bool axis_last_;
  int64_t outer_ = 1, inner_ = 1, channels_ = 1;
};

std::unique_ptr<Kernel> make_axis_layer_norm(const NodeContext& ctx) {
  return std::make_unique<AxisLayerNormKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(AxisLayerNorm, &make_axis_layer_norm, &require_float32);

}  // namespace lumen::cpu
