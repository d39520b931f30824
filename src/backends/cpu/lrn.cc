// CPU LRN (local response normalisation across channels, opset 13) for float32:
// y = x / (bias + alpha / size * sum of x^2 over channels [c - floor((size-1)/2),
// c + ceil((size-1)/2)])^beta. Runs per (n, c) plane, summing the window's planes contiguously.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/sampling.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 15;

class LrnKernel final : public Kernel {
 public:
  explicit LrnKernel(const NodeContext& ctx) : spec_(lrn_spec(ctx)) {
    const Shape& x = ctx.input_shape(0);
    n_ = x[0];
    c_ = x[1];
    plane_ = x.numel() / std::max<int64_t>(n_ * c_, 1);
  }

  void run(KernelContext& ctx) const override {
    if (ctx.outputs[0].numel() == 0) return;
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    int64_t before = (spec_.size - 1) / 2, after = spec_.size - 1 - before;
    float scale = spec_.alpha / static_cast<float>(spec_.size);
    float bias = spec_.bias, beta = spec_.beta;
    int64_t work = n_ * c_ * plane_ * spec_.size;
#pragma omp parallel if (work > kParallelWork)
    {
      std::vector<float> sum(static_cast<size_t>(plane_));
#pragma omp for schedule(static)
      for (int64_t nc = 0; nc < n_ * c_; ++nc) {
        int64_t n = nc / c_, c = nc % c_;
        int64_t lo = std::max<int64_t>(c - before, 0), hi = std::min<int64_t>(c + after, c_ - 1);
        std::fill(sum.begin(), sum.end(), 0.0f);
        for (int64_t k = lo; k <= hi; ++k) {
          const float* p = x + (n * c_ + k) * plane_;
          for (int64_t i = 0; i < plane_; ++i) sum[i] += p[i] * p[i];
        }
        const float* xi = x + nc * plane_;
        float* yo = y + nc * plane_;
        for (int64_t i = 0; i < plane_; ++i) yo[i] = xi[i] / std::pow(bias + scale * sum[i], beta);
      }
    }
  }

 private:
  LrnSpec spec_;
  int64_t n_ = 0, c_ = 0, plane_ = 0;
};

std::unique_ptr<Kernel> make_lrn(const NodeContext& ctx) {
  return std::make_unique<LrnKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(LRN, &make_lrn, &require_float32);

}  // namespace lumen::cpu
