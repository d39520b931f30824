// The element types of the generic kernels (any_launch.h's Elem): dispatch from Elem to a C++
// type, and each type's arithmetic type (float for the half types, the type itself otherwise)
// with loads and stores through it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/any_launch.h"

namespace lumen::cuda {

constexpr int kAnyThreads = 256;

inline int any_blocks(int64_t n) {
  int64_t b = (n + kAnyThreads - 1) / kAnyThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

#define ANY_GRID_LOOP(i, n)                                                              \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// The type arithmetic on T happens in.
template <typename T>
struct MathOf {
  using type = T;
};
template <>
struct MathOf<__half> {
  using type = float;
};
template <>
struct MathOf<__nv_bfloat16> {
  using type = float;
};
template <typename T>
using math_t = typename MathOf<T>::type;

template <typename T>
inline constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

template <typename T>
__device__ __forceinline__ math_t<T> load(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(p[i]);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(p[i]);
  else
    return p[i];
}

// Any arithmetic value stored as T: half types round to nearest, floats to integers truncate,
// anything to bool is != 0.
template <typename T, typename V>
__device__ __forceinline__ T store_as(V v) {
  if constexpr (std::is_same_v<T, bool>)
    return v != V(0);
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// Calls f(T{}) with T the C++ type of `t`.
template <typename F>
void with_elem(Elem t, F&& f) {
  switch (t) {
    case Elem::kF32:
      return f(float{});
    case Elem::kF16:
      return f(__half{});
    case Elem::kBF16:
      return f(__nv_bfloat16{});
    case Elem::kF64:
      return f(double{});
    case Elem::kI8:
      return f(int8_t{});
    case Elem::kU8:
      return f(uint8_t{});
    case Elem::kI16:
      return f(int16_t{});
    case Elem::kU16:
      return f(uint16_t{});
    case Elem::kI32:
      return f(int32_t{});
    case Elem::kU32:
      return f(uint32_t{});
    case Elem::kI64:
      return f(int64_t{});
    case Elem::kU64:
      return f(uint64_t{});
    case Elem::kBool:
      return f(bool{});
  }
}

// Calls f(W{}) with W an unsigned word of `bytes` bytes (1, 2, 4; 8 for anything else): copies
// that move elements as raw words need one instantiation per element size.
template <typename F>
void with_word(int bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    default:
      return f(uint64_t{});
  }
}

// The element offset of output index i in an input with per-output-dim strides.
__device__ __forceinline__ int64_t strided_offset(int64_t i, int rank, const int64_t* dims,
                                                  const int64_t* strides) {
  int64_t off = 0;
  for (int k = rank - 1; k >= 0; --k) {
    const int64_t c = i % dims[k];
    i /= dims[k];
    off += c * strides[k];
  }
  return off;
}

}  // namespace lumen::cuda
