// Tests of the unary element-wise ops (Relu ... HardSwish, Clip, Not) against naive double
// references, their special values and accuracy, in-place runs, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "graph/op_kind.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;
using test::expect_close;
using test::expect_equal;
using test::omitted;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

using Ref = std::function<double(double)>;

// Shapes every unary op runs on: scalar, vector, matrix, size-1 and empty dims, and one large
// enough for the multi-threaded path.
const std::vector<Shape>& unary_shapes() {
  static const std::vector<Shape> shapes = {Shape{},        Shape{7},       Shape{3, 5},
                                            Shape{1, 1, 9}, Shape{2, 0, 3}, Shape{300, 257}};
  return shapes;
}

std::vector<double> map_values(const Tensor& x, const Ref& f) {
  std::vector<double> out;
  for (double v : to_doubles(x)) out.push_back(f(v));
  return out;
}

// Runs `op` on random data in [lo, hi) over every shape and compares with `ref`.
void check_unary(const std::string& op, const Ref& ref, float lo, float hi,
                 const Attributes& attrs = {}, double atol = 1e-5, double rtol = 1e-4) {
  uint64_t seed = 1;
  for (const Shape& shape : unary_shapes()) {
    SCOPED_TRACE(op + " " + shape.to_string());
    Tensor x = random_tensor(shape, seed++, lo, hi);
    Tensor y = run_op(op, {x}, attrs)[0];
    EXPECT_EQ(y.dtype(), DType::kFloat32);
    expect_close(y, shape, map_values(x, ref), atol, rtol);
  }
}

double gelu_erf(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double hard_sigmoid(double x, double alpha, double beta) {
  return std::max(0.0, std::min(1.0, alpha * x + beta));
}

TEST(Unary, Relu) {
  check_unary(
      "Relu", [](double x) { return x > 0 ? x : 0.0; }, -3, 3);
}

TEST(Unary, LeakyRelu) {
  check_unary(
      "LeakyRelu", [](double x) { return x < 0 ? 0.01 * x : x; }, -3, 3);
  check_unary("LeakyRelu", [](double x) { return x < 0 ? 0.3 * x : x; }, -3, 3, {{"alpha", 0.3}});
}

TEST(Unary, SigmoidTanhExp) {
  check_unary(
      "Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -20, 20);
  check_unary(
      "Tanh", [](double x) { return std::tanh(x); }, -6, 6);
  check_unary(
      "Exp", [](double x) { return std::exp(x); }, -80, 80);
}

TEST(Unary, GeluBothApproximations) {
  check_unary("Gelu", gelu_erf, -6, 6);
  check_unary("Gelu", gelu_erf, -6, 6, {{"approximate", "none"}});
  check_unary("Gelu", gelu_tanh, -6, 6, {{"approximate", "tanh"}});
  // The two forms really differ: the tanh form must not pass the erf reference everywhere.
  Tensor x = random_tensor({1000}, 5, -4, 4);
  std::vector<double> got = to_doubles(run_op("Gelu", {x}, {{"approximate", "tanh"}})[0]);
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i)
    max_diff = std::max(max_diff, std::abs(got[i] - gelu_erf(x.data<float>()[i])));
  EXPECT_GT(max_diff, 1e-4);
}

TEST(Unary, ErfLogSqrt) {
  check_unary(
      "Erf", [](double x) { return std::erf(x); }, -5, 5);
  check_unary(
      "Log", [](double x) { return std::log(x); }, 0.01f, 50);
  check_unary(
      "Sqrt", [](double x) { return std::sqrt(x); }, 0, 50);
}

TEST(Unary, NegAbsReciprocal) {
  check_unary(
      "Neg", [](double x) { return -x; }, -5, 5);
  check_unary(
      "Abs", [](double x) { return std::abs(x); }, -5, 5);
  // Reciprocal away from zero: |x| in [0.25, 4].
  for (const Shape& shape : unary_shapes()) {
    Tensor x = random_tensor(shape, 9, -1, 1);
    float* p = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i)
      p[i] = std::copysign(0.25f + 3.75f * std::abs(p[i]), p[i]);
    expect_close(run_op("Reciprocal", {x})[0], shape,
                 map_values(x, [](double v) { return 1.0 / v; }));
  }
}

TEST(Unary, HardSigmoidHardSwish) {
  check_unary(
      "HardSigmoid", [](double x) { return hard_sigmoid(x, 0.2, 0.5); }, -5, 5);
  check_unary("HardSigmoid", [](double x) { return hard_sigmoid(x, 0.5, 0.1); }, -5, 5,
              {{"alpha", 0.5}, {"beta", 0.1}});
  check_unary(
      "HardSwish", [](double x) { return x * hard_sigmoid(x, 1.0 / 6, 0.5); }, -6, 6);
}

// The polynomial exp/tanh/sigmoid/erf stay within a few float ulp on a dense grid.
TEST(Unary, TranscendentalAccuracy) {
  std::vector<float> xs;
  for (int i = -20000; i <= 20000; ++i) xs.push_back(i * 4.4e-3f);  // [-88, 88]
  for (int i = -1000; i <= 1000; ++i) xs.push_back(i * 1e-6f);      // near zero
  Tensor x = Tensor::from_vector<float>({static_cast<int64_t>(xs.size())}, xs);
  auto check = [&](const char* op, const Ref& f, double atol) {
    SCOPED_TRACE(op);
    expect_close(run_op(op, {x})[0], x.shape(), map_values(x, f), atol, 2e-6);
  };
  check(
      "Exp", [](double v) { return std::exp(v); }, 0);
  check(
      "Tanh", [](double v) { return std::tanh(v); }, 0);
  check(
      "Sigmoid", [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, 1e-37);
  check(
      "Erf", [](double v) { return std::erf(v); }, 2e-7);
}

TEST(Unary, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from_vector<float>({7}, {nan, inf, -inf, 100.f, -120.f, 0.f, -0.f});
  auto got = [&](const char* op) { return to_doubles(run_op(op, {x})[0]); };
  std::vector<double> e = got("Exp");
  EXPECT_TRUE(std::isnan(e[0]));
  EXPECT_EQ(e[1], inf);
  EXPECT_EQ(e[2], 0.0);
  EXPECT_EQ(e[3], inf);
  EXPECT_EQ(e[4], 0.0);
  EXPECT_EQ(e[5], 1.0);
  std::vector<double> t = got("Tanh");
  EXPECT_TRUE(std::isnan(t[0]));
  EXPECT_EQ(t[1], 1.0);
  EXPECT_EQ(t[2], -1.0);
  EXPECT_EQ(t[4], -1.0);
  std::vector<double> s = got("Sigmoid");
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_EQ(s[1], 1.0);
  EXPECT_EQ(s[2], 0.0);
  EXPECT_EQ(s[5], 0.5);
  std::vector<double> f = got("Erf");
  EXPECT_TRUE(std::isnan(f[0]));
  EXPECT_EQ(f[1], 1.0);
  EXPECT_EQ(f[2], -1.0);
  for (const char* op : {"Relu", "Gelu", "Abs", "Neg", "Sqrt", "Log", "HardSwish"})
    EXPECT_TRUE(std::isnan(got(op)[0])) << op;
  EXPECT_TRUE(std::isnan(run_op("Clip", {x, constant(Tensor::scalar(0.f))})[0].item_as_double(0)));
}

TEST(Unary, NegAbsRelu_Ints) {
  for (DType dt : {DType::kInt64, DType::kInt32}) {
    for (const Shape& shape : {Shape{}, Shape{4, 6}, Shape{0}, Shape{200, 200}}) {
      Tensor x = random_ints(shape, 3, -1000, 1000, dt);
      std::vector<double> xs = to_doubles(x), neg, abs, relu;
      for (double v : xs) {
        neg.push_back(-v);
        abs.push_back(std::abs(v));
        relu.push_back(v > 0 ? v : 0);
      }
      expect_equal(run_op("Neg", {x})[0], dt, shape, neg);
      expect_equal(run_op("Abs", {x})[0], dt, shape, abs);
      expect_equal(run_op("Relu", {x})[0], dt, shape, relu);
    }
  }
}

TEST(Unary, Not) {
  for (const Shape& shape : {Shape{}, Shape{5, 7}, Shape{0, 2}, Shape{40000}}) {
    Tensor x = random_ints(shape, 4, 0, 1, DType::kBool);
    std::vector<double> want;
    for (double v : to_doubles(x)) want.push_back(v == 0 ? 1 : 0);
    expect_equal(run_op("Not", {x})[0], DType::kBool, shape, want);
  }
}

double clip_ref(double x, double lo, double hi) {
  return std::min(std::max(x, lo), hi);
}

TEST(Clip, WithAndWithoutBounds) {
  const double inf = std::numeric_limits<double>::infinity();
  for (const Shape& shape : unary_shapes()) {
    SCOPED_TRACE(shape.to_string());
    Tensor x = random_tensor(shape, 11, -3, 3);
    Tensor lo = Tensor::scalar(-0.5f), hi = Tensor::scalar(1.25f);
    auto want = [&](double l, double h) {
      return map_values(x, [&](double v) { return clip_ref(v, l, h); });
    };
    expect_close(run_op("Clip", {x})[0], shape, want(-inf, inf));
    expect_close(run_op("Clip", {x, constant(lo)})[0], shape, want(-0.5, inf));
    expect_close(run_op("Clip", {x, omitted(), constant(hi)})[0], shape, want(-inf, 1.25));
    expect_close(run_op("Clip", {x, constant(lo), constant(hi)})[0], shape, want(-0.5, 1.25));
    // Bounds that are graph inputs are read when the graph runs.
    expect_close(run_op("Clip", {x, lo, hi})[0], shape, want(-0.5, 1.25));
    expect_close(run_op("Clip", {x, omitted(), Tensor::from_vector<float>({1}, {0.f})})[0], shape,
                 want(-inf, 0.0));
  }
}

TEST(Clip, Ints) {
  for (DType dt : {DType::kInt64, DType::kInt32}) {
    Tensor x = random_ints({6, 9}, 12, -50, 50, dt);
    Tensor lo = random_ints({}, 0, -10, -10, dt), hi = random_ints({}, 0, 20, 20, dt);
    std::vector<double> want;
    for (double v : to_doubles(x)) want.push_back(clip_ref(v, -10, 20));
    expect_equal(run_op("Clip", {x, constant(lo), hi})[0], dt, x.shape(), want);
  }
}

// A kernel made straight from the registry and run with its output aliasing input 0, as the
// memory planner may arrange when in_place_input() says so.
TEST(Unary, InPlace) {
  Graph g;
  Value* in = g.add_input("x", {100, 1000});
  Value* out = g.add_op("Sigmoid", {in});
  const Node& node = g.node(out->producer);
  auto kernel = cpu::find_kernel(node.op)->make(NodeContext(g, node));
  EXPECT_EQ(kernel->in_place_input(), 0);
  Tensor x = random_tensor({100, 1000}, 13, -8, 8);
  std::vector<double> want = map_values(x, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  std::vector<Tensor> ins = {x}, outs = {x};
  KernelContext ctx{ins, outs, nullptr};
  kernel->run(ctx);
  expect_close(x, x.shape(), want);
}

TEST(UnaryErrors, BadInput) {
  Tensor f = random_tensor({2, 3}, 1);
  Tensor i64 = random_ints({2, 3}, 1, -5, 5);
  EXPECT_THROW(run_op("Sigmoid", {i64}), ShapeError);
  EXPECT_THROW(run_op("Not", {f}), ShapeError);
  EXPECT_THROW(run_op("Relu", {f}, {{"alpha", 0.1}}), InvalidModel);
  EXPECT_THROW(run_op("Gelu", {f}, {{"approximate", "fast"}}), InvalidModel);
  EXPECT_THROW(run_op("Gelu", {f}, {{"approximate", 1}}), InvalidModel);
  EXPECT_THROW(run_op("Clip", {f}, {{"min", 0.0}}), InvalidModel);
  EXPECT_THROW(run_op("Clip", {f, random_tensor({2}, 2)}), ShapeError);  // min not scalar
  EXPECT_THROW(run_op("Clip", {f, constant(Tensor::scalar<int64_t>(0))}), ShapeError);
  EXPECT_THROW(run_op("Relu", {f, f}), InvalidModel);
  EXPECT_THROW(run_op("Neg", {random_ints({3}, 1, -5, 5, DType::kInt8)}), UnsupportedOp);
}

}  // namespace
}  // namespace lumen
