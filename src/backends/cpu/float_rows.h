// Rows of float32, float16 or bfloat16 tensors read as float32 and written back, for kernels that
// compute in float32 whatever their storage (one rounding on store, to nearest even).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/half.h"
#include "lumen/tensor.h"

namespace lumen::cpu {

// A float32, float16 or bfloat16 host tensor's elements by row-major offset, its data pointer
// read once (kernels call these per row, in their inner loops).
class FloatRows {
 public:
  FloatRows() = default;
  explicit FloatRows(const Tensor& t)
      : data_(static_cast<char*>(t.raw_data())),
        dtype_(t.dtype()),
        elem_(t.dtype() == DType::kFloat32 ? 4 : 2) {}

  // Copies elements [at, at + n) into dst as float.
  void read(int64_t at, int64_t n, float* dst) const {
    if (dtype_ == DType::kFloat32) {
      const float* p = reinterpret_cast<const float*>(data_) + at;
      std::copy(p, p + n, dst);
      return;
    }
    const uint16_t* p = reinterpret_cast<const uint16_t*>(data_) + at;
    if (dtype_ == DType::kFloat16) {
      for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(p[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = bfloat16_to_float(p[i]);
    }
  }

  // Element i as float.
  float get(int64_t i) const {
    float v;
    read(i, 1, &v);
    return v;
  }

  // Elements [at, at + n) as float: a pointer into the tensor itself when it is float32, else
  // into `buf` (n floats), filled by conversion.
  const float* view(int64_t at, int64_t n, float* buf) const {
    if (dtype_ == DType::kFloat32) return reinterpret_cast<const float*>(data_) + at;
    read(at, n, buf);
    return buf;
  }

  // Writes src[0, n) into elements [at, at + n).
  void write(const float* src, int64_t n, int64_t at) const {
    if (dtype_ == DType::kFloat32) {
      std::copy(src, src + n, reinterpret_cast<float*>(data_) + at);
      return;
    }
    uint16_t* p = reinterpret_cast<uint16_t*>(data_) + at;
    if (dtype_ == DType::kFloat16) {
      for (int64_t i = 0; i < n; ++i) p[i] = float_to_half(src[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] = float_to_bfloat16(src[i]);
    }
  }

  // Asks for the cache lines of elements [at, at + n) to be loaded.
  void prefetch(int64_t at, int64_t n) const {
    constexpr int64_t kLine = 64;
    const char* begin = data_ + at * elem_;
    const char* end = begin + n * elem_;
    for (const char* p = begin; p < end; p += kLine) __builtin_prefetch(p);
  }

 private:
  char* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  int64_t elem_ = 4;
};

}  // namespace lumen::cpu
