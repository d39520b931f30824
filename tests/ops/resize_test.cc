// Tests of Resize (float32): cases worked out by hand from the ONNX formulas, and random cases
// against a naive double-precision reference that sums all 2^rank corners per output element.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "ops/op_test_util.h"

namespace lumen::test {
namespace {

Tensor floats(const Shape& shape, std::vector<float> v) {
  return Tensor::from_vector(shape, v);
}
Tensor ints(std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
}
Tensor scales(std::vector<float> v) {
  return Tensor::from_vector<float>(Shape{static_cast<int64_t>(v.size())}, v);
}

Tensor resize_scales(const Tensor& x, std::vector<float> s, const Attributes& attrs = {}) {
  return run_op("Resize", {x, omitted(), constant(scales(s))}, attrs)[0];
}
Tensor resize_sizes(const Tensor& x, std::vector<int64_t> s, const Attributes& attrs = {}) {
  return run_op("Resize", {x, omitted(), omitted(), constant(ints(s))}, attrs)[0];
}

// --- Known cases, derived by hand ---

TEST(Resize, NearestUpsampleHalfPixel) {
  // W scale 3, half_pixel: x_orig = (x + 0.5) / 3 - 0.5 = -0.33, 0, 0.33, 0.67, 1, 1.33.
  Tensor x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  expect_close(resize_scales(x, {1, 1, 2, 3}), {1, 1, 4, 6},
               {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
}

TEST(Resize, NearestSizesTiesRoundDown) {
  // H: 2 -> 7, scale 3.5, row 3 maps to exactly 0.5 and rounds to 0 (round_prefer_floor).
  Tensor x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  std::vector<double> want;
  for (int h = 0; h < 7; ++h)
    for (int w = 0; w < 8; ++w) want.push_back((h < 4 ? 1 : 3) + (w < 4 ? 0 : 1));
  expect_close(resize_sizes(x, {1, 1, 7, 8}), {1, 1, 7, 8}, want);
}

TEST(Resize, NearestDownsample) {
  // x_orig = (x + 0.5) / 0.6 - 0.5: H row 0 -> 0.33 -> 0; W cols -> 0.33, 2.0 -> 0, 2.
  Tensor x = floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_close(resize_scales(x, {1, 1, 0.6f, 0.6f}), {1, 1, 1, 2}, {1, 3});
}

TEST(Resize, NearestModesAsymmetric) {
  Tensor x = floats({4}, {10, 20, 30, 40});
  auto run = [&](float s, const char* nearest) {
    return resize_scales(
        x, {s}, {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", nearest}});
  };
  // Scale 2: x_orig = 0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5 (ties).
  expect_close(run(2, "round_prefer_floor"), {8}, {10, 10, 20, 20, 30, 30, 40, 40});
  expect_close(run(2, "round_prefer_ceil"), {8}, {10, 20, 20, 30, 30, 40, 40, 40});
  expect_close(run(2, "floor"), {8}, {10, 10, 20, 20, 30, 30, 40, 40});
  expect_close(run(2, "ceil"), {8}, {10, 20, 20, 30, 30, 40, 40, 40});
  // Scale 1.5: x_orig = 0, 0.67, 1.33, 2, 2.67, 3.33.
  expect_close(run(1.5f, "round_prefer_floor"), {6}, {10, 20, 20, 30, 40, 40});
  expect_close(run(1.5f, "round_prefer_ceil"), {6}, {10, 20, 20, 30, 40, 40});
  expect_close(run(1.5f, "floor"), {6}, {10, 10, 20, 30, 30, 40});
  expect_close(run(1.5f, "ceil"), {6}, {10, 20, 30, 30, 40, 40});
}

TEST(Resize, BilinearHalfPixel) {
  // x_orig = -0.25 (clamped), 0.25, 0.75, 1.25 (clamped) on both axes.
  Tensor x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  expect_close(
      resize_scales(x, {1, 1, 2, 2}, {{"mode", "linear"}}), {1, 1, 4, 4},
      {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0});
}

TEST(Resize, BilinearAlignCorners) {
  // x_orig = x * (2 - 1) / (4 - 1) = x / 3.
  Tensor x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  double t = 1.0 / 3;
  expect_close(
      resize_scales(x, {1, 1, 2, 2},
                    {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}),
      {1, 1, 4, 4},
      {1, 1 + t, 1 + 2 * t, 2, 1 + 2 * t, 2, 2 + t, 2 + 2 * t, 2 + t, 2 + 2 * t, 3, 3 + t, 3, 3 + t,
       3 + 2 * t, 4});
}

TEST(Resize, BilinearDownsample) {
  // H: 0.33 between rows 0 and 1; W: 0.33 between cols 0 and 1, then exactly col 2.
  Tensor x = floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_close(resize_scales(x, {1, 1, 0.6f, 0.6f}, {{"mode", "linear"}}), {1, 1, 1, 2},
               {2.6666667, 4.3333333});
}

TEST(Resize, LinearToSizeOne) {
  // pytorch_half_pixel maps a length-1 output to 0; half_pixel maps it to 0.5 / 0.25 - 0.5 = 1.5.
  Tensor x = floats({1, 4}, {1, 2, 3, 4});
  Attributes pt = {{"mode", "linear"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}};
  expect_close(resize_sizes(x, {1, 1}, pt), {1, 1}, {1});
  expect_close(resize_sizes(x, {1, 1}, {{"mode", "linear"}}), {1, 1}, {2.5});
}

TEST(Resize, Linear1DAsymmetric) {
  Tensor x = floats({2}, {0, 10});
  expect_close(
      resize_scales(x, {2}, {{"mode", "linear"}, {"coordinate_transformation_mode", "asymmetric"}}),
      {4}, {0, 5, 10, 10});
}

// --- Random cases against the naive reference ---

double source_coord(const std::string& coord, int64_t x, double scale, int64_t in, int64_t out) {
  if (coord == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (coord == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (coord == "align_corners") {  // ONNX: the resized length is scale * in, not rounded
    double resized = scale * double(in);
    return out == 1 || resized <= 1.0 ? 0.0 : x * double(in - 1) / (resized - 1.0);
  }
  return x / scale;  // asymmetric
}

int64_t nearest_of(const std::string& mode, double c) {
  if (mode == "round_prefer_floor") return static_cast<int64_t>(std::ceil(c - 0.5));
  if (mode == "round_prefer_ceil") return static_cast<int64_t>(std::floor(c + 0.5));
  if (mode == "floor") return static_cast<int64_t>(std::floor(c));
  return static_cast<int64_t>(std::ceil(c));
}

struct Params {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
};

std::vector<double> resize_ref(const Tensor& x, const Shape& out, const std::vector<double>& sc,
                               const Params& p) {
  const Shape& in = x.shape();
  int r = in.rank();
  std::vector<double> xv = to_doubles(x), y;
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> o = unravel(i, out);
    std::vector<std::array<int64_t, 2>> idx(r);
    std::vector<std::array<double, 2>> wt(r);
    for (int a = 0; a < r; ++a) {
      int64_t d = in.dims()[a];
      double c = source_coord(p.coord, o[a], sc[a], d, out.dims()[a]);
      auto clampi = [&](int64_t v) { return std::min<int64_t>(std::max<int64_t>(v, 0), d - 1); };
      if (p.mode == "nearest") {
        idx[a] = {clampi(nearest_of(p.nearest, c)), 0};
        wt[a] = {1.0, 0.0};
      } else {
        double f = std::floor(c);
        idx[a] = {clampi(static_cast<int64_t>(f)), clampi(static_cast<int64_t>(f) + 1)};
        wt[a] = {1.0 - (c - f), c - f};
      }
    }
    double sum = 0;
    for (int64_t corner = 0; corner < (int64_t{1} << r); ++corner) {
      double w = 1;
      std::vector<int64_t> src(r);
      for (int a = 0; a < r; ++a) {
        int bit = (corner >> a) & 1;
        w *= wt[a][bit];
        src[a] = idx[a][bit];
      }
      if (w != 0) sum += w * xv[ravel(src, in)];
    }
    y.push_back(sum);
  }
  return y;
}

Attributes attrs_of(const Params& p) {
  return {
      {"mode", p.mode}, {"coordinate_transformation_mode", p.coord}, {"nearest_mode", p.nearest}};
}

void check_scales(const Shape& in, const std::vector<float>& s, const Params& p, uint64_t seed) {
  SCOPED_TRACE(in.to_string() + " scales " + p.mode + " " + p.coord + " " + p.nearest);
  Tensor x = random_tensor(in, seed);
  std::vector<int64_t> od;
  std::vector<double> sc;
  for (int a = 0; a < in.rank(); ++a) {
    sc.push_back(s[a]);
    od.push_back(static_cast<int64_t>(std::floor(in.dims()[a] * static_cast<double>(s[a]))));
  }
  Shape out(od);
  expect_close(resize_scales(x, s, attrs_of(p)), out, resize_ref(x, out, sc, p));
}

void check_sizes(const Shape& in, const std::vector<int64_t>& s, const Params& p, uint64_t seed) {
  SCOPED_TRACE(in.to_string() + " -> " + Shape(s).to_string() + " " + p.mode + " " + p.coord + " " +
               p.nearest);
  Tensor x = random_tensor(in, seed);
  std::vector<double> sc;
  for (int a = 0; a < in.rank(); ++a) sc.push_back(double(s[a]) / double(in.dims()[a]));
  Shape out(s);
  expect_close(resize_sizes(x, s, attrs_of(p)), out, resize_ref(x, out, sc, p));
}

const char* const kCoords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
const char* const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

TEST(Resize, NearestRandom) {
  uint64_t seed = 7000;
  for (const char* coord : kCoords)
    for (const char* nearest : kNearest) {
      Params p{"nearest", coord, nearest};
      check_scales({2, 3, 5, 7}, {1, 1, 2, 2}, p, seed++);
      check_scales({2, 3, 5, 7}, {1, 1, 1.5f, 0.6f}, p, seed++);
      check_scales({1, 2, 6, 4}, {1, 1, 0.5f, 3.2f}, p, seed++);
      check_sizes({2, 3, 5, 7}, {2, 3, 8, 4}, p, seed++);
      check_sizes({2, 3, 5, 7}, {2, 3, 1, 1}, p, seed++);
      check_sizes({3, 4, 6}, {5, 2, 9}, p, seed++);
      check_scales({9}, {1.7f}, p, seed++);
    }
}

TEST(Resize, LinearRandom) {
  uint64_t seed = 7500;
  for (const char* coord : kCoords) {
    Params p{"linear", coord, "round_prefer_floor"};
    check_scales({2, 3, 5, 7}, {1, 1, 2, 2}, p, seed++);  // bilinear NCHW
    check_scales({2, 3, 5, 7}, {1, 1, 1.5f, 0.6f}, p, seed++);
    check_scales({1, 2, 6, 4}, {1, 1, 0.5f, 3.2f}, p, seed++);
    check_sizes({2, 3, 5, 7}, {2, 3, 11, 13}, p, seed++);
    check_sizes({2, 3, 5, 7}, {2, 3, 1, 1}, p, seed++);
    check_sizes({2, 3, 5, 7}, {2, 3, 5, 7}, p, seed++);               // same size
    check_sizes({2, 3, 1, 7}, {2, 3, 4, 3}, p, seed++);               // from a size-1 axis
    check_sizes({4, 5, 6}, {7, 3, 9}, p, seed++);                     // trilinear over every axis
    check_scales({9}, {1.7f}, p, seed++);                             // 1-D
    check_scales({1, 2, 3, 4, 5}, {1, 1, 2, 0.7f, 1.5f}, p, seed++);  // 5-D, 3 axes resized
    check_scales({2, 3, 4, 5}, {2, 1, 1, 1}, p, seed++);              // only the outermost axis
  }
}

TEST(Resize, LargeBilinearRunsInParallel) {
  check_scales({2, 16, 64, 64}, {1, 1, 2, 2}, {"linear", "half_pixel", "round_prefer_floor"}, 7900);
  check_sizes({2, 16, 64, 64}, {2, 16, 37, 91}, {"nearest", "asymmetric", "floor"}, 7901);
}

TEST(Resize, AxesAttribute) {
  Tensor x = random_tensor({2, 3, 5, 7}, 8000);
  Params p{"linear", "half_pixel", "round_prefer_floor"};
  Attributes a = attrs_of(p);
  a["axes"] = std::vector<int64_t>{2, 3};
  Tensor y = run_op("Resize", {x, omitted(), constant(scales({2, 1.5f}))}, a)[0];
  expect_close(y, {2, 3, 10, 10}, resize_ref(x, {2, 3, 10, 10}, {1, 1, 2, 1.5}, p));
  a["axes"] = std::vector<int64_t>{-1};
  y = run_op("Resize", {x, omitted(), omitted(), constant(ints({3}))}, a)[0];
  expect_close(y, {2, 3, 5, 3}, resize_ref(x, {2, 3, 5, 3}, {1, 1, 1, 3.0 / 7}, p));
}

TEST(Resize, EmptyRoiAndScalesPlaceholders) {
  // Opset 11 style: roi and scales given as empty tensors next to sizes.
  Tensor x = random_tensor({1, 2, 4, 4}, 8100);
  Tensor empty = Tensor::empty({0}, DType::kFloat32);
  Tensor y = run_op("Resize", {x, constant(empty), constant(empty), constant(ints({1, 2, 6, 3}))},
                    {{"mode", "linear"}})[0];
  Params p{"linear", "half_pixel", "round_prefer_floor"};
  expect_close(y, {1, 2, 6, 3}, resize_ref(x, {1, 2, 6, 3}, {1, 1, 1.5, 0.75}, p));
  // An output with an empty axis.
  y = resize_scales(x, {1, 1, 0.2f, 1});
  EXPECT_EQ(y.shape(), (Shape{1, 2, 0, 4}));
}

TEST(Resize, BadInput) {
  Tensor x = random_tensor({1, 1, 4, 4}, 8200);
  EXPECT_THROW(run_op("Resize",
                      {x, omitted(), constant(scales({1, 1, 2, 2})), constant(ints({1, 1, 8, 8}))}),
               InvalidModel);                                    // both scales and sizes
  EXPECT_THROW(run_op("Resize", {x, omitted()}), InvalidModel);  // neither
  EXPECT_THROW(resize_scales(x, {1, 1, 2, 2}, {{"mode", "area"}}), InvalidModel);
  // tf_crop_and_resize without a roi.
  EXPECT_THROW(
      resize_scales(x, {1, 1, 2, 2}, {{"coordinate_transformation_mode", "tf_crop_and_resize"}}),
      InvalidModel);
  EXPECT_THROW(resize_scales(x, {1, 1, 2, 2}, {{"nearest_mode", "nearest"}}), InvalidModel);
  EXPECT_THROW(resize_scales(x, {1, 1, 2}), ShapeError);
  EXPECT_THROW(resize_scales(x, {1, 1, 0, 2}), InvalidModel);
  EXPECT_THROW(resize_sizes(x, {1, 1, 8}), ShapeError);
  EXPECT_THROW(run_op("Resize", {x, omitted(), scales({1, 1, 2, 2})}), ShapeError);  // unknown
  EXPECT_THROW(resize_scales(random_ints({1, 1, 2, 2}, 8201, 0, 9), {1, 1, 2, 2}), UnsupportedOp);
}

}  // namespace
}  // namespace lumen::test
