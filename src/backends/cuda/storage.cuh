// Loads and stores of a kernel's float tensors in any storage (launch.h's Storage): kernels are
// templates over the element type T (float, __half or __nv_bfloat16), read every element as float,
// compute in float32 and round once as they store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Calls f(T{}) with T the element type of `st` (float, __half or __nv_bfloat16): the launchers'
// dispatch.
template <typename F>
void with_storage(Storage st, F&& f) {
  if (st == Storage::kFloat16)
    f(__half{});
  else if (st == Storage::kBFloat16)
    f(__nv_bfloat16{});
  else
    f(float{});
}

}  // namespace lumen::cuda
