// CPU kernel of DynamicQuantizeLinear (uint8, scale and zero point from the input's range);
// QuantizeLinear and DequantizeLinear are in quant_linear.cc.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/quant_math.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 16;

// y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = round(-min / y_scale) and
// y = saturate(round(x / y_scale) + y_zero_point). An all-zero (or empty) x gives scale 0,
// zero point 0 and y 0. NaNs in x are skipped by the range and quantize to the zero point.
class DynamicQuantizeLinearKernel final : public Kernel {
 public:
  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const float* xv = x.data<float>();
    const int64_t n = x.numel();
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      lo = std::min(lo, xv[i]);
      hi = std::max(hi, xv[i]);
    }
    const float scale = (hi - lo) / 255.0f;
    int32_t zp = 0;
    if (scale > 0.0f) zp = quantize_value((0.0f - lo) / scale, 0, 0, 255);
    uint8_t* y = ctx.outputs[0].data<uint8_t>();
#pragma omp parallel for schedule(static) if (n > kParallelWork)
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<uint8_t>(scale > 0.0f ? quantize_value(xv[i] / scale, zp, 0, 255) : 0);
    if (ctx.outputs.size() > 1 && ctx.outputs[1].defined()) ctx.outputs[1].data<float>()[0] = scale;
    if (ctx.outputs.size() > 2 && ctx.outputs[2].defined())
      ctx.outputs[2].data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  }
};

std::unique_ptr<Kernel> make_dynamic_quantize_linear(const NodeContext&) {
  return std::make_unique<DynamicQuantizeLinearKernel>();
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(DynamicQuantizeLinear, &make_dynamic_quantize_linear);

}  // namespace lumen::cpu
