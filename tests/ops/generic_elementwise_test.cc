// Element-wise ops on every dtype the CUDA backend's generic kernels take (comparisons, logical
// and bitwise ops, Where, integer arithmetic, Mod, PRelu, the unary math, Cast, CastLike, Clip
// with run-time bounds), against plain-loop references, with NumPy broadcasting. Run with
// --lumen-backends=cuda,cpu on a GPU machine each test also checks its node ran on CUDA; without
// the flag they check the CPU, and with it on a machine without a GPU they skip.
#include <cmath>
#include <functional>

#include "ops/backend_check_util.h"

namespace lumen::test {
namespace {

const DType kNumeric[] = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64,
                          DType::kUInt8,   DType::kInt8,    DType::kInt16};

// want[i] = f(a at i, b at i) over the broadcast output shape `out`.
std::vector<double> broadcast_ref(const Tensor& a, const Tensor& b, const Shape& out,
                                  const std::function<double(double, double)>& f) {
  const std::vector<double> av = to_doubles(a), bv = to_doubles(b);
  std::vector<double> want(static_cast<size_t>(out.numel()));
  for (int64_t i = 0; i < out.numel(); ++i) {
    const std::vector<int64_t> idx = unravel(i, out);
    want[i] = f(av[broadcast_source(idx, a.shape())], bv[broadcast_source(idx, b.shape())]);
  }
  return want;
}

class GenericElementwise : public ::testing::Test {
 protected:
  void SetUp() override { LUMEN_SKIP_WITHOUT_BACKENDS(); }
};

TEST_F(GenericElementwise, ComparisonsBroadcastEveryDtype) {
  const Shape sa{4, 1, 6, 5}, sb{3, 1, 5}, out{4, 3, 6, 5};
  const std::vector<std::pair<std::string, std::function<double(double, double)>>> ops = {
      {"Less", [](double a, double b) { return a < b; }},
      {"LessOrEqual", [](double a, double b) { return a <= b; }},
      {"Greater", [](double a, double b) { return a > b; }},
      {"GreaterOrEqual", [](double a, double b) { return a >= b; }},
      {"Equal", [](double a, double b) { return a == b; }}};
  uint64_t seed = 1;
  for (DType dt : kNumeric) {
    const int64_t lo = dt == DType::kUInt8 ? 0 : -3;
    const Tensor a = int_valued(sa, dt, ++seed, lo, 3), b = int_valued(sb, dt, ++seed, lo, 3);
    for (const auto& [op, f] : ops) {
      SCOPED_TRACE(op + " " + dtype_name(dt));
      expect_equal(run_checked(op, {a, b})[0], DType::kBool, out, broadcast_ref(a, b, out, f));
    }
  }
  const Tensor p = random_ints({5, 7}, 3, 0, 1, DType::kBool);
  const Tensor q = random_ints({7}, 4, 0, 1, DType::kBool);
  expect_equal(run_checked("Equal", {p, q})[0], DType::kBool, Shape{5, 7},
               broadcast_ref(p, q, Shape{5, 7}, [](double a, double b) { return a == b; }));
}

TEST_F(GenericElementwise, LogicalAndBitwise) {
  const Tensor p = random_ints({2, 5, 7}, 11, 0, 1, DType::kBool);
  const Tensor q = random_ints({5, 1}, 12, 0, 1, DType::kBool);
  const Shape out{2, 5, 7};
  expect_equal(run_checked("And", {p, q})[0], DType::kBool, out,
               broadcast_ref(p, q, out, [](double a, double b) { return a && b; }));
  expect_equal(run_checked("Or", {p, q})[0], DType::kBool, out,
               broadcast_ref(p, q, out, [](double a, double b) { return a || b; }));
  expect_equal(run_checked("Xor", {p, q})[0], DType::kBool, out,
               broadcast_ref(p, q, out, [](double a, double b) { return a != b; }));
  std::vector<double> not_want;
  for (double v : to_doubles(p)) not_want.push_back(v == 0);
  expect_equal(run_checked("Not", {p})[0], DType::kBool, p.shape(), not_want);

  for (DType dt : {DType::kInt32, DType::kInt64, DType::kUInt8, DType::kInt16}) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t lo = dt == DType::kUInt8 ? 0 : -1000, hi = dt == DType::kUInt8 ? 255 : 1000;
    const Tensor a = random_ints({3, 4, 9}, 21, lo, hi, dt),
                 b = random_ints({4, 1}, 22, lo, hi, dt);
    const Shape o{3, 4, 9};
    auto bits = [&](auto f) {
      return broadcast_ref(a, b, o, [&](double x, double y) {
        return static_cast<double>(
            static_cast<int64_t>(f(static_cast<int64_t>(x), static_cast<int64_t>(y))));
      });
    };
    expect_equal(run_checked("BitwiseAnd", {a, b})[0], dt, o,
                 bits([](int64_t x, int64_t y) { return x & y; }));
    expect_equal(run_checked("BitwiseOr", {a, b})[0], dt, o,
                 bits([](int64_t x, int64_t y) { return x | y; }));
    expect_equal(run_checked("BitwiseXor", {a, b})[0], dt, o,
                 bits([](int64_t x, int64_t y) { return x ^ y; }));
    std::vector<double> inv;
    for (double v : to_doubles(a))
      inv.push_back(dt == DType::kUInt8 ? 255 - v : static_cast<double>(~static_cast<int64_t>(v)));
    expect_equal(run_checked("BitwiseNot", {a})[0], dt, a.shape(), inv);
  }
}

TEST_F(GenericElementwise, BitShiftBothWays) {
  for (DType dt : {DType::kUInt8, DType::kUInt32, DType::kInt32, DType::kUInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    const int bits = static_cast<int>(dtype_size(dt)) * 8;
    const Tensor x = random_ints({5, 13}, 28, 0, dt == DType::kUInt8 ? 255 : 100000, dt);
    const Tensor s = random_ints({13}, 29, 0, bits - 1, dt);
    const Shape out{5, 13};
    const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    expect_equal(run_checked("BitShift", {x, s}, {{"direction", "LEFT"}})[0], dt, out,
                 broadcast_ref(x, s, out, [&](double a, double b) {
                   const uint64_t v = (static_cast<uint64_t>(a) << static_cast<int>(b)) & mask;
                   return dt == DType::kInt32 ? static_cast<double>(static_cast<int32_t>(v))
                                              : static_cast<double>(v);
                 }));
    expect_equal(run_checked("BitShift", {x, s}, {{"direction", "RIGHT"}})[0], dt, out,
                 broadcast_ref(x, s, out, [](double a, double b) {
                   return static_cast<double>(static_cast<uint64_t>(a) >> static_cast<int>(b));
                 }));
  }
}

TEST_F(GenericElementwise, WhereBroadcastsThreeWays) {
  const Tensor c = random_ints({4, 1, 6}, 31, 0, 1, DType::kBool);
  const Shape out{2, 4, 5, 6};
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBool, DType::kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const bool is_bool = dt == DType::kBool;
    const Tensor a = int_valued({2, 1, 5, 6}, dt, 32, is_bool ? 0 : -9, is_bool ? 1 : 9);
    const Tensor b = int_valued({5, 1}, dt, 33, is_bool ? 0 : -9, is_bool ? 1 : 9);
    const std::vector<double> cv = to_doubles(c), av = to_doubles(a), bv = to_doubles(b);
    std::vector<double> want;
    for (int64_t i = 0; i < out.numel(); ++i) {
      const std::vector<int64_t> idx = unravel(i, out);
      want.push_back(cv[broadcast_source(idx, c.shape())] != 0
                         ? av[broadcast_source(idx, a.shape())]
                         : bv[broadcast_source(idx, b.shape())]);
    }
    expect_equal(run_checked("Where", {c, a, b})[0], dt, out, want);
  }
}

TEST_F(GenericElementwise, IntegerArithmeticAndMod) {
  const Shape out{3, 5, 8};
  for (DType dt : {DType::kInt32, DType::kInt64, DType::kInt16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = random_ints({3, 5, 8}, 41, -500, 500, dt);
    Tensor b = random_ints({5, 1}, 42, 1, 40, dt);  // divisors: no zero, mixed signs below
    const Tensor nb = random_ints({5, 1}, 43, -40, -1, dt);
    using F = std::function<double(double, double)>;
    const std::vector<std::pair<std::string, F>> ops = {
        {"Add", [](double x, double y) { return x + y; }},
        {"Sub", [](double x, double y) { return x - y; }},
        {"Mul", [](double x, double y) { return x * y; }},
        {"Div", [](double x, double y) { return std::trunc(x / y); }},
        {"Min", [](double x, double y) { return std::min(x, y); }},
        {"Max", [](double x, double y) { return std::max(x, y); }}};
    for (const auto& [op, f] : ops) {
      SCOPED_TRACE(op);
      // A constant divisor: one known only at run time is checked for zero on the host.
      expect_equal(run_checked(op, {a, constant(b)})[0], dt, out, broadcast_ref(a, b, out, f));
    }
    for (const Tensor& d : {b, nb}) {
      const auto floor_mod = [](double x, double y) { return x - std::floor(x / y) * y; };
      expect_equal(run_checked("Mod", {a, constant(d)})[0], dt, out,
                   broadcast_ref(a, d, out, floor_mod));
      expect_equal(run_checked("Mod", {a, constant(d)}, {{"fmod", int64_t{1}}})[0], dt, out,
                   broadcast_ref(a, d, out, [](double x, double y) { return std::fmod(x, y); }));
    }
  }
  const Tensor x = random_tensor({6, 7}, 44, -10.f, 10.f), y = random_tensor({7}, 45, 0.5f, 3.f);
  expect_close(
      run_checked("Mod", {x, y}, {{"fmod", int64_t{1}}})[0], Shape{6, 7},
      broadcast_ref(x, y, Shape{6, 7}, [](double p, double q) {
        return static_cast<double>(std::fmod(static_cast<float>(p), static_cast<float>(q)));
      }));
  const Tensor ny = random_tensor({7}, 48, -3.f, -0.5f);
  expect_close(run_checked("Mod", {x, ny})[0], Shape{6, 7},
               broadcast_ref(x, ny, Shape{6, 7},
                             [](double p, double q) {
                               const double r =
                                   std::fmod(static_cast<float>(p), static_cast<float>(q));
                               return r != 0 && ((r < 0) != (q < 0)) ? r + q : r;
                             }),
               1e-5, 1e-4);
  const Tensor d1 = random_doubles({4, 6}, 46, -2, 2), d2 = random_doubles({6}, 47, -2, 2);
  expect_close(run_checked("Add", {d1, d2})[0], Shape{4, 6},
               broadcast_ref(d1, d2, Shape{4, 6}, [](double p, double q) { return p + q; }), 1e-12,
               1e-12);
}

TEST_F(GenericElementwise, VariadicSumMeanMaxMin) {
  const Shape out{3, 4, 5};
  for (DType dt : {DType::kFloat32, DType::kInt32, DType::kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<Tensor> ins = {int_valued({4, 1}, dt, 53, -9, 9),
                                     int_valued({3, 4, 5}, dt, 54, -9, 9),
                                     int_valued({5}, dt, 55, -9, 9)};
    using F = std::function<double(double, double)>;
    const std::vector<std::pair<std::string, F>> ops = {
        {"Sum", [](double a, double b) { return a + b; }},
        {"Max", [](double a, double b) { return std::max(a, b); }},
        {"Min", [](double a, double b) { return std::min(a, b); }},
        {"Mean", [](double a, double b) { return a + b; }}};
    for (const auto& [op, f] : ops) {
      if (op == "Mean" && dt == DType::kInt32) continue;
      SCOPED_TRACE(op);
      for (size_t count : {1u, 3u}) {
        std::vector<double> want;
        for (int64_t i = 0; i < out.numel(); ++i) {
          const std::vector<int64_t> idx = unravel(i, out);
          double acc = to_doubles(ins[0])[broadcast_source(idx, ins[0].shape())];
          for (size_t j = 1; j < count; ++j)
            acc = f(acc, to_doubles(ins[j])[broadcast_source(idx, ins[j].shape())]);
          want.push_back(op == "Mean" ? acc / count : acc);
        }
        const std::vector<OpInput> inputs(ins.begin(), ins.begin() + count);
        const Shape shape = count == 1 ? ins[0].shape() : out;
        if (count == 1) want.resize(static_cast<size_t>(shape.numel()));
        if (count == 1) {
          const std::vector<double> first = to_doubles(ins[0]);
          for (size_t k = 0; k < want.size(); ++k) want[k] = first[k];
        }
        if (dt == DType::kInt32)
          expect_equal(run_checked(op, inputs)[0], dt, shape, want);
        else
          expect_close(run_checked(op, inputs)[0], shape, want, 1e-6, 1e-6);
      }
    }
  }
}

TEST_F(GenericElementwise, PowWithAnExponentOfAnotherType) {
  const Tensor base = random_tensor({4, 9}, 56, 0.5f, 2.f);
  const Tensor e64 = random_ints({9}, 57, -2, 3);
  expect_close(run_checked("Pow", {base, e64})[0], base.shape(),
               broadcast_ref(base, e64, base.shape(),
                             [](double a, double b) { return static_cast<float>(std::pow(a, b)); }),
               1e-6, 1e-5);
  const Tensor ibase = random_ints({6, 11}, 58, 0, 5, DType::kInt32);
  const Tensor fexp = int_valued({11}, DType::kFloat32, 59, 0, 3);
  expect_equal(run_checked("Pow", {ibase, fexp})[0], DType::kInt32, ibase.shape(),
               broadcast_ref(ibase, fexp, ibase.shape(),
                             [](double a, double b) { return std::trunc(std::pow(a, b)); }));
}

TEST_F(GenericElementwise, PReluBroadcastsItsSlope) {
  const Tensor x = random_tensor({2, 3, 4, 5}, 51), slope = random_tensor({3, 1, 1}, 52);
  expect_close(
      run_checked("PRelu", {x, slope})[0], x.shape(),
      broadcast_ref(x, slope, x.shape(), [](double v, double s) { return v < 0 ? v * s : v; }));
}

TEST_F(GenericElementwise, UnaryMath) {
  struct Case {
    std::string op;
    float lo, hi;
    std::function<double(double)> f;
    Attributes attrs;
  };
  const double selu_a = 1.67326319217681884765625, selu_g = 1.05070102214813232421875;
  const std::vector<Case> cases = {
      {"Tan", -1.2f, 1.2f, [](double v) { return std::tan(v); }, {}},
      {"Asin", -0.99f, 0.99f, [](double v) { return std::asin(v); }, {}},
      {"Acos", -0.99f, 0.99f, [](double v) { return std::acos(v); }, {}},
      {"Atan", -5.f, 5.f, [](double v) { return std::atan(v); }, {}},
      {"Sinh", -3.f, 3.f, [](double v) { return std::sinh(v); }, {}},
      {"Cosh", -3.f, 3.f, [](double v) { return std::cosh(v); }, {}},
      {"Asinh", -5.f, 5.f, [](double v) { return std::asinh(v); }, {}},
      {"Acosh", 1.01f, 6.f, [](double v) { return std::acosh(v); }, {}},
      {"Atanh", -0.95f, 0.95f, [](double v) { return std::atanh(v); }, {}},
      {"Sign", -2.f, 2.f, [](double v) { return v > 0   ? 1.0
                                                : v < 0 ? -1.0
                                                        : 0.0; }, {}},
      {"Round", -5.f, 5.f, [](double v) { return std::nearbyint(v); }, {}},
      {"Erf", -3.f, 3.f, [](double v) { return std::erf(v); }, {}},
      {"Softsign", -4.f, 4.f, [](double v) { return v / (1 + std::abs(v)); }, {}},
      {"Mish", -4.f, 4.f, [](double v) { return v * std::tanh(std::log1p(std::exp(v))); }, {}},
      {"Selu",
       -3.f,
       3.f,
       [=](double v) { return v > 0 ? selu_g * v : selu_g * (selu_a * std::exp(v) - selu_a); },
       {}},
      {"Celu",
       -3.f,
       3.f,
       [](double v) { return std::max(0.0, v) + std::min(0.0, 0.7 * (std::exp(v / 0.7) - 1)); },
       {{"alpha", 0.7f}}},
      {"ThresholdedRelu", -3.f, 3.f, [](double v) { return v > 0.4 ? v : 0.0; }, {{"alpha", 0.4f}}},
      {"Shrink",
       -3.f,
       3.f,
       [](double v) { return v < -1.5  ? v + 0.25
                             : v > 1.5 ? v - 0.25
                                       : 0.0; },
       {{"lambd", 1.5f}, {"bias", 0.25f}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    const Tensor x = random_tensor({3, 7, 11}, 61, c.lo, c.hi);
    std::vector<double> want;
    for (double v : to_doubles(x)) want.push_back(c.f(v));
    expect_close(run_checked(c.op, {x}, c.attrs)[0], x.shape(), want, 1e-5, 1e-4);
  }
  // The float-storage ops on float64 and integers (the generic path).
  const Tensor d = random_doubles({5, 9}, 62, 0.1, 4);
  std::vector<double> exp_want, sqrt_want;
  for (double v : to_doubles(d)) {
    exp_want.push_back(std::exp(v));
    sqrt_want.push_back(std::sqrt(v));
  }
  // (the CPU computes these through float32; the GPU in float64)
  expect_close(run_checked("Exp", {d})[0], d.shape(), exp_want, 1e-6, 1e-6);
  expect_close(run_checked("Sqrt", {d})[0], d.shape(), sqrt_want, 1e-6, 1e-6);
  const Tensor i = random_ints({6, 13}, 63, -100, 100, DType::kInt32);
  std::vector<double> neg, abs, sign;
  for (double v : to_doubles(i)) {
    neg.push_back(-v);
    abs.push_back(std::abs(v));
    sign.push_back(v > 0 ? 1 : v < 0 ? -1 : 0);
  }
  expect_equal(run_checked("Neg", {i})[0], DType::kInt32, i.shape(), neg);
  expect_equal(run_checked("Abs", {i})[0], DType::kInt32, i.shape(), abs);
  expect_equal(run_checked("Sign", {i})[0], DType::kInt32, i.shape(), sign);
}

TEST_F(GenericElementwise, IsNaNAndIsInf) {
  std::vector<float> v = random_floats(90, 71);
  for (size_t k = 0; k < v.size(); k += 7) v[k] = NAN;
  for (size_t k = 3; k < v.size(); k += 11) v[k] = INFINITY;
  for (size_t k = 5; k < v.size(); k += 13) v[k] = -INFINITY;
  const Tensor x = Tensor::from_vector<float>(Shape{9, 10}, v);
  std::vector<double> nan, inf, pos;
  for (float f : v) {
    nan.push_back(std::isnan(f));
    inf.push_back(std::isinf(f));
    pos.push_back(std::isinf(f) && f > 0);
  }
  expect_equal(run_checked("IsNaN", {x})[0], DType::kBool, x.shape(), nan);
  expect_equal(run_checked("IsInf", {x})[0], DType::kBool, x.shape(), inf);
  expect_equal(run_checked("IsInf", {x}, {{"detect_negative", int64_t{0}}})[0], DType::kBool,
               x.shape(), pos);
}

// ONNX's TensorProto code of a dtype.
int64_t onnx_code(DType dt) {
  switch (dt) {
    case DType::kFloat32:
      return 1;
    case DType::kUInt8:
      return 2;
    case DType::kInt8:
      return 3;
    case DType::kInt16:
      return 5;
    case DType::kInt32:
      return 6;
    case DType::kInt64:
      return 7;
    case DType::kBool:
      return 9;
    case DType::kFloat16:
      return 10;
    case DType::kFloat64:
      return 11;
    case DType::kUInt32:
      return 12;
    default:
      return 0;
  }
}

// A value converted as Cast does (values kept inside every type's range by the test).
double cast_ref(double v, DType to) {
  switch (to) {
    case DType::kFloat32:
      return static_cast<float>(v);
    case DType::kFloat64:
      return v;
    case DType::kBool:
      return v != 0;
    case DType::kUInt8:
      return static_cast<uint8_t>(static_cast<int64_t>(std::trunc(v)));
    case DType::kInt8:
      return static_cast<int8_t>(static_cast<int64_t>(std::trunc(v)));
    default:
      return std::trunc(v);
  }
}

TEST_F(GenericElementwise, CastBetweenEveryPair) {
  const DType types[] = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64,
                         DType::kUInt8,   DType::kInt8,    DType::kBool,  DType::kInt16};
  for (DType from : types) {
    Tensor x;
    if (from == DType::kFloat32)
      x = random_tensor({4, 33}, 81, -100.f, 100.f);
    else if (from == DType::kFloat64)
      x = random_doubles({4, 33}, 82, -100, 100);
    else
      x = int_valued({4, 33}, from, 83, from == DType::kBool || from == DType::kUInt8 ? 0 : -100,
                     from == DType::kBool ? 1 : 100);
    for (DType to : types) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      std::vector<double> want;
      for (double v : to_doubles(x)) want.push_back(cast_ref(v, to));
      const Tensor got = run_checked("Cast", {x}, {{"to", onnx_code(to)}})[0];
      if (to == DType::kFloat32 || to == DType::kFloat64)
        expect_close(got, x.shape(), want, 0, 0);
      else
        expect_equal(got, to, x.shape(), want);
    }
  }
  // Float16 through CastLike (rounding to nearest: within half's precision).
  const Tensor x = random_tensor({8, 16}, 84, -4.f, 4.f);
  const Tensor like = Tensor::zeros({1}, DType::kFloat16);
  const Tensor h = run_checked("CastLike", {x, like})[0];
  ASSERT_EQ(h.dtype(), DType::kFloat16);
  expect_close(h, x.shape(), to_doubles(x), 0, 1.0 / 1024);
}

TEST_F(GenericElementwise, ClipWithRunTimeBounds) {
  const Tensor x = random_tensor({5, 6, 7}, 91, -3.f, 3.f);
  const Tensor lo = Tensor::scalar<float>(-1.25f), hi = Tensor::scalar<float>(0.75f);
  std::vector<double> both, upper;
  for (double v : to_doubles(x)) {
    both.push_back(std::min(std::max(v, -1.25), 0.75));
    upper.push_back(std::min(v, 0.75));
  }
  expect_close(run_checked("Clip", {x, lo, hi})[0], x.shape(), both);
  expect_close(run_checked("Clip", {x, omitted(), hi})[0], x.shape(), upper);
  expect_close(run_checked("Clip", {x, constant(lo), constant(hi)})[0], x.shape(), both);
  const Tensor i = random_ints({9, 11}, 92, -50, 50, DType::kInt32);
  std::vector<double> iwant;
  for (double v : to_doubles(i)) iwant.push_back(std::min(std::max(v, -7.0), 20.0));
  expect_equal(
      run_checked("Clip", {i, Tensor::scalar<int32_t>(-7), Tensor::scalar<int32_t>(20)})[0],
      DType::kInt32, i.shape(), iwant);
}

TEST_F(GenericElementwise, SmallInt64ShapeArithmeticStaysOnTheHost) {
  // With the GPU first, a small int64 Add (shape arithmetic) still runs on the host.
  const Tensor a = random_ints({4}, 95, 0, 9), b = random_ints({4}, 96, 0, 9);
  const std::vector<double> want =
      broadcast_ref(a, b, Shape{4}, [](double x, double y) { return x + y; });
  expect_equal(run_checked("Add", {a, b}, {}, 1, "cpu")[0], DType::kInt64, Shape{4}, want);
}

TEST_F(GenericElementwise, BadShapesAreErrors) {
  const Tensor a = random_ints({3, 4}, 97, 0, 9, DType::kInt32);
  const Tensor b = random_ints({5}, 98, 0, 9, DType::kInt32);
  expect_error<Error>([&] { run_checked("Less", {a, b}); }, "Less");
  expect_error<Error>([&] { run_checked("BitwiseAnd", {a, b}); }, "BitwiseAnd");
}

}  // namespace
}  // namespace lumen::test
