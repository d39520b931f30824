// Tests of the further element-wise ops (trigonometric, rounding, Sign, IsNaN/IsInf, Elu ...
// ThresholdedRelu, PRelu, Mod, Xor, LessOrEqual/GreaterOrEqual, Sum/Mean, CastLike, Size) against
// naive double references on random data, broadcasting, special values and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::broadcast_source;
using test::constant;
using test::expect_close;
using test::expect_equal;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;
using test::unravel;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

// ---- unary ----

const std::vector<Shape>& unary_shapes() {
  static const std::vector<Shape> shapes = {Shape{},        Shape{7},       Shape{3, 5},
                                            Shape{1, 1, 9}, Shape{2, 0, 3}, Shape{260, 257}};
  return shapes;
}

// Runs `op` on random data in [lo, hi) over every shape and compares with `ref`.
void check_unary(const std::string& op, const std::function<double(double)>& ref, float lo,
                 float hi, const Attributes& attrs = {}, double atol = 1e-5, double rtol = 1e-4) {
  uint64_t seed = 11;
  for (const Shape& shape : unary_shapes()) {
    SCOPED_TRACE(op + " " + shape.to_string());
    Tensor x = random_tensor(shape, seed++, lo, hi);
    std::vector<double> want;
    for (double v : to_doubles(x)) want.push_back(ref(v));
    Tensor y = run_op(op, {x}, attrs)[0];
    ASSERT_EQ(y.dtype(), DType::kFloat32);
    expect_close(y, shape, want, atol, rtol);
  }
}

TEST(ElementwiseExtra, Trigonometric) {
  check_unary(
      "Sin", [](double x) { return std::sin(x); }, -10, 10);
  check_unary(
      "Cos", [](double x) { return std::cos(x); }, -10, 10);
  check_unary(
      "Tan", [](double x) { return std::tan(x); }, -1.4f, 1.4f);
  check_unary(
      "Asin", [](double x) { return std::asin(x); }, -0.99f, 0.99f);
  check_unary(
      "Acos", [](double x) { return std::acos(x); }, -0.99f, 0.99f);
  check_unary(
      "Atan", [](double x) { return std::atan(x); }, -20, 20);
}

TEST(ElementwiseExtra, Hyperbolic) {
  check_unary(
      "Sinh", [](double x) { return std::sinh(x); }, -6, 6);
  check_unary(
      "Cosh", [](double x) { return std::cosh(x); }, -6, 6);
  check_unary(
      "Asinh", [](double x) { return std::asinh(x); }, -50, 50);
  check_unary(
      "Acosh", [](double x) { return std::acosh(x); }, 1, 50);
  check_unary(
      "Atanh", [](double x) { return std::atanh(x); }, -0.99f, 0.99f);
}

TEST(ElementwiseExtra, Rounding) {
  check_unary(
      "Floor", [](double x) { return std::floor(x); }, -20, 20, {}, 0, 0);
  check_unary(
      "Ceil", [](double x) { return std::ceil(x); }, -20, 20, {}, 0, 0);
  // Round half to even, written out independently of the rounding mode.
  auto round_even = [](double x) {
    double f = std::floor(x), d = x - f;
    if (d < 0.5) return f;
    if (d > 0.5) return f + 1;
    return std::fmod(f, 2.0) == 0 ? f : f + 1;
  };
  check_unary("Round", round_even, -20, 20, {}, 0, 0);
  Tensor halves = Tensor::from_vector<float>(
      {10}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, 3.7f, -3.2f, kNaNF});
  expect_close(run_op("Round", {halves})[0], {10}, {0, 2, 2, -0, -2, -2, 0, 4, -3, kNaN}, 0, 0);
  Tensor special = Tensor::from_vector<float>({4}, {kInfF, -kInfF, -0.0f, 1e20f});
  for (const char* op : {"Floor", "Ceil", "Round"})
    expect_equal(run_op(op, {special})[0], DType::kFloat32, {4}, {INFINITY, -INFINITY, 0, 1e20f});
  for (const char* op : {"Floor", "Ceil"})
    expect_close(run_op(op, {Tensor::scalar(kNaNF)})[0], {}, {kNaN});
}

TEST(ElementwiseExtra, Sign) {
  auto sign = [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); };
  check_unary("Sign", sign, -3, 3, {}, 0, 0);
  Tensor special = Tensor::from_vector<float>({5}, {0.0f, -0.0f, kNaNF, -kInfF, 1e-30f});
  expect_close(run_op("Sign", {special})[0], {5}, {0, 0, kNaN, -1, 1}, 0, 0);
  for (DType dt : {DType::kInt32, DType::kInt64}) {
    Tensor x = random_ints({4, 33}, 5, -1000000, 1000000, dt);
    std::vector<double> want;
    for (double v : to_doubles(x)) want.push_back(sign(v));
    expect_equal(run_op("Sign", {x})[0], dt, {4, 33}, want);
  }
}

TEST(ElementwiseExtra, Activations) {
  auto elu = [](double a) { return [a](double x) { return x >= 0 ? x : a * (std::exp(x) - 1); }; };
  check_unary("Elu", elu(1.0), -6, 3);
  check_unary("Elu", elu(0.3), -6, 3, {{"alpha", 0.3}});
  auto selu = [](double a, double g) {
    return [a, g](double x) { return x > 0 ? g * x : g * (a * std::exp(x) - a); };
  };
  check_unary("Selu", selu(1.6732632423543772, 1.0507009873554805), -6, 3);
  check_unary("Selu", selu(2.0, 0.5), -6, 3, {{"alpha", 2.0}, {"gamma", 0.5}});
  auto celu = [](double a) {
    return [a](double x) { return std::max(0.0, x) + std::min(0.0, a * (std::exp(x / a) - 1)); };
  };
  check_unary("Celu", celu(1.0), -6, 3);
  check_unary("Celu", celu(2.5), -6, 3, {{"alpha", 2.5}});
  auto softplus = [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); };
  check_unary("Softplus", softplus, -30, 30);
  // Relative accuracy in the tails, where the result is tiny.
  check_unary("Softplus", softplus, -60, -2, {}, 0, 1e-5);
  check_unary(
      "Mish", [&](double x) { return x * std::tanh(softplus(x)); }, -60, -2, {}, 0, 1e-5);
  check_unary(
      "Softsign", [](double x) { return x / (1 + std::abs(x)); }, -10, 10);
  check_unary(
      "Mish", [&](double x) { return x * std::tanh(softplus(x)); }, -20, 20);
  auto thresholded = [](double a) { return [a](double x) { return x > a ? x : 0.0; }; };
  check_unary("ThresholdedRelu", thresholded(1.0), -3, 3);
  check_unary("ThresholdedRelu", thresholded(-0.5), -3, 3, {{"alpha", -0.5}});
  // Far tails and NaN.
  Tensor far = Tensor::from_vector<float>({4}, {-200.0f, 200.0f, kNaNF, 0.0f});
  expect_close(run_op("Softplus", {far})[0], {4}, {0, 200, kNaN, std::log(2.0)});
  expect_close(run_op("Mish", {far})[0], {4}, {0, 200, kNaN, 0});
  expect_close(run_op("Elu", {far})[0], {4}, {-1, 200, kNaN, 0});
  expect_close(run_op("Celu", {far})[0], {4}, {-1, 200, kNaN, 0});
}

TEST(ElementwiseExtra, IsNaNIsInf) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {kNaNF, kInfF, -kInfF, 0.0f, -3.5f, 3e38f});
  expect_equal(run_op("IsNaN", {x})[0], DType::kBool, {2, 3}, {1, 0, 0, 0, 0, 0});
  expect_equal(run_op("IsInf", {x})[0], DType::kBool, {2, 3}, {0, 1, 1, 0, 0, 0});
  expect_equal(run_op("IsInf", {x}, {{"detect_negative", 0}})[0], DType::kBool, {2, 3},
               {0, 1, 0, 0, 0, 0});
  expect_equal(run_op("IsInf", {x}, {{"detect_positive", 0}})[0], DType::kBool, {2, 3},
               {0, 0, 1, 0, 0, 0});
  expect_equal(run_op("IsInf", {x}, {{"detect_positive", 0}, {"detect_negative", 0}})[0],
               DType::kBool, {2, 3}, {0, 0, 0, 0, 0, 0});
  // A large tensor with special values sprinkled in (threaded path).
  Tensor big = random_tensor({300, 200}, 3, -1e30f, 1e30f);
  float* p = big.data<float>();
  for (int64_t i = 0; i < big.numel(); i += 7) p[i] = (i % 3 == 0) ? kNaNF : -kInfF;
  std::vector<double> nan_want, inf_want;
  for (double v : to_doubles(big)) {
    nan_want.push_back(std::isnan(v));
    inf_want.push_back(std::isinf(v));
  }
  expect_equal(run_op("IsNaN", {big})[0], DType::kBool, big.shape(), nan_want);
  expect_equal(run_op("IsInf", {big})[0], DType::kBool, big.shape(), inf_want);
  expect_equal(run_op("IsNaN", {Tensor::empty({0, 4})})[0], DType::kBool, {0, 4}, {});
}

// ---- broadcasting ----

struct Case {
  std::vector<Shape> in;
  Shape out;
};

const std::vector<Case>& binary_cases() {
  static const std::vector<Case> cases = {
      {{{3, 4}, {3, 4}}, {3, 4}},
      {{{3, 4}, {}}, {3, 4}},
      {{{}, {3, 4}}, {3, 4}},
      {{{2, 3, 4}, {4}}, {2, 3, 4}},
      {{{2, 3, 4}, {2, 3, 1}}, {2, 3, 4}},
      {{{5, 1}, {1, 6}}, {5, 6}},
      {{{2, 1, 4, 1}, {3, 1, 5}}, {2, 3, 4, 5}},
      {{{1}, {1, 1, 1}}, {1, 1, 1}},
      {{{2, 0, 3}, {3}}, {2, 0, 3}},
      {{{64, 700}, {700}}, {64, 700}},
      {{{70001}, {70001}}, {70001}},
      {{{3, 1, 40}, {1, 500, 40}}, {3, 500, 40}},
  };
  return cases;
}

using Fn = std::function<double(const std::vector<double>&)>;
using Maker = std::function<Tensor(const Shape&, uint64_t)>;

std::vector<double> reference(const std::vector<Tensor>& ins, const Shape& out, const Fn& f) {
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ins) vals.push_back(to_doubles(t));
  std::vector<double> want, args(ins.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, out);
    for (size_t k = 0; k < ins.size(); ++k)
      args[k] = vals[k][broadcast_source(idx, ins[k].shape())];
    want.push_back(f(args));
  }
  return want;
}

void check_cases(const std::string& op, const std::vector<Case>& cases,
                 const std::vector<Maker>& make, const Fn& f, DType out_dtype, bool exact,
                 const Attributes& attrs = {}) {
  uint64_t seed = 200;
  for (const Case& c : cases) {
    std::string shapes;
    for (const Shape& s : c.in) shapes += s.to_string();
    SCOPED_TRACE(op + " " + shapes);
    std::vector<Tensor> ins;
    std::vector<test::OpInput> args;
    for (size_t k = 0; k < c.in.size(); ++k) {
      ins.push_back(make[k % make.size()](c.in[k], seed++));
      args.emplace_back(ins.back());
    }
    Tensor got = run_op(op, args, attrs)[0];
    std::vector<double> want = reference(ins, c.out, f);
    if (exact) {
      expect_equal(got, out_dtype, c.out, want);
    } else {
      ASSERT_EQ(got.dtype(), out_dtype);
      expect_close(got, c.out, want);
    }
  }
}

Maker uniform(float lo, float hi) {
  return [=](const Shape& s, uint64_t seed) { return random_tensor(s, seed, lo, hi); };
}
Maker ints(DType dt, int64_t lo, int64_t hi) {
  return [=](const Shape& s, uint64_t seed) { return random_ints(s, seed, lo, hi, dt); };
}
// Integers in [lo, hi] with zeros replaced by `lo`.
Maker nonzero(DType dt, int64_t lo, int64_t hi) {
  return [=](const Shape& s, uint64_t seed) {
    std::vector<double> v = to_doubles(random_ints(s, seed, lo, hi, DType::kInt64));
    std::vector<int64_t> w;
    for (double d : v) w.push_back(d == 0 ? lo : static_cast<int64_t>(d));
    Tensor t = Tensor::from_vector<int64_t>(s, w);
    if (dt == DType::kInt64) return t;
    std::vector<int32_t> n(w.begin(), w.end());
    return Tensor::from_vector<int32_t>(s, n);
  };
}
// Small integers as float32, so that comparisons see ties.
Maker tied_floats() {
  return [](const Shape& s, uint64_t seed) {
    std::vector<double> v = to_doubles(random_ints(s, seed, -2, 2));
    return Tensor::from_vector<float>(s, std::vector<float>(v.begin(), v.end()));
  };
}

TEST(ElementwiseExtra, PRelu) {
  // Slope broadcast unidirectionally to X: per channel, scalar, last axis, full, size-1 dims.
  const std::vector<Case> cases = {
      {{{2, 3, 4, 5}, {3, 1, 1}}, {2, 3, 4, 5}},
      {{{2, 3, 4, 5}, {}}, {2, 3, 4, 5}},
      {{{2, 3, 4, 5}, {5}}, {2, 3, 4, 5}},
      {{{3, 4}, {3, 4}}, {3, 4}},
      {{{3, 4}, {1, 1}}, {3, 4}},
      {{{0, 4}, {4}}, {0, 4}},
      {{{8, 64, 100}, {64, 1}}, {8, 64, 100}},
  };
  auto prelu = [](auto& v) { return v[0] < 0 ? v[0] * v[1] : v[0]; };
  check_cases("PRelu", cases, {uniform(-3, 3), uniform(-1, 1)}, prelu, DType::kFloat32, false);
  check_cases("PRelu", cases, {ints(DType::kInt64, -50, 50), ints(DType::kInt64, -5, 5)}, prelu,
              DType::kInt64, true);
  check_cases("PRelu", cases, {ints(DType::kInt32, -50, 50), ints(DType::kInt32, -5, 5)}, prelu,
              DType::kInt32, true);
  // The slope must not widen X.
  EXPECT_THROW(run_op("PRelu", {random_tensor({3, 4}, 1), random_tensor({2, 3, 4}, 2)}),
               ShapeError);
  EXPECT_THROW(run_op("PRelu", {random_tensor({3, 1}, 1), random_tensor({3, 4}, 2)}), ShapeError);
  EXPECT_THROW(run_op("PRelu", {random_tensor({3, 4}, 1), random_tensor({3}, 2)}), ShapeError);
  EXPECT_THROW(run_op("PRelu", {random_tensor({3, 4}, 1), random_ints({4}, 2, 0, 2)}), ShapeError);
}

double python_mod(double a, double b) {
  double r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

TEST(ElementwiseExtra, Mod) {
  for (DType dt : {DType::kInt32, DType::kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    Maker a = ints(dt, -1000, 1000);
    Maker b = nonzero(dt, -13, 13);
    check_cases(
        "Mod", binary_cases(), {a, b}, [](auto& v) { return python_mod(v[0], v[1]); }, dt, true);
    check_cases("Mod", binary_cases(), {a, b}, [](auto& v) { return std::fmod(v[0], v[1]); }, dt,
                true, {{"fmod", 1}});
  }
  check_cases("Mod", binary_cases(), {uniform(-10, 10), uniform(0.5f, 3)},
              [](auto& v) { return std::fmod(v[0], v[1]); }, DType::kFloat32, false, {{"fmod", 1}});
  check_cases("Mod", binary_cases(), {uniform(-10, 10), uniform(-3, -0.5f)},
              [](auto& v) { return std::fmod(v[0], v[1]); }, DType::kFloat32, false, {{"fmod", 1}});
  // Every sign combination, and the minimum divided by -1.
  Tensor x = Tensor::from_vector<int64_t>({4}, {7, -7, 7, -7});
  Tensor y = Tensor::from_vector<int64_t>({4}, {3, 3, -3, -3});
  expect_equal(run_op("Mod", {x, y})[0], DType::kInt64, {4}, {1, 2, -2, -1});
  expect_equal(run_op("Mod", {x, y}, {{"fmod", 1}})[0], DType::kInt64, {4}, {1, -1, 1, -1});
  const int32_t lowest = std::numeric_limits<int32_t>::min();
  Tensor m = Tensor::from_vector<int32_t>({2}, {lowest, 5});
  Tensor neg1 = Tensor::from_vector<int32_t>({1}, {-1});
  expect_equal(run_op("Mod", {m, neg1})[0], DType::kInt32, {2}, {0, 0});
  expect_equal(run_op("Mod", {m, neg1}, {{"fmod", 1}})[0], DType::kInt32, {2}, {0, 0});
  // Integer division by zero is refused at run time; float fmod by zero is NaN.
  Tensor zero = Tensor::from_vector<int64_t>({2}, {3, 0});
  EXPECT_THROW(run_op("Mod", {x.reshape({4, 1}), zero}), InvalidArgument);
  EXPECT_THROW(run_op("Mod", {x.reshape({4, 1}), zero}, {{"fmod", 1}}), InvalidArgument);
  Tensor fz = Tensor::from_vector<float>({2}, {1.5f, -2.0f});
  expect_close(run_op("Mod", {fz, Tensor::scalar(0.0f)}, {{"fmod", 1}})[0], {2}, {kNaN, kNaN});
  // Attributes: fmod is 0 or 1 (floats take either since opset 28: newer_opsets_test).
  Tensor f = random_tensor({3}, 4);
  EXPECT_THROW(run_op("Mod", {x, y}, {{"fmod", 2}}), InvalidModel);
  EXPECT_THROW(run_op("Mod", {x, f}), ShapeError);
  EXPECT_THROW(run_op("Mod", {x, random_ints({3}, 1, 1, 5)}), ShapeError);
  Tensor bf16 = Tensor::zeros({3}, DType::kBFloat16);
  // bfloat16 runs in float32 between Casts: 0 mod 0 is NaN.
  Tensor bf16_mod = run_op("Mod", {bf16, bf16}, {{"fmod", 1}})[0];
  EXPECT_EQ(bf16_mod.dtype(), DType::kBFloat16);
  EXPECT_TRUE(std::isnan(bf16_mod.item_as_double(0)));
  // The narrow integers and float64 (ONNX's mixed-sign cases).
  Tensor i8a = Tensor::from_vector<int8_t>({4}, {-128, -7, 7, 100});
  Tensor i8b = Tensor::from_vector<int8_t>({4}, {-1, 3, -3, 7});
  expect_equal(run_op("Mod", {i8a, i8b})[0], DType::kInt8, {4}, {0, 2, -2, 2});
  expect_equal(run_op("Mod", {i8a, i8b}, {{"fmod", 1}})[0], DType::kInt8, {4}, {0, -1, 1, 2});
  Tensor u8a = Tensor::from_vector<uint8_t>({3}, {200, 7, 255});
  Tensor u8b = Tensor::from_vector<uint8_t>({3}, {255, 3, 16});
  expect_equal(run_op("Mod", {u8a, u8b})[0], DType::kUInt8, {3}, {200, 1, 15});
  Tensor d = Tensor::from_vector<double>({3}, {-4.3, 7.2, 5.0});
  Tensor e = Tensor::from_vector<double>({3}, {2.1, -3.4, 2.5});
  expect_close(run_op("Mod", {d, e}, {{"fmod", 1}})[0], {3},
               {std::fmod(-4.3, 2.1), std::fmod(7.2, -3.4), 0.0}, 1e-12, 1e-12);
}

TEST(ElementwiseExtra, XorAndOrderComparisons) {
  Maker flags = ints(DType::kBool, 0, 1);
  check_cases(
      "Xor", binary_cases(), {flags, flags}, [](auto& v) { return double(v[0] != v[1]); },
      DType::kBool, true);
  for (const Maker& m : {tied_floats(), ints(DType::kInt32, -2, 2), ints(DType::kInt64, -2, 2)}) {
    Tensor probe = m({1}, 0);
    SCOPED_TRACE(dtype_name(probe.dtype()));
    check_cases(
        "LessOrEqual", binary_cases(), {m, m}, [](auto& v) { return double(v[0] <= v[1]); },
        DType::kBool, true);
    check_cases(
        "GreaterOrEqual", binary_cases(), {m, m}, [](auto& v) { return double(v[0] >= v[1]); },
        DType::kBool, true);
  }
  Tensor nan = Tensor::from_vector<float>({3}, {kNaNF, 1.0f, kNaNF});
  Tensor one = Tensor::from_vector<float>({3}, {1.0f, kNaNF, kNaNF});
  expect_equal(run_op("LessOrEqual", {nan, one})[0], DType::kBool, {3}, {0, 0, 0});
  expect_equal(run_op("GreaterOrEqual", {nan, one})[0], DType::kBool, {3}, {0, 0, 0});
  Tensor f = random_tensor({3}, 1);
  EXPECT_THROW(run_op("Xor", {f, f}), ShapeError);
  EXPECT_THROW(run_op("LessOrEqual", {f, random_ints({3}, 1, 0, 3)}), ShapeError);
  EXPECT_THROW(run_op("GreaterOrEqual", {f, random_tensor({2}, 1)}), ShapeError);
  Tensor flag = random_ints({3}, 1, 0, 1, DType::kBool);
  EXPECT_THROW(run_op("LessOrEqual", {flag, flag}), ShapeError);
}

TEST(ElementwiseExtra, SumMean) {
  const std::vector<Case> cases = {
      {{{3, 4}}, {3, 4}},
      {{{3, 4}, {3, 4}}, {3, 4}},
      {{{2, 3, 4}, {4}, {2, 3, 1}}, {2, 3, 4}},
      {{{5, 1}, {1, 6}, {}, {5, 6}}, {5, 6}},
      {{{1}, {2, 1, 3}, {4, 1}, {1, 1, 1}, {3}}, {2, 4, 3}},
      {{{2, 0, 3}, {3}, {1, 3}}, {2, 0, 3}},
      {{{64, 700}, {700}, {64, 1}}, {64, 700}},
  };
  auto sum = [](auto& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
  };
  auto mean = [&](auto& v) { return sum(v) / static_cast<double>(v.size()); };
  check_cases("Sum", cases, {uniform(-3, 3)}, sum, DType::kFloat32, false);
  check_cases("Mean", cases, {uniform(-3, 3)}, mean, DType::kFloat32, false);
  check_cases("Sum", cases, {ints(DType::kInt32, -1000, 1000)}, sum, DType::kInt32, true);
  check_cases("Sum", cases, {ints(DType::kInt64, -1000, 1000)}, sum, DType::kInt64, true);
  Tensor f = random_tensor({3}, 1);
  Tensor i = random_ints({3}, 1, 0, 3);
  EXPECT_THROW(run_op("Sum", {f, i}), ShapeError);
  EXPECT_THROW(run_op("Sum", {f, random_tensor({2}, 1)}), ShapeError);
  EXPECT_THROW(run_op("Mean", {i, i}), ShapeError);
  EXPECT_THROW(run_op("Sum", {}), InvalidModel);
}

TEST(ElementwiseExtra, CastLike) {
  Tensor x = random_tensor({4, 9}, 3, -100, 100);
  std::vector<double> xs = to_doubles(x);
  std::vector<double> trunc, nonzero;
  for (double v : xs) {
    trunc.push_back(std::trunc(v));
    nonzero.push_back(v != 0);
  }
  expect_equal(run_op("CastLike", {x, Tensor::scalar<int32_t>(1)})[0], DType::kInt32, {4, 9},
               trunc);
  expect_equal(run_op("CastLike", {x, random_ints({2}, 1, 0, 5)})[0], DType::kInt64, {4, 9}, trunc);
  expect_equal(run_op("CastLike", {x, random_ints({}, 1, 0, 1, DType::kBool)})[0], DType::kBool,
               {4, 9}, nonzero);
  Tensor d = run_op("CastLike", {x, Tensor::scalar<double>(1.0)})[0];
  expect_close(d, {4, 9}, xs, 0, 0);
  EXPECT_EQ(d.dtype(), DType::kFloat64);
  Tensor n = random_ints({3, 0, 2}, 2, -9, 9);
  expect_close(run_op("CastLike", {n, random_tensor({5}, 1)})[0], {3, 0, 2}, {});
  Tensor big = random_ints({300, 300}, 2, -1000000, 1000000);
  expect_close(run_op("CastLike", {big, random_tensor({}, 1)})[0], big.shape(), to_doubles(big), 0,
               1e-7);
  Tensor same = run_op("CastLike", {x, random_tensor({7}, 9)})[0];
  expect_close(same, x.shape(), xs, 0, 0);
  EXPECT_THROW(run_op("CastLike", {x}), InvalidModel);
}

TEST(ElementwiseExtra, Size) {
  for (const Shape& s : {Shape{}, Shape{7}, Shape{3, 0, 2}, Shape{2, 3, 4}}) {
    SCOPED_TRACE(s.to_string());
    Tensor got = run_op("Size", {random_tensor(s, 1)})[0];
    expect_equal(got, DType::kInt64, {}, {static_cast<double>(s.numel())});
    got = run_op("Size", {random_ints(s, 1, 0, 1, DType::kBool)})[0];
    expect_equal(got, DType::kInt64, {}, {static_cast<double>(s.numel())});
  }
  // Known at build time: Size feeds a shape input.
  Graph g;
  Value* x = g.add_input("x", {2, 6});
  Value* n = g.add_op("Size", {x});
  ASSERT_TRUE(n->data.has_value());
  EXPECT_EQ(n->data->data<int64_t>()[0], 12);
}

TEST(ElementwiseExtra, BadInput) {
  Tensor i = random_ints({3}, 1, 0, 3, DType::kInt32);
  Tensor f64 = Tensor::from_vector<double>({2}, {0.5, -1.0});
  for (const char* op : {"Sin", "Acosh", "Floor", "Round", "IsNaN", "IsInf", "Elu", "Selu", "Celu",
                         "Softplus", "Softsign", "Mish", "ThresholdedRelu"}) {
    SCOPED_TRACE(op);
    EXPECT_THROW(run_op(op, {i}), ShapeError);
    // float64, which these kernels take only as float32, runs between Casts.
    EXPECT_EQ(run_op(op, {f64})[0].numel(), 2);
  }
  EXPECT_THROW(run_op("Sign", {random_ints({3}, 1, 0, 1, DType::kBool)}), ShapeError);
  EXPECT_EQ(run_op("Sign", {f64})[0].dtype(), DType::kFloat64);
  Tensor f = random_tensor({3}, 1);
  EXPECT_THROW(run_op("IsInf", {f}, {{"detect_negative", 2}}), InvalidModel);
  EXPECT_THROW(run_op("Celu", {f}, {{"alpha", 0.0}}), InvalidModel);
  EXPECT_THROW(run_op("Elu", {f}, {{"beta", 1.0}}), InvalidModel);
  EXPECT_THROW(run_op("Elu", {f}, {{"alpha", "x"}}), InvalidModel);
  EXPECT_THROW(run_op("Sin", {f, f}), InvalidModel);
  EXPECT_EQ(run_op("Mean", {f64, f64})[0].dtype(), DType::kFloat64);
}

}  // namespace
}  // namespace lumen
