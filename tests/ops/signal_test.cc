// Tests of the signal ops against naive double-precision references: the cosine-sum windows,
// DFT (real and complex input, every axis, inverse, onesided, dft_length padding and truncation,
// power-of-two and other lengths), STFT (with and without a window), MelWeightMatrix, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <tuple>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;
using test::expect_close;
using test::omitted;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

constexpr double kPi = std::numbers::pi;

using test::expect_error;

TEST(Windows, HannHammingBlackmanPeriodicAndSymmetric) {
  struct Case {
    const char* op;
    double a0, a1, a2;
  };
  for (const Case& c :
       {Case{"HannWindow", 0.5, 0.5, 0.0}, Case{"HammingWindow", 25.0 / 46.0, 21.0 / 46.0, 0.0},
        Case{"BlackmanWindow", 0.42, 0.5, 0.08}}) {
    for (int64_t size : {1, 7, 16}) {
      for (int64_t periodic : {0, 1}) {
        const double n = periodic ? size : size - 1;
        std::vector<double> want(static_cast<size_t>(size), 1.0);
        if (n > 0)
          for (int64_t k = 0; k < size; ++k)
            want[k] = c.a0 - c.a1 * std::cos(2 * kPi * k / n) + c.a2 * std::cos(4 * kPi * k / n);
        Tensor y =
            run_op(c.op, {constant(Tensor::scalar<int64_t>(size))}, {{"periodic", periodic}})[0];
        expect_close(y, Shape{size}, want, 1e-6, 1e-6);
      }
    }
    // float64 output.
    Tensor y = run_op(c.op, {constant(Tensor::scalar<int32_t>(5))}, {{"output_datatype", 11}})[0];
    EXPECT_EQ(y.dtype(), DType::kFloat64);
  }
}

// Naive DFT of each line along `axis` of x [..., c] (c = 1 real, 2 complex), zero padded or
// truncated to n, keeping `bins` outputs.
std::vector<double> ref_dft(const Tensor& x, int axis, int64_t n, bool inverse, int64_t bins,
                            Shape* shape) {
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank() - 1; ++d) inner *= s[d];
  const int64_t len = s[axis], c = s[-1];
  std::vector<int64_t> dims = s.dims();
  dims[axis] = bins;
  dims.back() = 2;
  *shape = Shape(dims);
  std::vector<double> xv = to_doubles(x), out(static_cast<size_t>(outer * bins * inner * 2));
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      for (int64_t k = 0; k < bins; ++k) {
        std::complex<double> acc = 0;
        for (int64_t t = 0; t < std::min(n, len); ++t) {
          const double* v = xv.data() + ((o * len + t) * inner + i) * c;
          const std::complex<double> val(v[0], c == 2 ? v[1] : 0.0);
          acc += val * std::polar(1.0, sign * 2 * kPi * double(k * t % n) / double(n));
        }
        if (inverse) acc /= double(n);
        out[((o * bins + k) * inner + i) * 2] = acc.real();
        out[((o * bins + k) * inner + i) * 2 + 1] = acc.imag();
      }
  return out;
}

TEST(DFT, AxesLengthsInverseOnesided) {
  Tensor real = random_tensor({2, 12, 8, 1}, 1);
  Tensor cplx = random_tensor({2, 12, 8, 2}, 2);
  Shape shape;
  for (const Tensor* x : {&real, &cplx}) {
    for (int axis : {1, 2}) {
      const int64_t len = x->shape()[axis];
      for (int inverse : {0, 1}) {
        std::vector<double> want = ref_dft(*x, axis, len, inverse, len, &shape);
        expect_close(
            run_op("DFT", {*x}, {{"axis", int64_t{axis}}, {"inverse", int64_t{inverse}}})[0], shape,
            want, 1e-4, 1e-4);
      }
      // Padded to a longer and truncated to a shorter dft_length.
      for (int64_t n : {len + 5, len - 3, int64_t{16}}) {
        std::vector<double> want = ref_dft(*x, axis, n, false, n, &shape);
        expect_close(
            run_op("DFT", {*x, constant(Tensor::scalar<int64_t>(n))}, {{"axis", int64_t{axis}}})[0],
            shape, want, 1e-4, 1e-4);
      }
    }
  }
  // Onesided (real input): n / 2 + 1 bins; negative axis counts from the signal's last dim.
  std::vector<double> want = ref_dft(real, 2, 8, false, 5, &shape);
  expect_close(run_op("DFT", {real}, {{"axis", int64_t{-1}}, {"onesided", int64_t{1}}})[0], shape,
               want, 1e-4, 1e-4);
}

// Naive STFT of signal [batch, length, c] with an optional window.
std::vector<double> ref_stft(const Tensor& x, const std::vector<double>& window, int64_t frame,
                             int64_t step, bool onesided, Shape* shape) {
  const int64_t batch = x.shape()[0], len = x.shape()[1], c = x.shape()[2];
  const int64_t frames = (len - frame) / step + 1, bins = onesided ? frame / 2 + 1 : frame;
  *shape = Shape{batch, frames, bins, 2};
  std::vector<double> xv = to_doubles(x), out;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t k = 0; k < bins; ++k) {
        std::complex<double> acc = 0;
        for (int64_t t = 0; t < frame; ++t) {
          const double* v = xv.data() + (b * len + f * step + t) * c;
          const double w = window.empty() ? 1.0 : window[t];
          acc += std::complex<double>(v[0], c == 2 ? v[1] : 0.0) * w *
                 std::polar(1.0, -2 * kPi * double(k * t % frame) / double(frame));
        }
        out.push_back(acc.real());
        out.push_back(acc.imag());
      }
  return out;
}

TEST(STFT, WindowFrameLengthOnesided) {
  Tensor x = random_tensor({2, 50, 1}, 11);
  Tensor w = random_tensor({12}, 12, 0.0f, 1.0f);
  Shape shape;
  std::vector<double> want = ref_stft(x, to_doubles(w), 12, 5, true, &shape);
  expect_close(run_op("STFT", {x, constant(Tensor::scalar<int64_t>(5)), w})[0], shape, want, 1e-4,
               1e-4);
  want = ref_stft(x, {}, 16, 7, false, &shape);
  expect_close(run_op("STFT",
                      {x, constant(Tensor::scalar<int64_t>(7)), omitted(),
                       constant(Tensor::scalar<int64_t>(16))},
                      {{"onesided", int64_t{0}}})[0],
               shape, want, 1e-4, 1e-4);
  Tensor xc = random_tensor({1, 40, 2}, 13);
  want = ref_stft(xc, to_doubles(w), 12, 4, false, &shape);
  expect_close(
      run_op("STFT", {xc, constant(Tensor::scalar<int64_t>(4)), w}, {{"onesided", int64_t{0}}})[0],
      shape, want, 1e-4, 1e-4);
}

// The ONNX reference definition: num_mel_bins + 2 edges spaced by (mel(hi) - mel(lo)) /
// (num_mel_bins + 2) from mel(lo), mapped to bins floor((dft_length + 1) * hz / sample_rate).
std::vector<double> ref_mel(int64_t bins, int64_t dft, double rate, double lo, double hi) {
  auto mel = [](double f) { return 2595 * std::log10(1 + f / 700); };
  const int64_t rows = dft / 2 + 1;
  std::vector<double> out(static_cast<size_t>(rows * bins), 0.0);
  std::vector<int64_t> e;
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double m = mel(lo) + i * (mel(hi) - mel(lo)) / double(bins + 2);
    e.push_back(
        static_cast<int64_t>(std::floor((dft + 1) * 700 * (std::pow(10, m / 2595) - 1) / rate)));
  }
  for (int64_t i = 0; i < bins; ++i) {
    for (int64_t j = e[i]; j <= e[i + 1]; ++j)
      out[j * bins + i] = e[i + 1] == e[i] ? 1.0 : double(j - e[i]) / double(e[i + 1] - e[i]);
    for (int64_t j = e[i + 1]; j < e[i + 2]; ++j)
      out[j * bins + i] = double(e[i + 2] - j) / double(e[i + 2] - e[i + 1]);
  }
  return out;
}

TEST(MelWeightMatrix, TrianglesOnTheMelScale) {
  for (auto [bins, dft, rate, lo, hi] :
       {std::tuple{8, 16, 8192, 0.0f, 4096.0f}, std::tuple{10, 64, 16000, 20.0f, 7600.0f},
        std::tuple{5, 33, 22050, 300.0f, 5000.0f}}) {
    Tensor y = run_op(
        "MelWeightMatrix",
        {constant(Tensor::scalar<int64_t>(bins)), constant(Tensor::scalar<int32_t>(dft)),
         Tensor::scalar<int64_t>(rate), Tensor::scalar<float>(lo), Tensor::scalar<float>(hi)})[0];
    expect_close(y, Shape{dft / 2 + 1, bins}, ref_mel(bins, dft, rate, lo, hi), 1e-6, 1e-6);
  }
}

TEST(Signal, BadInputNamesTheNode) {
  expect_error<ShapeError>([] { run_op("HannWindow", {Tensor::scalar<int64_t>(8)}); },
                           "HannWindow");
  expect_error<ShapeError>(
      [] { run_op("BlackmanWindow", {constant(Tensor::scalar<int64_t>(-2))}); }, "BlackmanWindow");
  expect_error<ShapeError>([] { run_op("DFT", {random_tensor({2, 8, 3}, 21)}); }, "DFT");
  expect_error<ShapeError>(
      [] {
        run_op("DFT", {random_tensor({2, 8, 1}, 21)}, {{"axis", int64_t{2}}});
      },
      "DFT");
  expect_error<UnsupportedOp>(
      [] {
        run_op("DFT", {random_tensor({2, 8, 2}, 22)}, {{"onesided", int64_t{1}}});
      },
      "DFT");
  expect_error<ShapeError>(
      [] {
        run_op("STFT", {random_tensor({1, 10, 1}, 23), constant(Tensor::scalar<int64_t>(2)),
                        random_tensor({12}, 24)});
      },
      "STFT");
  expect_error<ShapeError>(
      [] {
        run_op("STFT", {random_tensor({1, 10, 1}, 23), constant(Tensor::scalar<int64_t>(2)),
                        random_tensor({4}, 24), constant(Tensor::scalar<int64_t>(5))});
      },
      "STFT");
  expect_error<ShapeError>(
      [] {
        run_op("MelWeightMatrix",
               {constant(Tensor::scalar<int64_t>(0)), constant(Tensor::scalar<int64_t>(8)),
                Tensor::scalar<int64_t>(100), Tensor::scalar<float>(0), Tensor::scalar<float>(50)});
      },
      "MelWeightMatrix");
}

}  // namespace
}  // namespace lumen
