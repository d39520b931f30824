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

// I: the index type, 32-bit whenever every index fits (64-bit division, which the strided inputs
// need per element and dim, is several times slower).
template <typename T, typename I>
__global__ void fused_elementwise_kernel(const __grid_constant__ EwDesc d, EwInputs<T> in, T* y,
                                         I n) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<I>(blockDim.x) * gridDim.x) {
    float r[kEwMaxRegs];
    for (int k = 0; k < d.num_inputs; ++k) {
      if (d.mode[k] == 0) {
        r[k] = to_float(in.p[k][i]);
      } else if (d.mode[k] == 1) {
        r[k] = to_float(in.p[k][0]);
      } else {
        I rest = i, at = 0;
        for (int j = d.rank - 1; j >= 0; --j) {
          const auto dim = static_cast<I>(d.dims[j]);
          at += (rest % dim) * static_cast<I>(d.strides[k][j]);
          rest /= dim;
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

// The 2-D or batched 2-D case [B,] R x S where input `tk` is read transposed, element (r, s) at
// s * R + r of its batch (ConvNeXt's channels-last product read as (C, H W) by the layer scale
// and residual add): a block stages a 32 x 32 tile of it in shared memory, read along r, so both
// that read and the output's write along s are coalesced (the per-element gather reads 32 sectors
// per warp). Blocks (32, 8); grid (S / 32, R / 32, B).
template <typename T>
__global__ void fused_elementwise_tiled_kernel(const __grid_constant__ EwDesc d, EwInputs<T> in,
                                               T* y, int tk) {
  __shared__ float tile[32][33];
  const int a = d.rank - 2;
  const int64_t rows = d.dims[a], cols = d.dims[a + 1];
  const int64_t b = blockIdx.z;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 32,
                s0 = static_cast<int64_t>(blockIdx.x) * 32;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const T* t = in.p[tk] + b * rows * cols;
  for (int j = ty; j < 32; j += 8) {
    const int64_t s = s0 + j, r = r0 + tx;
    if (s < cols && r < rows) tile[j][tx] = to_float(t[s * rows + r]);
  }
  __syncthreads();
  for (int j = ty; j < 32; j += 8) {
    const int64_t r = r0 + j, s = s0 + tx;
    if (r >= rows || s >= cols) continue;
    const int64_t i = (b * rows + r) * cols + s;
    float reg[kEwMaxRegs];
    for (int k = 0; k < d.num_inputs; ++k) {
      if (k == tk)
        reg[k] = tile[tx][j];
      else if (d.mode[k] == 0)
        reg[k] = to_float(in.p[k][i]);
      else if (d.mode[k] == 1)
        reg[k] = to_float(in.p[k][0]);
      else
        reg[k] = to_float(in.p[k][(a == 1 ? b * d.strides[k][0] : 0) + r * d.strides[k][a] +
                                  s * d.strides[k][a + 1]]);
    }
    float v = 0.f;
    for (int c = 0; c < d.num_code; ++c) {
      v = run_instruction(d, d.code[c], reg);
      reg[d.code[c].dst] = v;
    }
    y[i] = from_float<T>(v);
  }
}

// The input the tiled kernel stages: the one strided input read as (r, s) -> s * R + r of its
// batch, when the (compacted) output is [R, S] or [B, R, S] within the grid's limits; else -1.
int tiled_input(const EwDesc& d) {
  if (d.rank != 2 && d.rank != 3) return -1;
  const int a = d.rank - 2;
  const int64_t rows = d.dims[a], cols = d.dims[a + 1];
  if ((rows + 31) / 32 > 65535 || (a == 1 && d.dims[0] > 65535)) return -1;
  int found = -1;
  for (int k = 0; k < d.num_inputs; ++k) {
    if (d.mode[k] != 2 || d.strides[k][a] != 1 || d.strides[k][a + 1] != rows) continue;
    if (a == 1 && d.strides[k][0] != rows * cols) continue;
    if (found >= 0) return -1;
    found = k;
  }
  return found;
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
    const int tk = tiled_input(desc);
    if (tk >= 0) {
      const int a = desc.rank - 2;
      const dim3 grid(static_cast<unsigned>((desc.dims[a + 1] + 31) / 32),
                      static_cast<unsigned>((desc.dims[a] + 31) / 32),
                      static_cast<unsigned>(a == 1 ? desc.dims[0] : 1));
      fused_elementwise_tiled_kernel<<<grid, dim3(32, 8), 0, stream>>>(desc, in, static_cast<T*>(y),
                                                                       tk);
      return;
    }
    // Every input is at most the output's size, so indices below n fit where n does.
    if (n < (int64_t{1} << 31))
      fused_elementwise_kernel<<<static_cast<int>(blocks), kThreads, 0, stream>>>(
          desc, in, static_cast<T*>(y), static_cast<int32_t>(n));
    else
      fused_elementwise_kernel<<<static_cast<int>(blocks), kThreads, 0, stream>>>(
          desc, in, static_cast<T*>(y), n);
  });
}

}  // namespace lumen::cuda
