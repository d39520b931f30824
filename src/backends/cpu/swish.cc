// CPU kernels of Swish (x * sigmoid(alpha * x)) and SwiGLU (Swish_alpha(A) * B) for float32,
// float64, float16 and bfloat16. float32 (and the 16-bit types, computed in float32) use the
// branch-free exp of elementwise_math.h, so the contiguous loops vectorise; float64 uses std::exp.
#include <cmath>
#include <memory>
#include <string>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/elementwise_math.h"
#include "backends/cpu/float_types.h"
#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

// v * sigmoid(alpha * v) as one division: v / (1 + e^(-alpha v)). Large positive alpha * v gives
// v, large negative gives -0 or a tiny value, NaN stays NaN.
inline float swish_of(float v, float alpha) {
  return v / (1.0f + exp_f(-alpha * v));
}
inline double swish_of(double v, double alpha) {
  return v / (1.0 + std::exp(-alpha * v));
}

class SwishKernel final : public Kernel {
 public:
  explicit SwishKernel(const NodeContext& ctx)
      : alpha_(ctx.attr_float("alpha", 1.0f)), gated_(ctx.op() == OpKind::kSwiGLU) {}

  void run(KernelContext& ctx) const override {
    visit_float(ctx.inputs[0].dtype(), [&](auto t) { apply<decltype(t)>(ctx); });
  }

  int in_place_input() const override { return 0; }

 private:
  template <typename T>
  void apply(KernelContext& ctx) const {
    using C = ComputeOf<T>;
    const T* a = elements<T>(ctx.inputs[0]);
    const T* b = gated_ ? elements<T>(ctx.inputs[1]) : nullptr;
    T* y = elements<T>(ctx.outputs[0]);
    const C alpha = static_cast<C>(alpha_);
    parallel_chunks(ctx.outputs[0].numel(), [&](int64_t begin, int64_t end) {
      if (b != nullptr) {
        for (int64_t i = begin; i < end; ++i)
          y[i] = T(swish_of(static_cast<C>(a[i]), alpha) * static_cast<C>(b[i]));
      } else {
        for (int64_t i = begin; i < end; ++i) y[i] = T(swish_of(static_cast<C>(a[i]), alpha));
      }
    });
  }

  float alpha_;
  bool gated_;
};

std::unique_ptr<Kernel> make_swish(const NodeContext& ctx) {
  return std::make_unique<SwishKernel>(ctx);
}

std::string check_float(const NodeContext& ctx) {
  return require_cpu_float(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Swish, &make_swish, &check_float);
LUMEN_REGISTER_CPU_KERNEL(SwiGLU, &make_swish, &check_float);

}  // namespace lumen::cpu
