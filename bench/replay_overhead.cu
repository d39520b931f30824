// The fixed cost of one host-input-to-host-output replay: ways to move a pageable input in and a
// pageable output out around a recorded CUDA graph of `kernels` tiny kernels, median of 500 runs
// each, interleaved: what src/backends/cuda/async_copy.cc and the executable's replay do (the third
// way), what they did before, and candidates. On the H200 machine, 16 threads: 256 bytes in, 16 KB
// out, 21 kernels: 40.2 us with the output through the driver, 36.2 through pinned memory, the
// replay alone 26.9; staging a 401 KB input in chunks sent as staged was slower than in one piece.
// On the GPU machine, from the repository root:
//   nvcc -O2 -arch=sm_90 -Isrc -Xcompiler -fopenmp bench/replay_overhead.cu -o /tmp/ro -lgomp
//   /tmp/ro INPUT_BYTES OUTPUT_BYTES KERNELS THREADS
#include <cuda_runtime.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/stream_copy.h"

namespace {

__global__ void step(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 0.5f + 1.f;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "replay_overhead: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// dst = src by `threads` threads, a page-aligned block each, with non-temporal stores.
void fill(char* dst, const char* src, size_t n, int threads) {
  if (threads <= 1 || n < (size_t{64} << 10)) {
    lumen::cuda::stream_copy(dst, src, n);
    return;
  }
  size_t block = (n + threads - 1) / threads;
  block = std::max<size_t>(32 << 10, (block + 4095) / 4096 * 4096);
  const int blocks = static_cast<int>((n + block - 1) / block);
#pragma omp parallel for num_threads(std::min(threads, blocks)) schedule(static)
  for (int b = 0; b < blocks; ++b) {
    const size_t at = static_cast<size_t>(b) * block;
    lumen::cuda::stream_copy(dst + at, src + at, std::min(block, n - at));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t in_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const size_t out_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 16384;
  const int kernels = argc > 3 ? std::atoi(argv[3]) : 20;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 16;
  const int n = 4096;
  std::vector<char> host_in(in_bytes), host_out(out_bytes);
  for (size_t i = 0; i < in_bytes; ++i) host_in[i] = static_cast<char>(i * 7);
  char *dev_in = nullptr, *dev_out = nullptr, *pin_in = nullptr, *pin_out = nullptr;
  float* work = nullptr;
  cudaStream_t s = nullptr;
  check(cudaMalloc(&dev_in, std::max<size_t>(in_bytes, 4 * n)), "malloc");
  check(cudaMalloc(&dev_out, std::max<size_t>(out_bytes, 4 * n)), "malloc");
  check(cudaMalloc(&work, 2 * 4 * n), "malloc");
  check(cudaMallocHost(&pin_in, in_bytes), "pinned");
  check(cudaMallocHost(&pin_out, out_bytes), "pinned");
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");

  auto capture = [&](bool copies_inside) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t e = nullptr;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), "capture");
    if (copies_inside)
      check(cudaMemcpyAsync(dev_in, pin_in, in_bytes, cudaMemcpyHostToDevice, s), "copy node");
    step<<<n / 256, 256, 0, s>>>(reinterpret_cast<const float*>(dev_in), work, n);
    for (int k = 1; k < kernels; ++k)
      step<<<n / 256, 256, 0, s>>>(work + (k % 2 ? 0 : n), work + (k % 2 ? n : 0), n);
    check(cudaMemcpyAsync(dev_out, work, std::min<size_t>(out_bytes, 4 * n),
                          cudaMemcpyDeviceToDevice, s),
          "copy node");
    if (copies_inside)
      check(cudaMemcpyAsync(pin_out, dev_out, out_bytes, cudaMemcpyDeviceToHost, s), "copy node");
    check(cudaStreamEndCapture(s, &g), "end capture");
    check(cudaGraphInstantiate(&e, g, 0), "instantiate");
    return e;
  };
  cudaGraphExec_t plain = capture(false), inside = capture(true);

  const bool staged = in_bytes >= (size_t{128} << 10);
  struct Way {
    std::string name;
    std::function<void()> run;
    std::vector<double> us;
  };
  std::vector<Way> ways;
  // The input as the executable's replay sends it: staged in pinned memory by the threads from
  // 128 KB, else through the driver.
  auto send_input = [&] {
    if (staged) {
      fill(pin_in, host_in.data(), in_bytes, threads);
      cudaMemcpyAsync(dev_in, pin_in, in_bytes, cudaMemcpyHostToDevice, s);
    } else {
      cudaMemcpyAsync(dev_in, host_in.data(), in_bytes, cudaMemcpyHostToDevice, s);
    }
  };
  ways.push_back({"input as Lumen sends it, replay, output by the driver (Lumen until 2026-12-01)",
                  [&] {
                    send_input();
                    cudaGraphLaunch(plain, s);
                    cudaMemcpyAsync(host_out.data(), dev_out, out_bytes, cudaMemcpyDeviceToHost, s);
                    cudaStreamSynchronize(s);
                  },
                  {}});
  ways.push_back({"both copies inside the graph, pinned in and out",
                  [&] {
                    fill(pin_in, host_in.data(), in_bytes, threads);
                    cudaGraphLaunch(inside, s);
                    cudaStreamSynchronize(s);
                    std::memcpy(host_out.data(), pin_out, out_bytes);
                  },
                  {}});
  ways.push_back({"input as Lumen sends it, replay, output through pinned memory (Lumen now)",
                  [&] {
                    send_input();
                    cudaGraphLaunch(plain, s);
                    cudaMemcpyAsync(pin_out, dev_out, out_bytes, cudaMemcpyDeviceToHost, s);
                    cudaStreamSynchronize(s);
                    std::memcpy(host_out.data(), pin_out, out_bytes);
                  },
                  {}});
  for (size_t chunk : {size_t{64} << 10, size_t{128} << 10, size_t{256} << 10}) {
    if (chunk >= in_bytes) continue;
    ways.push_back({"input staged in " + std::to_string(chunk >> 10) +
                        " KB chunks, each sent as staged; output through pinned memory",
                    [&, chunk] {
                      for (size_t at = 0; at < in_bytes; at += chunk) {
                        const size_t len = std::min(chunk, in_bytes - at);
                        fill(pin_in + at, host_in.data() + at, len, threads);
                        cudaMemcpyAsync(dev_in + at, pin_in + at, len, cudaMemcpyHostToDevice, s);
                      }
                      cudaGraphLaunch(plain, s);
                      cudaMemcpyAsync(pin_out, dev_out, out_bytes, cudaMemcpyDeviceToHost, s);
                      cudaStreamSynchronize(s);
                      std::memcpy(host_out.data(), pin_out, out_bytes);
                    },
                    {}});
  }
  ways.push_back({"replay alone (no copies)",
                  [&] {
                    cudaGraphLaunch(plain, s);
                    cudaStreamSynchronize(s);
                  },
                  {}});
  for (int r = 0; r < 520; ++r)
    for (Way& w : ways) {
      const auto a = std::chrono::steady_clock::now();
      w.run();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
      if (r >= 20) w.us.push_back(us);
    }
  check(cudaGetLastError(), "runs");
  std::printf("| way (%zu bytes in, %zu out, %d kernels, %d threads) | median us | min us |\n",
              in_bytes, out_bytes, kernels, threads);
  std::printf("| --- | ---: | ---: |\n");
  for (Way& w : ways) {
    std::sort(w.us.begin(), w.us.end());
    std::printf("| %s | %.1f | %.1f |\n", w.name.c_str(), w.us[w.us.size() / 2], w.us[0]);
  }
  return 0;
}
