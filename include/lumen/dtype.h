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
  // ONNX's narrow types (opsets 19-25). Lumen stores each element in one byte, sub-byte types
  // (4- and 2-bit) unpacked, so every kernel addresses them like int8; ONNX files hold them
  // packed, and the TensorProto reader and writer pack and unpack.
  kFloat8E4M3FN,
  kFloat8E4M3FNUZ,
  kFloat8E5M2,
  kFloat8E5M2FNUZ,
  kFloat8E8M0,
  kFloat4E2M1,
  kUInt4,
  kInt4,
  kUInt2,
  kInt2,
};

// Size of one element in bytes as Lumen stores it (bool, the 8-bit floats and the unpacked 4- and
// 2-bit types are one byte).
size_t dtype_size(DType dtype);
// Lower-case name: "float32", "int64", ...
const char* dtype_name(DType dtype);
// Parses a name from dtype_name(); throws InvalidArgument for anything else.
DType dtype_from_name(std::string_view name);
// float32/16, bfloat16 and float64: the types kernels compute in (not the narrow floats below).
bool is_floating(DType dtype);
bool is_integer(DType dtype);  // signed or unsigned integers (int4, int2 too), not bool
// The 8- and 4-bit floating types (float8 variants, float4e2m1): stored as bit patterns, converted
// through float32.
bool is_narrow_float(DType dtype);

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
