// Element types of tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lumen {

enum class DType : uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
  kBool,
  kInt16,
  kUInt16,
  kUInt32,
  kUInt64,
};

// Size of one element in bytes (bool is one byte).
size_t dtype_size(DType dtype);
// Lower-case name: "float32", "int64", ...
const char* dtype_name(DType dtype);
// Parses a name from dtype_name(); throws InvalidArgument for anything else.
DType dtype_from_name(std::string_view name);
bool is_floating(DType dtype);
bool is_integer(DType dtype);  // signed or unsigned integers, not bool

// The C++ type stored for a dtype, for kernels and tests: DTypeOf<float>::value == kFloat32.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kInt8;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<int16_t> {
  static constexpr DType value = DType::kInt16;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::kUInt16;
};
template <>
struct DTypeOf<uint32_t> {
  static constexpr DType value = DType::kUInt32;
};
template <>
struct DTypeOf<uint64_t> {
  static constexpr DType value = DType::kUInt64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};

}  // namespace lumen
