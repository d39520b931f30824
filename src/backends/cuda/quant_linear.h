// Launchers of the CUDA kernels of QuantizeLinear and DequantizeLinear (quant_linear.cu) for the
// 8-, 16- and 32-bit integer types with float32, float16 or bfloat16 scales, per tensor, per axis
// or blocked. Plain C++ types, so the kernel classes (quant_linear_op.cc) need no CUDA C++. The
// arithmetic is the CPU kernel's (src/backends/cpu/quant_linear.cc), value for value.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/any_launch.h"
#include "backends/cuda/launch.h"
#include "graph/schemas/quant_layout.h"

namespace lumen::cuda {

using QuantLayout = QuantParamLayout;  // graph/schemas/quant_layout.h

// y = saturate(round_half_even(x / scale) + zero_point) into the integer type `q` (int8, uint8,
// int16 or uint16); x and scale in storage `st`, the quotient rounded to it; NaN becomes the zero
// point. zero_point (of type q) may be null (0).
void launch_quantize_linear(Storage st, Elem q, const QuantLayout& l, const void* x,
                            const void* scale, const void* zero_point, void* y, int64_t n,
                            cudaStream_t stream);

// y = (x - zero_point) * scale in storage `st` (the difference exact, rounded to st, the product
// rounded once); x and zero_point of the integer type `q` (int8, uint8, int16, uint16 or int32).
void launch_dequantize_linear(Storage st, Elem q, const QuantLayout& l, const void* x,
                              const void* scale, const void* zero_point, void* y, int64_t n,
                              cudaStream_t stream);

}  // namespace lumen::cuda
