// CPU kernels of the further broadcasting element-wise ops: PRelu, Mod, Xor, LessOrEqual,
// GreaterOrEqual, variadic Sum and Mean, plus CastLike (Cast's kernel) and Size. Built on the
// shared BinaryKernel/VariadicKernel; Mod, the comparisons and Sum take float16, float32, float64
// and every integer dtype, PRelu float32, int32 and int64, Mean float32.
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/elementwise_math.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/shape_ops_cast.h"

namespace lumen::cpu {
namespace {

// x for x >= 0, else slope * x (integers wrap like Mul).
struct PReluOp {
  template <typename T>
  T operator()(T x, T slope) const {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? static_cast<T>(Wide<T>(x) * Wide<T>(slope)) : x;
    } else {
      return select(x < 0.0f, slope * x, x);
    }
  }
};

// Mod with fmod = 0: the remainder takes the divisor's sign (Python's %, a - floor(a / b) * b).
// Integer divisors are checked for zero before the loop; x % -1 is 0 without the INT_MIN trap.
// Floats follow opset 28's rules: a zero remainder has b's sign, b = ±inf gives a when the signs
// agree and b otherwise, and x % 0, ±inf % y and NaNs give NaN.
struct FloorModOp {
  static constexpr bool kIntegerDivisor = true;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, Float16>) {
      return T(floor_mod(static_cast<float>(a), static_cast<float>(b)));
    } else if constexpr (std::is_floating_point_v<T>) {
      return floor_mod(a, b);
    } else if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return T(0);
      const T r = static_cast<T>(a % b);
      return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;
    } else {
      return static_cast<T>(a % b);
    }
  }
  template <typename F>
  static F floor_mod(F a, F b) {
    const F r = std::fmod(a, b);  // NaN for b = 0, a = ±inf or a NaN operand
    if (r == F(0)) return std::copysign(F(0), b);
    return (r < 0) != (b < 0) ? r + b : r;
  }
};

// Mod with fmod = 1: the remainder takes the dividend's sign (C's % and fmod).
struct TruncModOp {
  static constexpr bool kIntegerDivisor = true;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
      return b == T(-1) ? T(0) : static_cast<T>(a % b);
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(a % b);
    } else if constexpr (std::is_same_v<T, Float16>) {
      return std::fmod(static_cast<float>(a), static_cast<float>(b));
    } else {
      return std::fmod(a, b);
    }
  }
};

template <typename T>
std::unique_ptr<Kernel> make_mod_typed(const NodeContext& ctx, bool fmod) {
  if (!fmod) return std::make_unique<BinaryKernel<T, T, FloorModOp>>(ctx);
  return std::make_unique<BinaryKernel<T, T, TruncModOp>>(ctx);
}

// The dtypes of Mod, the order comparisons and Sum.
constexpr unsigned kArith = kWithFloat16;

std::unique_ptr<Kernel> make_mod(const NodeContext& ctx) {
  const bool fmod = ctx.attr_int("fmod", 0) != 0;
  return visit_numeric<kArith>(ctx.input_dtype(0),
                               [&]<typename T>(T) { return make_mod_typed<T>(ctx, fmod); });
}

struct XorOp {
  bool operator()(bool a, bool b) const { return a != b; }
};

// PRelu on float32, int32 and int64 (the check refuses the rest).
std::unique_ptr<Kernel> make_prelu(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kInt32:
      return std::make_unique<BinaryKernel<int32_t, int32_t, PReluOp>>(ctx);
    case DType::kInt64:
      return std::make_unique<BinaryKernel<int64_t, int64_t, PReluOp>>(ctx);
    default:
      return std::make_unique<BinaryKernel<float, float, PReluOp>>(ctx);
  }
}

std::unique_ptr<Kernel> make_xor(const NodeContext& ctx) {
  return std::make_unique<BinaryKernel<bool, bool, XorOp>>(ctx);
}

struct LessOrEqualOp {
  template <typename T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct GreaterOrEqualOp {
  template <typename T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};

// Mean: the broadcast sum of the inputs, divided by their count.
class MeanKernel final : public Kernel {
 public:
  explicit MeanKernel(const NodeContext& ctx)
      : sum_(ctx), count_(static_cast<float>(ctx.num_inputs())) {}

  void run(KernelContext& ctx) const override {
    sum_.run(ctx);
    float* y = ctx.outputs[0].data<float>();
    const float count = count_;
    parallel_chunks(ctx.outputs[0].numel(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) y[i] /= count;
    });
  }
  int in_place_input() const override { return sum_.in_place_input(); }

 private:
  VariadicKernel<float, AddOp> sum_;
  float count_;
};

std::unique_ptr<Kernel> make_mean(const NodeContext& ctx) {
  return std::make_unique<MeanKernel>(ctx);
}

// Size's value is known at build time (the schema sets it); the kernel writes the same count.
class SizeKernel final : public Kernel {
 public:
  explicit SizeKernel(const NodeContext& ctx) : size_(ctx.input_shape(0).numel()) {}
  void run(KernelContext& ctx) const override { ctx.outputs[0].data<int64_t>()[0] = size_; }

 private:
  int64_t size_;
};

std::unique_ptr<Kernel> make_size(const NodeContext& ctx) {
  return std::make_unique<SizeKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(PRelu, &make_prelu, &require_float_or_int);
LUMEN_REGISTER_CPU_KERNEL(Mod, &make_mod, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Xor, &make_xor, &require_bool);
LUMEN_REGISTER_CPU_KERNEL(LessOrEqual, &make_binary<LessOrEqualOp, true, kArith>,
                          &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(GreaterOrEqual, &make_binary<GreaterOrEqualOp, true, kArith>,
                          &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Sum, &make_variadic<AddOp, kArith>, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Mean, &make_mean, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(CastLike, &make_cast_kernel, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Size, &make_size, nullptr);

}  // namespace lumen::cpu
