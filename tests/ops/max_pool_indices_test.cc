// Tests of MaxPool's Indices output (storage_order 0 and 1) and of MaxPool on int8 / uint8,
// against a naive reference that scans each window in row-major order (the first maximum wins).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen::test {
namespace {

struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool column_major = false;
};

// (values, indices) of a MaxPool with explicit pads (begin then end) over `out`.
std::pair<std::vector<double>, std::vector<double>> ref_max_pool(const Tensor& x, const Window& w,
                                                                 const Shape& out) {
  std::vector<double> xs = to_doubles(x), vals, inds;
  int spatial = x.rank() - 2;
  Shape kshape(w.kernel);
  int64_t plane = 1;
  for (int a = 0; a < spatial; ++a) plane *= x.shape()[2 + a];
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> o = unravel(i, out);
    double best = 0;
    int64_t best_idx = -1;
    for (int64_t k = 0; k < kshape.numel(); ++k) {
      std::vector<int64_t> kk = unravel(k, kshape), xi = {o[0], o[1]};
      bool inside = true;
      for (int a = 0; a < spatial; ++a) {
        int64_t pos = o[2 + a] * w.strides[a] - w.pads[a] + kk[a] * w.dilations[a];
        inside = inside && pos >= 0 && pos < x.shape()[2 + a];
        xi.push_back(pos);
      }
      if (!inside) continue;
      double v = xs[ravel(xi, x.shape())];
      if (best_idx >= 0 && !(v > best)) continue;
      best = v;
      // Spatial position, row-major or first spatial axis fastest, plus the (n, c) plane.
      int64_t pos = 0;
      if (w.column_major) {
        for (int a = spatial - 1; a >= 0; --a) pos = pos * x.shape()[2 + a] + xi[2 + a];
      } else {
        for (int a = 0; a < spatial; ++a) pos = pos * x.shape()[2 + a] + xi[2 + a];
      }
      best_idx = (o[0] * x.shape()[1] + o[1]) * plane + pos;
    }
    vals.push_back(best);
    inds.push_back(static_cast<double>(best_idx));
  }
  return {vals, inds};
}

Attributes attrs_of(const Window& w) {
  std::vector<int64_t> pads = w.pads;
  pads.insert(pads.end(), w.pads.begin(), w.pads.end());
  return {{"kernel_shape", w.kernel},
          {"strides", w.strides},
          {"pads", pads},
          {"dilations", w.dilations},
          {"storage_order", int64_t{w.column_major ? 1 : 0}}};
}

void check_indices(const Tensor& x, const Window& w, const Shape& out) {
  SCOPED_TRACE(x.shape().to_string() + " -> " + out.to_string() +
               (w.column_major ? " column-major" : " row-major"));
  std::vector<Tensor> y = run_op("MaxPool", {x}, attrs_of(w), 2);
  auto [vals, inds] = ref_max_pool(x, w, out);
  if (x.dtype() == DType::kFloat32) {
    expect_close(y[0], out, vals, 0, 0);
  } else {
    expect_equal(y[0], x.dtype(), out, vals);
  }
  expect_equal(y[1], DType::kInt64, out, inds);
}

TEST(MaxPoolIndices, Random2D) {
  for (bool cm : {false, true}) {
    check_indices(random_tensor({2, 3, 7, 6}, 11), {{3, 3}, {1, 1}, {1, 1}, {1, 1}, cm},
                  {2, 3, 7, 6});
    check_indices(random_tensor({2, 3, 7, 6}, 12), {{2, 3}, {2, 2}, {0, 1}, {1, 1}, cm},
                  {2, 3, 3, 3});
    check_indices(random_tensor({1, 2, 9, 8}, 13), {{3, 2}, {2, 1}, {2, 0}, {2, 3}, cm},
                  {1, 2, 5, 5});
  }
}

TEST(MaxPoolIndices, Random1DAnd3D) {
  check_indices(random_tensor({2, 3, 11}, 21), {{3}, {2}, {1}, {1}}, {2, 3, 6});
  check_indices(random_tensor({1, 2, 4, 5, 6}, 22), {{2, 2, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}},
                {1, 2, 3, 3, 3});
  check_indices(random_tensor({1, 2, 4, 5, 6}, 23),
                {{2, 2, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, true}, {1, 2, 3, 3, 3});
}

TEST(MaxPoolIndices, LargeRunsInParallel) {
  check_indices(random_tensor({4, 16, 32, 32}, 31), {{3, 3}, {2, 2}, {1, 1}, {1, 1}},
                {4, 16, 16, 16});
}

TEST(MaxPoolInt8, Random) {
  // Small value ranges make ties common: the first maximum in window order must win.
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    int64_t lo = t == DType::kUInt8 ? 0 : -128, hi = t == DType::kUInt8 ? 255 : 127;
    check_indices(random_ints({2, 3, 7, 6}, 41, lo, hi, t), {{3, 3}, {1, 1}, {1, 1}, {1, 1}},
                  {2, 3, 7, 6});
    check_indices(random_ints({2, 3, 7, 6}, 42, lo, lo + 3, t), {{2, 2}, {2, 2}, {0, 0}, {1, 1}},
                  {2, 3, 3, 3});
    // Values only, no Indices output.
    Tensor x = random_ints({1, 2, 5, 5}, 43, lo, hi, t);
    Window w{{5, 5}, {1, 1}, {2, 2}, {1, 1}};
    std::vector<Tensor> y = run_op("MaxPool", {x}, attrs_of(w));
    expect_equal(y[0], t, {1, 2, 5, 5}, ref_max_pool(x, w, {1, 2, 5, 5}).first);
  }
}

TEST(MaxPoolIndices, BadInput) {
  Tensor x = random_tensor({1, 2, 5, 5}, 50);
  try {
    run_op("MaxPool", {x}, {{"kernel_shape", {2, 2}}, {"storage_order", 2}}, 2);
    FAIL() << "expected InvalidModel";
  } catch (const InvalidModel& e) {
    EXPECT_NE(std::string(e.what()).find("MaxPool"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("storage_order"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_op("MaxPool", {random_ints({1, 2, 5}, 51, 0, 9, DType::kUInt8)},
                      {{"kernel_shape", {2, 2}}}),
               InvalidModel);  // two kernel sizes for one spatial axis
  EXPECT_THROW(
      run_op("MaxPool", {random_ints({2, 5}, 52, 0, 9, DType::kInt8)}, {{"kernel_shape", {2}}}),
      ShapeError);  // no spatial axis
}

}  // namespace
}  // namespace lumen::test
