// Mapping between ONNX TensorProto.DataType codes and lumen dtypes (Cast's `to`, ConstantOfShape,
// and the ONNX importer's initializers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lumen/dtype.h"

namespace lumen {

// The ONNX TensorProto.DataType codes (onnx.proto), all of them, so errors can name the ones lumen
// does not support.
enum class OnnxDType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
  kFloat6E2M3 = 27,
  kFloat6E3M2 = 28,
};

// The lumen dtype of an ONNX data type code, or nullopt when lumen has no such dtype (string,
// complex, float6) or the code is unknown.
inline std::optional<DType> dtype_from_onnx(int64_t code) {
  switch (code) {
    case static_cast<int64_t>(OnnxDType::kFloat):
      return DType::kFloat32;
    case static_cast<int64_t>(OnnxDType::kUInt8):
      return DType::kUInt8;
    case static_cast<int64_t>(OnnxDType::kInt8):
      return DType::kInt8;
    case static_cast<int64_t>(OnnxDType::kInt32):
      return DType::kInt32;
    case static_cast<int64_t>(OnnxDType::kInt64):
      return DType::kInt64;
    case static_cast<int64_t>(OnnxDType::kBool):
      return DType::kBool;
    case static_cast<int64_t>(OnnxDType::kFloat16):
      return DType::kFloat16;
    case static_cast<int64_t>(OnnxDType::kDouble):
      return DType::kFloat64;
    case static_cast<int64_t>(OnnxDType::kBFloat16):
      return DType::kBFloat16;
    case static_cast<int64_t>(OnnxDType::kInt16):
      return DType::kInt16;
    case static_cast<int64_t>(OnnxDType::kUInt16):
      return DType::kUInt16;
    case static_cast<int64_t>(OnnxDType::kUInt32):
      return DType::kUInt32;
    case static_cast<int64_t>(OnnxDType::kUInt64):
      return DType::kUInt64;
    case static_cast<int64_t>(OnnxDType::kFloat8E4M3FN):
      return DType::kFloat8E4M3FN;
    case static_cast<int64_t>(OnnxDType::kFloat8E4M3FNUZ):
      return DType::kFloat8E4M3FNUZ;
    case static_cast<int64_t>(OnnxDType::kFloat8E5M2):
      return DType::kFloat8E5M2;
    case static_cast<int64_t>(OnnxDType::kFloat8E5M2FNUZ):
      return DType::kFloat8E5M2FNUZ;
    case static_cast<int64_t>(OnnxDType::kFloat8E8M0):
      return DType::kFloat8E8M0;
    case static_cast<int64_t>(OnnxDType::kFloat4E2M1):
      return DType::kFloat4E2M1;
    case static_cast<int64_t>(OnnxDType::kUInt4):
      return DType::kUInt4;
    case static_cast<int64_t>(OnnxDType::kInt4):
      return DType::kInt4;
    case static_cast<int64_t>(OnnxDType::kUInt2):
      return DType::kUInt2;
    case static_cast<int64_t>(OnnxDType::kInt2):
      return DType::kInt2;
    default:
      return std::nullopt;
  }
}

// The ONNX data type code of a lumen dtype.
inline int32_t onnx_from_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return static_cast<int32_t>(OnnxDType::kFloat);
    case DType::kFloat16:
      return static_cast<int32_t>(OnnxDType::kFloat16);
    case DType::kBFloat16:
      return static_cast<int32_t>(OnnxDType::kBFloat16);
    case DType::kFloat64:
      return static_cast<int32_t>(OnnxDType::kDouble);
    case DType::kInt8:
      return static_cast<int32_t>(OnnxDType::kInt8);
    case DType::kUInt8:
      return static_cast<int32_t>(OnnxDType::kUInt8);
    case DType::kInt32:
      return static_cast<int32_t>(OnnxDType::kInt32);
    case DType::kInt64:
      return static_cast<int32_t>(OnnxDType::kInt64);
    case DType::kBool:
      return static_cast<int32_t>(OnnxDType::kBool);
    case DType::kInt16:
      return static_cast<int32_t>(OnnxDType::kInt16);
    case DType::kUInt16:
      return static_cast<int32_t>(OnnxDType::kUInt16);
    case DType::kUInt32:
      return static_cast<int32_t>(OnnxDType::kUInt32);
    case DType::kUInt64:
      return static_cast<int32_t>(OnnxDType::kUInt64);
    case DType::kFloat8E4M3FN:
      return static_cast<int32_t>(OnnxDType::kFloat8E4M3FN);
    case DType::kFloat8E4M3FNUZ:
      return static_cast<int32_t>(OnnxDType::kFloat8E4M3FNUZ);
    case DType::kFloat8E5M2:
      return static_cast<int32_t>(OnnxDType::kFloat8E5M2);
    case DType::kFloat8E5M2FNUZ:
      return static_cast<int32_t>(OnnxDType::kFloat8E5M2FNUZ);
    case DType::kFloat8E8M0:
      return static_cast<int32_t>(OnnxDType::kFloat8E8M0);
    case DType::kFloat4E2M1:
      return static_cast<int32_t>(OnnxDType::kFloat4E2M1);
    case DType::kUInt4:
      return static_cast<int32_t>(OnnxDType::kUInt4);
    case DType::kInt4:
      return static_cast<int32_t>(OnnxDType::kInt4);
    case DType::kUInt2:
      return static_cast<int32_t>(OnnxDType::kUInt2);
    case DType::kInt2:
      return static_cast<int32_t>(OnnxDType::kInt2);
  }
  return static_cast<int32_t>(OnnxDType::kUndefined);
}

// The ONNX name of a data type code for messages: "FLOAT", "STRING", ... ("code 99" if unknown).
inline std::string onnx_dtype_name(int64_t code) {
  static const char* const kNames[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",   "INT16",
      "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",  "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",     "FLOAT4E2M1",
      "FLOAT8E8M0",     "UINT2",      "INT2",           "FLOAT6E2M3", "FLOAT6E3M2"};
  constexpr int64_t kCount = sizeof(kNames) / sizeof(kNames[0]);
  if (code >= 0 && code < kCount) return kNames[code];
  return "code " + std::to_string(code);
}

}  // namespace lumen
