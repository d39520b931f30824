// launch_pointwise_conv's kernel (pointwise_conv.h): a tiled float32 GEMM per image with the
// convolution's epilogue applied as the outputs leave the registers.
#include "backends/cuda/pointwise_conv.h"

#include <cstdint>

#include "backends/cuda/unary_math.cuh"

namespace lumen::cuda {
namespace {

constexpr int kThreads = 256;

// A block computes a kM x kN tile of one image's output, each thread kTm channels x kTn pixels,
// over the input channels in chunks of kChunk staged in shared memory; the next chunk is read into
// registers while the current one is used. W is stored k-major in shared memory with a padded row
// (its global reads run along k, so the transposing store would otherwise hit one bank). With
// `by4` (kTn 4, hw a multiple of 4, y and the residual 16-byte aligned) a thread's four pixels
// are read and written as one vector.
template <int kM, int kN, int kTm, int kTn, int kChunk>
__global__ void __launch_bounds__(kThreads)
    pointwise_conv_kernel(const float* __restrict__ x, const float* __restrict__ w,
                          float* __restrict__ y, int cout, int cin, int hw, ConvEpilogue e,
                          bool by4) {
  static_assert((kM / kTm) * (kN / kTn) == kThreads, "one output tile per thread");
  constexpr int kWLoads = kM * kChunk / kThreads;
  constexpr int kXLoads = kChunk * kN / kThreads;
  __shared__ float ws[kChunk][kM + 1];
  __shared__ float xs[kChunk][kN];
  const int t = threadIdx.x;
  const int tx = t % (kN / kTn), ty = t / (kN / kTn);
  const int m0 = blockIdx.y * kM, n0 = blockIdx.x * kN;
  const size_t image = blockIdx.z;
  x += image * cin * static_cast<size_t>(hw);
  float wr[kWLoads], xr[kXLoads];
  auto fetch = [&](int k0) {
#pragma unroll
    for (int r = 0; r < kWLoads; ++r) {
      const int idx = t + kThreads * r, i = idx / kChunk, kk = idx % kChunk;
      const int m = m0 + i, k = k0 + kk;
      wr[r] = m < cout && k < cin ? w[static_cast<size_t>(m) * cin + k] : 0.f;
    }
#pragma unroll
    for (int r = 0; r < kXLoads; ++r) {
      const int idx = t + kThreads * r, kk = idx / kN, j = idx % kN;
      const int k = k0 + kk, n = n0 + j;
      xr[r] = k < cin && n < hw ? x[static_cast<size_t>(k) * hw + n] : 0.f;
    }
  };
  auto stage = [&] {
#pragma unroll
    for (int r = 0; r < kWLoads; ++r) {
      const int idx = t + kThreads * r;
      ws[idx % kChunk][idx / kChunk] = wr[r];
    }
#pragma unroll
    for (int r = 0; r < kXLoads; ++r) {
      const int idx = t + kThreads * r;
      xs[idx / kN][idx % kN] = xr[r];
    }
  };
  float acc[kTm][kTn] = {};
  fetch(0);
  for (int k0 = 0; k0 < cin; k0 += kChunk) {
    stage();
    __syncthreads();
    if (k0 + kChunk < cin) fetch(k0 + kChunk);
#pragma unroll 8
    for (int k = 0; k < kChunk; ++k) {
      float a[kTm], b[kTn];
#pragma unroll
      for (int i = 0; i < kTm; ++i) a[i] = ws[k][ty * kTm + i];
#pragma unroll
      for (int j = 0; j < kTn; ++j) b[j] = xs[k][tx * kTn + j];
#pragma unroll
      for (int i = 0; i < kTm; ++i)
#pragma unroll
        for (int j = 0; j < kTn; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  const auto* bias = static_cast<const float*>(e.bias);
  const auto* residual = static_cast<const float*>(e.residual);
  const size_t out = image * cout * static_cast<size_t>(hw);
#pragma unroll
  for (int i = 0; i < kTm; ++i) {
    const int m = m0 + ty * kTm + i;
    if (m >= cout) continue;
    const float b = bias != nullptr ? bias[m] : 0.f;
    if constexpr (kTn == 4) {
      const int n = n0 + tx * 4;
      if (by4 && n + 3 < hw) {
        const size_t at = out + static_cast<size_t>(m) * hw + n;
        float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
        if (residual != nullptr) z = *reinterpret_cast<const float4*>(residual + at);
        *reinterpret_cast<float4*>(y + at) =
            make_float4(apply_unary(e.op, acc[i][0] + b + z.x, e.alpha, e.beta),
                        apply_unary(e.op, acc[i][1] + b + z.y, e.alpha, e.beta),
                        apply_unary(e.op, acc[i][2] + b + z.z, e.alpha, e.beta),
                        apply_unary(e.op, acc[i][3] + b + z.w, e.alpha, e.beta));
        continue;
      }
    }
#pragma unroll
    for (int j = 0; j < kTn; ++j) {
      const int n = n0 + tx * kTn + j;
      if (n >= hw) continue;
      const size_t at = out + static_cast<size_t>(m) * hw + n;
      float v = acc[i][j] + b;
      if (residual != nullptr) v += residual[at];
      y[at] = apply_unary(e.op, v, e.alpha, e.beta);
    }
  }
}

// Chunks of 16 input channels where there are no more (MobileNet's first expansion), else 32.
template <int kM, int kN, int kTm, int kTn>
void launch_tiles(const float* x, const float* w, float* y, int64_t batch, int64_t cout,
                  int64_t cin, int64_t hw, const ConvEpilogue& e, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((hw + kN - 1) / kN),
                  static_cast<unsigned>((cout + kM - 1) / kM), static_cast<unsigned>(batch));
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const bool by4 = hw % 4 == 0 && aligned(y) && aligned(e.residual);
  const int c = static_cast<int>(cout), k = static_cast<int>(cin), n = static_cast<int>(hw);
  if (cin <= 16)
    pointwise_conv_kernel<kM, kN, kTm, kTn, 16>
        <<<grid, kThreads, 0, stream>>>(x, w, y, c, k, n, e, by4);
  else
    pointwise_conv_kernel<kM, kN, kTm, kTn, 32>
        <<<grid, kThreads, 0, stream>>>(x, w, y, c, k, n, e, by4);
}

}  // namespace

void launch_pointwise_conv(PointwiseTile tile, const float* x, const float* w, float* y,
                           int64_t batch, int64_t cout, int64_t cin, int64_t hw,
                           const ConvEpilogue& epilogue, cudaStream_t stream) {
  if (batch * cout * hw == 0) return;
  if (tile == PointwiseTile::kWide)
    launch_tiles<32, 64, 2, 4>(x, w, y, batch, cout, cin, hw, epilogue, stream);
  else
    launch_tiles<64, 16, 4, 1>(x, w, y, batch, cout, cin, hw, epilogue, stream);
}

}  // namespace lumen::cuda
