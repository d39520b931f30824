// CPU kernels of the generated signal tensors: the cosine-sum windows (HannWindow, HammingWindow,
// BlackmanWindow) and MelWeightMatrix, computed in double and stored as float32 or float64.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

// Stores v[i] into a float32 or float64 output.
void store_reals(Tensor& out, const std::vector<double>& v) {
  if (out.dtype() == DType::kFloat64) {
    std::copy(v.begin(), v.end(), out.data<double>());
  } else {
    float* o = out.data<float>();
    for (size_t i = 0; i < v.size(); ++i) o[i] = static_cast<float>(v[i]);
  }
}

// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), with N = size when periodic and size - 1
// when symmetric (a symmetric window of one sample is 1).
class WindowKernel final : public Kernel {
 public:
  WindowKernel(const NodeContext& ctx, double a0, double a1, double a2)
      : a0_(a0), a1_(a1), a2_(a2), periodic_(ctx.attr_int("periodic", 1) != 0) {}

  void run(KernelContext& ctx) const override {
    const int64_t size = ctx.outputs[0].numel();
    const int64_t denom = periodic_ ? size : size - 1;
    std::vector<double> w(static_cast<size_t>(size), 1.0);
    if (denom > 0) {
      for (int64_t n = 0; n < size; ++n) {
        const double angle = 2.0 * std::numbers::pi * static_cast<double>(n) / denom;
        w[n] = a0_ - a1_ * std::cos(angle) + a2_ * std::cos(2.0 * angle);
      }
    }
    store_reals(ctx.outputs[0], w);
  }

 private:
  double a0_, a1_, a2_;
  bool periodic_;
};

double scalar_at(const Tensor& t) {
  return t.item_as_double(0);
}

// Triangular filters on the mel scale mel(f) = 2595 log10(1 + f / 700). The num_mel_bins + 2
// edges are equally spaced in mel from lower_edge_hertz with a step of (mel(upper) - mel(lower))
// / (num_mel_bins + 2), converted back to hertz and to spectrogram bins
// floor((dft_length + 1) * f / sample_rate). Filter i rises from edge i to 1 at edge i + 1 and
// falls to 0 at edge i + 2 (as the ONNX reference defines it). Output [dft_length / 2 + 1,
// num_mel_bins].
class MelWeightMatrixKernel final : public Kernel {
 public:
  explicit MelWeightMatrixKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const Shape& y = ctx.output(0).shape;
    rows_ = y[0];
    bins_ = y[1];
    dft_length_ = ctx.input_ints(1, "dft_length")[0];
  }

  void run(KernelContext& ctx) const override {
    const double sample_rate = scalar_at(ctx.inputs[2]);
    const double lower = scalar_at(ctx.inputs[3]), upper = scalar_at(ctx.inputs[4]);
    if (!(sample_rate > 0.0))
      throw InvalidArgument(where_ + ": sample_rate must be positive, got " +
                            std::to_string(sample_rate));
    if (!(lower >= 0.0 && lower <= upper))
      throw InvalidArgument(where_ + ": need 0 <= lower_edge_hertz <= upper_edge_hertz, got " +
                            std::to_string(lower) + " and " + std::to_string(upper));
    auto mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
    const double low_mel = mel(lower);
    const double step = (mel(upper) - low_mel) / static_cast<double>(bins_ + 2);
    std::vector<int64_t> edge(static_cast<size_t>(bins_ + 2));
    for (int64_t i = 0; i < bins_ + 2; ++i) {
      const double hz = 700.0 * (std::pow(10.0, (low_mel + i * step) / 2595.0) - 1.0);
      edge[i] = static_cast<int64_t>(std::floor((dft_length_ + 1) * hz / sample_rate));
    }
    std::vector<double> w(static_cast<size_t>(rows_ * bins_), 0.0);
    auto set = [&](int64_t row, int64_t col, double v) {
      if (row >= 0 && row < rows_) w[row * bins_ + col] = v;
    };
    for (int64_t i = 0; i < bins_; ++i) {
      const int64_t left = edge[i], center = edge[i + 1], right = edge[i + 2];
      if (center == left) {
        set(center, i, 1.0);
      } else {
        for (int64_t j = left; j <= center; ++j)
          set(j, i, static_cast<double>(j - left) / static_cast<double>(center - left));
      }
      for (int64_t j = center; j < right; ++j)
        set(j, i, static_cast<double>(right - j) / static_cast<double>(right - center));
    }
    store_reals(ctx.outputs[0], w);
  }

 private:
  std::string where_;
  int64_t rows_ = 1;
  int64_t bins_ = 1;
  int64_t dft_length_ = 1;
};

std::unique_ptr<Kernel> make_hann(const NodeContext& ctx) {
  return std::make_unique<WindowKernel>(ctx, 0.5, 0.5, 0.0);
}

std::unique_ptr<Kernel> make_hamming(const NodeContext& ctx) {
  return std::make_unique<WindowKernel>(ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}

std::unique_ptr<Kernel> make_blackman(const NodeContext& ctx) {
  return std::make_unique<WindowKernel>(ctx, 0.42, 0.5, 0.08);
}

std::unique_ptr<Kernel> make_mel_weight_matrix(const NodeContext& ctx) {
  return std::make_unique<MelWeightMatrixKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(HannWindow, &make_hann);
LUMEN_REGISTER_CPU_KERNEL(HammingWindow, &make_hamming);
LUMEN_REGISTER_CPU_KERNEL(BlackmanWindow, &make_blackman);
LUMEN_REGISTER_CPU_KERNEL(MelWeightMatrix, &make_mel_weight_matrix);

}  // namespace lumen::cpu
