// Tests of ReduceSum/Mean/Max/Min and ArgMax against naive double-precision references.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
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

struct RefResult {
  Shape shape;
  std::vector<double> values;
};

// Reduces x over `axes` (empty: all) by visiting every input element and its output slot.
RefResult ref_reduce(const std::string& op, const Tensor& x, std::vector<int64_t> axes,
                     bool keepdims) {
  const Shape& shape = x.shape();
  int rank = shape.rank();
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> out_dims, kept_dims;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) count *= shape.dims()[d];
    if (!reduced[d]) kept_dims.push_back(shape.dims()[d]);
    if (!reduced[d] || keepdims) out_dims.push_back(reduced[d] ? 1 : shape.dims()[d]);
  }
  Shape kept(kept_dims);
  double init = op == "ReduceMax" ? -INFINITY : op == "ReduceMin" ? INFINITY : 0.0;
  std::vector<double> acc(static_cast<size_t>(kept.numel()), init);
  std::vector<double> xv = to_doubles(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = test::unravel(i, shape), out_idx;
    for (int d = 0; d < rank; ++d)
      if (!reduced[d]) out_idx.push_back(idx[d]);
    double& a = acc[test::ravel(out_idx, kept)];
    if (op == "ReduceMax")
      a = std::max(a, xv[i]);
    else if (op == "ReduceMin")
      a = std::min(a, xv[i]);
    else
      a += xv[i];
  }
  if (op == "ReduceMean")
    for (double& a : acc) a /= static_cast<double>(count);
  return {Shape(out_dims), acc};
}

Tensor axes_tensor(const std::vector<int64_t>& axes) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(axes.size())}, axes);
}

// Runs op with axes as an attribute or as a constant second input, checks against ref_reduce.
void check_reduce(const std::string& op, const Tensor& x, const std::vector<int64_t>& axes,
                  bool keepdims, bool axes_as_input) {
  SCOPED_TRACE(op + " " + x.shape().to_string() + " axes " + std::to_string(axes.size()) +
               " keepdims " + std::to_string(keepdims) + (axes_as_input ? " (input)" : ""));
  Attributes attrs{{"keepdims", keepdims ? 1 : 0}};
  std::vector<test::OpInput> inputs = {x};
  if (axes_as_input) {
    inputs.push_back(constant(axes_tensor(axes)));
  } else if (!axes.empty()) {
    attrs["axes"] = axes;
  }
  auto out = run_op(op, inputs, attrs);
  RefResult ref = ref_reduce(op, x, axes, keepdims);
  if (x.dtype() == DType::kFloat32) {
    expect_close(out[0], ref.shape, ref.values, 1e-4, 1e-4);
  } else {
    expect_equal(out[0], x.dtype(), ref.shape, ref.values);
  }
}

struct Case {
  Shape shape;
  std::vector<int64_t> axes;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {{5}, {}},
      {{5}, {0}},
      {{5}, {-1}},
      {{3, 4}, {0}},
      {{3, 4}, {1}},
      {{3, 4}, {-1}},
      {{3, 4}, {0, 1}},
      {{2, 3, 4}, {1}},
      {{2, 3, 4}, {0, 2}},
      {{2, 3, 4}, {-1, 0}},
      {{2, 3, 4}, {}},
      {{2, 3, 4, 5}, {1, 2}},
      {{2, 3, 4, 5}, {0, 3}},
      {{2, 3, 4, 5}, {0, 2}},
      {{2, 3, 4, 5}, {1, 3}},
      {{2, 3, 4, 5}, {3}},
      {{2, 3, 4, 5}, {-4}},
      {{1, 3, 1, 4}, {0}},
      {{1, 3, 1, 4}, {2}},
      {{1, 3, 1, 4}, {0, 2}},
      {{1, 3, 1, 4}, {1, 3}},
      {{1, 1}, {1}},
      {{0, 3}, {1}},
      {{2, 0, 4}, {2}},
      {{2, 0, 4}, {0, 2}},
  };
  return kCases;
}

class ReduceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReduceTest, Float32AxesAttribute) {
  uint64_t seed = 100;
  for (const Case& c : cases())
    for (bool keep : {true, false})
      check_reduce(GetParam(), random_tensor(c.shape, seed++, -2.0f, 2.0f), c.axes, keep, false);
}

TEST_P(ReduceTest, Float32AxesInput) {
  uint64_t seed = 200;
  for (const Case& c : cases())
    for (bool keep : {true, false})
      check_reduce(GetParam(), random_tensor(c.shape, seed++, -2.0f, 2.0f), c.axes, keep, true);
}

TEST_P(ReduceTest, Float32Large) {
  std::string op = GetParam();
  check_reduce(op, random_tensor({64, 4096}, 300), {1}, true, false);
  check_reduce(op, random_tensor({64, 4096}, 301), {0}, false, false);
  check_reduce(op, random_tensor({1, 1 << 17}, 302), {}, false, false);
  check_reduce(op, random_tensor({3, 1 << 16}, 303), {1}, true, true);
  check_reduce(op, random_tensor({300, 3, 200}, 304), {0, 2}, true, false);
  check_reduce(op, random_tensor({40, 30, 50}, 305), {1}, false, false);
  check_reduce(op, random_tensor({3, 5, 1100}, 307), {1}, true, false);
  check_reduce(op, random_tensor({9, 7, 2, 1100}, 308), {0, 2}, false, false);
  check_reduce(op, random_tensor({20, 30, 40, 5}, 306), {0, 2}, false, true);
  // A global pool of a channels-last image: one column task over 2867 rows, split into parts.
  check_reduce(op, random_tensor({1, 61, 47, 45}, 309), {1, 2}, true, false);
}

// Fewer output rows than threads (a machine with 8 threads): the reduced rows are split into
// parts of at least 16 rows, each over every column chunk (40 rows: 2 parts of 2 chunks; 2000
// rows: 8 parts; 14 x 14 pixels of 672 channels: 8 parts of 2 chunks, the last one partial);
// with as many output rows as threads they are not (8 rows of 1000 columns).
TEST_P(ReduceTest, ColumnTasksFewerThanThreads) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(8);
  check_reduce(GetParam(), random_tensor({1, 40, 1000}, 310), {1}, true, false);
  check_reduce(GetParam(), random_tensor({40, 1, 1000}, 311), {0}, false, false);
  check_reduce(GetParam(), random_tensor({1, 2000, 40}, 312), {1}, true, false);
  check_reduce(GetParam(), random_tensor({1, 14, 14, 672}, 313), {1, 2}, true, false);
  check_reduce(GetParam(), random_tensor({8, 30, 1000}, 314), {1}, true, false);
  omp_set_num_threads(threads);
}

TEST_P(ReduceTest, IntegerTypes) {
  std::string op = GetParam();
  if (op == "ReduceMean") {  // float32 only: integer input is refused when compiled
    EXPECT_THROW(run_op(op, {random_ints({3, 4}, 1, -5, 5)}, {{"axes", {1}}}), UnsupportedOp);
    return;
  }
  uint64_t seed = 400;
  for (DType dt : {DType::kInt64, DType::kInt32})
    for (const Case& c : cases())
      check_reduce(op, random_ints(c.shape, seed++, -1000, 1000, dt), c.axes, true, seed % 2);
  check_reduce(op, random_ints({50, 2000}, seed++, -100000, 100000), {1}, false, false);
  check_reduce(op, random_ints({50, 2000}, seed++, -100000, 100000, DType::kInt32), {0}, true,
               false);
  check_reduce(op, random_ints({1, 9000, 7}, seed++, -100000, 100000, DType::kInt32), {1}, true,
               false);
}

TEST_P(ReduceTest, NoopWithEmptyAxes) {
  Tensor x = random_tensor({2, 3}, 500);
  auto out = run_op(GetParam(), {x}, {{"noop_with_empty_axes", 1}});
  expect_close(out[0], {2, 3}, to_doubles(x), 0, 0);
  // An empty axes input is still "no axes".
  out = run_op(GetParam(), {x, constant(axes_tensor({}))}, {{"noop_with_empty_axes", 1}});
  expect_close(out[0], {2, 3}, to_doubles(x), 0, 0);
  // Without the flag, empty axes reduce everything.
  out = run_op(GetParam(), {x, constant(axes_tensor({}))});
  expect_close(out[0], {1, 1}, ref_reduce(GetParam(), x, {}, true).values);
}

TEST_P(ReduceTest, ReduceOverEmptyDim) {
  std::string op = GetParam();
  Tensor x = Tensor::empty({0, 3});
  auto out = run_op(op, {x}, {{"axes", {0}}});
  if (op == "ReduceMax" || op == "ReduceMin") {
    // Opset 20 defines the maximum of nothing as -inf and the minimum as +inf.
    const double inf = op == "ReduceMax" ? -std::numeric_limits<double>::infinity()
                                         : std::numeric_limits<double>::infinity();
    ASSERT_EQ(out[0].shape(), (Shape{1, 3}));
    for (double v : to_doubles(out[0])) EXPECT_EQ(v, inf);
    return;
  }
  double want = op == "ReduceSum" ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  expect_close(out[0], {1, 3}, {want, want, want});
}

// A row of -inf (an attention row masked whole) has the maximum -inf, not the lowest finite
// float, and the minimum of a row of +inf is +inf: the reduced axis is the trailing one.
TEST(ReduceInfinities, RowsOfInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector<float>({2, 3}, {-inf, -inf, -inf, 1.f, -inf, 2.f});
  auto out = run_op("ReduceMax", {x}, {{"axes", {1}}, {"keepdims", 0}});
  ASSERT_EQ(out[0].shape(), (Shape{2}));
  EXPECT_EQ(to_doubles(out[0]), (std::vector<double>{-INFINITY, 2.0}));
  Tensor y = Tensor::from_vector<float>({2, 3}, {inf, inf, inf, 1.f, inf, 2.f});
  out = run_op("ReduceMin", {y}, {{"axes", {1}}, {"keepdims", 0}});
  EXPECT_EQ(to_doubles(out[0]), (std::vector<double>{INFINITY, 1.0}));
}

TEST_P(ReduceTest, BadInputs) {
  std::string op = GetParam();
  Tensor x = random_tensor({2, 3}, 600);
  EXPECT_THROW(run_op(op, {x}, {{"axes", {2}}}), ShapeError);
  EXPECT_THROW(run_op(op, {x}, {{"axes", {-3}}}), ShapeError);
  EXPECT_THROW(run_op(op, {x, constant(axes_tensor({5}))}), ShapeError);
  EXPECT_THROW(run_op(op, {x}, {{"axes", {1, -1}}}), InvalidModel);
  EXPECT_THROW(run_op(op, {x, constant(axes_tensor({0, 0}))}), InvalidModel);
  EXPECT_THROW(run_op(op, {x, constant(axes_tensor({0}))}, {{"axes", {0}}}), InvalidModel);
  // Axes that are only known at run time cannot give the output shape.
  EXPECT_THROW(run_op(op, {x, axes_tensor({0})}), ShapeError);
  EXPECT_THROW(run_op(op, {x}, {{"keepdims", 2}}), InvalidModel);
  EXPECT_THROW(run_op(op, {x}, {{"axis", 0}}), InvalidModel);
  EXPECT_THROW(run_op(op, {random_ints({2, 3}, 601, 0, 1, DType::kBool)}), ShapeError);
  if (op == "ReduceMean") EXPECT_THROW(run_op(op, {random_ints({2, 3}, 602, 0, 9)}), UnsupportedOp);
}

INSTANTIATE_TEST_SUITE_P(Ops, ReduceTest,
                         ::testing::Values("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"));

TEST(ReduceTest, NanPropagates) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from_vector<float>({2, 3}, {1.0f, nan, 3.0f, 4.0f, 5.0f, 6.0f});
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceSum"}) {
    auto out = run_op(op, {x}, {{"axes", {1}}, {"keepdims", 0}});
    std::vector<double> g = to_doubles(out[0]);
    EXPECT_TRUE(std::isnan(g[0])) << op;
    EXPECT_FALSE(std::isnan(g[1])) << op;
    out = run_op(op, {x}, {{"axes", {0}}, {"keepdims", 0}});
    g = to_doubles(out[0]);
    EXPECT_TRUE(std::isnan(g[1])) << op;
    EXPECT_FALSE(std::isnan(g[0]) || std::isnan(g[2])) << op;
  }
}

// --- ArgMax ---------------------------------------------------------------------------------

RefResult ref_argmax(const Tensor& x, int axis, bool keepdims, bool last) {
  const Shape& shape = x.shape();
  std::vector<int64_t> out_dims;
  for (int d = 0; d < shape.rank(); ++d)
    if (d != axis || keepdims) out_dims.push_back(d == axis ? 1 : shape.dims()[d]);
  std::vector<double> xv = to_doubles(x);
  int64_t n = shape.dims()[axis], stride = shape.strides()[axis];
  std::vector<double> out;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (test::unravel(i, shape)[axis] != 0) continue;
    int64_t best = 0;
    for (int64_t k = 1; k < n; ++k) {
      double v = xv[i + k * stride], b = xv[i + best * stride];
      if (v > b || (last && v == b)) best = k;
    }
    out.push_back(static_cast<double>(best));
  }
  return {Shape(out_dims), out};
}

void check_argmax(const Tensor& x, int64_t axis_attr, bool keepdims, bool last) {
  SCOPED_TRACE(x.shape().to_string() + " axis " + std::to_string(axis_attr));
  int axis = static_cast<int>(axis_attr < 0 ? axis_attr + x.rank() : axis_attr);
  auto out = run_op(
      "ArgMax", {x},
      {{"axis", axis_attr}, {"keepdims", keepdims ? 1 : 0}, {"select_last_index", last ? 1 : 0}});
  RefResult ref = ref_argmax(x, axis, keepdims, last);
  expect_equal(out[0], DType::kInt64, ref.shape, ref.values);
}

TEST(ArgMaxTest, Float32) {
  uint64_t seed = 700;
  for (const Shape& s : {Shape{7}, Shape{3, 4, 5}, Shape{2, 1, 3}, Shape{4, 600}, Shape{5, 3, 700}})
    for (int64_t axis = -s.rank(); axis < s.rank(); ++axis)
      for (bool keep : {true, false}) check_argmax(random_tensor(s, seed++), axis, keep, false);
}

TEST(ArgMaxTest, IntegersWithTies) {
  uint64_t seed = 800;
  for (DType dt : {DType::kInt64, DType::kInt32})
    for (const Shape& s : {Shape{9}, Shape{3, 4, 5}, Shape{6, 300}})
      for (int64_t axis = 0; axis < s.rank(); ++axis)
        for (bool last : {false, true})
          check_argmax(random_ints(s, seed++, -2, 2, dt), axis, true, last);
}

TEST(ArgMaxTest, FloatTiesAndDefaults) {
  Tensor x = Tensor::from_vector<float>({2, 4}, {1, 3, 3, 0, 2, 2, 2, 2});
  auto out = run_op("ArgMax", {x});
  expect_equal(out[0], DType::kInt64, {1, 4}, {1, 0, 0, 1});
  out = run_op("ArgMax", {x}, {{"axis", 1}, {"keepdims", 0}});
  expect_equal(out[0], DType::kInt64, {2}, {1, 0});
  out = run_op("ArgMax", {x}, {{"axis", 1}, {"select_last_index", 1}});
  expect_equal(out[0], DType::kInt64, {2, 1}, {2, 3});
}

TEST(ArgMaxTest, EmptyAndBad) {
  auto out = run_op("ArgMax", {Tensor::empty({0, 3})}, {{"axis", 1}});
  expect_equal(out[0], DType::kInt64, {0, 1}, {});
  EXPECT_THROW(run_op("ArgMax", {Tensor::empty({0, 3})}, {{"axis", 0}}), ShapeError);
  Tensor x = random_tensor({2, 3}, 900);
  EXPECT_THROW(run_op("ArgMax", {x}, {{"axis", 2}}), ShapeError);
  EXPECT_THROW(run_op("ArgMax", {x}, {{"axis", -3}}), ShapeError);
  EXPECT_THROW(run_op("ArgMax", {x}, {{"axes", {0}}}), InvalidModel);
  EXPECT_THROW(run_op("ArgMax", {x}, {{"select_last_index", 2}}), InvalidModel);
  EXPECT_THROW(run_op("ArgMax", {random_ints({2}, 901, 0, 1, DType::kBool)}), ShapeError);
}

}  // namespace
}  // namespace lumen
