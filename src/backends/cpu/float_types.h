// The floating element types of CPU kernels that take every ONNX float dtype (float32, float64,
// float16, bfloat16): visit_float calls a generic lambda with the C++ type of a dtype, and
// ComputeOf names the type such a kernel computes in (double for float64, float for the rest, so
// 16-bit data is widened once on load and rounded once on store).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "backends/cpu/numeric_types.h"
#include "core/half.h"
#include "graph/node_context.h"

namespace lumen::cpu {

// One bfloat16 element: converts to float for arithmetic and back rounding to nearest even.
struct BFloat16 {
  uint16_t bits;

  BFloat16() = default;
  BFloat16(float f) : bits(float_to_bfloat16(f)) {}  // NOLINT: implicit, like a built-in float
  operator float() const { return bfloat16_to_float(bits); }
};

// The arithmetic type of kernels over element type T.
template <typename T>
using ComputeOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// True for the dtypes visit_float serves.
inline bool is_cpu_float(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

// Calls f(T{}) with T the element type of a float dtype (float, double, Float16 or BFloat16) and
// returns its result; other dtypes get float (callers refuse them beforehand).
template <typename F>
decltype(auto) visit_float(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f(double{});
    case DType::kFloat16:
      return f(Float16{});
    case DType::kBFloat16:
      return f(BFloat16{});
    default:
      return f(float{});
  }
}

// A kernel check: every present input is float32, float64, float16 or bfloat16 except those whose
// bit is set in `skip` (integer index inputs, checked by the schema).
inline std::string require_cpu_float(const NodeContext& ctx, unsigned skip = 0) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || ((skip >> i) & 1u) != 0) continue;
    if (!is_cpu_float(ctx.input_dtype(i)))
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
             "; the CPU kernel takes float32, float64, float16 or bfloat16";
  }
  return "";
}

// The typed pointer of a tensor's elements (T from visit_float; no dtype check, the kernel's
// check has made it).
template <typename T>
T* elements(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

}  // namespace lumen::cpu
