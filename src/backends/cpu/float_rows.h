// Rows of float32, float16 or bfloat16 tensors read as float32 and written back, for kernels that
// compute in float32 whatever their storage (one rounding on store, to nearest even).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/half.h"
#include "lumen/tensor.h"

namespace lumen::cpu {

// Copies elements [at, at + n) of `t` (float32, float16 or bfloat16, row-major) into dst as float.
inline void read_floats(const Tensor& t, int64_t at, int64_t n, float* dst) {
  switch (t.dtype()) {
    case DType::kFloat32: {
      const float* p = static_cast<const float*>(t.raw_data()) + at;
      std::copy(p, p + n, dst);
      return;
    }
    case DType::kFloat16: {
      const uint16_t* p = static_cast<const uint16_t*>(t.raw_data()) + at;
      for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(p[i]);
      return;
    }
    default: {
      const uint16_t* p = static_cast<const uint16_t*>(t.raw_data()) + at;
      for (int64_t i = 0; i < n; ++i) dst[i] = bfloat16_to_float(p[i]);
      return;
    }
  }
}

// Elements [at, at + n) of `t` as float: a pointer into t itself when it is float32, else into
// `buf` (n floats), filled by conversion.
inline const float* view_floats(const Tensor& t, int64_t at, int64_t n, float* buf) {
  if (t.dtype() == DType::kFloat32) return static_cast<const float*>(t.raw_data()) + at;
  read_floats(t, at, n, buf);
  return buf;
}

// Writes src[0, n) into elements [at, at + n) of `t` (float32, float16 or bfloat16).
inline void write_floats(const float* src, int64_t n, const Tensor& t, int64_t at) {
  switch (t.dtype()) {
    case DType::kFloat32:
      std::copy(src, src + n, static_cast<float*>(t.raw_data()) + at);
      return;
    case DType::kFloat16: {
      uint16_t* p = static_cast<uint16_t*>(t.raw_data()) + at;
      for (int64_t i = 0; i < n; ++i) p[i] = float_to_half(src[i]);
      return;
    }
    default: {
      uint16_t* p = static_cast<uint16_t*>(t.raw_data()) + at;
      for (int64_t i = 0; i < n; ++i) p[i] = float_to_bfloat16(src[i]);
      return;
    }
  }
}

}  // namespace lumen::cpu
