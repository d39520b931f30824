#include "lumen/dtype.h"

#include <string>

#include "lumen/error.h"

namespace lumen {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kFloat64:
      return 8;
    case DType::kInt8:
      return 1;
    case DType::kUInt8:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kBool:
      return 1;
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kUInt32:
      return 4;
    case DType::kUInt64:
      return 8;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat8E8M0:
    case DType::kFloat4E2M1:
    case DType::kUInt4:
    case DType::kInt4:
    case DType::kUInt2:
    case DType::kInt2:
      return 1;
  }
  throw InvalidArgument("dtype_size: unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat64:
      return "float64";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
    case DType::kInt16:
      return "int16";
    case DType::kUInt16:
      return "uint16";
    case DType::kUInt32:
      return "uint32";
    case DType::kUInt64:
      return "uint64";
    case DType::kFloat8E4M3FN:
      return "float8e4m3fn";
    case DType::kFloat8E4M3FNUZ:
      return "float8e4m3fnuz";
    case DType::kFloat8E5M2:
      return "float8e5m2";
    case DType::kFloat8E5M2FNUZ:
      return "float8e5m2fnuz";
    case DType::kFloat8E8M0:
      return "float8e8m0";
    case DType::kFloat4E2M1:
      return "float4e2m1";
    case DType::kUInt4:
      return "uint4";
    case DType::kInt4:
      return "int4";
    case DType::kUInt2:
      return "uint2";
    case DType::kInt2:
      return "int2";
  }
  return "unknown";
}

DType dtype_from_name(std::string_view name) {
  for (DType d : {DType::kFloat32,
                  DType::kFloat16,
                  DType::kBFloat16,
                  DType::kFloat64,
                  DType::kInt8,
                  DType::kUInt8,
                  DType::kInt32,
                  DType::kInt64,
                  DType::kBool,
                  DType::kInt16,
                  DType::kUInt16,
                  DType::kUInt32,
                  DType::kUInt64,
                  DType::kFloat8E4M3FN,
                  DType::kFloat8E4M3FNUZ,
                  DType::kFloat8E5M2,
                  DType::kFloat8E5M2FNUZ,
                  DType::kFloat8E8M0,
                  DType::kFloat4E2M1,
                  DType::kUInt4,
                  DType::kInt4,
                  DType::kUInt2,
                  DType::kInt2}) {
    if (name == dtype_name(d)) return d;
  }
  throw InvalidArgument("unknown dtype '" + std::string(name) + "'");
}

bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat64;
}

bool is_narrow_float(DType dtype) {
  switch (dtype) {
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat8E8M0:
    case DType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

bool is_integer(DType dtype) {
  switch (dtype) {
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kUInt4:
    case DType::kInt4:
    case DType::kUInt2:
    case DType::kInt2:
      return true;
    default:
      return false;
  }
}

}  // namespace lumen
