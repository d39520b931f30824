// Launchers of the CUDA kernels of the 8-bit integer ops (int8_ops.cu): MatMulInteger,
// QLinearMatMul, ConvInteger, QLinearConv, QLinearAdd and DynamicQuantizeLinear. Plain C++ types,
// so the kernel classes (int8_ops.cc) need no CUDA C++. The arithmetic is the CPU kernels'
// (src/backends/cpu/quant_gemm.cc, quant_conv.cc, quant_add.cc, quant.cc), value for value:
// products of zero-point-shifted operands summed exactly in int32, requantized as
// y = saturate(round_half_even(float(acc * scale)) + y_zero_point) with scale in double.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/launch.h"
#include "backends/cuda/window_ops.h"

namespace lumen::cuda {

// An 8-bit operand or zero point: its device pointer and whether it is int8 (else uint8).
struct Int8Ref {
  const void* data = nullptr;
  bool is_signed = false;
};

// The requantization of QLinearMatMul and QLinearConv: per-tensor x (or A) scale `a_scale` (a_count
// values: 1, or one per row of A), w (or B) scales `b_scale` (b_count: 1, or one per output
// channel / column of B), y_scale and y_zero_point (one each); y of type out_signed ? int8 : uint8.
// All device pointers; y_zero_point may be null (0).
struct Requant {
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  const float* y_scale = nullptr;
  Int8Ref y_zero_point;
  int64_t a_count = 1, b_count = 1;
  bool out_signed = false;
};

// A batched matmul of [m, k] by [k, n] matrices (numpy broadcasting over up to 6 batch dims): batch
// index t of the output reads A's matrix sum_d idx_d(t) * a_strides[d] and B's likewise (stride 0
// where that operand broadcasts). Zero points: count 0 (none), 1, or m (A) / n (B).
struct IntMatMulDesc {
  int64_t m = 1, k = 1, n = 1, batches = 1;
  int batch_rank = 0;
  int64_t batch_dims[6] = {};
  int64_t a_strides[6] = {};
  int64_t b_strides[6] = {};
  int64_t a_zp_count = 0, b_zp_count = 0;
};
// y: int32 (rq null: MatMulInteger) or the requantized 8-bit type (QLinearMatMul).
void launch_int_matmul(const IntMatMulDesc& d, Int8Ref a, Int8Ref b, Int8Ref a_zp, Int8Ref b_zp,
                       const Requant* rq, void* y, cudaStream_t stream);

// A grouped, strided, dilated, padded convolution of x (batch, channels, in...) by w (out_channels,
// channels / group, kernel...) over up to 3 spatial axes (missing leading axes of size 1). x's zero
// point is per tensor (padding adds nothing); w's per tensor or per output channel (w_zp_count).
struct IntConvDesc {
  int64_t batch = 1, channels = 1, out_channels = 1, group = 1;
  WindowDesc window;
  int64_t w_zp_count = 0;
  bool has_x_zp = false;
};
// y: int32 (rq null: ConvInteger) or requantized after adding bias (int32 per output channel,
// nullable) (QLinearConv).
void launch_int_conv(const IntConvDesc& d, Int8Ref x, Int8Ref w, Int8Ref x_zp, Int8Ref w_zp,
                     const int32_t* bias, const Requant* rq, void* y, cudaStream_t stream);

// QLinearAdd: c = saturate(round_half_even((dq(a) + dq(b)) / c_scale) + c_zp), dq(v) = (v - zp) *
// scale, each step rounded to float32 as the CPU kernel does (no fused multiply-add); a and b
// broadcast as `desc` says (launch.h's BroadcastDesc); every scale and zero point per tensor
// (zero points nullable).
struct QAddRefs {
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
  const float* c_scale = nullptr;
  const void* a_zp = nullptr;
  const void* b_zp = nullptr;
  const void* c_zp = nullptr;
};
void launch_qlinear_add(bool is_signed, const QAddRefs& refs, const void* a, const void* b, void* c,
                        int64_t n, const BroadcastDesc& desc, cudaStream_t stream);

// DynamicQuantizeLinear of n float32 values into uint8 y: the range (NaNs skipped, always
// including 0) gives scale = (max - min) / 255 and zero point round(-min / scale); both are
// written to `params` (device scratch: a float then a uint8) and to scale / zero_point where
// those are not null.
void launch_dynamic_quantize(const float* x, int64_t n, uint8_t* y, float* scale,
                             uint8_t* zero_point, void* params, cudaStream_t stream);

}  // namespace lumen::cuda
