// CPU kernels of DFT and STFT (float32 in and out, computed in double). Lengths that are powers
// of two use an iterative radix-2 FFT, other lengths the direct O(n^2) sum over a twiddle table.
// Complex values are (real, imag) pairs in a trailing dimension of 2; real inputs have 1.
#include <algorithm>
#include <cmath>
#include <complex>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

using Complex = std::complex<double>;

// The discrete Fourier transform of one length: X[k] = sum_n x[n] exp(-+2 pi i k n / N), the
// inverse one scaled by 1/N.
class Transform {
 public:
  Transform(int64_t n, bool inverse) : n_(n), inverse_(inverse), twiddle_(static_cast<size_t>(n)) {
    const double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n; ++k) {
      const double angle = sign * 2.0 * std::numbers::pi * static_cast<double>(k) / n;
      twiddle_[k] = Complex(std::cos(angle), std::sin(angle));
    }
  }

  int64_t length() const { return n_; }

  // Transforms `data` (n values) in place; `scratch` is n values of working space.
  void run(Complex* data, Complex* scratch) const {
    if ((n_ & (n_ - 1)) == 0)
      fft(data);
    else
      direct(data, scratch);
    if (inverse_) {
      const double s = 1.0 / static_cast<double>(n_);
      for (int64_t k = 0; k < n_; ++k) data[k] *= s;
    }
  }

 private:
  void direct(Complex* data, Complex* scratch) const {
    for (int64_t k = 0; k < n_; ++k) {
      Complex acc = 0.0;
      int64_t idx = 0;  // k * t mod n, kept without overflow
      for (int64_t t = 0; t < n_; ++t) {
        acc += data[t] * twiddle_[idx];
        idx += k;
        if (idx >= n_) idx -= n_;
      }
      scratch[k] = acc;
    }
    for (int64_t k = 0; k < n_; ++k) data[k] = scratch[k];
  }

  void fft(Complex* data) const {
    for (int64_t i = 1, j = 0; i < n_; ++i) {
      int64_t bit = n_ >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j |= bit;
      if (i < j) std::swap(data[i], data[j]);
    }
    for (int64_t len = 2; len <= n_; len <<= 1) {
      const int64_t step = n_ / len, half = len / 2;
      for (int64_t start = 0; start < n_; start += len) {
        for (int64_t k = 0; k < half; ++k) {
          const Complex u = data[start + k];
          const Complex v = data[start + k + half] * twiddle_[k * step];
          data[start + k] = u + v;
          data[start + k + half] = u - v;
        }
      }
    }
  }

  int64_t n_;
  bool inverse_;
  std::vector<Complex> twiddle_;
};

// Input [outer, n_in, inner, c] (c = 1 or 2) along the DFT axis; output [outer, bins, inner, 2].
class DftKernel final : public Kernel {
 public:
  explicit DftKernel(const NodeContext& ctx)
      : transform_(length_of(ctx), ctx.attr_int("inverse", 0) != 0) {
    const Shape& x = ctx.input_shape(0);
    const int axis = static_cast<int>(axis_of(ctx));
    for (int d = 0; d < axis; ++d) outer_ *= x[d];
    for (int d = axis + 1; d < x.rank() - 1; ++d) inner_ *= x[d];
    n_in_ = x[axis];
    complex_in_ = x[-1] == 2;
    bins_ = ctx.output(0).shape[axis];
    irfft_ = ctx.attr_int("onesided", 0) != 0 && ctx.attr_int("inverse", 0) != 0;
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t n = transform_.length(), lines = outer_ * inner_;
    const int64_t c = complex_in_ ? 2 : 1, inner = inner_, n_in = n_in_, bins = bins_;
    const bool irfft = irfft_;
#pragma omp parallel for schedule(static) if (lines > 1 && lines * n > (1 << 14))
    for (int64_t line = 0; line < lines; ++line) {
      const int64_t o = line / inner, i = line % inner;
      std::vector<Complex> buf(static_cast<size_t>(2 * n), 0.0);
      // IRFFT: the one-sided spectrum gives bins 0 .. n/2, conjugate symmetry the rest.
      const int64_t take = std::min(irfft ? n / 2 + 1 : n, n_in);
      for (int64_t t = 0; t < take; ++t) {
        const float* v = x + ((o * n_in + t) * inner + i) * c;
        buf[t] = Complex(v[0], c == 2 ? v[1] : 0.0f);
      }
      if (irfft)
        for (int64_t t = n / 2 + 1; t < n; ++t) buf[t] = std::conj(buf[n - t]);
      transform_.run(buf.data(), buf.data() + n);
      const int64_t out_c = irfft ? 1 : 2;
      for (int64_t k = 0; k < bins; ++k) {
        float* out = y + ((o * bins + k) * inner + i) * out_c;
        out[0] = static_cast<float>(buf[k].real());
        if (!irfft) out[1] = static_cast<float>(buf[k].imag());
      }
    }
  }

 private:
  static int64_t axis_of(const NodeContext& ctx) {
    int64_t axis = ctx.attr_int("axis", 1);
    return axis < 0 ? axis + ctx.input_shape(0).rank() - 1 : axis;
  }
  // dft_length when given, else the axis' length (twice the axis' length less one for an IRFFT,
  // whose axis holds half a spectrum).
  static int64_t length_of(const NodeContext& ctx) {
    if (ctx.has_input(1)) return ctx.input_ints(1, "dft_length")[0];
    const int64_t len = ctx.input_shape(0)[static_cast<int>(axis_of(ctx))];
    const bool irfft = ctx.attr_int("onesided", 0) != 0 && ctx.attr_int("inverse", 0) != 0;
    return irfft ? 2 * (len - 1) : len;
  }

  Transform transform_;
  int64_t outer_ = 1;
  int64_t inner_ = 1;
  int64_t n_in_ = 1;
  int64_t bins_ = 1;
  bool complex_in_ = false;
  bool irfft_ = false;  // onesided inverse: a one-sided spectrum in, a real signal out
};

// Signal [batch, length, c], optional window [frame_length]; output [batch, frames, bins, 2].
class StftKernel final : public Kernel {
 public:
  explicit StftKernel(const NodeContext& ctx)
      : transform_(frame_length(ctx), false), step_(ctx.input_ints(1, "frame_step")[0]) {
    const Shape& x = ctx.input_shape(0);
    batch_ = x[0];
    length_ = x[1];
    complex_in_ = x[2] == 2;
    const Shape& y = ctx.output(0).shape;
    frames_ = y[1];
    bins_ = y[2];
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    const float* w = nullptr;
    if (ctx.inputs.size() > 2 && ctx.inputs[2].defined()) w = ctx.inputs[2].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t n = transform_.length(), tasks = batch_ * frames_;
    const int64_t c = complex_in_ ? 2 : 1, frames = frames_, bins = bins_, length = length_;
    const int64_t step = step_;
#pragma omp parallel for schedule(static) if (tasks > 1 && tasks * n > (1 << 14))
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / frames, f = task % frames;
      std::vector<Complex> buf(static_cast<size_t>(2 * n));
      for (int64_t t = 0; t < n; ++t) {
        const float* v = x + (b * length + f * step + t) * c;
        const double scale = w ? w[t] : 1.0;
        buf[t] = Complex(v[0] * scale, c == 2 ? v[1] * scale : 0.0);
      }
      transform_.run(buf.data(), buf.data() + n);
      float* out = y + task * bins * 2;
      for (int64_t k = 0; k < bins; ++k) {
        out[2 * k] = static_cast<float>(buf[k].real());
        out[2 * k + 1] = static_cast<float>(buf[k].imag());
      }
    }
  }

 private:
  static int64_t frame_length(const NodeContext& ctx) {
    if (ctx.has_input(2)) return ctx.input_shape(2)[0];
    return ctx.input_ints(3, "frame_length")[0];
  }

  Transform transform_;
  int64_t step_;
  int64_t batch_ = 1;
  int64_t length_ = 1;
  int64_t frames_ = 1;
  int64_t bins_ = 1;
  bool complex_in_ = false;
};

// The signal (and window) must be float32.
std::string check_float_signal(const NodeContext& ctx) {
  for (int i : {0, 2})
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::kFloat32)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
             "; the CPU kernel takes float32";
  return "";
}

std::unique_ptr<Kernel> make_dft(const NodeContext& ctx) {
  return std::make_unique<DftKernel>(ctx);
}

std::unique_ptr<Kernel> make_stft(const NodeContext& ctx) {
  return std::make_unique<StftKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(DFT, &make_dft, &check_float_signal);
LUMEN_REGISTER_CPU_KERNEL(STFT, &make_stft, &check_float_signal);

}  // namespace lumen::cpu
