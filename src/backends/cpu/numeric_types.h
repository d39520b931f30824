// The C++ element types of lumen's numeric dtypes for templated CPU kernels, and visit_numeric,
// which calls a generic lambda with the type of a dtype. float16 has no C++ arithmetic type: it is
// Float16, stored as its IEEE bits and computed with as float.
#pragma once

#include <cstdint>

#include "core/half.h"
#include "lumen/dtype.h"

namespace lumen {
namespace cpu {

// One float16 element. Converts to float for any arithmetic or comparison and back from float
// rounding to nearest even, so generic ops written for float work on it unchanged (one rounding
// per result; for + - * / and fmod that equals computing in float16 directly).
struct Float16 {
  uint16_t bits;

  Float16() = default;
  Float16(float f) : bits(float_to_half(f)) {}  // NOLINT: implicit, like a built-in float type
  operator float() const { return half_to_float(bits); }
};

// Which dtypes visit_numeric serves besides float32, float64 and the eight integer types.
enum NumericSet : unsigned {
  kNumericOnly = 0,
  kWithFloat16 = 1,  // float16 as Float16
  kWithBool = 2,     // bool as bool
};

// Calls f(T{}) with the element type T of `dtype` and returns its result. Dtypes outside the set
// (bfloat16; float16 or bool unless kSet names them) are the caller's to refuse beforehand: they
// get f(float{}) so that every branch returns the same type.
template <unsigned kSet, typename F>
decltype(auto) visit_numeric(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat64:
      return f(double{});
    case DType::kInt8:
      return f(int8_t{});
    case DType::kUInt8:
      return f(uint8_t{});
    case DType::kInt16:
      return f(int16_t{});
    case DType::kUInt16:
      return f(uint16_t{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kUInt32:
      return f(uint32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kUInt64:
      return f(uint64_t{});
    case DType::kFloat16:
      if constexpr ((kSet & kWithFloat16) != 0) return f(Float16{});
      break;
    case DType::kBool:
      if constexpr ((kSet & kWithBool) != 0) return f(bool{});
      break;
    default:
      break;
  }
  return f(float{});
}

// True for float32, float64, the 8- to 64-bit integer dtypes and, per kSet, float16 and bool: the
// dtypes visit_numeric<kSet> serves.
template <unsigned kSet>
bool in_numeric_set(DType dtype) {
  if (dtype == DType::kInt4 || dtype == DType::kUInt4 || dtype == DType::kInt2 ||
      dtype == DType::kUInt2)
    return false;  // ONNX's 4- and 2-bit integers: for Cast, Q/DQ and data movement only
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64 || is_integer(dtype)) return true;
  if (dtype == DType::kFloat16) return (kSet & kWithFloat16) != 0;
  if (dtype == DType::kBool) return (kSet & kWithBool) != 0;
  return false;
}

// The names of visit_numeric<kSet>'s dtypes for messages: "float32, float64, int8, ...".
template <unsigned kSet>
const char* numeric_set_names() {
  if constexpr (kSet == (kWithFloat16 | kWithBool))
    return "float16, float32, float64, integers, bool";
  if constexpr (kSet == kWithFloat16) return "float16, float32, float64, integers";
  if constexpr (kSet == kWithBool) return "float32, float64, integers, bool";
  return "float32, float64, integers";
}

}  // namespace cpu

template <>
struct DTypeOf<cpu::Float16> {
  static constexpr DType value = DType::kFloat16;
};

}  // namespace lumen
