// FusedAttention's CUDA kernels alone, on operands already on the GPU: what bench/attention.py sets
// beside PyTorch's scaled_dot_product_attention. For each [batch, heads, seq, depth] given, Q, K
// and V of random values in float16 or bfloat16 (K as is, scale 1/sqrt(depth); with --mask, an
// additive key-padding mask [batch, 1, 1, seq] hiding each sequence's last eighth), timed
// with CUDA events over back-to-back launches of the kernel a FusedAttention node runs (the
// tensor-core kernel where it fits), after a warm-up. One JSON line per shape on stdout.
//
//   lumen_attention_bench float16|bfloat16 [--mask] B,H,S,D [B,H,S,D ...]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/launch.h"
#include "core/half.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "lumen_attention_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// n random 16-bit values (uniform in [-1, 1]) on the GPU.
void* random_device(size_t n, bool half, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> host(n);
  for (uint16_t& b : host)
    b = half ? lumen::float_to_half(dist(gen)) : lumen::float_to_bfloat16(dist(gen));
  void* dev = nullptr;
  check(cudaMalloc(&dev, n * 2), "cudaMalloc");
  check(cudaMemcpy(dev, host.data(), n * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  return dev;
}

// Milliseconds per launch: the median over 7 rounds of `reps` back-to-back launches.
template <typename F>
double time_launches(F launch, cudaStream_t stream) {
  for (int i = 0; i < 3; ++i) launch();
  check(cudaStreamSynchronize(stream), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  // As many launches per round as fill about 20 ms (at least 5).
  check(cudaEventRecord(start, stream), "record");
  launch();
  check(cudaEventRecord(stop, stream), "record");
  check(cudaEventSynchronize(stop), "sync");
  float one = 0;
  check(cudaEventElapsedTime(&one, start, stop), "elapsed");
  const int reps = std::max(5, static_cast<int>(20.f / std::max(one, 1e-3f)));
  std::vector<double> rounds;
  for (int r = 0; r < 7; ++r) {
    check(cudaEventRecord(start, stream), "record");
    for (int i = 0; i < reps; ++i) launch();
    check(cudaEventRecord(stop, stream), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    rounds.push_back(ms / reps);
  }
  check(cudaGetLastError(), "launch");
  std::sort(rounds.begin(), rounds.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return rounds[rounds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: lumen_attention_bench float16|bfloat16 [--mask] B,H,S,D [B,H,S,D ...]\n");
    return 2;
  }
  const std::string dtype = argv[1];
  if (dtype != "float16" && dtype != "bfloat16") {
    std::fprintf(stderr, "lumen_attention_bench: dtype must be float16 or bfloat16\n");
    return 2;
  }
  const bool half = dtype == "float16";
  const auto st = half ? lumen::cuda::Storage::kFloat16 : lumen::cuda::Storage::kBFloat16;
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  const bool masked = std::string(argv[2]) == "--mask";
  for (int a = masked ? 3 : 2; a < argc; ++a) {
    long long b = 0, h = 0, s = 0, d = 0;
    if (std::sscanf(argv[a], "%lld,%lld,%lld,%lld", &b, &h, &s, &d) != 4 || b <= 0 || h <= 0 ||
        s <= 0 || d <= 0 || d > lumen::cuda::kAttentionMaxDepth) {
      std::fprintf(stderr, "lumen_attention_bench: bad shape '%s' (B,H,S,D; D at most %d)\n",
                   argv[a], lumen::cuda::kAttentionMaxDepth);
      return 2;
    }
    const size_t n = static_cast<size_t>(b * h * s * d);
    void* q = random_device(n, half, 1);
    void* k = random_device(n, half, 2);
    void* v = random_device(n, half, 3);
    void* y = nullptr;
    check(cudaMalloc(&y, n * 2), "cudaMalloc");
    lumen::cuda::AttentionDesc desc;
    desc.batch = b * h;
    desc.sq = desc.sk = s;
    desc.depth = desc.depth_v = d;
    desc.scale = 1.f / std::sqrt(static_cast<float>(d));
    desc.lead_rank = 2;
    desc.lead_dims[0] = b;
    desc.lead_dims[1] = h;
    void* mask = nullptr;
    if (masked) {  // 0 for the first 7/8 of each sequence's keys, -inf for the rest
      std::vector<uint16_t> host(static_cast<size_t>(b * s));
      const uint16_t ninf = half ? 0xFC00 : 0xFF80;
      for (long long i = 0; i < b * s; ++i) host[i] = i % s < s - s / 8 ? 0 : ninf;
      check(cudaMalloc(&mask, host.size() * 2), "cudaMalloc");
      check(cudaMemcpy(mask, host.data(), host.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
      desc.mask_lead_strides[0] = s;  // [B, 1, 1, S]: heads and rows broadcast
      desc.mask_k_stride = 1;
    }
    const bool tensor_cores = lumen::cuda::flash_attention_fits(st, desc);
    const double ms = time_launches(
        [&] { lumen::cuda::launch_attention(st, desc, q, k, v, mask, y, nullptr, stream); },
        stream);
    const double flop = 4.0 * static_cast<double>(b * h) * static_cast<double>(s) * s * d;
    std::printf(
        "{\"dtype\": \"%s\", \"batch\": %lld, \"heads\": %lld, \"seq\": %lld, \"depth\": %lld, "
        "\"mask\": %s, \"kernel\": \"%s\", \"ms\": %.5f, \"tflops\": %.1f}\n",
        dtype.c_str(), b, h, s, d, masked ? "true" : "false",
        tensor_cores ? "tensor cores" : "fused", ms, flop / (ms * 1e-3) / 1e12);
    std::fflush(stdout);
    for (void* p : {q, k, v, y, mask}) cudaFree(p);
  }
  cudaStreamDestroy(stream);
  return 0;
}
