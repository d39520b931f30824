// CPU kernels of InstanceNormalization, DepthToSpace and SpaceToDepth (float32).
// InstanceNorm takes each (n, c) plane's mean and variance with blocked float sums added in double;
// DepthToSpace and SpaceToDepth copy contiguous rows of W between the two layouts.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 32768;

class InstanceNormKernel final : public Kernel {
 public:
  explicit InstanceNormKernel(const NodeContext& ctx) : epsilon_(ctx.attr_float("epsilon", 1e-5f)) {
    const Shape& x = ctx.input_shape(0);
    batch_ = x.dims()[0];
    channels_ = x.dims()[1];
    for (int d = 2; d < x.rank(); ++d) spatial_ *= x.dims()[d];
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    const float* scale = ctx.inputs[1].data<float>();
    const float* bias = ctx.inputs[2].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t channels = channels_, spatial = spatial_, planes = batch_ * channels_;
    if (spatial == 0) return;
    const double epsilon = epsilon_;
#pragma omp parallel for schedule(static) if (planes * spatial > kParallelWork)
    for (int64_t p = 0; p < planes; ++p) {
      const float* in = x + p * spatial;
      float* out = y + p * spatial;
      const float first =
          static_cast<float>(sum_floats(in, spatial) / static_cast<double>(spatial));
      double sum_d = 0.0, sum_d2 = 0.0;
      sum_deviations(in, spatial, first, &sum_d, &sum_d2);
      const double n = static_cast<double>(spatial);
      const double mean = first + sum_d / n;
      const double var = std::max(0.0, (sum_d2 - sum_d * sum_d / n) / n);
      const int64_t c = p % channels;
      const float a = static_cast<float>(scale[c] / std::sqrt(var + epsilon));
      const float b = static_cast<float>(bias[c] - mean * a);
#pragma omp simd
      for (int64_t i = 0; i < spatial; ++i) out[i] = in[i] * a + b;
    }
  }

  int in_place_input() const override {
    return 0;
  }

 private:
  float epsilon_;
  int64_t batch_ = 1, channels_ = 1, spatial_ = 1;
};

// DepthToSpace (space_to_depth_ == false) and SpaceToDepth (true). In both, the "deep" tensor is
// [N, C * b * b, H, W] and the "wide" one [N, C, H * b, W * b]; wide[n, c, h*b+i, w*b+j] is
// deep[n, channel(c, i, j), h, w] with channel = (i*b + j)*C + c (DCR, SpaceToDepth) or
// c*b*b + i*b + j (CRD).
class BlockShuffleKernel final : public Kernel {
 public:
  BlockShuffleKernel(const NodeContext& ctx, bool space_to_depth)
      : space_to_depth_(space_to_depth), b_(ctx.attr_int("blocksize")) {
    const Shape& deep = space_to_depth ? ctx.output(0).shape : ctx.input_shape(0);
    crd_ = !space_to_depth && ctx.attr_string("mode", "DCR") == "CRD";
    n_ = deep.dims()[0];
    c_ = deep.dims()[1] / (b_ * b_);
    h_ = deep.dims()[2];
    w_ = deep.dims()[3];
  }

  void run(KernelContext& ctx) const override {
    const float* src = ctx.inputs[0].data<float>();
    float* dst = ctx.outputs[0].data<float>();
    const int64_t b = b_, c_count = c_, h_count = h_, w_count = w_;
    const int64_t rows = n_ * c_ * h_ * b;  // rows of the wide tensor
    if (rows * w_count * b == 0) return;
    const bool to_deep = space_to_depth_;
    const bool crd = crd_;
#pragma omp parallel for schedule(static) if (rows * w_count * b > kParallelWork)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = row % b;
      const int64_t h = (row / b) % h_count;
      const int64_t c = (row / (b * h_count)) % c_count;
      const int64_t n = row / (b * h_count * c_count);
      float* wide_dst = dst + row * w_count * b;
      const float* wide_src = src + row * w_count * b;
      for (int64_t j = 0; j < b; ++j) {
        const int64_t ch = crd ? c * b * b + i * b + j : (i * b + j) * c_count + c;
        const int64_t deep_off = ((n * c_count * b * b + ch) * h_count + h) * w_count;
        if (to_deep) {
          float* out = dst + deep_off;
          for (int64_t w = 0; w < w_count; ++w) out[w] = wide_src[w * b + j];
        } else {
          const float* in = src + deep_off;
          for (int64_t w = 0; w < w_count; ++w) wide_dst[w * b + j] = in[w];
        }
      }
    }
  }

 private:
  bool space_to_depth_;
  bool crd_ = false;
  int64_t b_;
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0;
};

std::unique_ptr<Kernel> make_instance_norm(const NodeContext& ctx) {
  return std::make_unique<InstanceNormKernel>(ctx);
}
std::unique_ptr<Kernel> make_depth_to_space(const NodeContext& ctx) {
  return std::make_unique<BlockShuffleKernel>(ctx, false);
}
std::unique_ptr<Kernel> make_space_to_depth(const NodeContext& ctx) {
  return std::make_unique<BlockShuffleKernel>(ctx, true);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(InstanceNormalization, &make_instance_norm, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(DepthToSpace, &make_depth_to_space, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(SpaceToDepth, &make_space_to_depth, &require_float32);

}  // namespace lumen::cpu
