// The scalar math of the backend's unary ops, shared by every kernel that applies an activation
// (element-wise ops, convolution and GEMM epilogues, fused element-wise programs).
#pragma once

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// Maximum, minimum and clamp that return NaN when an operand is NaN, as ONNX's Max, Min, Clip and
// the CPU kernels do (fmaxf and fminf return the other operand).
__device__ __forceinline__ float max_nan(float a, float b) {
  return a != a || b != b ? a + b : fmaxf(a, b);
}
__device__ __forceinline__ float min_nan(float a, float b) {
  return a != a || b != b ? a + b : fminf(a, b);
}
__device__ __forceinline__ float clamp_nan(float v, float lo, float hi) {
  return v != v ? v : fminf(fmaxf(v, lo), hi);
}

__device__ __forceinline__ float apply_unary(UnaryOp op, float v, float alpha, float beta) {
  switch (op) {
    case UnaryOp::kIdentity:
      return v;
    case UnaryOp::kRelu:
      return v < 0.f ? 0.f : v;  // NaN stays NaN
    case UnaryOp::kLeakyRelu:
      return v >= 0.f ? v : alpha * v;
    case UnaryOp::kSigmoid:
      return 1.f / (1.f + expf(-v));
    case UnaryOp::kTanh:
      return tanhf(v);
    case UnaryOp::kGelu:
      return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    case UnaryOp::kErf:
      return erff(v);
    case UnaryOp::kExp:
      return expf(v);
    case UnaryOp::kLog:
      return logf(v);
    case UnaryOp::kSqrt:
      return sqrtf(v);
    case UnaryOp::kNeg:
      return -v;
    case UnaryOp::kAbs:
      return fabsf(v);
    case UnaryOp::kReciprocal:
      return 1.f / v;
    case UnaryOp::kClip:
      return clamp_nan(v, alpha, beta);
    case UnaryOp::kHardSigmoid:
      return clamp_nan(alpha * v + beta, 0.f, 1.f);
    case UnaryOp::kHardSwish:
      return v * clamp_nan(v / 6.f + 0.5f, 0.f, 1.f);
    case UnaryOp::kFloor:
      return floorf(v);
    case UnaryOp::kCeil:
      return ceilf(v);
    case UnaryOp::kSin:
      return sinf(v);
    case UnaryOp::kCos:
      return cosf(v);
    case UnaryOp::kSoftplus:
      return v > 20.f ? v : log1pf(expf(v));
    case UnaryOp::kElu:
      return v >= 0.f ? v : alpha * (expf(v) - 1.f);
    case UnaryOp::kSwish:
      return v / (1.f + expf(-v));
    case UnaryOp::kGeluTanh:
      return v / (1.f + expf(-1.5957691216057308f * (v + 0.044715f * v * v * v)));
  }
  return v;
}

}  // namespace lumen::cuda
