// Ways to send a pageable host buffer (default: one 1x3x224x224 float32 image, 602 KB) to the
// device, each followed by a one-thread kernel and a stream synchronize, median of 300: the
// driver's own staging, a copy from pinned memory alone, and the pinned staging CudaBackend does
// (src/backends/cuda/async_copy.cc) filled with memcpy and with non-temporal stores by 1 to 16
// threads. On the GPU machine, from the repository root:
//   nvcc -O2 -arch=sm_90 -Isrc -Xcompiler -fopenmp bench/h2d_copy.cu -o /tmp/h2d_copy -lgomp
//   /tmp/h2d_copy [bytes]
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

__global__ void touch(float* p) {
  if (threadIdx.x == 0) p[0] += 1.f;
}

// dst (page-aligned) = src by `threads` threads, a page-aligned block each.
void fill(char* dst, const char* src, size_t n, int threads, bool streaming) {
  size_t block = (n + threads - 1) / threads;
  block = (block + 4095) / 4096 * 4096;
  const int blocks = static_cast<int>((n + block - 1) / block);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int b = 0; b < blocks; ++b) {
    const size_t at = static_cast<size_t>(b) * block, len = std::min(block, n - at);
    if (streaming)
      lumen::cuda::stream_copy(dst + at, src + at, len);
    else
      std::memcpy(dst + at, src + at, len);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 3 * 224 * 224 * 4;
  std::vector<char> host(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<char>(i * 7);
  float* dev = nullptr;
  char* pinned = nullptr;
  cudaStream_t s = nullptr;
  if (cudaMalloc(&dev, bytes) != cudaSuccess || cudaMallocHost(&pinned, bytes) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "h2d_copy: no CUDA device\n");
    return 1;
  }
  std::printf("| way (%zu bytes, then a kernel and a sync) | median us | min us |\n", bytes);
  std::printf("| --- | ---: | ---: |\n");
  auto bench = [&](const std::string& name, const std::function<void()>& send) {
    std::vector<double> t;
    for (int r = 0; r < 300; ++r) {
      const auto a = std::chrono::steady_clock::now();
      send();
      touch<<<1, 32, 0, s>>>(dev);
      cudaStreamSynchronize(s);
      t.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    std::printf("| %s | %.1f | %.1f |\n", name.c_str(), t[t.size() / 2], t[0]);
  };
  bench("kernel alone", [] {});
  bench("driver (cudaMemcpyAsync from pageable memory)",
        [&] { cudaMemcpyAsync(dev, host.data(), bytes, cudaMemcpyHostToDevice, s); });
  bench("from pinned memory alone",
        [&] { cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, s); });
  for (bool streaming : {false, true})
    for (int threads : {1, 4, 16})
      bench(std::string(streaming ? "non-temporal" : "memcpy") + " staging by " +
                std::to_string(threads) + " threads, then from pinned memory",
            [&] {
              fill(pinned, host.data(), bytes, threads, streaming);
              cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, s);
            });
  return 0;
}
