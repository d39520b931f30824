// Semantics that opsets 19-28 added to ops Lumen already ran: Mod with fmod = 0 on floats (28),
// Pad's wrap mode (19), Resize's antialias, half_pixel_symmetric and keep_aspect_ratio_policy
// (18/19), and float64 nodes whose CPU kernel takes float32 (run between Casts). References are
// plain loops over the spec's formulas, on random data.
#include <algorithm>
#include <cmath>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

TEST(NewerOpsets, ModFloorOnFloats) {
  Tensor a = test::random_tensor({3, 7}, 1, -5.0f, 5.0f);
  Tensor b = test::random_tensor({7}, 2, 0.5f, 2.0f);
  for (int i = 0; i < 7; i += 2) b.data<float>()[i] = -b.data<float>()[i];
  a.data<float>()[0] = 0.0f;  // a zero remainder takes the divisor's sign
  auto out = test::run_op("Mod", {a, b}, {{"fmod", int64_t{0}}});
  std::vector<double> want;
  for (int64_t i = 0; i < 21; ++i) {
    double x = a.data<float>()[i], y = b.data<float>()[i % 7];
    double r = x - std::floor(x / y) * y;
    want.push_back(r == 0 ? std::copysign(0.0, y) : r);
  }
  test::expect_close(out[0], {3, 7}, want, 1e-5, 1e-4);
  EXPECT_EQ(std::signbit(out[0].data<float>()[0]), std::signbit(b.data<float>()[0]));
}

TEST(NewerOpsets, PadWrap) {
  Tensor x = test::random_tensor({3, 4}, 3);
  // pads: begin (1, 5), end (2, -1): axis 1 crops its last column and wraps over the other three.
  auto out = test::run_op("Pad", {x, test::constant(Tensor::from_vector<int64_t>({4}, {1, 5, 2, -1}))},
                          {{"mode", std::string("wrap")}});
  const int64_t rows = 3 + 1 + 2, cols = 4 + 5 - 1;
  std::vector<double> want;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t sr = ((r - 1) % 3 + 3) % 3;
      int64_t sc = ((c - 5) % 3 + 3) % 3;
      want.push_back(x.data<float>()[sr * 4 + sc]);
    }
  test::expect_close(out[0], {rows, cols}, want);
}

// Antialiased linear downsampling of one axis by `scale`: the triangle filter stretched by
// 1 / scale around each output's source coordinate (half_pixel), weights normalised, edges clamped.
std::vector<double> antialias_linear_1d(const float* x, int64_t in, int64_t out, double scale) {
  std::vector<double> y(out);
  for (int64_t o = 0; o < out; ++o) {
    double src = (o + 0.5) / scale - 0.5;
    double num = 0, den = 0;
    const int64_t reach = static_cast<int64_t>(std::ceil(1 / scale)) + 2;
    for (int64_t i = static_cast<int64_t>(std::floor(src)) - reach;
         i <= static_cast<int64_t>(std::floor(src)) + reach; ++i) {
      double w = std::max(0.0, 1 - std::abs((i - src) * scale));
      num += w * x[std::clamp<int64_t>(i, 0, in - 1)];
      den += w;
    }
    y[o] = num / den;
  }
  return y;
}

TEST(NewerOpsets, ResizeAntialiasLinear) {
  Tensor x = test::random_tensor({1, 1, 1, 17}, 4);
  Tensor scales = Tensor::from_vector<float>({4}, {1.0f, 1.0f, 1.0f, 0.3f});
  auto out = test::run_op("Resize", {x, test::omitted(), test::constant(scales)},
                          {{"mode", std::string("linear")}, {"antialias", int64_t{1}}});
  const int64_t n = static_cast<int64_t>(std::floor(17 * 0.3));
  test::expect_close(out[0], {1, 1, 1, n}, antialias_linear_1d(x.data<float>(), 17, n, 0.3f));
}

TEST(NewerOpsets, ResizeKeepAspectRatioAndHalfPixelSymmetric) {
  Tensor x = test::random_tensor({1, 1, 4, 6}, 5);
  // not_larger: one scale, min(3/4, 5/6) = 0.75; lengths round half up: 3 x 5 (4.5 -> 5).
  Tensor sizes = Tensor::from_vector<int64_t>({2}, {3, 5});
  auto out = test::run_op("Resize", {x, test::omitted(), test::omitted(), test::constant(sizes)},
                          {{"mode", std::string("nearest")},
                           {"axes", std::vector<int64_t>{2, 3}},
                           {"keep_aspect_ratio_policy", std::string("not_larger")},
                           {"coordinate_transformation_mode", std::string("half_pixel_symmetric")},
                           {"nearest_mode", std::string("floor")}});
  const double s = 0.75;
  std::vector<double> want;
  auto src = [&](int64_t o, int64_t in, int64_t len) {
    double adjustment = len / (s * in);
    double x_ori = in / 2.0 * (1 - adjustment) + (o + 0.5) / s - 0.5;
    return std::clamp<int64_t>(static_cast<int64_t>(std::floor(x_ori)), 0, in - 1);
  };
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 5; ++c) want.push_back(x.data<float>()[src(r, 4, 3) * 6 + src(c, 6, 5)]);
  test::expect_close(out[0], {1, 1, 3, 5}, want);
}

TEST(NewerOpsets, Float64NodeRunsInFloat32BetweenCasts) {
  Tensor x32 = test::random_tensor({2, 3, 5}, 6, -2.0f, 2.0f);
  Tensor x = Tensor::empty({2, 3, 5}, DType::kFloat64);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] = x32.data<float>()[i];
  auto out = test::run_op("Softmax", {x}, {{"axis", int64_t{-1}}});
  ASSERT_EQ(out[0].dtype(), DType::kFloat64);
  std::vector<double> want(30);
  for (int64_t r = 0; r < 6; ++r) {
    double m = -1e300, sum = 0;
    for (int c = 0; c < 5; ++c) m = std::max(m, x.data<double>()[r * 5 + c]);
    for (int c = 0; c < 5; ++c) sum += std::exp(x.data<double>()[r * 5 + c] - m);
    for (int c = 0; c < 5; ++c) want[r * 5 + c] = std::exp(x.data<double>()[r * 5 + c] - m) / sum;
  }
  test::expect_close(out[0], {2, 3, 5}, want, 1e-6, 1e-5);
}

// DFT with onesided = 1 and inverse = 1 (IRFFT): the one-sided spectrum of a real signal, made
// here by the plain sum, gives the signal back (length 2 * (bins - 1), a real last dimension).
TEST(NewerOpsets, DftInverseOfAOneSidedSpectrum) {
  const int64_t n = 12, bins = n / 2 + 1;
  Tensor signal = test::random_tensor({2, n}, 8);
  Tensor spectrum = Tensor::empty({2, bins, 2});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < bins; ++k) {
      double re = 0, im = 0;
      for (int64_t t = 0; t < n; ++t) {
        const double angle = -2 * M_PI * static_cast<double>(k * t) / n;
        re += signal.data<float>()[b * n + t] * std::cos(angle);
        im += signal.data<float>()[b * n + t] * std::sin(angle);
      }
      spectrum.data<float>()[(b * bins + k) * 2] = static_cast<float>(re);
      spectrum.data<float>()[(b * bins + k) * 2 + 1] = static_cast<float>(im);
    }
  auto out = test::run_op("DFT", {spectrum},
                          {{"onesided", int64_t{1}}, {"inverse", int64_t{1}}, {"axis", int64_t{1}}});
  test::expect_close(out[0], {2, n, 1}, test::to_doubles(signal), 1e-5, 1e-4);
}

TEST(NewerOpsets, BadInputs) {
  Tensor x = test::random_tensor({2, 3}, 7);
  test::expect_error<InvalidModel>(
      [&] {
        test::run_op("Pad", {x, test::constant(Tensor::from_vector<int64_t>({4}, {0, 1, 0, 1}))},
                     {{"mode", std::string("spiral")}});
      },
      "Pad");
  test::expect_error<InvalidModel>(
      [&] {
        test::run_op("Resize",
                     {x, test::omitted(), test::omitted(),
                      test::constant(Tensor::from_vector<int64_t>({2}, {4, 4}))},
                     {{"keep_aspect_ratio_policy", std::string("sideways")}});
      },
      "Resize");
}

}  // namespace
}  // namespace lumen
