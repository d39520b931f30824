// CPU kernels of QuantizeLinear and DequantizeLinear through opset 25.
//
// QuantizeLinear: y = saturate(round(x / y_scale) + y_zero_point) for the integer types (ties to
// even, clamped to the type's range), and y = cast(x / y_scale + y_zero_point) for the float8
// and float4 types (round to nearest even; `saturate` as Cast's). The division is done in
// `precision` (default: y_scale's type; float32 for float8e8m0 scales, float64 for int32 ones):
// for float16 and bfloat16 both operands and the quotient are rounded to that type. An int32 x
// divides in float64, its quotient rounded to float32.
//
// DequantizeLinear: y = (x - x_zero_point) * x_scale in the output's type (output_dtype, else
// x_scale's), the difference taken exactly for integers.
//
// Scales and zero points are per tensor, per axis, or blocked: an element at index d of the axis
// uses the parameter at d / block_size, with its other coordinates its own.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernel_registry.h"
#include "core/half.h"
#include "core/narrow_types.h"
#include "graph/onnx_dtype.h"
#include "graph/schemas/quant_layout.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kChunk = 4096;
constexpr int64_t kParallelWork = 1 << 16;

using ParamLayout = QuantParamLayout;

// Runs body(begin, end, param_base, param_step) over every element: runs of at most kChunk
// consecutive elements of one (o, d) row, where the parameter index of element k is
// param_base + (k - begin) * param_step. In parallel for large tensors.
template <typename Body>
void for_each_run(const ParamLayout& l, Body&& body) {
  const int64_t rows = l.outer * l.axis_len;
  const int64_t chunks = (l.inner + kChunk - 1) / kChunk;
  const int64_t items = rows * chunks;
#pragma omp parallel for schedule(static) if (rows * l.inner > kParallelWork)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t row = item / chunks, c = item % chunks;
    const int64_t o = row / l.axis_len, d = row % l.axis_len;
    const int64_t i0 = c * kChunk, i1 = std::min(l.inner, i0 + kChunk);
    const int64_t base = o * l.p_outer + (d / l.block) * l.p_axis + i0 * l.p_inner;
    body(row * l.inner + i0, row * l.inner + i1, base, l.p_inner);
  }
}

float round_to(DType t, float v) {
  if (t == DType::kFloat16) return half_to_float(float_to_half(v));
  if (t == DType::kBFloat16) return bfloat16_to_float(float_to_bfloat16(v));
  return v;
}

// The range of an integer quantized type.
void integer_range(DType t, int32_t& lo, int32_t& hi) {
  switch (t) {
    case DType::kUInt8:
      lo = 0, hi = 255;
      break;
    case DType::kInt8:
      lo = -128, hi = 127;
      break;
    case DType::kUInt16:
      lo = 0, hi = 65535;
      break;
    case DType::kInt16:
      lo = -32768, hi = 32767;
      break;
    case DType::kUInt4:
      lo = 0, hi = 15;
      break;
    case DType::kInt4:
      lo = -8, hi = 7;
      break;
    case DType::kUInt2:
      lo = 0, hi = 3;
      break;
    default:  // int2
      lo = -2, hi = 1;
      break;
  }
}

// round(v) (ties to even) + zero_point, saturated to [lo, hi]; NaN becomes the zero point.
inline int32_t quantize_integer(double v, int32_t zero_point, int32_t lo, int32_t hi) {
  const double r = std::nearbyint(v);
  if (std::isnan(r)) return std::clamp(zero_point, lo, hi);
  const double q = r + zero_point;
  if (q <= lo) return lo;
  if (q >= hi) return hi;
  return static_cast<int32_t>(q);
}

class QuantizeLinearKernel final : public Kernel {
 public:
  explicit QuantizeLinearKernel(const NodeContext& ctx)
      : layout_(quant_param_layout(ctx)),
        x_type_(ctx.input_dtype(0)),
        scale_type_(ctx.input_dtype(1)),
        out_(ctx.output(0).dtype),
        saturate_(ctx.attr_int("saturate", 1) != 0) {
    const int64_t code = ctx.attr_int("precision", 0);
    std::optional<DType> p = code != 0 ? dtype_from_onnx(code) : std::nullopt;
    if (p) {
      precision_ = *p;
    } else if (scale_type_ == DType::kInt32) {
      precision_ = DType::kFloat64;
    } else if (scale_type_ == DType::kFloat8E8M0) {
      precision_ = DType::kFloat32;
    } else {
      precision_ = scale_type_;
    }
    if (!is_narrow_float(out_)) integer_range(out_, lo_, hi_);
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& s = ctx.inputs[1];
    const Tensor* zp = ctx.inputs.size() > 2 && ctx.inputs[2].defined() ? &ctx.inputs[2] : nullptr;
    // Scales in the division's precision; zero points as integers or (float outputs) floats.
    std::vector<double> scale(static_cast<size_t>(s.numel()));
    for (int64_t i = 0; i < s.numel(); ++i) {
      const double v = s.item_as_double(i);
      scale[i] = precision_ == DType::kFloat64 ? v : round_to(precision_, static_cast<float>(v));
    }
    std::vector<double> zero(static_cast<size_t>(s.numel()), 0.0);
    if (zp != nullptr)
      for (int64_t i = 0; i < zp->numel(); ++i) zero[i] = zp->item_as_double(i);
    switch (x_type_) {
      case DType::kFloat32:
        quantize(static_cast<const float*>(x.raw_data()), scale, zero, ctx.outputs[0]);
        break;
      case DType::kInt32:
        quantize(static_cast<const int32_t*>(x.raw_data()), scale, zero, ctx.outputs[0]);
        break;
      default:  // float16, bfloat16: their bits
        quantize(static_cast<const uint16_t*>(x.raw_data()), scale, zero, ctx.outputs[0]);
        break;
    }
  }

 private:
  // x / scale in the division's precision `prec` (x of dtype xt where XT holds 16-bit bits).
  template <typename XT>
  static double quotient(XT raw, double scale, DType xt, DType prec) {
    if constexpr (std::is_same_v<XT, int32_t>) {
      const double q = static_cast<double>(raw) / scale;
      return prec == DType::kFloat64 ? q : round_to(prec, static_cast<float>(q));
    } else {
      float x;
      if constexpr (std::is_same_v<XT, float>)
        x = raw;
      else
        x = xt == DType::kFloat16 ? half_to_float(raw) : bfloat16_to_float(raw);
      if (prec == DType::kFloat32) return x / static_cast<float>(scale);
      if (prec == DType::kFloat64) return static_cast<double>(x) / scale;
      return round_to(prec, round_to(prec, x) / static_cast<float>(scale));
    }
  }

  template <typename XT>
  void quantize(const XT* x, const std::vector<double>& scale, const std::vector<double>& zero,
                Tensor& out) const {
    // Locals, so that the byte stores below cannot be taken to change them.
    void* y = out.raw_data();
    const DType xt = x_type_, prec = precision_, out_type = out_;
    if (is_narrow_float(out_type)) {
      uint8_t* y8 = static_cast<uint8_t*>(y);
      const bool saturate = saturate_;
      for_each_run(layout_, [&](int64_t begin, int64_t end, int64_t p, int64_t step) {
        for (int64_t k = begin; k < end; ++k, p += step) {
          const float v = static_cast<float>(quotient(x[k], scale[p], xt, prec) + zero[p]);
          y8[k] = float_to_narrow_float(out_type, v, saturate);
        }
      });
      return;
    }
    const int32_t lo = lo_, hi = hi_;
    if constexpr (std::is_same_v<XT, float>) {
      if (prec == DType::kFloat32) {
        if (out_type == DType::kInt16)
          quantize_fast(x, static_cast<int16_t*>(y), scale, zero);
        else if (out_type == DType::kUInt16)
          quantize_fast(x, static_cast<uint16_t*>(y), scale, zero);
        else
          quantize_fast(x, static_cast<uint8_t*>(y), scale, zero);
        return;
      }
    }
    for_each_run(layout_, [&](int64_t begin, int64_t end, int64_t p, int64_t step) {
      for (int64_t k = begin; k < end; ++k, p += step) {
        const int32_t q = quantize_integer(quotient(x[k], scale[p], xt, prec),
                                           static_cast<int32_t>(zero[p]), lo, hi);
        if (out_type == DType::kInt16)
          static_cast<int16_t*>(y)[k] = static_cast<int16_t>(q);
        else if (out_type == DType::kUInt16)
          static_cast<uint16_t*>(y)[k] = static_cast<uint16_t>(q);
        else
          static_cast<uint8_t*>(y)[k] = static_cast<uint8_t>(q);  // int8 etc.: two's complement
      }
    });
  }

  // float32 x and division to an integer type YT (int8 and the narrower ones stored as bytes),
  // in float: the common case, kept simple enough to vectorize.
  template <typename YT>
  void quantize_fast(const float* x, YT* y, const std::vector<double>& scale,
                     const std::vector<double>& zero) const {
    const std::vector<float> s(scale.begin(), scale.end()), z(zero.begin(), zero.end());
    const float lo = static_cast<float>(lo_), hi = static_cast<float>(hi_);
    if (s.size() == 1) {  // per tensor: one vectorised loop (AVX2 where the CPU has it)
      const float sc = s[0], zp = z[0];
      parallel_chunks(layout_.outer * layout_.axis_len * layout_.inner, [=](int64_t b, int64_t e) {
        quantize_run<YT, false>(x + b, y + b, e - b, &sc, &zp, lo, hi);
      });
      return;
    }
    for_each_run(layout_, [&](int64_t begin, int64_t end, int64_t p, int64_t step) {
      if (step == 0)
        quantize_run<YT, false>(x + begin, y + begin, end - begin, &s[p], &z[p], lo, hi);
      else
        quantize_run<YT, true>(x + begin, y + begin, end - begin, &s[p], &z[p], lo, hi);
    });
  }

  // n values with one scale and zero point (kEach: one per value).
  template <typename YT, bool kEach>
  static void quantize_run(const float* x, YT* y, int64_t n, const float* s, const float* z,
                           float lo, float hi) {
    // Read once: a byte store to y may alias s and z, which would reload them per element and
    // keep the per-tensor loop scalar.
    const float s0 = s[0], z0 = z[0];
    for (int64_t i = 0; i < n; ++i) {
      const float sc = kEach ? s[i] : s0, zp = kEach ? z[i] : z0;
      const float r = std::nearbyint(x[i] / sc);
      const float q = r != r ? zp : r + zp;  // NaN: the zero point
      y[i] = static_cast<YT>(static_cast<int32_t>(std::min(std::max(q, lo), hi)));
    }
  }

  ParamLayout layout_;
  DType x_type_, scale_type_, out_;
  DType precision_ = DType::kFloat32;
  bool saturate_ = true;
  int32_t lo_ = 0, hi_ = 0;
};

class DequantizeLinearKernel final : public Kernel {
 public:
  explicit DequantizeLinearKernel(const NodeContext& ctx)
      : layout_(quant_param_layout(ctx)), x_type_(ctx.input_dtype(0)), out_(ctx.output(0).dtype) {
    if (is_narrow_float(x_type_))
      for (int b = 0; b < 256; ++b) decoded_[b] = narrow_to_float(x_type_, static_cast<uint8_t>(b));
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& s = ctx.inputs[1];
    const Tensor* zp = ctx.inputs.size() > 2 && ctx.inputs[2].defined() ? &ctx.inputs[2] : nullptr;
    std::vector<float> scale(static_cast<size_t>(s.numel()));
    for (int64_t i = 0; i < s.numel(); ++i)
      scale[i] = round_to(out_, static_cast<float>(s.item_as_double(i)));
    if (is_narrow_float(x_type_)) {
      std::vector<float> zero(static_cast<size_t>(s.numel()), 0.0f);
      if (zp != nullptr)
        for (int64_t i = 0; i < zp->numel(); ++i)
          zero[i] = static_cast<float>(zp->item_as_double(i));
      const uint8_t* xb = static_cast<const uint8_t*>(x.raw_data());
      store(ctx.outputs[0], scale,
            [&](int64_t k, int64_t p) { return round_to(out_, decoded_[xb[k]] - zero[p]); });
      return;
    }
    std::vector<int64_t> zero(static_cast<size_t>(s.numel()), 0);
    if (zp != nullptr)
      for (int64_t i = 0; i < zp->numel(); ++i)
        zero[i] = static_cast<int64_t>(zp->item_as_double(i));
    if (s.numel() == 1 && out_ == DType::kFloat32 &&
        (x_type_ == DType::kUInt8 || x_type_ == DType::kInt8)) {
      dequantize_8bit(x, scale[0], zero[0], ctx.outputs[0].data<float>());
      return;
    }
    const void* xd = x.raw_data();
    auto diff = [&](auto tag) {
      using T = decltype(tag);
      const T* xv = static_cast<const T*>(xd);
      store(ctx.outputs[0], scale, [&](int64_t k, int64_t p) {
        return round_to(out_, static_cast<float>(static_cast<int64_t>(xv[k]) - zero[p]));
      });
    };
    switch (x_type_) {
      case DType::kInt8:
      case DType::kInt4:
      case DType::kInt2:
        diff(int8_t{});
        break;
      case DType::kInt16:
        diff(int16_t{});
        break;
      case DType::kUInt16:
        diff(uint16_t{});
        break;
      case DType::kInt32:
        diff(int32_t{});
        break;
      default:  // uint8, uint4, uint2
        diff(uint8_t{});
        break;
    }
  }

 private:
  // Per-tensor 8-bit to float32 (the activations of QDQ models): (code - zero) * scale, in loops
  // the compiler vectorises (AVX2 where the CPU has it).
  void dequantize_8bit(const Tensor& x, float scale, int64_t zero, float* y) const {
    const auto z = static_cast<int32_t>(zero);
    auto run = [&](const auto* xb) {
      parallel_chunks(x.numel(), [=](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) y[k] = static_cast<float>(xb[k] - z) * scale;
      });
    };
    if (x_type_ == DType::kInt8)
      run(static_cast<const int8_t*>(x.raw_data()));
    else
      run(static_cast<const uint8_t*>(x.raw_data()));
  }

  // y[k] = diff(k, p) * scale[p] in the output's type.
  template <typename Diff>
  void store(Tensor& out, const std::vector<float>& scale, Diff&& diff) const {
    void* y = out.raw_data();
    const DType out_type = out_;
    for_each_run(layout_, [&](int64_t begin, int64_t end, int64_t p, int64_t step) {
      if (out_type == DType::kFloat32) {
        float* yf = static_cast<float*>(y);
        for (int64_t k = begin; k < end; ++k, p += step) yf[k] = diff(k, p) * scale[p];
        return;
      }
      uint16_t* yh = static_cast<uint16_t*>(y);
      for (int64_t k = begin; k < end; ++k, p += step) {
        const float v = diff(k, p) * scale[p];
        yh[k] = out_type == DType::kFloat16 ? float_to_half(v) : float_to_bfloat16(v);
      }
    });
  }

  ParamLayout layout_;
  DType x_type_, out_;
  float decoded_[256] = {};
};

std::unique_ptr<Kernel> make_quantize_linear(const NodeContext& ctx) {
  return std::make_unique<QuantizeLinearKernel>(ctx);
}

std::unique_ptr<Kernel> make_dequantize_linear(const NodeContext& ctx) {
  return std::make_unique<DequantizeLinearKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(QuantizeLinear, &make_quantize_linear);
LUMEN_REGISTER_CPU_KERNEL(DequantizeLinear, &make_dequantize_linear);

}  // namespace lumen::cpu
