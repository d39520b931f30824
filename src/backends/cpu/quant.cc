// CPU kernels of QuantizeLinear, DequantizeLinear (per tensor or per axis) and
// DynamicQuantizeLinear (uint8, scale and zero point from the input's range).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/quant_math.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 16;

// x seen as [outer, channels, inner] around the quantization axis; channels is 1 when the scale
// is per tensor.
struct AxisLayout {
  int64_t outer = 1;
  int64_t channels = 1;
  int64_t inner = 1;
};

AxisLayout axis_layout(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  AxisLayout l;
  l.inner = x.numel();
  const Shape& s = ctx.input_shape(1);
  if (s.numel() == 1 && s.rank() <= 1) return l;
  const int axis = normalize_axis(ctx.attr_int("axis", 1), x.rank());
  l.outer = 1;
  for (int d = 0; d < axis; ++d) l.outer *= x[d];
  l.channels = x[axis];
  l.inner = 1;
  for (int d = axis + 1; d < x.rank(); ++d) l.inner *= x[d];
  return l;
}

class QuantizeLinearKernel final : public Kernel {
 public:
  explicit QuantizeLinearKernel(const NodeContext& ctx)
      : layout_(axis_layout(ctx)), out_(ctx.output(0).dtype) {}

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const std::vector<float> s = scales(ctx.inputs[1], layout_.channels);
    const std::vector<int32_t> zp =
        zero_points(ctx.inputs.size() > 2 ? ctx.inputs[2] : Tensor(), layout_.channels);
    void* y = ctx.outputs[0].raw_data();
    const int32_t lo = quant_min(out_), hi = quant_max(out_);
    const int64_t planes = layout_.outer * layout_.channels, inner = layout_.inner;
    const bool is_float = x.dtype() == DType::kFloat32;
    const float* xf = is_float ? x.data<float>() : nullptr;
    const int32_t* xi = is_float ? nullptr : x.data<int32_t>();
    const DType out = out_;
    const int64_t channels = layout_.channels;
#pragma omp parallel for schedule(static) if (planes * inner > kParallelWork)
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t c = p % channels;
      const float scale = s[c];
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = p * inner + i;
        const float v =
            is_float ? xf[k] / scale : static_cast<float>(static_cast<double>(xi[k]) / scale);
        store_8bit(y, out, k, quantize_value(v, zp[c], lo, hi));
      }
    }
  }

 private:
  AxisLayout layout_;
  DType out_;
};

class DequantizeLinearKernel final : public Kernel {
 public:
  explicit DequantizeLinearKernel(const NodeContext& ctx) : layout_(axis_layout(ctx)) {}

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const std::vector<float> s = scales(ctx.inputs[1], layout_.channels);
    const std::vector<int32_t> zp =
        zero_points(ctx.inputs.size() > 2 ? ctx.inputs[2] : Tensor(), layout_.channels);
    float* y = ctx.outputs[0].data<float>();
    const int64_t planes = layout_.outer * layout_.channels, inner = layout_.inner;
    const int64_t channels = layout_.channels;
#pragma omp parallel for schedule(static) if (planes * inner > kParallelWork)
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t c = p % channels;
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = p * inner + i;
        // int32 inputs may not fit a float exactly: subtract in 64 bits first.
        const int64_t d = static_cast<int64_t>(int_at(x, k)) - zp[c];
        y[k] = static_cast<float>(d) * s[c];
      }
    }
  }

 private:
  AxisLayout layout_;
};

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

std::unique_ptr<Kernel> make_quantize_linear(const NodeContext& ctx) {
  return std::make_unique<QuantizeLinearKernel>(ctx);
}

std::unique_ptr<Kernel> make_dequantize_linear(const NodeContext& ctx) {
  return std::make_unique<DequantizeLinearKernel>(ctx);
}

std::unique_ptr<Kernel> make_dynamic_quantize_linear(const NodeContext&) {
  return std::make_unique<DynamicQuantizeLinearKernel>();
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(QuantizeLinear, &make_quantize_linear);
LUMEN_REGISTER_CPU_KERNEL(DequantizeLinear, &make_dequantize_linear);
LUMEN_REGISTER_CPU_KERNEL(DynamicQuantizeLinear, &make_dynamic_quantize_linear);

}  // namespace lumen::cpu
