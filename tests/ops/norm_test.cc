// Tests of BatchNormalization, LayerNormalization, Softmax and LogSoftmax against naive
// double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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

// --- references -------------------------------------------------------------------------------

std::vector<double> ref_batch_norm(const Tensor& x, const Tensor& scale, const Tensor& bias,
                                   const Tensor& mean, const Tensor& var, double eps) {
  std::vector<double> xv = to_doubles(x), s = to_doubles(scale), b = to_doubles(bias),
                      m = to_doubles(mean), v = to_doubles(var);
  int64_t channels = x.shape().dims()[1];
  int64_t spatial = 1;
  for (int d = 2; d < x.rank(); ++d) spatial *= x.shape().dims()[d];
  std::vector<double> out(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    int64_t c = (static_cast<int64_t>(i) / spatial) % channels;
    out[i] = (xv[i] - m[c]) / std::sqrt(v[c] + eps) * s[c] + b[c];
  }
  return out;
}

struct LayerNormRef {
  std::vector<double> y, mean, inv_std;
};

// Normalises over dims [axis, rank); scale and bias broadcast onto those dims.
LayerNormRef ref_layer_norm(const Tensor& x, int axis, const Tensor& scale, const Tensor* bias,
                            double eps) {
  const Shape& shape = x.shape();
  std::vector<int64_t> norm_dims(shape.dims().begin() + axis, shape.dims().end());
  Shape norm(norm_dims);
  int64_t n = norm.numel();
  int64_t rows = 1;
  for (int d = 0; d < axis; ++d) rows *= shape.dims()[d];
  std::vector<double> xv = to_doubles(x), s = to_doubles(scale);
  std::vector<double> b = bias ? to_doubles(*bias) : std::vector<double>();
  LayerNormRef r;
  r.y.resize(xv.size());
  for (int64_t row = 0; row < rows; ++row) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += xv[row * n + i];
    double mean = sum / n;
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += (xv[row * n + i] - mean) * (xv[row * n + i] - mean);
    double inv = 1.0 / std::sqrt(sq / n + eps);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> idx = test::unravel(i, norm);
      double sv = s[test::broadcast_source(idx, scale.shape())];
      double bv = bias ? b[test::broadcast_source(idx, bias->shape())] : 0.0;
      r.y[row * n + i] = (xv[row * n + i] - mean) * inv * sv + bv;
    }
    r.mean.push_back(mean);
    r.inv_std.push_back(inv);
  }
  return r;
}

std::vector<double> ref_softmax(const Tensor& x, int axis, bool log) {
  const Shape& shape = x.shape();
  std::vector<double> xv = to_doubles(x);
  std::vector<double> out(xv.size());
  int64_t stride = shape.strides()[axis];
  int64_t n = shape.dims()[axis];
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = test::unravel(i, shape);
    if (idx[axis] != 0) continue;
    double m = -INFINITY;
    for (int64_t k = 0; k < n; ++k) m = std::max(m, xv[i + k * stride]);
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += std::exp(xv[i + k * stride] - m);
    for (int64_t k = 0; k < n; ++k) {
      double v = xv[i + k * stride];
      out[i + k * stride] = log ? v - m - std::log(s) : std::exp(v - m) / s;
    }
  }
  return out;
}

Shape stats_shape(const Shape& x, int axis) {
  Shape s = x;
  for (int d = axis; d < x.rank(); ++d) s.dims()[d] = 1;
  return s;
}

// --- BatchNormalization ---------------------------------------------------------------------

void check_batch_norm(const Shape& shape, float eps, uint64_t seed) {
  int64_t c = shape.dims()[1];
  Tensor x = random_tensor(shape, seed, -3.0f, 3.0f);
  Tensor scale = random_tensor({c}, seed + 1, 0.5f, 2.0f);
  Tensor bias = random_tensor({c}, seed + 2);
  Tensor mean = random_tensor({c}, seed + 3);
  Tensor var = random_tensor({c}, seed + 4, 0.1f, 3.0f);
  Attributes attrs;
  if (eps != 1e-5f) attrs["epsilon"] = eps;
  auto out = run_op("BatchNormalization", {x, scale, bias, constant(mean), var}, attrs);
  expect_close(out[0], shape, ref_batch_norm(x, scale, bias, mean, var, eps));
}

TEST(BatchNormTest, Rank2) {
  check_batch_norm({6, 5}, 1e-5f, 1);
}
TEST(BatchNormTest, Rank3) {
  check_batch_norm({2, 3, 7}, 1e-3f, 2);
}
TEST(BatchNormTest, Rank4) {
  check_batch_norm({2, 3, 5, 7}, 1e-5f, 3);
}
TEST(BatchNormTest, Rank4Large) {
  check_batch_norm({4, 16, 32, 33}, 1e-5f, 4);
}
TEST(BatchNormTest, SizeOneDims) {
  check_batch_norm({1, 1, 1, 1}, 1e-5f, 5);
}
TEST(BatchNormTest, EmptyBatch) {
  check_batch_norm({0, 3, 2, 2}, 1e-5f, 6);
}

TEST(BatchNormTest, MomentumIsIgnored) {
  Tensor x = random_tensor({2, 3, 4}, 7);
  Tensor s = random_tensor({3}, 8), b = random_tensor({3}, 9), m = random_tensor({3}, 10);
  Tensor v = random_tensor({3}, 11, 0.5f, 1.5f);
  auto out =
      run_op("BatchNormalization", {x, s, b, m, v}, {{"momentum", 0.5f}, {"training_mode", 0}});
  expect_close(out[0], {2, 3, 4}, ref_batch_norm(x, s, b, m, v, 1e-5));
}

TEST(BatchNormTest, BadInputs) {
  Tensor x = random_tensor({2, 3, 4}, 12);
  Tensor c3 = random_tensor({3}, 13, 0.5f, 1.0f);
  Tensor c4 = random_tensor({4}, 14, 0.5f, 1.0f);
  EXPECT_THROW(run_op("BatchNormalization", {x, c3, c3, c3, c3}, {{"training_mode", 1}}),
               UnsupportedOp);
  EXPECT_THROW(run_op("BatchNormalization", {x, c4, c3, c3, c3}), ShapeError);
  EXPECT_THROW(run_op("BatchNormalization", {x, c3, c3, c3, c4}), ShapeError);
  EXPECT_THROW(run_op("BatchNormalization", {random_tensor({3}, 15), c3, c3, c3, c3}), ShapeError);
  EXPECT_THROW(run_op("BatchNormalization", {x, c3, c3, c3, c3}, {}, 3), InvalidModel);
  EXPECT_THROW(run_op("BatchNormalization", {x, c3, c3, c3}), InvalidModel);
  EXPECT_THROW(run_op("BatchNormalization", {test::random_ints({2, 3}, 16, 0, 5), c3, c3, c3, c3}),
               ShapeError);
  EXPECT_THROW(run_op("BatchNormalization", {x, c3, c3, c3, c3}, {{"epsilon", "x"}}), InvalidModel);
}

// --- LayerNormalization ---------------------------------------------------------------------

void check_layer_norm(const Shape& shape, int64_t axis_attr, const Shape& param_shape,
                      bool with_bias, int num_outputs, uint64_t seed, float lo = -2.0f,
                      float hi = 2.0f) {
  int axis = static_cast<int>(axis_attr < 0 ? axis_attr + shape.rank() : axis_attr);
  Tensor x = random_tensor(shape, seed, lo, hi);
  Tensor scale = random_tensor(param_shape, seed + 1, 0.5f, 1.5f);
  Tensor bias = random_tensor(param_shape, seed + 2);
  std::vector<test::OpInput> inputs = {x, scale};
  if (with_bias) inputs.push_back(bias);
  auto out = run_op("LayerNormalization", inputs, {{"axis", axis_attr}}, num_outputs);
  LayerNormRef ref = ref_layer_norm(x, axis, scale, with_bias ? &bias : nullptr, 1e-5);
  ASSERT_EQ(out.size(), static_cast<size_t>(num_outputs));
  expect_close(out[0], shape, ref.y, 1e-4, 1e-4);
  if (num_outputs > 1) expect_close(out[1], stats_shape(shape, axis), ref.mean, 1e-5, 1e-4);
  if (num_outputs > 2) expect_close(out[2], stats_shape(shape, axis), ref.inv_std, 1e-5, 1e-4);
}

TEST(LayerNormTest, LastAxisRank3) {
  check_layer_norm({2, 3, 4}, -1, {4}, true, 1, 20);
}
TEST(LayerNormTest, LastAxisNoBiasAllOutputs) {
  check_layer_norm({2, 3, 4}, -1, {4}, false, 3, 21);
}
TEST(LayerNormTest, Axis1Rank3AllOutputs) {
  check_layer_norm({2, 3, 4}, 1, {3, 4}, true, 3, 22);
}
TEST(LayerNormTest, Axis1NoBiasTwoOutputs) {
  check_layer_norm({2, 3, 4}, 1, {3, 4}, false, 2, 23);
}
TEST(LayerNormTest, Axis0ReducesEverything) {
  check_layer_norm({3, 5}, 0, {3, 5}, true, 3, 24);
}
TEST(LayerNormTest, BroadcastScale) {
  check_layer_norm({2, 3, 4}, 1, {4}, true, 3, 25);
}
TEST(LayerNormTest, BroadcastScaleSizeOne) {
  check_layer_norm({2, 3, 4}, -2, {3, 1}, true, 1, 26);
}
TEST(LayerNormTest, Rank1) {
  check_layer_norm({17}, -1, {17}, true, 3, 27);
}
TEST(LayerNormTest, LargeRowsWithOffset) {
  // Mean far from zero with a small spread: a one-pass E[x^2]-E[x]^2 would lose it.
  check_layer_norm({64, 1000}, -1, {1000}, true, 3, 28, 99.0f, 101.0f);
}
TEST(LayerNormTest, RowLengthsOfEveryKernelForm) {
  // Backends pick a kernel by row length (CUDA: a warp per row up to 256, 512 and 1024 values, a
  // block per row beyond); row counts that do not fill the last block.
  check_layer_norm({37, 200}, -1, {200}, true, 1, 40);
  check_layer_norm({9, 500}, -1, {500}, false, 1, 41);
  check_layer_norm({2, 65, 768}, -1, {768}, true, 1, 42);
  check_layer_norm({5, 1500}, -1, {1500}, true, 1, 43);
  check_layer_norm({6, 33}, -1, {33}, true, 1, 44);
}
TEST(LayerNormTest, EmptyRows) {
  check_layer_norm({0, 4}, -1, {4}, true, 3, 29);
}

TEST(LayerNormTest, Epsilon) {
  Tensor x = random_tensor({3, 8}, 30, -0.01f, 0.01f);
  Tensor s = random_tensor({8}, 31);
  auto out = run_op("LayerNormalization", {x, s, omitted()}, {{"epsilon", 1e-2f}});
  expect_close(out[0], {3, 8}, ref_layer_norm(x, 1, s, nullptr, 1e-2).y);
}

TEST(LayerNormTest, BadInputs) {
  Tensor x = random_tensor({2, 3, 4}, 32);
  Tensor s4 = random_tensor({4}, 33);
  EXPECT_THROW(run_op("LayerNormalization", {x, s4}, {{"axis", 3}}), ShapeError);
  EXPECT_THROW(run_op("LayerNormalization", {x, s4}, {{"axis", -4}}), ShapeError);
  EXPECT_THROW(run_op("LayerNormalization", {x, random_tensor({5}, 34)}), ShapeError);
  EXPECT_THROW(run_op("LayerNormalization", {x, s4, random_tensor({3}, 35)}), ShapeError);
  EXPECT_THROW(run_op("LayerNormalization", {x, random_tensor({3, 4}, 36)}), ShapeError);
  EXPECT_THROW(run_op("LayerNormalization", {x, s4}, {{"stash_type", 0}}), UnsupportedOp);
  EXPECT_THROW(run_op("LayerNormalization", {x, s4}, {}, 4), InvalidModel);
  EXPECT_THROW(run_op("LayerNormalization", {test::random_ints({2, 4}, 37, 0, 3), s4}), ShapeError);
}

// --- Softmax / LogSoftmax -------------------------------------------------------------------

void check_softmax(const std::string& op, const Shape& shape, int64_t axis_attr, uint64_t seed,
                   float lo = -3.0f, float hi = 3.0f, bool default_axis = false) {
  int axis = static_cast<int>(axis_attr < 0 ? axis_attr + shape.rank() : axis_attr);
  Tensor x = random_tensor(shape, seed, lo, hi);
  Attributes attrs;
  if (!default_axis) attrs["axis"] = axis_attr;
  auto out = run_op(op, {x}, attrs);
  expect_close(out[0], shape, ref_softmax(x, axis, op == "LogSoftmax"), 1e-6, 1e-4);
}

class SoftmaxTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SoftmaxTest, DefaultAxisIsLast) {
  check_softmax(GetParam(), {3, 4, 5}, -1, 40, -3, 3, true);
}
TEST_P(SoftmaxTest, Axis0) {
  check_softmax(GetParam(), {3, 4, 5}, 0, 41);
}
TEST_P(SoftmaxTest, Axis1) {
  check_softmax(GetParam(), {3, 4, 5}, 1, 42);
}
TEST_P(SoftmaxTest, AxisMinus1) {
  check_softmax(GetParam(), {3, 4, 5}, -1, 43);
}
TEST_P(SoftmaxTest, AxisMinus2Rank4) {
  check_softmax(GetParam(), {2, 3, 4, 5}, -2, 44);
}
TEST_P(SoftmaxTest, Rank1) {
  check_softmax(GetParam(), {9}, 0, 45);
}
TEST_P(SoftmaxTest, SizeOneAxis) {
  check_softmax(GetParam(), {4, 1, 3}, 1, 46);
}
TEST_P(SoftmaxTest, EmptyDim) {
  check_softmax(GetParam(), {0, 5}, 1, 47);
}
TEST_P(SoftmaxTest, LargeMagnitudeLastAxis) {
  check_softmax(GetParam(), {4, 33}, -1, 48, -5000.0f, 5000.0f);
}
TEST_P(SoftmaxTest, LargeMagnitudeAxis0) {
  check_softmax(GetParam(), {7, 3, 5}, 0, 49, 1000.0f, 1100.0f);
}
TEST_P(SoftmaxTest, LargeMagnitudeAxis1) {
  check_softmax(GetParam(), {3, 6, 5}, 1, 50, -1e4f, -0.9e4f);
}
TEST_P(SoftmaxTest, LargeParallelLastAxis) {
  check_softmax(GetParam(), {128, 1000}, -1, 51);
}
TEST_P(SoftmaxTest, LargeParallelMiddleAxis) {
  check_softmax(GetParam(), {3, 40, 700}, 1, 52);
}

TEST_P(SoftmaxTest, NegativeInfinityEntries) {
  std::string op = GetParam();
  float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector<float>({2, 3}, {1.0f, -inf, 2.0f, -inf, 0.5f, -inf});
  auto out = run_op(op, {x}, {{"axis", 1}});
  std::vector<double> want = ref_softmax(x, 1, op == "LogSoftmax");
  std::vector<double> got = to_doubles(out[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-6) << "element " << i;
    }
  }
}

TEST_P(SoftmaxTest, BadInputs) {
  std::string op = GetParam();
  EXPECT_THROW(run_op(op, {random_tensor({2, 3}, 53)}, {{"axis", 2}}), ShapeError);
  EXPECT_THROW(run_op(op, {random_tensor({2, 3}, 54)}, {{"axis", -3}}), ShapeError);
  EXPECT_THROW(run_op(op, {test::random_ints({2, 3}, 55, 0, 4)}), ShapeError);
  EXPECT_THROW(run_op(op, {random_tensor({2, 3}, 56)}, {{"axes", 1}}), InvalidModel);
}

INSTANTIATE_TEST_SUITE_P(Ops, SoftmaxTest, ::testing::Values("Softmax", "LogSoftmax"));

}  // namespace
}  // namespace lumen
