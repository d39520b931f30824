// CPU kernels of the further unary element-wise ops: trigonometric and hyperbolic functions,
// Floor/Ceil/Round, Sign, IsNaN/IsInf and the activations Elu, Selu, Celu, Softplus, Softsign,
// Mish and ThresholdedRelu, all on the shared UnaryKernel. Float32; Sign also int32 and int64.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/elementwise_math.h"
#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

// A kernel of a float -> float function of the libm kind (no attributes).
#define LUMEN_FLOAT_UNARY(name, expr)                                 \
  std::unique_ptr<Kernel> make_##name(const NodeContext&) {            \
    return unary<float>([](float x) { return expr; });                 \
  }

LUMEN_FLOAT_UNARY(sin, std::sin(x))
LUMEN_FLOAT_UNARY(cos, std::cos(x))
LUMEN_FLOAT_UNARY(tan, std::tan(x))
LUMEN_FLOAT_UNARY(asin, std::asin(x))
LUMEN_FLOAT_UNARY(acos, std::acos(x))
LUMEN_FLOAT_UNARY(atan, std::atan(x))
LUMEN_FLOAT_UNARY(sinh, std::sinh(x))
LUMEN_FLOAT_UNARY(cosh, std::cosh(x))
LUMEN_FLOAT_UNARY(asinh, std::asinh(x))
LUMEN_FLOAT_UNARY(acosh, std::acosh(x))
LUMEN_FLOAT_UNARY(atanh, std::atanh(x))
LUMEN_FLOAT_UNARY(floor, std::floor(x))
LUMEN_FLOAT_UNARY(ceil, std::ceil(x))
// Halves round to even: nearbyint under the default rounding mode, as NumPy's round does.
LUMEN_FLOAT_UNARY(round, std::nearbyint(x))
LUMEN_FLOAT_UNARY(softsign, x / (1.0f + std::fabs(x)))
#undef LUMEN_FLOAT_UNARY

// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
inline float softplus_f(float x) {
  return select(x > 0.0f, x, 0.0f) + std::log1p(exp_f(-std::fabs(x)));
}

std::unique_ptr<Kernel> make_softplus(const NodeContext&) {
  return unary<float>([](float x) { return softplus_f(x); });
}

std::unique_ptr<Kernel> make_mish(const NodeContext&) {
  return unary<float>([](float x) { return x * tanh_f(softplus_f(x)); });
}

// Sign: -1, 0 or 1; NaN stays NaN.
struct SignOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>((x > 0) - (x < 0));
    } else {
      return select(x > 0.0f, 1.0f, select(x < 0.0f, -1.0f, x));
    }
  }
};

std::unique_ptr<Kernel> make_sign(const NodeContext& ctx) {
  return unary_typed(ctx, SignOp{});
}

std::unique_ptr<Kernel> make_is_nan(const NodeContext&) {
  auto op = [](float x) { return x != x; };
  return std::make_unique<UnaryKernel<float, decltype(op), bool>>(op);
}

std::unique_ptr<Kernel> make_is_inf(const NodeContext& ctx) {
  const bool neg = ctx.attr_int("detect_negative", 1) != 0;
  const bool pos = ctx.attr_int("detect_positive", 1) != 0;
  auto op = [neg, pos](float x) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    return (pos && x == kInf) || (neg && x == -kInf);
  };
  return std::make_unique<UnaryKernel<float, decltype(op), bool>>(op);
}

// x for x > 0, else alpha (e^x - 1).
std::unique_ptr<Kernel> make_elu(const NodeContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 1.0f);
  return unary<float>([alpha](float x) { return select(x > 0.0f, x, alpha * (exp_f(x) - 1.0f)); });
}

// gamma x for x > 0, else gamma alpha (e^x - 1).
std::unique_ptr<Kernel> make_selu(const NodeContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
  const float gamma = ctx.attr_float("gamma", 1.05070102214813232421875f);
  return unary<float>([alpha, gamma](float x) {
    return gamma * select(x > 0.0f, x, alpha * exp_f(x) - alpha);
  });
}

// max(0, x) + min(0, alpha (e^(x / alpha) - 1)); NaN stays NaN.
std::unique_ptr<Kernel> make_celu(const NodeContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 1.0f);
  return unary<float>([alpha](float x) {
    const float e = alpha * (exp_f(x / alpha) - 1.0f);
    return select(x > 0.0f, x, 0.0f) + select(e > 0.0f, 0.0f, e);
  });
}

// x for x > alpha, else 0.
std::unique_ptr<Kernel> make_thresholded_relu(const NodeContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 1.0f);
  return unary<float>([alpha](float x) { return select(x > alpha, x, 0.0f); });
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Sin, &make_sin, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Cos, &make_cos, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Tan, &make_tan, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Asin, &make_asin, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Acos, &make_acos, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Atan, &make_atan, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Sinh, &make_sinh, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Cosh, &make_cosh, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Asinh, &make_asinh, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Acosh, &make_acosh, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Atanh, &make_atanh, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Floor, &make_floor, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Ceil, &make_ceil, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Round, &make_round, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Sign, &make_sign, &require_float_or_int);
LUMEN_REGISTER_CPU_KERNEL(IsNaN, &make_is_nan, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(IsInf, &make_is_inf, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Elu, &make_elu, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Selu, &make_selu, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Celu, &make_celu, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Softplus, &make_softplus, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Softsign, &make_softsign, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Mish, &make_mish, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(ThresholdedRelu, &make_thresholded_relu, &require_float32);

}  // namespace lumen::cpu
