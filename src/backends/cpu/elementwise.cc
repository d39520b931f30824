// CPU kernels of the unary element-wise ops (Relu ... HardSwish, Clip, Not): one templated
// kernel applying an inlined functor over a contiguous tensor, split across OpenMP threads when
// large. Float32 throughout; Relu, Neg and Abs also int32 and int64, Clip also float64 and every
// integer dtype; Not on bool.
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/elementwise_math.h"
#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

// ---- functors (NaN in gives NaN out wherever ONNX's reference does) ----

struct ReluOp {
  template <typename T>
  T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};

struct NegOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(x));
    } else {
      return -x;
    }
  }
};

struct AbsOp {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? NegOp()(x) : x;  // wraps at the minimum like NumPy
    } else {
      return std::fabs(x);
    }
  }
};

// ---- factories ----

std::unique_ptr<Kernel> make_relu(const NodeContext& ctx) {
  return unary_typed(ctx, ReluOp{});
}
std::unique_ptr<Kernel> make_neg(const NodeContext& ctx) {
  return unary_typed(ctx, NegOp{});
}
std::unique_ptr<Kernel> make_abs(const NodeContext& ctx) {
  return unary_typed(ctx, AbsOp{});
}

std::unique_ptr<Kernel> make_leaky_relu(const NodeContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 0.01f);
  return unary<float>([alpha](float x) { return select(x < 0.0f, alpha * x, x); });
}

std::unique_ptr<Kernel> make_sigmoid(const NodeContext&) {
  return unary<float>([](float x) { return sigmoid_f(x); });
}

std::unique_ptr<Kernel> make_tanh(const NodeContext&) {
  return unary<float>([](float x) { return tanh_f(x); });
}

std::unique_ptr<Kernel> make_gelu(const NodeContext& ctx) {
  if (ctx.attr_string("approximate", "none") == "tanh") {
    // 0.5 x (1 + tanh(u)) == x * sigmoid(2u): no cancellation for negative x.
    return unary<float>([](float x) {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      const float u = kSqrt2OverPi * std::fma(0.044715f * x, x * x, x);
      return x * sigmoid_f(2.0f * u);
    });
  }
  return unary<float>([](float x) {
    constexpr float kSqrtHalf = 0.7071067811865476f;
    return 0.5f * x * (1.0f + erf_f(x * kSqrtHalf));
  });
}

std::unique_ptr<Kernel> make_erf(const NodeContext&) {
  return unary<float>([](float x) { return erf_f(x); });
}

std::unique_ptr<Kernel> make_exp(const NodeContext&) {
  return unary<float>([](float x) { return exp_f(x); });
}

std::unique_ptr<Kernel> make_log(const NodeContext&) {
  return unary<float>([](float x) { return std::log(x); });
}

std::unique_ptr<Kernel> make_sqrt(const NodeContext&) {
  return unary<float>([](float x) { return std::sqrt(x); });
}

std::unique_ptr<Kernel> make_reciprocal(const NodeContext&) {
  return unary<float>([](float x) { return 1.0f / x; });
}

// max(0, min(1, alpha x + beta)), written as selects that keep NaN.
inline float hard_sigmoid(float x, float alpha, float beta) {
  float v = std::fma(alpha, x, beta);
  v = select(v < 0.0f, 0.0f, v);
  return select(v > 1.0f, 1.0f, v);
}

std::unique_ptr<Kernel> make_hard_sigmoid(const NodeContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 0.2f);
  const float beta = ctx.attr_float("beta", 0.5f);
  return unary<float>([alpha, beta](float x) { return hard_sigmoid(x, alpha, beta); });
}

std::unique_ptr<Kernel> make_hard_swish(const NodeContext&) {
  return unary<float>([](float x) { return x * hard_sigmoid(x, 1.0f / 6.0f, 0.5f); });
}

std::unique_ptr<Kernel> make_not(const NodeContext&) {
  return unary<bool>([](bool x) { return !x; });
}

// Clip(x, min?, max?). A bound known when the graph is built is captured here; one that is not
// is read from its input at run time. An absent bound does not clip.
template <typename T>
class ClipKernel final : public Kernel {
 public:
  explicit ClipKernel(const NodeContext& ctx) {
    for (int i = 0; i < 2; ++i) {
      present_[i] = ctx.has_input(i + 1);
      if (const Tensor* t = ctx.input_value(i + 1)) known_[i] = t->data<T>()[0];
    }
  }

  void run(KernelContext& ctx) const override {
    T lo = kLowest, hi = kHighest;
    if (present_[0]) lo = known_[0] ? *known_[0] : ctx.inputs[1].data<T>()[0];
    if (present_[1]) hi = known_[1] ? *known_[1] : ctx.inputs[2].data<T>()[0];
    auto op = [lo, hi](T x) {
      T v = x < lo ? lo : x;
      return v > hi ? hi : v;
    };
    UnaryKernel<T, decltype(op)>(op).run(ctx);
  }
  int in_place_input() const override { return 0; }

 private:
  static constexpr T kLowest = std::numeric_limits<T>::has_infinity
                                   ? -std::numeric_limits<T>::infinity()
                                   : std::numeric_limits<T>::lowest();
  static constexpr T kHighest = std::numeric_limits<T>::has_infinity
                                    ? std::numeric_limits<T>::infinity()
                                    : std::numeric_limits<T>::max();
  bool present_[2] = {false, false};
  std::optional<T> known_[2];
};

// Clip on float32, float64 and every integer dtype (the check refuses the rest).
std::unique_ptr<Kernel> make_clip(const NodeContext& ctx) {
  return visit_numeric<kNumericOnly>(ctx.input_dtype(0),
                                     [&]<typename T>(T) -> std::unique_ptr<Kernel> {
                                       return std::make_unique<ClipKernel<T>>(ctx);
                                     });
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Relu, &make_relu, &require_float_or_int);
LUMEN_REGISTER_CPU_KERNEL(LeakyRelu, &make_leaky_relu, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Sigmoid, &make_sigmoid, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Tanh, &make_tanh, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Gelu, &make_gelu, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Erf, &make_erf, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Exp, &make_exp, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Log, &make_log, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Sqrt, &make_sqrt, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Neg, &make_neg, &require_float_or_int);
LUMEN_REGISTER_CPU_KERNEL(Abs, &make_abs, &require_float_or_int);
LUMEN_REGISTER_CPU_KERNEL(Reciprocal, &make_reciprocal, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(HardSigmoid, &make_hard_sigmoid, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(HardSwish, &make_hard_swish, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Clip, &make_clip, &require_numeric<kNumericOnly>);
LUMEN_REGISTER_CPU_KERNEL(Not, &make_not, &require_bool);

}  // namespace lumen::cpu
