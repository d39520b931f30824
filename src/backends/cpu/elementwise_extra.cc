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
#define LUMEN_FLOAT_UNARY(name, expr)                       \
  std::unique_ptr<Kernel> make_##name(const NodeContext&) { \
    return unary<float>([](float x) { return expr; });      \
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

// log(1 + t) for t in [0, 1] (NaN stays NaN), vectorisable: Cephes' logf reduction and
// polynomial for u = 1 + t, then the correction t / (u - 1) for the rounding of u, which keeps
// the result accurate relative to t when t is small.
inline float log1p_unit_f(float t) {
  constexpr float kSqrt2 = 1.41421356237f;
  const float u = 1.0f + t;
  const bool halve = u > kSqrt2;
  const float f = select(halve, 0.5f * u, u) - 1.0f;  // u = 2^e (1 + f), f in [-0.3, 0.42]
  const float e = select(halve, 1.0f, 0.0f);
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = std::fma(p, f, -1.1514610310e-1f);
  p = std::fma(p, f, 1.1676998740e-1f);
  p = std::fma(p, f, -1.2420140846e-1f);
  p = std::fma(p, f, 1.4249322787e-1f);
  p = std::fma(p, f, -1.6668057665e-1f);
  p = std::fma(p, f, 2.0000714765e-1f);
  p = std::fma(p, f, -2.4999993993e-1f);
  p = std::fma(p, f, 3.3333331174e-1f);
  float y = p * f * z;
  y = std::fma(e, -2.12194440e-4f, y);
  y = std::fma(-0.5f, z, y);
  const float log_u = std::fma(e, 0.693359375f, f + y);
  const float d = u - 1.0f;
  return select(d == 0.0f, t, log_u * (t / d));
}

// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
inline float softplus_f(float x) {
  return select(x > 0.0f, x, 0.0f) + log1p_unit_f(exp_f(-std::fabs(x)));
}

std::unique_ptr<Kernel> make_softplus(const NodeContext&) {
  return unary<float>([](float x) { return softplus_f(x); });
}

// x tanh(softplus(x)) = x n (n + 2) / (n (n + 2) + 2) with n = e^x; beyond x = 20 the fraction
// is 1 in float (and n^2 would overflow further on).
std::unique_ptr<Kernel> make_mish(const NodeContext&) {
  return unary<float>([](float x) {
    const float n = exp_f(x);
    const float q = n * (n + 2.0f);
    return select(x > 20.0f, x, x * (q / (q + 2.0f)));
  });
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
  return unary<float>(
      [alpha, gamma](float x) { return gamma * select(x > 0.0f, x, alpha * exp_f(x) - alpha); });
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
