// Tests of Shrink, MeanVarianceNormalization, Det and ReverseSequence against naive
// double-precision references on random data, and their bad-input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::expect_close;
using test::expect_equal;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

using test::expect_error;

double ref_shrink(double v, double lambd, double bias) {
  return v < -lambd ? v + bias : v > lambd ? v - bias : 0.0;
}

TEST(Shrink, SoftHardAndIntegers) {
  Tensor x = random_tensor({4, 9}, 1, -3.0f, 3.0f);
  std::vector<double> xv = to_doubles(x), want(xv.size());
  for (auto [lambd, bias] : {std::pair{0.5f, 0.0f}, std::pair{1.5f, 1.5f}, std::pair{0.7f, 0.2f}}) {
    for (size_t i = 0; i < xv.size(); ++i) want[i] = ref_shrink(xv[i], lambd, bias);
    expect_close(run_op("Shrink", {x}, {{"lambd", lambd}, {"bias", bias}})[0], x.shape(), want);
  }
  Tensor xi = random_ints({20}, 2, -10, 10, DType::kInt32);
  xv = to_doubles(xi);
  want.resize(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) want[i] = ref_shrink(xv[i], 3.0, 2.0);
  expect_equal(run_op("Shrink", {xi}, {{"lambd", 3.0f}, {"bias", 2.0f}})[0], DType::kInt32,
               xi.shape(), want);
}

TEST(MeanVarianceNormalization, DefaultAndCustomAxes) {
  Tensor x = random_tensor({3, 4, 2, 5}, 11, -2.0f, 5.0f);
  std::vector<double> xv = to_doubles(x);
  const Shape& s = x.shape();
  for (const std::vector<int64_t>& axes :
       {std::vector<int64_t>{0, 2, 3}, std::vector<int64_t>{1, -1}, std::vector<int64_t>{2}}) {
    std::vector<bool> red(4, false);
    for (int64_t a : axes) red[(a + 4) % 4] = true;
    // The group of an element: its index with the reduced coordinates zeroed.
    auto group_of = [&](int64_t flat) {
      std::vector<int64_t> idx = test::unravel(flat, s);
      for (int d = 0; d < 4; ++d)
        if (red[d]) idx[d] = 0;
      return test::ravel(idx, s);
    };
    std::vector<double> sum(xv.size(), 0), cnt(xv.size(), 0), sq(xv.size(), 0);
    for (size_t i = 0; i < xv.size(); ++i) {
      sum[group_of(i)] += xv[i];
      cnt[group_of(i)] += 1;
    }
    for (size_t i = 0; i < xv.size(); ++i) {
      const int64_t g = group_of(i);
      const double d = xv[i] - sum[g] / cnt[g];
      sq[g] += d * d;
    }
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      const int64_t g = group_of(i);
      want[i] = (xv[i] - sum[g] / cnt[g]) / (std::sqrt(sq[g] / cnt[g]) + 1e-9);
    }
    Attributes attrs;
    if (axes.size() != 3) attrs["axes"] = axes;
    expect_close(run_op("MeanVarianceNormalization", {x}, attrs)[0], s, want, 1e-5, 1e-4);
  }
}

// Determinant by cofactor expansion (independent of the kernel's elimination).
double ref_det(const std::vector<double>& a, int64_t m) {
  if (m == 1) return a[0];
  double det = 0;
  for (int64_t c = 0; c < m; ++c) {
    std::vector<double> minor;
    for (int64_t r = 1; r < m; ++r)
      for (int64_t k = 0; k < m; ++k)
        if (k != c) minor.push_back(a[r * m + k]);
    det += (c % 2 ? -1.0 : 1.0) * a[c] * ref_det(minor, m - 1);
  }
  return det;
}

TEST(Det, BatchedSizes) {
  for (int64_t m : {1, 2, 3, 5}) {
    Tensor x = random_tensor({2, 3, m, m}, 20 + m, -2.0f, 2.0f);
    std::vector<double> xv = to_doubles(x), want;
    for (int64_t b = 0; b < 6; ++b)
      want.push_back(
          ref_det(std::vector<double>(xv.begin() + b * m * m, xv.begin() + (b + 1) * m * m), m));
    expect_close(run_op("Det", {x})[0], Shape{2, 3}, want, 1e-5, 1e-4);
  }
  // A singular matrix (two equal rows) and a plain 2-D input.
  Tensor sing = Tensor::from_vector<float>({3, 3}, {1, 2, 3, 1, 2, 3, 0.5f, -1, 4});
  expect_close(run_op("Det", {sing})[0], Shape{}, {0.0}, 1e-6);
}

TEST(ReverseSequence, BatchAndTimeAxesAnyDtype) {
  for (int64_t batch_axis : {0, 1}) {
    const int64_t time_axis = 1 - batch_axis;
    Tensor x = random_tensor({5, 4, 3}, 31 + batch_axis);
    const int64_t batch = x.shape()[static_cast<int>(batch_axis)];
    const int64_t time = x.shape()[static_cast<int>(time_axis)];
    Tensor lens = random_ints({batch}, 33 + batch_axis, 0, time);
    std::vector<double> xv = to_doubles(x), lv = to_doubles(lens), want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      std::vector<int64_t> idx = test::unravel(i, x.shape());
      const int64_t b = idx[batch_axis], t = idx[time_axis], l = static_cast<int64_t>(lv[b]);
      if (t < l) idx[time_axis] = l - 1 - t;
      want[i] = xv[test::ravel(idx, x.shape())];
    }
    Attributes attrs = {{"batch_axis", batch_axis}, {"time_axis", time_axis}};
    expect_close(run_op("ReverseSequence", {x, lens}, attrs)[0], x.shape(), want, 0, 0);
    Tensor xi = random_ints({5, 4, 3}, 35, -100, 100, DType::kInt8);
    std::vector<double> xiv = to_doubles(xi);
    for (size_t i = 0; i < xiv.size(); ++i) {
      std::vector<int64_t> idx = test::unravel(i, x.shape());
      const int64_t b = idx[batch_axis], t = idx[time_axis], l = static_cast<int64_t>(lv[b]);
      if (t < l) idx[time_axis] = l - 1 - t;
      want[i] = xiv[test::ravel(idx, x.shape())];
    }
    expect_equal(run_op("ReverseSequence", {xi, lens}, attrs)[0], DType::kInt8, x.shape(), want);
  }
}

TEST(MiscOps, BadInputNamesTheNode) {
  expect_error<InvalidModel>(
      [] {
        run_op("Shrink", {random_tensor({3}, 41)}, {{"lambd", -1.0f}});
      },
      "Shrink");
  expect_error<ShapeError>(
      [] {
        run_op("MeanVarianceNormalization", {random_tensor({2, 3}, 42)});
      },
      "MeanVarianceNormalization");
  expect_error<ShapeError>([] { run_op("Det", {random_tensor({2, 3, 4}, 43)}); }, "Det");
  expect_error<InvalidModel>(
      [] {
        run_op("ReverseSequence", {random_tensor({3, 4}, 44), random_ints({4}, 45, 0, 3)},
               {{"batch_axis", int64_t{1}}, {"time_axis", int64_t{1}}});
      },
      "ReverseSequence");
  expect_error<ShapeError>(
      [] {
        run_op("ReverseSequence", {random_tensor({3, 4}, 44), random_ints({3}, 45, 0, 3)});
      },
      "ReverseSequence");
  // A sequence length longer than the time axis is caught when the kernel runs.
  expect_error<InvalidArgument>(
      [] {
        run_op("ReverseSequence",
               {random_tensor({3, 4}, 44), Tensor::from_vector<int64_t>({4}, {1, 2, 9, 0})});
      },
      "ReverseSequence");
}

}  // namespace
}  // namespace lumen
