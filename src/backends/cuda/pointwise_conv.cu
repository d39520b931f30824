// launch_pointwise_conv's kernel (pointwise_conv.h): a tiled float32 GEMM per image with the
// convolution's epilogue applied as the outputs leave the registers.
#include "backends/cuda/pointwise_conv.h"
#include "backends/cuda/unary_math.cuh"

namespace lumen::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 32;  // input channels staged per step

// A block computes a kM x kN tile of one image's output, each thread kTm channels x kTn pixels,
// over the input channels in chunks of kChunk staged in shared memory; the next chunk is read into
// registers while the current one is used. W is stored k-major in shared memory with a padded row
// (its global reads run along k, so the transposing store would otherwise hit one bank).
template <int kM, int kN, int kTm, int kTn>
__global__ void __launch_bounds__(kThreads)
    pointwise_conv_kernel(const float* __restrict__ x, const float* __restrict__ w,
                          float* __restrict__ y, int cout, int cin, int hw, ConvEpilogue e) {
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

template <int kM, int kN, int kTm, int kTn>
void launch_tiles(const float* x, const float* w, float* y, int64_t batch, int64_t cout,
                  int64_t cin, int64_t hw, const ConvEpilogue& e, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((hw + kN - 1) / kN),
                  static_cast<unsigned>((cout + kM - 1) / kM), static_cast<unsigned>(batch));
  pointwise_conv_kernel<kM, kN, kTm, kTn><<<grid, kThreads, 0, stream>>>(
      x, w, y, static_cast<int>(cout), static_cast<int>(cin), static_cast<int>(hw), e);
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
