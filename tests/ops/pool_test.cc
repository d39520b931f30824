// Tests of MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool against naive double loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::expect_close;
using test::random_tensor;
using test::ravel;
using test::run_op;
using test::unravel;

// Window geometry the reference uses, resolved by hand in each test.
struct Win {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end;
};

Win win(std::vector<int64_t> kernel, std::vector<int64_t> strides = {},
        std::vector<int64_t> pad_begin = {}, std::vector<int64_t> pad_end = {},
        std::vector<int64_t> dilations = {}) {
  size_t n = kernel.size();
  Win w{kernel, strides, dilations, pad_begin, pad_end};
  if (w.strides.empty()) w.strides.assign(n, 1);
  if (w.dilations.empty()) w.dilations.assign(n, 1);
  if (w.pad_begin.empty()) w.pad_begin.assign(n, 0);
  if (w.pad_end.empty()) w.pad_end.assign(n, 0);
  return w;
}

// Max or average over each window. Positions outside the input are skipped; with
// count_include_pad they still count toward the divisor when they lie within the explicit pads
// (never the ceil_mode overhang past the end padding).
std::vector<double> ref_pool(const Tensor& x, const Win& w, const Shape& out, bool is_max,
                             bool include_pad = false) {
  std::vector<double> xs = test::to_doubles(x), y(out.numel());
  int spatial = x.rank() - 2;
  Shape kshape(w.kernel);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> o = unravel(i, out);
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    int64_t count = 0;
    for (int64_t k = 0; k < kshape.numel(); ++k) {
      std::vector<int64_t> kk = unravel(k, kshape);
      std::vector<int64_t> xi = {o[0], o[1]};
      bool inside = true, in_pads = true;
      for (int a = 0; a < spatial; ++a) {
        int64_t n = x.shape()[2 + a];
        int64_t pos = o[2 + a] * w.strides[a] - w.pad_begin[a] + kk[a] * w.dilations[a];
        inside = inside && pos >= 0 && pos < n;
        in_pads = in_pads && pos >= -w.pad_begin[a] && pos < n + w.pad_end[a];
        xi.push_back(pos);
      }
      if (include_pad ? in_pads : inside) ++count;
      if (!inside) continue;
      double v = xs[ravel(xi, x.shape())];
      acc = is_max ? std::max(acc, v) : acc + v;
    }
    y[i] = is_max ? acc : acc / static_cast<double>(count);
  }
  return y;
}

void check_max(const Shape& xs, const Attributes& attrs, const Win& w, const Shape& out,
               uint64_t seed) {
  Tensor x = random_tensor(xs, seed);
  expect_close(run_op("MaxPool", {x}, attrs)[0], out, ref_pool(x, w, out, true));
}

void check_avg(const Shape& xs, const Attributes& attrs, const Win& w, const Shape& out,
               uint64_t seed) {
  Tensor x = random_tensor(xs, seed);
  bool include = attrs.count("count_include_pad") && attrs.at("count_include_pad").as_int();
  expect_close(run_op("AveragePool", {x}, attrs)[0], out, ref_pool(x, w, out, false, include));
}

TEST(MaxPool, Basic) {
  check_max({1, 3, 6, 6}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}}, win({2, 2}, {2, 2}),
            {1, 3, 3, 3}, 1);
  check_max({2, 4, 7, 7}, {{"kernel_shape", {3, 3}}}, win({3, 3}), {2, 4, 5, 5}, 2);
  // Stride 3 (the generic-stride path) and a non-square window.
  check_max({1, 2, 10, 11}, {{"kernel_shape", {2, 3}}, {"strides", {2, 3}}}, win({2, 3}, {2, 3}),
            {1, 2, 5, 3}, 3);
}

TEST(MaxPool, PadsAndCeilMode) {
  // padded 10: floor (10 - 3) / 2 + 1 = 4, ceil 5.
  Attributes a = {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}};
  check_max({1, 2, 8, 8}, a, win({3, 3}, {2, 2}, {1, 1}, {1, 1}), {1, 2, 4, 4}, 4);
  a["ceil_mode"] = 1;
  check_max({1, 2, 8, 8}, a, win({3, 3}, {2, 2}, {1, 1}, {1, 1}), {1, 2, 5, 5}, 5);
  // ceil would give 3 windows along W, but the third would start in the right padding.
  Attributes b = {
      {"kernel_shape", {1, 2}}, {"strides", {1, 3}}, {"pads", {0, 0, 0, 1}}, {"ceil_mode", 1}};
  check_max({1, 1, 3, 5}, b, win({1, 2}, {1, 3}, {0, 0}, {0, 1}), {1, 1, 3, 2}, 6);
}

TEST(MaxPool, Dilation) {
  check_max({1, 2, 9, 9}, {{"kernel_shape", {3, 3}}, {"dilations", {2, 2}}},
            win({3, 3}, {}, {}, {}, {2, 2}), {1, 2, 5, 5}, 7);
  check_max({1, 2, 10, 9},
            {{"kernel_shape", {2, 2}},
             {"dilations", {3, 2}},
             {"strides", {2, 1}},
             {"pads", {1, 1, 1, 0}},
             {"ceil_mode", 1}},
            win({2, 2}, {2, 1}, {1, 1}, {1, 0}, {3, 2}), {1, 2, 5, 8}, 8);
}

TEST(MaxPool, AutoPad) {
  // ceil(7 / 2) = 4; total (4 - 1) * 2 + 3 - 7 = 2 -> 1 + 1; kernel 2: total 1.
  check_max({1, 2, 7, 7},
            {{"kernel_shape", {3, 2}}, {"strides", {2, 2}}, {"auto_pad", "SAME_UPPER"}},
            win({3, 2}, {2, 2}, {1, 0}, {1, 1}), {1, 2, 4, 4}, 9);
  check_max({1, 2, 7, 7},
            {{"kernel_shape", {3, 2}}, {"strides", {2, 2}}, {"auto_pad", "SAME_LOWER"}},
            win({3, 2}, {2, 2}, {1, 1}, {1, 0}), {1, 2, 4, 4}, 10);
  check_max(
      {1, 2, 7, 7},
      {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"auto_pad", "VALID"}, {"ceil_mode", 1}},
      win({3, 3}, {2, 2}), {1, 2, 3, 3}, 11);
}

TEST(MaxPool, OneDThreeDAndEmpty) {
  check_max({2, 3, 11}, {{"kernel_shape", {3}}, {"strides", {2}}, {"pads", {1, 1}}},
            win({3}, {2}, {1}, {1}), {2, 3, 6}, 12);
  check_max({1, 2, 4, 5, 6}, {{"kernel_shape", {2, 2, 3}}, {"strides", {2, 2, 1}}},
            win({2, 2, 3}, {2, 2, 1}), {1, 2, 2, 2, 4}, 13);
  std::vector<Tensor> y =
      run_op("MaxPool", {Tensor::zeros({0, 3, 4, 4})}, {{"kernel_shape", {2, 2}}});
  EXPECT_EQ(y[0].shape(), (Shape{0, 3, 3, 3}));
}

TEST(MaxPool, LargeParallel) {
  check_max({2, 32, 56, 56},
            {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}},
            win({3, 3}, {2, 2}, {1, 1}, {1, 1}), {2, 32, 28, 28}, 14);
}

TEST(AveragePool, CountIncludePad) {
  Attributes a = {{"kernel_shape", {3, 3}}, {"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}};
  check_avg({1, 3, 6, 6}, a, win({3, 3}, {}, {1, 1}, {1, 1}), {1, 3, 6, 6}, 20);
  a["count_include_pad"] = 1;
  check_avg({1, 3, 6, 6}, a, win({3, 3}, {}, {1, 1}, {1, 1}), {1, 3, 6, 6}, 21);
  a["count_include_pad"] = 0;
  check_avg({1, 3, 6, 6}, a, win({3, 3}, {}, {1, 1}, {1, 1}), {1, 3, 6, 6}, 22);
}

TEST(AveragePool, CeilMode) {
  // padded 8: ceil gives 4 windows; the last one covers input 5, pad 6 and overhang 7.
  for (int include : {0, 1}) {
    Attributes a = {{"kernel_shape", {3, 3}},
                    {"strides", {2, 2}},
                    {"pads", {1, 1, 1, 1}},
                    {"ceil_mode", 1},
                    {"count_include_pad", include}};
    check_avg({2, 2, 6, 6}, a, win({3, 3}, {2, 2}, {1, 1}, {1, 1}), {2, 2, 4, 4}, 23 + include);
    a["ceil_mode"] = 0;
    check_avg({2, 2, 6, 6}, a, win({3, 3}, {2, 2}, {1, 1}, {1, 1}), {2, 2, 3, 3}, 25 + include);
  }
  // No pads: ceil_mode's overhang never counts.
  check_avg(
      {1, 1, 7, 7},
      {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}, {"ceil_mode", 1}, {"count_include_pad", 1}},
      win({2, 2}, {2, 2}), {1, 1, 4, 4}, 27);
}

TEST(AveragePool, OneDAutoPadAsymmetric) {
  check_avg({2, 3, 10}, {{"kernel_shape", {4}}, {"strides", {3}}, {"auto_pad", "SAME_UPPER"}},
            win({4}, {3}, {1}, {2}), {2, 3, 4}, 28);
  check_avg({2, 3, 10},
            {{"kernel_shape", {4}},
             {"strides", {3}},
             {"auto_pad", "SAME_LOWER"},
             {"count_include_pad", 1}},
            win({4}, {3}, {2}, {1}), {2, 3, 4}, 29);
  check_avg({1, 2, 5, 8},
            {{"kernel_shape", {2, 3}}, {"pads", {0, 2, 1, 0}}, {"count_include_pad", 1}},
            win({2, 3}, {}, {0, 2}, {1, 0}), {1, 2, 5, 8}, 30);
  check_avg({1, 2, 4, 5, 6}, {{"kernel_shape", {2, 2, 2}}, {"pads", {1, 0, 1, 0, 1, 0}}},
            win({2, 2, 2}, {}, {1, 0, 1}, {0, 1, 0}), {1, 2, 4, 5, 6}, 31);
}

TEST(AveragePool, Dilation) {
  // extent 5, padded 11: (11 - 5) / 2 + 1 = 4 (ceil: 4 as well).
  for (int include : {0, 1}) {
    check_avg({1, 2, 9, 9},
              {{"kernel_shape", {3, 3}},
               {"dilations", {2, 2}},
               {"strides", {2, 2}},
               {"pads", {1, 1, 1, 1}},
               {"count_include_pad", include}},
              win({3, 3}, {2, 2}, {1, 1}, {1, 1}, {2, 2}), {1, 2, 4, 4}, 33 + include);
    check_avg({1, 2, 8, 8},
              {{"kernel_shape", {2, 2}},
               {"dilations", {2, 2}},
               {"strides", {2, 2}},
               {"pads", {1, 1, 1, 1}},
               {"ceil_mode", 1},
               {"count_include_pad", include}},
              win({2, 2}, {2, 2}, {1, 1}, {1, 1}, {2, 2}), {1, 2, 5, 5}, 35 + include);
  }
}

TEST(AveragePool, LargeParallel) {
  check_avg({2, 16, 40, 40}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}}, win({2, 2}, {2, 2}),
            {2, 16, 20, 20}, 32);
}

std::vector<double> ref_global(const Tensor& x, bool is_max) {
  std::vector<double> xs = test::to_doubles(x);
  int64_t planes = x.shape()[0] * x.shape()[1], n = x.numel() / planes;
  std::vector<double> y(planes);
  for (int64_t p = 0; p < planes; ++p) {
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < n; ++i)
      acc = is_max ? std::max(acc, xs[p * n + i]) : acc + xs[p * n + i];
    y[p] = is_max ? acc : acc / n;
  }
  return y;
}

TEST(GlobalPool, AverageAndMax) {
  struct C {
    Shape x, out;
  };
  for (const C& c :
       {C{{2, 3, 5, 7}, {2, 3, 1, 1}}, C{{2, 4, 9}, {2, 4, 1}}, C{{1, 2, 3, 4, 5}, {1, 2, 1, 1, 1}},
        C{{1, 16, 64, 64}, {1, 16, 1, 1}}, C{{1, 1, 1, 1}, {1, 1, 1, 1}}}) {
    Tensor x = random_tensor(c.x, c.x.numel());
    expect_close(run_op("GlobalAveragePool", {x})[0], c.out, ref_global(x, false));
    expect_close(run_op("GlobalMaxPool", {x})[0], c.out, ref_global(x, true));
  }
}

TEST(Pool, BadInput) {
  Tensor x = random_tensor({1, 2, 5, 5}, 40);
  EXPECT_THROW(run_op("MaxPool", {x}), InvalidModel);  // kernel_shape is required
  EXPECT_THROW(run_op("MaxPool", {x}, {{"kernel_shape", {6, 6}}}), ShapeError);
  EXPECT_THROW(run_op("MaxPool", {x}, {{"kernel_shape", {2}}}), InvalidModel);
  EXPECT_THROW(run_op("MaxPool", {x}, {{"kernel_shape", {0, 2}}}), InvalidModel);
  EXPECT_THROW(run_op("MaxPool", {x}, {{"kernel_shape", {2, 2}}, {"strides", {0, 1}}}),
               InvalidModel);
  EXPECT_THROW(run_op("MaxPool", {x}, {{"kernel_shape", {2, 2}}, {"pads", {0, -1, 0, 0}}}),
               InvalidModel);
  EXPECT_THROW(run_op("MaxPool", {x}, {{"kernel_shape", {2, 2}}, {"ceil_mode", 2}}), InvalidModel);
  EXPECT_THROW(run_op("AveragePool", {x}, {{"kernel_shape", {2, 2}}, {"count_include_pad", 3}}),
               InvalidModel);
  EXPECT_THROW(run_op("AveragePool", {x}, {{"kernel_shape", {2, 2}}, {"auto_pad", "FULL"}}),
               InvalidModel);
  EXPECT_THROW(run_op("AveragePool", {random_tensor({5, 5}, 41)}, {{"kernel_shape", {2, 2}}}),
               ShapeError);
  EXPECT_THROW(run_op("GlobalAveragePool", {random_tensor({5, 5}, 42)}), ShapeError);
  EXPECT_THROW(run_op("GlobalMaxPool", {test::random_ints({1, 2, 3}, 43, 0, 4)}), ShapeError);
  // MaxPool takes int8 and uint8 (max_pool_indices_test.cc), not int32.
  EXPECT_THROW(run_op("MaxPool", {test::random_ints({1, 2, 5, 5}, 44, 0, 9, DType::kInt32)},
                      {{"kernel_shape", {2, 2}}}),
               ShapeError);
}

}  // namespace
}  // namespace lumen
