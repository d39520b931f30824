// Tests of Resize's cubic mode (cubic_coeff_a, exclude_outside) and of the tf_crop_and_resize
// coordinate mode (roi, extrapolation_value), against a naive double-precision reference that
// sums every combination of per-axis taps for each output element.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "ops/op_test_util.h"

namespace lumen::test {
namespace {

Tensor floats1d(std::vector<float> v) {
  return Tensor::from_vector<float>(Shape{static_cast<int64_t>(v.size())}, v);
}
Tensor ints1d(std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
}

struct CubicParams {
  std::string mode = "cubic";
  std::string coord = "half_pixel";
  double a = -0.75;
  bool exclude = false;
  std::vector<float> roi;  // tf_crop_and_resize: starts then ends, per axis
  double extrapolation = 0.0;
};

// Keys' kernel W(d) for |d| < 2.
double keys(double d, double a) {
  d = std::abs(d);
  if (d <= 1) return (a + 2) * d * d * d - (a + 3) * d * d + 1;
  if (d < 2) return a * d * d * d - 5 * a * d * d + 8 * a * d - 4 * a;
  return 0;
}

// The (index, weight) taps of one output coordinate; `outside` for tf_crop_and_resize misses.
std::vector<std::pair<int64_t, double>> taps_of(const CubicParams& p, int axis, int rank, int64_t o,
                                                double scale, int64_t in, int64_t out,
                                                bool* outside) {
  double x;
  if (p.coord == "tf_crop_and_resize") {
    double s = p.roi[axis], e = p.roi[axis + rank];
    x = out == 1 ? (s + e) / 2 * (in - 1)
                 : s * (in - 1) + o * (e - s) * (in - 1) / (scale * in - 1);
    if (x < 0 || x > in - 1) *outside = true;
  } else if (p.coord == "align_corners") {
    x = out == 1 ? 0 : o * double(in - 1) / (scale * in - 1);
  } else if (p.coord == "asymmetric") {
    x = o / scale;
  } else {
    x = (o + 0.5) / scale - 0.5;
  }
  auto clampi = [in](int64_t i) { return std::min<int64_t>(std::max<int64_t>(i, 0), in - 1); };
  int64_t f = static_cast<int64_t>(std::floor(x));
  std::vector<std::pair<int64_t, double>> taps;
  if (p.mode == "linear") {
    taps = {{clampi(f), 1 - (x - f)}, {clampi(f + 1), x - f}};
    return taps;
  }
  double sum = 0;
  for (int64_t i = f - 1; i <= f + 2; ++i) {
    double w = keys(x - i, p.a);
    if (p.exclude && (i < 0 || i >= in)) w = 0;
    taps.push_back({clampi(i), w});
    sum += w;
  }
  if (p.exclude)
    for (auto& t : taps) t.second /= sum;
  return taps;
}

std::vector<double> cubic_ref(const Tensor& x, const Shape& out, const std::vector<double>& sc,
                              const CubicParams& p) {
  const Shape& in = x.shape();
  int r = in.rank();
  std::vector<double> xv = to_doubles(x), y;
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> o = unravel(i, out);
    bool outside = false;
    std::vector<std::vector<std::pair<int64_t, double>>> taps(r);
    for (int a = 0; a < r; ++a)
      taps[a] = taps_of(p, a, r, o[a], sc[a], in.dims()[a], out.dims()[a], &outside);
    if (outside) {
      y.push_back(p.extrapolation);
      continue;
    }
    // Every combination of one tap per axis.
    double sum = 0;
    std::vector<size_t> pick(r, 0);
    while (true) {
      double w = 1;
      std::vector<int64_t> src(r);
      for (int a = 0; a < r; ++a) {
        w *= taps[a][pick[a]].second;
        src[a] = taps[a][pick[a]].first;
      }
      sum += w * xv[ravel(src, in)];
      int a = r - 1;
      while (a >= 0 && ++pick[a] == taps[a].size()) pick[a--] = 0;
      if (a < 0) break;
    }
    y.push_back(sum);
  }
  return y;
}

Attributes attrs_of(const CubicParams& p) {
  Attributes at = {{"mode", p.mode},
                   {"coordinate_transformation_mode", p.coord},
                   {"cubic_coeff_a", static_cast<float>(p.a)},
                   {"exclude_outside", int64_t{p.exclude ? 1 : 0}}};
  if (!p.roi.empty()) at["extrapolation_value"] = static_cast<float>(p.extrapolation);
  return at;
}

OpInput roi_input(const CubicParams& p) {
  return p.roi.empty() ? omitted() : constant(floats1d(p.roi));
}

void check_scales(const Shape& in, const std::vector<float>& s, const CubicParams& p,
                  uint64_t seed) {
  SCOPED_TRACE(in.to_string() + " scales " + p.mode + " " + p.coord + " a=" + std::to_string(p.a) +
               (p.exclude ? " exclude" : ""));
  Tensor x = random_tensor(in, seed);
  std::vector<int64_t> od;
  std::vector<double> sc;
  for (int a = 0; a < in.rank(); ++a) {
    sc.push_back(s[a]);
    od.push_back(static_cast<int64_t>(std::floor(in.dims()[a] * static_cast<double>(s[a]))));
  }
  Shape out(od);
  Tensor y = run_op("Resize", {x, roi_input(p), constant(floats1d(s))}, attrs_of(p))[0];
  expect_close(y, out, cubic_ref(x, out, sc, p));
}

void check_sizes(const Shape& in, const std::vector<int64_t>& s, const CubicParams& p,
                 uint64_t seed) {
  SCOPED_TRACE(in.to_string() + " -> " + Shape(s).to_string() + " " + p.mode + " " + p.coord);
  Tensor x = random_tensor(in, seed);
  std::vector<double> sc;
  for (int a = 0; a < in.rank(); ++a) sc.push_back(double(s[a]) / double(in.dims()[a]));
  Shape out(s);
  Tensor y = run_op("Resize", {x, roi_input(p), omitted(), constant(ints1d(s))}, attrs_of(p))[0];
  expect_close(y, out, cubic_ref(x, out, sc, p));
}

TEST(ResizeCubic, Random) {
  uint64_t seed = 9000;
  for (const char* coord : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"})
    for (double a : {-0.75, -0.5})
      for (bool exclude : {false, true}) {
        CubicParams p{"cubic", coord, a, exclude};
        check_scales({2, 3, 5, 7}, {1, 1, 2, 2}, p, seed++);
        check_scales({1, 2, 8, 8}, {1, 1, 0.8f, 0.6f}, p, seed++);
        check_sizes({2, 2, 4, 6}, {2, 2, 9, 3}, p, seed++);
        check_sizes({3, 4, 5}, {5, 2, 9}, p, seed++);  // every axis resized
        check_scales({9}, {1.7f}, p, seed++);
        check_sizes({2, 3, 1, 7}, {2, 3, 4, 5}, p, seed++);  // from a size-1 axis
      }
}

TEST(ResizeCubic, LargeRunsInParallel) {
  check_scales({2, 8, 48, 64}, {1, 1, 2, 1.5f}, CubicParams{}, 9500);
}

TEST(ResizeCubic, KnownValue) {
  // 1-D, asymmetric, scale 2: output 1 reads x = 0.5, the taps -1..2 weigh (a = -0.75)
  // -0.09375, 0.59375, 0.59375, -0.09375 over values 1 (clamped), 1, 2, 3.
  Tensor x = floats1d({1, 2, 3, 4});
  Tensor y = run_op("Resize", {x, omitted(), constant(floats1d({2}))},
                    {{"mode", "cubic"}, {"coordinate_transformation_mode", "asymmetric"}})[0];
  double v = -0.09375 * 1 + 0.59375 * 1 + 0.59375 * 2 - 0.09375 * 3;
  EXPECT_NEAR(to_doubles(y)[0], 1.0, 1e-6);
  EXPECT_NEAR(to_doubles(y)[1], v, 1e-6);
}

TEST(ResizeCropAndResize, Random) {
  uint64_t seed = 9600;
  for (const char* mode : {"linear", "cubic"}) {
    CubicParams p{mode, "tf_crop_and_resize"};
    p.roi = {0, 0, 0.4f, 0.6f, 1, 1, 0.6f, 0.8f};
    check_sizes({1, 1, 4, 4}, {1, 1, 3, 3}, p, seed++);
    check_sizes({2, 3, 6, 5}, {2, 3, 7, 4}, p, seed++);
    // A roi reaching outside the input: those outputs take the extrapolation value.
    p.roi = {0, 0, -0.3f, 0.2f, 1, 1, 1.4f, 1.2f};
    p.extrapolation = 10.0;
    check_sizes({2, 2, 5, 6}, {2, 2, 8, 7}, p, seed++);
    check_scales({2, 2, 5, 6}, {1, 1, 1.6f, 1.5f}, p, seed++);
    check_sizes({2, 2, 5, 6}, {2, 2, 1, 1}, p, seed++);
  }
}

TEST(ResizeCropAndResize, RoiWithAxes) {
  Tensor x = random_tensor({2, 3, 5, 6}, 9700);
  CubicParams p{"linear", "tf_crop_and_resize"};
  p.roi = {0, 0, 0.1f, -0.2f, 1, 1, 0.7f, 0.9f};
  p.extrapolation = -3.0;
  Attributes at = attrs_of(p);
  at["axes"] = std::vector<int64_t>{2, 3};
  Tensor y = run_op(
      "Resize",
      {x, constant(floats1d({0.1f, -0.2f, 0.7f, 0.9f})), omitted(), constant(ints1d({4, 8}))},
      at)[0];
  std::vector<double> sc = {1, 1, 4.0 / 5, 8.0 / 6};
  expect_close(y, {2, 3, 4, 8}, cubic_ref(x, {2, 3, 4, 8}, sc, p));
}

TEST(ResizeCropAndResize, BadRoi) {
  Tensor x = random_tensor({1, 1, 4, 4}, 9800);
  Attributes at = {{"coordinate_transformation_mode", "tf_crop_and_resize"}};
  // Two values for a rank-4 input.
  try {
    run_op("Resize", {x, constant(floats1d({0, 1})), constant(floats1d({1, 1, 2, 2}))}, at);
    FAIL() << "expected InvalidModel";
  } catch (const InvalidModel& e) {
    EXPECT_NE(std::string(e.what()).find("Resize"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("roi"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lumen::test
