// Launchers of the CUDA kernels of DFT and STFT (spectral.cu): float32 in and out, each output
// bin a direct sum in double over its line (sincospi twiddles), as exact as the CPU kernel's FFT
// to float32's precision. Plain C++ types, so the kernel classes (spectral.cc) need no CUDA C++.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lumen::cuda {

// DFT of x [outer, n_in, inner, c] (c 1: real, 2: complex) along n_in into y [outer, bins, inner,
// 2] (one-sided inverse: [outer, bins, inner, 1], the real signal): length n (inputs past n_in are
// zeros, past n dropped), inverse scaled by 1/n; an IRFFT reads bins 0 .. n/2 and takes the rest
// by conjugate symmetry.
struct DftDesc {
  int64_t outer = 1, inner = 1, n_in = 1, n = 1, bins = 1;
  bool complex_in = false, inverse = false, irfft = false;
};
void launch_dft(const DftDesc& d, const float* x, float* y, cudaStream_t stream);

// STFT of signal [batch, length, c] in frames of n samples every `step`, each times window[t]
// (nullable), into y [batch, frames, bins, 2].
struct StftDesc {
  int64_t batch = 1, length = 1, n = 1, step = 1, frames = 1, bins = 1;
  bool complex_in = false;
};
void launch_stft(const StftDesc& d, const float* x, const float* window, float* y,
                 cudaStream_t stream);

}  // namespace lumen::cuda
