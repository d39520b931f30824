// CPU kernels of the broadcasting element-wise ops: Add, Sub, Mul, Div, Pow, Equal, Less,
// Greater, And, Or, variadic Min/Max and Where, over float16, float32, float64 and every integer
// dtype (Pow: see its kernel). Each walks a BroadcastPlan made at compile time;
// every row segment is one of four contiguous/repeated shapes, each a loop g++ vectorises.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

struct SubOp {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(Wide<T>(a) - Wide<T>(b));
  }
};
struct MulOp {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(Wide<T>(a) * Wide<T>(b));
  }
};
// Integer division truncates toward zero (C, ONNX); divisors are checked for zero before the
// loop, and signed min / -1 wraps instead of trapping.
struct DivOp {
  static constexpr bool kIntegerDivisor = true;
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      return b == T(-1) ? static_cast<T>(Wide<T>(0) - Wide<T>(a)) : static_cast<T>(a / b);
    } else {
      return static_cast<T>(a / b);
    }
  }
};
// Min and Max propagate NaN from either side, like NumPy's minimum/maximum.
struct MinOp {
  template <typename T>
  T operator()(T a, T b) const {
    return (b < a || b != b) ? b : a;
  }
};
struct MaxOp {
  template <typename T>
  T operator()(T a, T b) const {
    return (b > a || b != b) ? b : a;
  }
};
struct EqualOp {
  template <typename T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct LessOp {
  template <typename T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct GreaterOp {
  template <typename T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct AndOp {
  bool operator()(bool a, bool b) const { return a & b; }
};
struct OrOp {
  bool operator()(bool a, bool b) const { return a | b; }
};

std::unique_ptr<Kernel> make_logic_and(const NodeContext& ctx) {
  return std::make_unique<BinaryKernel<bool, bool, AndOp>>(ctx);
}
std::unique_ptr<Kernel> make_logic_or(const NodeContext& ctx) {
  return std::make_unique<BinaryKernel<bool, bool, OrOp>>(ctx);
}

// The dtypes of the arithmetic, comparison and Min/Max kernels; Equal adds bool.
constexpr unsigned kArith = kWithFloat16;
constexpr unsigned kEqual = kWithFloat16 | kWithBool;

// Integer powers by squaring, wrapping like Mul. A negative exponent gives the truncated
// reciprocal power: 1 for base 1, +-1 for base -1, and 0 otherwise (base 0 included, where NumPy
// raises).
template <typename T, typename TE>
T integer_pow(T base, TE exponent) {
  if constexpr (std::is_signed_v<TE>) {
    if (exponent < 0) {
      if (base == T(1)) return T(1);
      if constexpr (std::is_signed_v<T>)
        if (base == T(-1)) return (exponent & 1) ? T(-1) : T(1);
      return T(0);
    }
  }
  Wide<T> result = 1, b = static_cast<Wide<T>>(base);
  for (auto e = static_cast<std::make_unsigned_t<TE>>(exponent); e != 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return static_cast<T>(result);
}

// An integer from a double, truncated toward zero; NaN gives 0 and values beyond T's range
// saturate (a plain conversion would be undefined there).
template <typename T>
T saturating_integer(double v) {
  if (!(v == v)) return T(0);
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
    return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// base ^ exponent in base's type T for an exponent of type TE.
struct PowOp {
  template <typename T, typename TE>
  T operator()(T x, TE y) const {
    if constexpr (std::is_integral_v<T> && std::is_integral_v<TE>) {
      return integer_pow(x, y);
    } else if constexpr (std::is_integral_v<T>) {
      return saturating_integer<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
    } else if constexpr (std::is_same_v<T, double>) {
      return std::pow(x, static_cast<double>(y));
    } else {
      return std::pow(x, static_cast<float>(y));
    }
  }
};

// Pow(base, exponent): base float32, float64, int32 or int64; exponent any of those or another
// integer dtype. For a float32 base, a single-valued exponent (the common x^2, x^0.5, ...) is read
// at run time and dispatched to plain arithmetic instead of powf.
template <typename T, typename TE>
class PowKernel final : public Kernel {
 public:
  explicit PowKernel(const NodeContext& ctx)
      : plan_(ctx.output(0).shape, {ctx.input_shape(0), ctx.input_shape(1)}),
        in_place_(ctx.input_shape(0) == ctx.output(0).shape ? 0 : -1) {}

  void run(KernelContext& ctx) const override {
    const T* a = ctx.inputs[0].data<T>();
    const Tensor& e = ctx.inputs[1];
    const TE* b = e.data<TE>();
    T* out = ctx.outputs[0].data<T>();
    if constexpr (std::is_same_v<T, float>) {
      if (e.numel() == 1) {
        const double p = static_cast<double>(b[0]);
        auto run = [&](auto op) { run_binary(plan_, a, b, out, op); };
        if (p == 1.0) return run([](float x, TE) { return x; });
        if (p == 2.0) return run([](float x, TE) { return x * x; });
        if (p == 3.0) return run([](float x, TE) { return x * x * x; });
        if (p == 0.5) return run([](float x, TE) { return std::sqrt(x); });
        if (p == -1.0) return run([](float x, TE) { return 1.0f / x; });
      }
    }
    run_binary(plan_, a, b, out, PowOp{});
  }
  int in_place_input() const override { return in_place_; }

 private:
  BroadcastPlan plan_;
  int in_place_;
};

bool is_pow_base(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt32 || t == DType::kInt64;
}

std::unique_ptr<Kernel> make_pow(const NodeContext& ctx) {
  auto with_base = [&]<typename T>(T) {
    return visit_numeric<kNumericOnly>(ctx.input_dtype(1),
                                       [&]<typename TE>(TE) -> std::unique_ptr<Kernel> {
                                         return std::make_unique<PowKernel<T, TE>>(ctx);
                                       });
  };
  switch (ctx.input_dtype(0)) {
    case DType::kFloat64:
      return with_base(double{});
    case DType::kInt32:
      return with_base(int32_t{});
    case DType::kInt64:
      return with_base(int64_t{});
    default:
      return with_base(float{});
  }
}

std::string check_pow(const NodeContext& ctx) {
  if (!is_pow_base(ctx.input_dtype(0)))
    return std::string("base is ") + dtype_name(ctx.input_dtype(0)) +
           "; the CPU kernel takes float32, float64, int32, int64";
  DType t = ctx.input_dtype(1);
  if (in_numeric_set<kNumericOnly>(t)) return "";
  return std::string("exponent is ") + dtype_name(t) + "; the CPU kernel takes " +
         numeric_set_names<kNumericOnly>();
}

// Where(cond, x, y): out[i] = cond ? x : y. Elements are moved as raw bits of their size, so
// every dtype is served by four instantiations. The three inputs' row steps (0 or 1 each) pick
// one of eight loops.
template <bool kC, bool kX, bool kY, typename T>
void where_segment(const uint8_t* c, const T* x, const T* y, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T xv = x[kX ? i : 0], yv = y[kY ? i : 0];  // both read, so the choice is a blend
    out[i] = c[kC ? i : 0] != 0 ? xv : yv;
  }
}

template <typename T>
class WhereKernel final : public Kernel {
 public:
  explicit WhereKernel(const NodeContext& ctx)
      : plan_(ctx.output(0).shape, {ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)}),
        in_place_(ctx.input_shape(1) == ctx.output(0).shape ? 1 : -1) {}

  void run(KernelContext& ctx) const override {
    using Segment = void (*)(const uint8_t*, const T*, const T*, T*, int64_t);
    static constexpr Segment kSegments[8] = {
        &where_segment<false, false, false, T>, &where_segment<false, false, true, T>,
        &where_segment<false, true, false, T>,  &where_segment<false, true, true, T>,
        &where_segment<true, false, false, T>,  &where_segment<true, false, true, T>,
        &where_segment<true, true, false, T>,   &where_segment<true, true, true, T>};
    const Segment segment =
        kSegments[plan_.inner_stride(0) * 4 + plan_.inner_stride(1) * 2 + plan_.inner_stride(2)];
    // The condition is read as bytes: g++ does not vectorise loads of bool mixed with wider types.
    const uint8_t* c = static_cast<const uint8_t*>(ctx.inputs[0].raw_data());
    const T* x = static_cast<const T*>(ctx.inputs[1].raw_data());
    const T* y = static_cast<const T*>(ctx.inputs[2].raw_data());
    T* out = static_cast<T*>(ctx.outputs[0].raw_data());
    for_each_row(plan_, [&](int64_t o, const int64_t* in, int64_t n) {
      segment(c + in[0], x + in[1], y + in[2], out + o, n);
    });
  }
  // x may be overwritten: each output element is written after its own x element is read.
  int in_place_input() const override { return in_place_; }

 private:
  BroadcastPlan plan_;
  int in_place_;
};

std::unique_ptr<Kernel> make_where(const NodeContext& ctx) {
  switch (dtype_size(ctx.input_dtype(1))) {
    case 1:
      return std::make_unique<WhereKernel<uint8_t>>(ctx);
    case 2:
      return std::make_unique<WhereKernel<uint16_t>>(ctx);
    case 4:
      return std::make_unique<WhereKernel<uint32_t>>(ctx);
    case 8:
      return std::make_unique<WhereKernel<uint64_t>>(ctx);
    default:
      ctx.fail_unsupported("no CPU kernel for this element size");
  }
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Add, &make_binary<AddOp, false, kArith>, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Sub, &make_binary<SubOp, false, kArith>, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Mul, &make_binary<MulOp, false, kArith>, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Div, &make_binary<DivOp, false, kArith>, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Pow, &make_pow, &check_pow);
LUMEN_REGISTER_CPU_KERNEL(Min, &make_variadic<MinOp, kArith>, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Max, &make_variadic<MaxOp, kArith>, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Equal, &make_binary<EqualOp, true, kEqual>, &require_numeric<kEqual>);
LUMEN_REGISTER_CPU_KERNEL(Less, &make_binary<LessOp, true, kArith>, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(Greater, &make_binary<GreaterOp, true, kArith>, &require_numeric<kArith>);
LUMEN_REGISTER_CPU_KERNEL(And, &make_logic_and, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Or, &make_logic_or, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Where, &make_where, nullptr);

}  // namespace lumen::cpu
