// FusedElementwise on the GPU: one thread per output element runs the node's whole program over a
// small array of float registers, reading each input once and writing the output once. The
// program is a kernel parameter, identical for every thread, so the switch below never diverges.
#include "backends/cuda/launch.h"
#include "backends/cuda/storage.cuh"
#include "backends/cuda/unary_math.cuh"
#include "graph/fused_elementwise.h"

namespace lumen::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
struct EwInputs {
  const T* p[kEwMaxInputs];
};

__device__ __forceinline__ float operand(const float* regs, const EwDesc& d, int8_t x) {
  return x >= 0 ? regs[x] : d.consts[-x - 1];
}

__device__ float run_instruction(const EwDesc& d, const EwInstruction& in, const float* r) {
  const float a = operand(r, d, in.a);
  switch (static_cast<EwOp>(in.op)) {
    case EwOp::kAdd:
      return a + operand(r, d, in.b);
    case EwOp::kSub:
      return a - operand(r, d, in.b);
    case EwOp::kMul:
      return a * operand(r, d, in.b);
    case EwOp::kDiv:
      return a / operand(r, d, in.b);
    case EwOp::kMax:
      return max_nan(a, operand(r, d, in.b));
    case EwOp::kMin:
      return min_nan(a, operand(r, d, in.b));
    case EwOp::kPow: {
      const float p = operand(r, d, in.b);
      if (p == 2.f) return a * a;
      if (p == 0.5f) return sqrtf(a);
      return powf(a, p);
    }
    case EwOp::kRelu:
      return apply_unary(UnaryOp::kRelu, a, 0.f, 0.f);
    case EwOp::kSigmoid:
      return apply_unary(UnaryOp::kSigmoid, a, 0.f, 0.f);
    case EwOp::kTanh:
      return tanhf(a);
    case EwOp::kExp:
      return expf(a);
    case EwOp::kLog:
      return logf(a);
    case EwOp::kNeg:
      return -a;
    case EwOp::kAbs:
      return fabsf(a);
    case EwOp::kSqrt:
      return sqrtf(a);
    case EwOp::kReciprocal:
      return 1.f / a;
    case EwOp::kErf:
      return erff(a);
    case EwOp::kClip:
      return clamp_nan(a, d.consts[-in.b - 1], d.consts[-in.b]);
    case EwOp::kLeakyRelu:
      return apply_unary(UnaryOp::kLeakyRelu, a, d.consts[-in.b - 1], 0.f);
    case EwOp::kHardSigmoid:
      return apply_unary(UnaryOp::kHardSigmoid, a, d.consts[-in.b - 1], d.consts[-in.b]);
    case EwOp::kHardSwish:
      return apply_unary(UnaryOp::kHardSwish, a, 0.f, 0.f);
    case EwOp::kSoftplus:
      return fmaxf(a, 0.f) + log1pf(expf(-fabsf(a)));
    case EwOp::kSwish:
      return apply_unary(UnaryOp::kSwish, a, 0.f, 0.f);
    case EwOp::kGeluErf:
      return apply_unary(UnaryOp::kGelu, a, 0.f, 0.f);
    case EwOp::kGeluTanh:
      return apply_unary(UnaryOp::kGeluTanh, a, 0.f, 0.f);
    default:
      return a;
  }
}

template <typename T>
__global__ void fused_elementwise_kernel(const __grid_constant__ EwDesc d, EwInputs<T> in, T* y,
                                         int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float r[kEwMaxRegs];
    for (int k = 0; k < d.num_inputs; ++k) {
      if (d.mode[k] == 0) {
        r[k] = to_float(in.p[k][i]);
      } else if (d.mode[k] == 1) {
        r[k] = to_float(in.p[k][0]);
      } else {
        int64_t rest = i, at = 0;
        for (int j = d.rank - 1; j >= 0; --j) {
          at += (rest % d.dims[j]) * d.strides[k][j];
          rest /= d.dims[j];
        }
        r[k] = to_float(in.p[k][at]);
      }
    }
    float v = 0.f;
    for (int c = 0; c < d.num_code; ++c) {
      v = run_instruction(d, d.code[c], r);
      r[d.code[c].dst] = v;
    }
    y[i] = from_float<T>(v);
  }
}

}  // namespace

void launch_fused_elementwise(Storage st, const EwDesc& desc, const void* const* inputs, void* y,
                              int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    EwInputs<T> in{};
    for (int k = 0; k < desc.num_inputs; ++k) in.p[k] = static_cast<const T*>(inputs[k]);
    fused_elementwise_kernel<<<static_cast<int>(blocks), kThreads, 0, stream>>>(
        desc, in, static_cast<T*>(y), n);
  });
}

}  // namespace lumen::cuda
