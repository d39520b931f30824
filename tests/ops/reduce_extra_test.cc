// Tests of ReduceProd/SumSquare/LogSum/LogSumExp/L1/L2, ArgMin, CumSum, Hardmax and TopK against
// naive double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;
using test::expect_close;
using test::expect_equal;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

Tensor ints1(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

// Reduces x over `axes` (empty: all): visits every element, maps it, accumulates, finishes.
std::vector<double> ref_reduce(const std::string& op, const Tensor& x,
                               const std::vector<int64_t>& axes, bool keepdims, Shape* out_shape) {
  const Shape& shape = x.shape();
  const int rank = shape.rank();
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> out_dims, kept_dims;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[d]) kept_dims.push_back(shape.dims()[d]);
    if (!reduced[d] || keepdims) out_dims.push_back(reduced[d] ? 1 : shape.dims()[d]);
  }
  *out_shape = Shape(out_dims);
  Shape kept(kept_dims);
  std::vector<double> xv = to_doubles(x);
  std::vector<std::vector<double>> groups(static_cast<size_t>(kept.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = test::unravel(i, shape), out_idx;
    for (int d = 0; d < rank; ++d)
      if (!reduced[d]) out_idx.push_back(idx[d]);
    groups[test::ravel(out_idx, kept)].push_back(xv[i]);
  }
  std::vector<double> out;
  for (const auto& g : groups) {
    double r = op == "ReduceProd" ? 1.0 : 0.0;
    if (op == "ReduceLogSumExp") {
      double m = -INFINITY;
      for (double v : g) m = std::max(m, v);
      for (double v : g) r += std::exp(v - m);
      r = g.empty() ? -INFINITY : std::log(r) + m;
    } else {
      for (double v : g) {
        if (op == "ReduceProd")
          r *= v;
        else if (op == "ReduceSumSquare" || op == "ReduceL2")
          r += v * v;
        else if (op == "ReduceL1")
          r += std::fabs(v);
        else
          r += v;
      }
      if (op == "ReduceL2") r = std::sqrt(r);
      if (op == "ReduceLogSum") r = std::log(r);
    }
    out.push_back(r);
  }
  return out;
}

// expect_close that also accepts equal infinities (the log reductions of nothing are -inf).
void expect_close_inf(const Tensor& got, const Shape& shape, const std::vector<double>& want) {
  ASSERT_EQ(got.shape(), shape);
  std::vector<double> g = to_doubles(got);
  std::vector<double> finite_got, finite_want;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(g[i], want[i]) << "element " << i;
    } else {
      finite_got.push_back(g[i]);
      finite_want.push_back(want[i]);
    }
  }
  Tensor fg = Tensor::from_vector<double>({static_cast<int64_t>(finite_got.size())}, finite_got);
  expect_close(fg, fg.shape(), finite_want, 1e-5, 1e-4);
}

class ReduceExtraTest : public ::testing::TestWithParam<std::string> {};

void check_reduce(const std::string& op, const Tensor& x, const std::vector<int64_t>& axes,
                  bool keepdims, bool as_input) {
  SCOPED_TRACE(op + " " + x.shape().to_string() + " keepdims " + std::to_string(keepdims) +
               (as_input ? " (axes input)" : ""));
  Attributes attrs{{"keepdims", keepdims ? 1 : 0}};
  std::vector<test::OpInput> inputs = {x};
  if (as_input)
    inputs.push_back(constant(ints1(axes)));
  else if (!axes.empty())
    attrs["axes"] = axes;
  Tensor got = run_op(op, inputs, attrs)[0];
  Shape shape;
  std::vector<double> want = ref_reduce(op, x, axes, keepdims, &shape);
  if (x.dtype() == DType::kFloat32)
    expect_close_inf(got, shape, want);
  else
    expect_equal(got, x.dtype(), shape, want);
}

// Positive data for the log reductions, values near 1 for products.
Tensor data_for(const std::string& op, const Shape& s, uint64_t seed) {
  if (op == "ReduceProd") return random_tensor(s, seed, 0.5f, 1.5f);
  if (op == "ReduceLogSum") return random_tensor(s, seed, 0.1f, 2.0f);
  if (op == "ReduceLogSumExp") return random_tensor(s, seed, -20.0f, 60.0f);
  return random_tensor(s, seed, -2.0f, 2.0f);
}

TEST_P(ReduceExtraTest, Float32Axes) {
  const std::string op = GetParam();
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  std::vector<Case> cases = {
      {{7}, {}},         {{3, 4}, {1}},    {{3, 4}, {0}},          {{2, 3, 5}, {0, 2}},
      {{2, 3, 5}, {-2}}, {{4, 1, 6}, {1}}, {{2, 3, 4, 5}, {1, 3}}, {{2, 3, 4, 5}, {}},
      {{37, 41}, {0}},   {{5, 300}, {1}},  {{2, 3}, {-1, 0}}};
  uint64_t seed = 1;
  for (const Case& c : cases)
    for (bool keep : {true, false})
      for (bool as_input : {false, true})
        if (!(as_input && c.axes.empty()))
          check_reduce(op, data_for(op, c.shape, seed++), c.axes, keep, as_input);
}

TEST_P(ReduceExtraTest, LargeParallel) {
  const std::string op = GetParam();
  check_reduce(op, data_for(op, {64, 1200}, 7), {1}, true, false);
  check_reduce(op, data_for(op, {64, 1200}, 8), {0}, false, false);
  check_reduce(op, data_for(op, {8, 100, 60}, 9), {0, 2}, true, true);
  // Fewer outputs than threads over long rows: the rows are split into parts.
  Tensor x = op == "ReduceProd" ? random_tensor({2, 20000}, 12, 0.999f, 1.001f)
                                : data_for(op, {2, 20000}, 12);
  check_reduce(op, x, {1}, false, false);
  check_reduce(op, x, {}, true, false);
}

TEST_P(ReduceExtraTest, EmptyDims) {
  const std::string op = GetParam();
  // Reducing an empty dim gives the empty reduction's value (1, 0 or -inf); an empty kept dim
  // gives an empty output.
  check_reduce(op, Tensor::zeros({3, 0}), {1}, true, false);
  check_reduce(op, Tensor::zeros({0, 4}), {1}, false, false);
}

TEST_P(ReduceExtraTest, NoopWithEmptyAxes) {
  const std::string op = GetParam();
  Tensor x = data_for(op, {3, 4}, 11);
  Tensor got = run_op(op, {x, constant(Tensor::empty({0}, DType::kInt64))},
                      {{"noop_with_empty_axes", 1}})[0];
  // Nothing is reduced: each element goes through the map and finish alone.
  std::vector<double> want;
  for (double v : to_doubles(x)) {
    if (op == "ReduceSumSquare")
      want.push_back(v * v);
    else if (op == "ReduceL1" || op == "ReduceL2")
      want.push_back(std::fabs(v));
    else if (op == "ReduceLogSum")
      want.push_back(std::log(v));
    else
      want.push_back(v);
  }
  expect_close(got, {3, 4}, want);
}

TEST_P(ReduceExtraTest, BadInputs) {
  const std::string op = GetParam();
  Tensor x = random_tensor({2, 3}, 3);
  EXPECT_THROW(run_op(op, {x}, {{"axes", {2}}}), ShapeError);
  EXPECT_THROW(run_op(op, {x}, {{"axes", {0, -2}}}), InvalidModel);
  EXPECT_THROW(run_op(op, {x}, {{"keepdims", 3}}), InvalidModel);
  EXPECT_THROW(run_op(op, {x, constant(ints1({1}))}, {{"axes", {1}}}), InvalidModel);
  EXPECT_THROW(run_op(op, {random_ints({2, 3}, 1, 0, 1, DType::kBool)}), ShapeError);
  EXPECT_THROW(run_op(op, {random_ints({2, 3}, 1, 0, 3, DType::kUInt8)}), UnsupportedOp);
}

INSTANTIATE_TEST_SUITE_P(Ops, ReduceExtraTest,
                         ::testing::Values("ReduceProd", "ReduceSumSquare", "ReduceLogSum",
                                           "ReduceLogSumExp", "ReduceL1", "ReduceL2"));

TEST(ReduceExtraTest, IntegerTypes) {
  for (const char* op : {"ReduceProd", "ReduceSumSquare", "ReduceL1"})
    for (DType dt : {DType::kInt64, DType::kInt32}) {
      check_reduce(op, random_ints({3, 4, 5}, 5, -3, 3, dt), {1}, true, false);
      check_reduce(op, random_ints({3, 4, 5}, 6, -3, 3, dt), {0, 2}, false, true);
    }
  EXPECT_THROW(run_op("ReduceL2", {random_ints({3}, 1, 0, 3)}), UnsupportedOp);
}

TEST(ReduceExtraTest, LogSumExpIsStable) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {1000, 1000, 999, -1000, -1001, -INFINITY});
  Tensor got = run_op("ReduceLogSumExp", {x}, {{"axes", {1}}, {"keepdims", 0}})[0];
  double a = 1000 + std::log(2 + std::exp(-1.0));
  double b = -1000 + std::log(1 + std::exp(-1.0));
  expect_close_inf(got, {2}, {a, b});
  Tensor inf = Tensor::from_vector<float>({2}, {-INFINITY, -INFINITY});
  expect_close_inf(run_op("ReduceLogSumExp", {inf}, {{"keepdims", 0}})[0], {}, {-INFINITY});
}

// ArgMin reference: first (or last) index of the minimum along axis.
std::vector<double> ref_argmin(const Tensor& x, int axis, bool last, Shape* out_shape,
                               bool keepdims) {
  const Shape& s = x.shape();
  std::vector<double> v = to_doubles(x);
  int64_t outer = 1, inner = 1, n = s.dims()[axis];
  for (int d = 0; d < axis; ++d) outer *= s.dims()[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s.dims()[d];
  std::vector<int64_t> dims = s.dims();
  if (keepdims)
    dims[axis] = 1;
  else
    dims.erase(dims.begin() + axis);
  *out_shape = Shape(dims);
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t best = 0;
      for (int64_t r = 1; r < n; ++r) {
        double a = v[(o * n + r) * inner + j], b = v[(o * n + best) * inner + j];
        if (a < b || (last && a == b)) best = r;
      }
      out.push_back(static_cast<double>(best));
    }
  return out;
}

TEST(ArgMinTest, AxesKeepdimsTies) {
  uint64_t seed = 20;
  for (Shape s : {Shape{7}, Shape{3, 4}, Shape{2, 5, 3}, Shape{4, 1, 700}})
    for (int axis = -s.rank(); axis < s.rank(); ++axis)
      for (int last : {0, 1})
        for (int keep : {0, 1})
          for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt32}) {
            SCOPED_TRACE(s.to_string() + " axis " + std::to_string(axis));
            Tensor x = dt == DType::kFloat32 ? random_tensor(s, seed++)
                                             : random_ints(s, seed++, -2, 2, dt);
            Tensor got =
                run_op("ArgMin", {x},
                       {{"axis", axis}, {"keepdims", keep}, {"select_last_index", last}})[0];
            Shape shape;
            auto want = ref_argmin(x, axis < 0 ? axis + s.rank() : axis, last, &shape, keep);
            expect_equal(got, DType::kInt64, shape, want);
          }
}

TEST(ArgMinTest, Bad) {
  EXPECT_THROW(run_op("ArgMin", {random_tensor({2, 3}, 1)}, {{"axis", 2}}), ShapeError);
  EXPECT_THROW(run_op("ArgMin", {random_tensor({2, 3}, 1)}, {{"select_last_index", 2}}),
               InvalidModel);
  EXPECT_THROW(run_op("ArgMin", {random_tensor({2, 0}, 1)}, {{"axis", 1}}), ShapeError);
}

TEST(CumSumTest, AllVariants) {
  uint64_t seed = 40;
  for (Shape s : {Shape{9}, Shape{3, 4}, Shape{2, 3, 5}, Shape{3, 700}, Shape{2, 0, 3}})
    for (int axis = -s.rank(); axis < s.rank(); ++axis)
      for (int exclusive : {0, 1})
        for (int reverse : {0, 1}) {
          SCOPED_TRACE(s.to_string() + " axis " + std::to_string(axis) + " excl " +
                       std::to_string(exclusive) + " rev " + std::to_string(reverse));
          Tensor x = random_tensor(s, seed++);
          Tensor ax = Tensor::scalar<int64_t>(axis);
          Tensor got = run_op("CumSum", {x, constant(ax)},
                              {{"exclusive", exclusive}, {"reverse", reverse}})[0];
          const int a = axis < 0 ? axis + s.rank() : axis;
          std::vector<double> xv = to_doubles(x), want(xv.size());
          for (int64_t i = 0; i < x.numel(); ++i) {
            std::vector<int64_t> idx = test::unravel(i, s);
            double sum = 0;
            for (int64_t r = 0; r < s.dims()[a]; ++r) {
              bool take = reverse ? (exclusive ? r > idx[a] : r >= idx[a])
                                  : (exclusive ? r < idx[a] : r <= idx[a]);
              std::vector<int64_t> src = idx;
              src[a] = r;
              if (take) sum += xv[test::ravel(src, s)];
            }
            want[i] = sum;
          }
          expect_close(got, s, want);
        }
  Tensor xi = random_ints({3, 4}, 3, -5, 5, DType::kInt32);
  Tensor got = run_op("CumSum", {xi, constant(Tensor::from_vector<int32_t>({1}, {1}))})[0];
  std::vector<double> v = to_doubles(xi), want;
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int c = 0; c < 4; ++c) want.push_back(s += v[r * 4 + c]);
  }
  expect_equal(got, DType::kInt32, {3, 4}, want);
}

TEST(CumSumTest, Bad) {
  Tensor x = random_tensor({2, 3}, 1);
  EXPECT_THROW(run_op("CumSum", {x, constant(Tensor::scalar<int64_t>(2))}), ShapeError);
  EXPECT_THROW(run_op("CumSum", {x, constant(Tensor::scalar<float>(1))}), ShapeError);
  EXPECT_THROW(run_op("CumSum", {x, Tensor::scalar<int64_t>(1)}), ShapeError);  // not constant
  EXPECT_THROW(run_op("CumSum", {x, constant(Tensor::scalar<int64_t>(0))}, {{"reverse", 2}}),
               InvalidModel);
}

TEST(HardmaxTest, Axes) {
  uint64_t seed = 60;
  for (Shape s : {Shape{5}, Shape{3, 4}, Shape{2, 3, 4}})
    for (int axis = -s.rank(); axis < s.rank(); ++axis) {
      Tensor x = random_ints(s, seed++, -2, 2, DType::kInt64);  // ties: the first max wins
      std::vector<double> xv = to_doubles(x);
      std::vector<float> xf(xv.begin(), xv.end());
      Tensor xt = Tensor::from_vector<float>(s, xf);
      Tensor got = run_op("Hardmax", {xt}, {{"axis", axis}})[0];
      const int a = axis < 0 ? axis + s.rank() : axis;
      std::vector<double> want(xv.size(), 0.0);
      for (int64_t i = 0; i < x.numel(); ++i) {
        std::vector<int64_t> idx = test::unravel(i, s);
        if (idx[a] != 0) continue;
        int64_t best = 0;
        for (int64_t r = 1; r < s.dims()[a]; ++r) {
          std::vector<int64_t> p = idx, q = idx;
          p[a] = r;
          q[a] = best;
          if (xv[test::ravel(p, s)] > xv[test::ravel(q, s)]) best = r;
        }
        idx[a] = best;
        want[test::ravel(idx, s)] = 1.0;
      }
      expect_close(got, s, want);
    }
  expect_close(run_op("Hardmax", {random_tensor({2, 3}, 1)})[0], {2, 3}, [] {
    std::vector<double> w(6, 0.0);
    std::vector<double> v = to_doubles(random_tensor({2, 3}, 1));
    for (int r = 0; r < 2; ++r)
      w[r * 3 +
        (std::max_element(v.begin() + r * 3, v.begin() + r * 3 + 3) - (v.begin() + r * 3))] = 1.0;
    return w;
  }());
  EXPECT_THROW(run_op("Hardmax", {random_tensor({2, 3}, 1)}, {{"axis", 2}}), ShapeError);
  EXPECT_THROW(run_op("Hardmax", {random_ints({2, 3}, 1, 0, 3)}), ShapeError);
}

TEST(TopKTest, LargestSmallestAxes) {
  uint64_t seed = 80;
  for (Shape s : {Shape{9}, Shape{4, 6}, Shape{3, 5, 4}, Shape{2, 1000}})
    for (int axis = -1; axis < s.rank(); ++axis)
      for (int largest : {0, 1})
        for (DType dt : {DType::kFloat32, DType::kInt64}) {
          const int a = axis < 0 ? axis + s.rank() : axis;
          const int64_t n = s.dims()[a];
          for (int64_t k : {int64_t{0}, int64_t{1}, n / 2, n}) {
            SCOPED_TRACE(s.to_string() + " axis " + std::to_string(axis) + " k " +
                         std::to_string(k) + " largest " + std::to_string(largest));
            Tensor x = dt == DType::kFloat32 ? random_tensor(s, seed++)
                                             : random_ints(s, seed++, -3, 3, dt);
            auto out = run_op("TopK", {x, constant(ints1({k}))},
                              {{"axis", axis}, {"largest", largest}}, 2);
            Shape os = s;
            os.dims()[a] = k;
            std::vector<double> xv = to_doubles(x), wv(os.numel()), wi(os.numel());
            for (int64_t i = 0; i < os.numel(); ++i) {
              std::vector<int64_t> idx = test::unravel(i, os);
              std::vector<std::pair<double, int64_t>> line;
              for (int64_t r = 0; r < n; ++r) {
                std::vector<int64_t> p = idx;
                p[a] = r;
                line.push_back({xv[test::ravel(p, s)], r});
              }
              std::stable_sort(line.begin(), line.end(), [&](const auto& l, const auto& r) {
                return largest ? l.first > r.first : l.first < r.first;
              });
              wv[i] = line[idx[a]].first;
              wi[i] = static_cast<double>(line[idx[a]].second);
            }
            expect_close(out[0], os, wv, 0, 0);
            expect_equal(out[1], DType::kInt64, os, wi);
          }
        }
}

TEST(TopKTest, Bad) {
  Tensor x = random_tensor({3, 4}, 1);
  EXPECT_THROW(run_op("TopK", {x, constant(ints1({5}))}, {}, 2), ShapeError);
  EXPECT_THROW(run_op("TopK", {x, constant(ints1({-1}))}, {}, 2), ShapeError);
  EXPECT_THROW(run_op("TopK", {x, ints1({2})}, {}, 2), ShapeError);  // K unknown at build time
  EXPECT_THROW(run_op("TopK", {x, constant(ints1({2}))}, {{"axis", 2}}, 2), ShapeError);
  EXPECT_THROW(run_op("TopK", {x, constant(ints1({2}))}, {{"largest", 5}}, 2), InvalidModel);
}

}  // namespace
}  // namespace lumen
