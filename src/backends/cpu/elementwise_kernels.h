// Kernel templates shared by the element-wise families (elementwise.cc, elementwise_binary.cc,
// elementwise_extra_*.cc): a unary kernel applying an inlined functor over a contiguous tensor,
// and broadcasting binary and variadic kernels walking a BroadcastPlan with row loops that g++
// vectorises.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/numeric_types.h"

namespace lumen::cpu {

// ---- unary ----

// y = op(x) over every element. The output may be the input itself (in_place_input() is 0); that
// case gets its own loop over one pointer so the compiler vectorises it without alias checks.
// TO is the output's type (bool for predicates such as IsNaN).
template <typename T, typename Op, typename TO = T>
class UnaryKernel final : public Kernel {
 public:
  explicit UnaryKernel(Op op) : op_(op) {}

  void run(KernelContext& ctx) const override {
    const T* x = ctx.inputs[0].data<T>();
    TO* y = ctx.outputs[0].data<TO>();
    const Op op = op_;
    parallel_chunks(ctx.outputs[0].numel(), [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, TO>) {
        if (x == y) {
          for (int64_t i = begin; i < end; ++i) y[i] = op(y[i]);
          return;
        }
      }
      for (int64_t i = begin; i < end; ++i) y[i] = op(x[i]);
    });
  }
  int in_place_input() const override { return std::is_same_v<T, TO> ? 0 : -1; }

 private:
  Op op_;
};

template <typename T, typename Op>
std::unique_ptr<Kernel> unary(Op op) {
  return std::make_unique<UnaryKernel<T, Op>>(op);
}

// Builds the kernel of a functor with a templated call operator for x's dtype (float32, int32 or
// int64; the caller's check has already refused the rest).
template <typename Op>
std::unique_ptr<Kernel> unary_typed(const NodeContext& ctx, Op op) {
  switch (ctx.input_dtype(0)) {
    case DType::kInt32:
      return unary<int32_t>(op);
    case DType::kInt64:
      return unary<int64_t>(op);
    default:
      return unary<float>(op);
  }
}

// ---- broadcasting binary ----

// out[i] = op(a[i * sa], b[i * sb]) for i < n, where sa and sb are 0 or 1. `out` may be `a`
// itself (in place), which gets its own loops so that no alias check blocks vectorisation.
template <typename TA, typename TB, typename TO, typename Op>
inline void binary_segment(const TA* a, int64_t sa, const TB* b, int64_t sb, TO* out, int64_t n,
                           const Op& op) {
  if constexpr (std::is_same_v<TA, TO>) {
    if (sa && static_cast<const void*>(a) == static_cast<const void*>(out)) {
      if (sb) {
        for (int64_t i = 0; i < n; ++i) out[i] = op(out[i], b[i]);
      } else {
        const TB bv = *b;
        for (int64_t i = 0; i < n; ++i) out[i] = op(out[i], bv);
      }
      return;
    }
  }
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], b[i]);
  } else if (sa) {
    const TB bv = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], bv);
  } else if (sb) {
    const TA av = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = op(av, b[i]);
  } else {
    const TO v = op(*a, *b);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

// Applies op over a two-input plan.
template <typename TA, typename TB, typename TO, typename Op>
void run_binary(const BroadcastPlan& plan, const TA* a, const TB* b, TO* out, const Op& op) {
  const int64_t sa = plan.inner_stride(0), sb = plan.inner_stride(1);
  for_each_row(plan, [&](int64_t o, const int64_t* in, int64_t n) {
    binary_segment(a + in[0], sa, b + in[1], sb, out + o, n, op);
  });
}

// Integer arithmetic wraps around (two's complement) instead of overflowing: it is done in an
// unsigned type at least as wide as unsigned int (narrower ones would promote to signed int).
template <typename T, bool = std::is_integral_v<T> && !std::is_same_v<T, bool>>
struct WideOf {
  using type = T;
};
template <typename T>
struct WideOf<T, true> {
  using type =
      std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};
template <typename T>
using Wide = typename WideOf<T>::type;

struct AddOp {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(Wide<T>(a) + Wide<T>(b));
  }
};

// An op functor that declares `static constexpr bool kIntegerDivisor = true` divides by its
// second operand: on integer dtypes the kernel refuses a zero there before running.
template <typename Op>
constexpr bool divides_by_input1() {
  if constexpr (requires { Op::kIntegerDivisor; }) {
    return Op::kIntegerDivisor;
  } else {
    return false;
  }
}

// out = op(a, b) with a and b of dtype T broadcast together; the result is T, or bool for
// comparisons (TO).
template <typename T, typename TO, typename Op>
class BinaryKernel final : public Kernel {
 public:
  explicit BinaryKernel(const NodeContext& ctx)
      : where_(ctx.where()),
        plan_(ctx.output(0).shape, {ctx.input_shape(0), ctx.input_shape(1)}),
        in_place_(std::is_same_v<T, TO> && ctx.input_shape(0) == ctx.output(0).shape ? 0 : -1) {}

  void run(KernelContext& ctx) const override {
    const Tensor& b = ctx.inputs[1];
    if constexpr (divides_by_input1<Op>() && std::is_integral_v<T>) {
      if (plan_.numel() > 0) {
        const T* p = b.data<T>();
        bool zero = false;
        for (int64_t i = 0; i < b.numel(); ++i) zero |= p[i] == T(0);
        if (zero) throw InvalidArgument(where_ + ": integer division by zero");
      }
    }
    run_binary(plan_, ctx.inputs[0].data<T>(), b.data<T>(), ctx.outputs[0].data<TO>(), Op{});
  }
  int in_place_input() const override { return in_place_; }

 private:
  std::string where_;
  BroadcastPlan plan_;
  int in_place_;
};

// The kernel for input 0's dtype among visit_numeric<kSet>'s (the caller's check has refused the
// rest); comparisons (kCompare) output bool.
template <typename Op, bool kCompare, unsigned kSet>
std::unique_ptr<Kernel> make_binary(const NodeContext& ctx) {
  return visit_numeric<kSet>(ctx.input_dtype(0), [&]<typename T>(T) -> std::unique_ptr<Kernel> {
    using TO = std::conditional_t<kCompare, bool, T>;
    return std::make_unique<BinaryKernel<T, TO, Op>>(ctx);
  });
}

// ---- variadic ----

// Op folded over one or more inputs: out = op(in0, in1), then out = op(out, in_k) for each
// further input, every step broadcasting to the output shape.
template <typename T, typename Op>
class VariadicKernel final : public Kernel {
 public:
  explicit VariadicKernel(const NodeContext& ctx) {
    const Shape& out = ctx.output(0).shape;
    in_place_ = ctx.input_shape(0) == out ? 0 : -1;
    if (ctx.num_inputs() >= 2)
      steps_.push_back(BroadcastPlan(out, {ctx.input_shape(0), ctx.input_shape(1)}));
    for (int k = 2; k < ctx.num_inputs(); ++k)
      steps_.push_back(BroadcastPlan(out, {out, ctx.input_shape(k)}));
  }

  void run(KernelContext& ctx) const override {
    T* out = ctx.outputs[0].data<T>();
    const T* in0 = ctx.inputs[0].data<T>();
    if (steps_.empty()) {  // one input: a copy
      if (in0 != out) std::memcpy(out, in0, ctx.outputs[0].nbytes());
      return;
    }
    run_binary(steps_[0], in0, ctx.inputs[1].data<T>(), out, Op{});
    for (size_t k = 1; k < steps_.size(); ++k)
      run_binary(steps_[k], static_cast<const T*>(out), ctx.inputs[k + 1].data<T>(), out, Op{});
  }
  int in_place_input() const override { return in_place_; }

 private:
  std::vector<BroadcastPlan> steps_;
  int in_place_ = -1;
};

// The kernel for input 0's dtype among visit_numeric<kSet>'s (the caller's check has refused the
// rest).
template <typename Op, unsigned kSet>
std::unique_ptr<Kernel> make_variadic(const NodeContext& ctx) {
  return visit_numeric<kSet>(ctx.input_dtype(0), [&]<typename T>(T) -> std::unique_ptr<Kernel> {
    return std::make_unique<VariadicKernel<T, Op>>(ctx);
  });
}

// ---- dtype checks ----

// For kernels over float32, int32 and int64 (input 0's dtype).
inline std::string require_float_or_int(const NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (t == DType::kFloat32 || t == DType::kInt32 || t == DType::kInt64) return "";
  return std::string("input is ") + dtype_name(t) + "; the CPU kernel takes float32, int32, int64";
}

// For kernels over visit_numeric<kSet>'s dtypes (input 0's dtype).
template <unsigned kSet>
std::string require_numeric(const NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (in_numeric_set<kSet>(t)) return "";
  return std::string("input is ") + dtype_name(t) + "; the CPU kernel takes " +
         numeric_set_names<kSet>();
}

inline std::string require_bool(const NodeContext& ctx) {
  return ctx.input_dtype(0) == DType::kBool ? "" : "input must be bool";
}

}  // namespace lumen::cpu
