// CUDA kernels of DFT and STFT (spectral.h): a thread per output bin, summing its line's n terms
// in double with the twiddle of k * t mod n (sincospi keeps every angle's error at double's).
#include "backends/cuda/any_types.cuh"
#include "backends/cuda/spectral.h"

namespace lumen::cuda {
namespace {

// acc += v * exp(sign * 2 pi i * idx / n).
__device__ __forceinline__ void add_term(double re, double im, int64_t idx, int64_t n, double sign,
                                         double* acc_re, double* acc_im) {
  double s, c;
  sincospi(2.0 * static_cast<double>(idx) / static_cast<double>(n), &s, &c);
  s *= sign;
  *acc_re += re * c - im * s;
  *acc_im += re * s + im * c;
}

__global__ void dft_kernel(DftDesc d, const float* x, float* y) {
  const int64_t c = d.complex_in ? 2 : 1, out_c = d.irfft ? 1 : 2;
  const int64_t take =
      d.n_in < (d.irfft ? d.n / 2 + 1 : d.n) ? d.n_in : (d.irfft ? d.n / 2 + 1 : d.n);
  const double sign = d.inverse ? 1.0 : -1.0;
  ANY_GRID_LOOP(j, d.outer * d.bins * d.inner) {
    const int64_t i = j % d.inner, k = (j / d.inner) % d.bins, o = j / (d.inner * d.bins);
    double acc_re = 0.0, acc_im = 0.0;
    int64_t idx = 0;  // k * t mod n
    for (int64_t t = 0; t < d.n; ++t) {
      // The line's value t: read, mirrored (an IRFFT's upper half), or zero padding.
      int64_t src = t;
      bool conj = false;
      if (t >= take) {
        src = d.irfft && t >= d.n / 2 + 1 ? d.n - t : -1;
        conj = true;
      }
      if (src >= 0 && src < take) {
        const float* v = x + ((o * d.n_in + src) * d.inner + i) * c;
        const double im = c == 2 ? v[1] : 0.0;
        add_term(v[0], conj ? -im : im, idx, d.n, sign, &acc_re, &acc_im);
      }
      idx += k;
      if (idx >= d.n) idx -= d.n;
    }
    if (d.inverse) {
      acc_re /= static_cast<double>(d.n);
      acc_im /= static_cast<double>(d.n);
    }
    float* out = y + ((o * d.bins + k) * d.inner + i) * out_c;
    out[0] = static_cast<float>(acc_re);
    if (!d.irfft) out[1] = static_cast<float>(acc_im);
  }
}

__global__ void stft_kernel(StftDesc d, const float* x, const float* window, float* y) {
  const int64_t c = d.complex_in ? 2 : 1;
  ANY_GRID_LOOP(j, d.batch * d.frames * d.bins) {
    const int64_t k = j % d.bins, f = (j / d.bins) % d.frames, b = j / (d.bins * d.frames);
    double acc_re = 0.0, acc_im = 0.0;
    int64_t idx = 0;
    for (int64_t t = 0; t < d.n; ++t) {
      const float* v = x + (b * d.length + f * d.step + t) * c;
      const double w = window ? window[t] : 1.0;
      add_term(v[0] * w, c == 2 ? v[1] * w : 0.0, idx, d.n, -1.0, &acc_re, &acc_im);
      idx += k;
      if (idx >= d.n) idx -= d.n;
    }
    y[2 * j] = static_cast<float>(acc_re);
    y[2 * j + 1] = static_cast<float>(acc_im);
  }
}

}  // namespace

void launch_dft(const DftDesc& d, const float* x, float* y, cudaStream_t stream) {
  const int64_t total = d.outer * d.bins * d.inner;
  if (total == 0 || d.n == 0) return;
  dft_kernel<<<any_blocks(total), kAnyThreads, 0, stream>>>(d, x, y);
}

void launch_stft(const StftDesc& d, const float* x, const float* window, float* y,
                 cudaStream_t stream) {
  const int64_t total = d.batch * d.frames * d.bins;
  if (total == 0 || d.n == 0) return;
  stft_kernel<<<any_blocks(total), kAnyThreads, 0, stream>>>(d, x, window, y);
}

}  // namespace lumen::cuda
