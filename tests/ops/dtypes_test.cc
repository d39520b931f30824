// The element-wise ops on the dtypes beyond float32/int32/int64 (int8, uint8, int16, uint16,
// uint32, uint64, float64, float16), and BitShift, each against a naive reference on random,
// broadcast inputs; plus the dtypes' refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::broadcast_source;
using test::constant;
using test::run_op;
using test::unravel;

// A float16 element in the tests: its bits.
struct Half {
  uint16_t bits;
};

template <typename T>
DType dtype_of() {
  if constexpr (std::is_same_v<T, Half>) {
    return DType::kFloat16;
  } else {
    return DTypeOf<T>::value;
  }
}

template <typename T>
std::vector<T> elems(const Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  const char* p = static_cast<const char*>(t.raw_data());
  for (size_t i = 0; i < v.size(); ++i) {
    T x;
    std::memcpy(&x, p + i * sizeof(T), sizeof(T));
    v[i] = x;
  }
  return v;
}

template <typename T>
Tensor tensor_of(const Shape& shape, const std::vector<T>& v) {
  Tensor t = Tensor::empty(shape, dtype_of<T>());
  char* p = static_cast<char*>(t.raw_data());
  for (size_t i = 0; i < v.size(); ++i) {
    const T x = v[i];
    std::memcpy(p + i * sizeof(T), &x, sizeof(T));
  }
  return t;
}

// Random values in [lo, hi] (whole numbers for integer types).
template <typename T>
Tensor random_of(const Shape& shape, uint64_t seed, double lo, double hi) {
  if constexpr (std::is_integral_v<T>) {
    return test::random_ints(shape, seed, static_cast<int64_t>(lo), static_cast<int64_t>(hi),
                             dtype_of<T>());
  } else {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<T> v(static_cast<size_t>(shape.numel()));
    for (T& x : v) {
      if constexpr (std::is_same_v<T, Half>) {
        x.bits = float_to_half(static_cast<float>(dist(rng)));
      } else {
        x = static_cast<T>(dist(rng));
      }
    }
    return tensor_of(shape, v);
  }
}

// Checks dtype, shape and every element's bytes.
template <typename T>
void expect_elems(const Tensor& got, const Shape& shape, const std::vector<T>& want) {
  ASSERT_EQ(got.dtype(), dtype_of<T>());
  ASSERT_EQ(got.shape(), shape);
  std::vector<T> g = elems<T>(got);
  for (size_t i = 0; i < want.size(); ++i) {
    const T gi = g[i], wi = want[i];
    ASSERT_EQ(std::memcmp(&gi, &wi, sizeof(T)), 0)
        << "element " << i << ": got " << got.item_as_double(static_cast<int64_t>(i));
  }
}

// Runs `op` on inputs of element type T broadcast together and compares with ref(values at each
// output element), whose result type is TO.
template <typename T, typename TO, typename Ref>
void check_op(const std::string& op, const std::vector<Tensor>& inputs, Ref ref,
              const Attributes& attrs = {}) {
  std::vector<test::OpInput> ins(inputs.begin(), inputs.end());
  Tensor got = run_op(op, ins, attrs)[0];
  Shape out = inputs[0].shape();
  for (const Tensor& t : inputs) out = broadcast_shapes(out, t.shape());
  std::vector<std::vector<T>> values;
  for (const Tensor& t : inputs) values.push_back(elems<T>(t));
  std::vector<TO> want(static_cast<size_t>(out.numel()));
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, out);
    std::vector<T> v;
    for (size_t k = 0; k < inputs.size(); ++k)
      v.push_back(values[k][broadcast_source(idx, inputs[k].shape())]);
    want[i] = ref(v);
  }
  expect_elems<TO>(got, out, want);
}

// Wrapping arithmetic, as two's complement: computed in uint64, reduced to T's width.
template <typename T>
T wrap(uint64_t v) {
  return static_cast<T>(v);
}

template <typename T>
class IntegerOps : public ::testing::Test {};
using IntegerTypes =
    ::testing::Types<int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t>;
TYPED_TEST_SUITE(IntegerOps, IntegerTypes);

template <typename T>
double lowest() {
  return std::is_signed_v<T> ? static_cast<double>(std::numeric_limits<T>::lowest()) : 0.0;
}
template <typename T>
double highest() {
  return std::min(static_cast<double>(std::numeric_limits<T>::max()), 9.2e18);
}

TYPED_TEST(IntegerOps, ArithmeticWrapsLikeTwosComplement) {
  using T = TypeParam;
  Tensor a = random_of<T>({3, 4, 5}, 1, lowest<T>(), highest<T>());
  Tensor b = random_of<T>({4, 1}, 2, lowest<T>(), highest<T>());
  auto u = [](T x) { return static_cast<uint64_t>(x); };
  check_op<T, T>("Add", {a, b}, [&](auto& v) { return wrap<T>(u(v[0]) + u(v[1])); });
  check_op<T, T>("Sub", {a, b}, [&](auto& v) { return wrap<T>(u(v[0]) - u(v[1])); });
  check_op<T, T>("Mul", {a, b}, [&](auto& v) { return wrap<T>(u(v[0]) * u(v[1])); });
  check_op<T, T>("Sum", {a, b, a}, [&](auto& v) { return wrap<T>(u(v[0]) + u(v[1]) + u(v[2])); });
}

TYPED_TEST(IntegerOps, DivisionAndModulo) {
  using T = TypeParam;
  Tensor a = random_of<T>({2, 3, 7}, 3, lowest<T>() / 2, highest<T>() / 2);
  std::vector<T> bv = elems<T>(random_of<T>({3, 1}, 4, std::is_signed_v<T> ? -50 : 1, 50));
  for (T& x : bv)
    if (x == 0) x = 7;
  bv[0] = std::is_signed_v<T> ? T(-1) : T(1);
  Tensor b = tensor_of<T>({3, 1}, bv);
  if constexpr (std::is_signed_v<T>) {
    auto s = [](T x) { return static_cast<int64_t>(x); };
    check_op<T, T>("Div", {a, b}, [&](auto& v) { return static_cast<T>(s(v[0]) / s(v[1])); });
    check_op<T, T>("Mod", {a, b}, [&](auto& v) {
      return static_cast<T>((s(v[0]) % s(v[1]) + s(v[1])) % s(v[1]));
    });
    check_op<T, T>("Mod", {a, b}, [&](auto& v) { return static_cast<T>(s(v[0]) % s(v[1])); },
                   {{"fmod", 1}});
  } else {
    auto u = [](T x) { return static_cast<uint64_t>(x); };
    check_op<T, T>("Div", {a, b}, [&](auto& v) { return static_cast<T>(u(v[0]) / u(v[1])); });
    for (int64_t fmod : {0, 1})
      check_op<T, T>("Mod", {a, b}, [&](auto& v) { return static_cast<T>(u(v[0]) % u(v[1])); },
                     {{"fmod", fmod}});
  }
  std::vector<T> zero = bv;
  zero[1] = 0;
  EXPECT_THROW(run_op("Div", {a, tensor_of<T>({3, 1}, zero)}), InvalidArgument);
}

TYPED_TEST(IntegerOps, MinMaxAndComparisons) {
  using T = TypeParam;
  Tensor a = random_of<T>({2, 3, 4}, 5, lowest<T>(), highest<T>());
  Tensor b = random_of<T>({3, 1}, 6, lowest<T>(), highest<T>());
  Tensor c = random_of<T>({4}, 7, lowest<T>(), highest<T>());
  check_op<T, T>("Min", {a, b, c}, [](auto& v) { return std::min({v[0], v[1], v[2]}); });
  check_op<T, T>("Max", {a, b, c}, [](auto& v) { return std::max({v[0], v[1], v[2]}); });
  // Few distinct values, so that equal pairs occur.
  Tensor x = random_of<T>({3, 4}, 8, 0, 3), y = random_of<T>({4}, 9, 0, 3);
  check_op<T, bool>("Equal", {x, y}, [](auto& v) { return v[0] == v[1]; });
  check_op<T, bool>("Less", {x, y}, [](auto& v) { return v[0] < v[1]; });
  check_op<T, bool>("Greater", {x, y}, [](auto& v) { return v[0] > v[1]; });
  check_op<T, bool>("LessOrEqual", {x, y}, [](auto& v) { return v[0] <= v[1]; });
  check_op<T, bool>("GreaterOrEqual", {x, y}, [](auto& v) { return v[0] >= v[1]; });
}

TYPED_TEST(IntegerOps, ClipWithKnownAndRuntimeBounds) {
  using T = TypeParam;
  Tensor x = random_of<T>({5, 6}, 10, lowest<T>(), highest<T>());
  T lo = elems<T>(random_of<T>({1}, 11, lowest<T>() / 2, 0))[0];
  T hi = elems<T>(random_of<T>({1}, 12, 0, highest<T>() / 2))[0];
  auto clamp = [&](T v) { return std::min(std::max(v, lo), hi); };
  Tensor got = run_op("Clip", {x, constant(tensor_of<T>({}, {lo})), tensor_of<T>({}, {hi})})[0];
  std::vector<T> want;
  for (T v : elems<T>(x)) want.push_back(clamp(v));
  expect_elems<T>(got, x.shape(), want);
  got = run_op("Clip", {x, test::omitted(), constant(tensor_of<T>({}, {hi}))})[0];
  want.clear();
  for (T v : elems<T>(x)) want.push_back(std::min(v, hi));
  expect_elems<T>(got, x.shape(), want);
}

TYPED_TEST(IntegerOps, CastToAndFromFloatAndInt64) {
  using T = TypeParam;
  Tensor x = random_of<T>({4, 5}, 13, lowest<T>(), highest<T>());
  std::vector<T> xv = elems<T>(x);
  std::vector<double> as_double;
  std::vector<int64_t> as_int64;
  for (T v : xv) {
    as_double.push_back(static_cast<double>(v));
    as_int64.push_back(static_cast<int64_t>(v));
  }
  expect_elems<double>(run_op("Cast", {x}, {{"to", int64_t{11}}})[0], x.shape(), as_double);
  expect_elems<int64_t>(run_op("Cast", {x}, {{"to", int64_t{7}}})[0], x.shape(), as_int64);
  // Back from int64 (wrapping) and from float64 (in range: exact).
  Tensor wide = random_of<int64_t>({4, 5}, 14, -1e12, 1e12);
  std::vector<T> wrapped;
  for (int64_t v : elems<int64_t>(wide)) wrapped.push_back(wrap<T>(static_cast<uint64_t>(v)));
  int32_t onnx_code = 0;
  switch (dtype_of<T>()) {
    case DType::kInt8:
      onnx_code = 3;
      break;
    case DType::kUInt8:
      onnx_code = 2;
      break;
    case DType::kInt16:
      onnx_code = 5;
      break;
    case DType::kUInt16:
      onnx_code = 4;
      break;
    case DType::kInt32:
      onnx_code = 6;
      break;
    case DType::kUInt32:
      onnx_code = 12;
      break;
    case DType::kInt64:
      onnx_code = 7;
      break;
    default:
      onnx_code = 13;
      break;
  }
  expect_elems<T>(run_op("Cast", {wide}, {{"to", int64_t{onnx_code}}})[0], wide.shape(), wrapped);
  Tensor small = random_of<double>({7}, 15, 0, 100);
  std::vector<T> truncated;
  for (double v : elems<double>(small)) truncated.push_back(static_cast<T>(std::trunc(v)));
  expect_elems<T>(run_op("Cast", {small}, {{"to", int64_t{onnx_code}}})[0], small.shape(),
                  truncated);
}

// Float to integer where ONNX leaves the result undefined (a fuzz finding: C++ makes it undefined
// behaviour): NaN becomes 0, values beyond the target's range saturate, the rest truncate.
TEST(CastDtypes, FloatOutOfRangeSaturatesAndNanIsZero) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_vector<float>(
      {9}, {std::nanf(""), -1e34f, 1e34f, -inf, inf, 3.7f, -3.7f, 2147483648.f, -2147483904.f});
  const int32_t lo32 = std::numeric_limits<int32_t>::min(),
                hi32 = std::numeric_limits<int32_t>::max();
  const int64_t lo64 = std::numeric_limits<int64_t>::min(),
                hi64 = std::numeric_limits<int64_t>::max();
  expect_elems<int32_t>(run_op("Cast", {x}, {{"to", int64_t{6}}})[0], x.shape(),
                        {0, lo32, hi32, lo32, hi32, 3, -3, hi32, lo32});
  expect_elems<int64_t>(run_op("Cast", {x}, {{"to", int64_t{7}}})[0], x.shape(),
                        {0, lo64, hi64, lo64, hi64, 3, -3, 2147483648LL, -2147483904LL});
  // int8 goes through int32 and wraps: the saturated int32 limits keep their low byte.
  expect_elems<int8_t>(run_op("Cast", {x}, {{"to", int64_t{3}}})[0], x.shape(),
                       {0, 0, -1, 0, -1, 3, -3, -1, 0});
  Tensor d = Tensor::from_vector<double>({3}, {std::nan(""), 1e300, -1e300});
  expect_elems<int64_t>(run_op("Cast", {d}, {{"to", int64_t{7}}})[0], d.shape(), {0, hi64, lo64});
}

// ---- floating point ----

TEST(FloatDtypes, Float64ArithmeticMinMaxAndMod) {
  Tensor a = random_of<double>({3, 4, 5}, 20, -10, 10);
  Tensor b = random_of<double>({4, 1}, 21, 0.5, 5);
  check_op<double, double>("Add", {a, b}, [](auto& v) { return v[0] + v[1]; });
  check_op<double, double>("Div", {a, b}, [](auto& v) { return v[0] / v[1]; });
  check_op<double, double>("Min", {a, b}, [](auto& v) { return std::min(v[0], v[1]); });
  check_op<double, double>("Max", {a, b}, [](auto& v) { return std::max(v[0], v[1]); });
  check_op<double, double>("Mod", {a, b}, [](auto& v) { return std::fmod(v[0], v[1]); },
                           {{"fmod", 1}});
  check_op<double, double>("Clip", {a}, [](auto& v) { return v[0]; });
  check_op<double, double>("Sub", {a, b}, [](auto& v) { return v[0] - v[1]; });
  check_op<double, double>("Mul", {a, b}, [](auto& v) { return v[0] * v[1]; });
  check_op<double, double>("Sum", {a, b, b}, [](auto& v) { return v[0] + v[1] + v[2]; });
  check_op<double, bool>("Equal", {a, a}, [](auto& v) { return v[0] == v[1]; });
  check_op<double, bool>("Greater", {a, b}, [](auto& v) { return v[0] > v[1]; });
  check_op<double, bool>("LessOrEqual", {a, b}, [](auto& v) { return v[0] <= v[1]; });
}

// float16 results are the float32 result rounded to nearest even.
TEST(FloatDtypes, Float16ArithmeticMinMaxAndMod) {
  Tensor a = random_of<Half>({3, 4, 5}, 22, -10, 10);
  Tensor b = random_of<Half>({4, 1}, 23, 0.5, 5);
  auto f = [](Half h) { return half_to_float(h.bits); };
  auto h = [](float x) { return Half{float_to_half(x)}; };
  check_op<Half, Half>("Add", {a, b}, [&](auto& v) { return h(f(v[0]) + f(v[1])); });
  check_op<Half, Half>("Sub", {a, b}, [&](auto& v) { return h(f(v[0]) - f(v[1])); });
  check_op<Half, Half>("Mul", {a, b}, [&](auto& v) { return h(f(v[0]) * f(v[1])); });
  check_op<Half, Half>("Div", {a, b}, [&](auto& v) { return h(f(v[0]) / f(v[1])); });
  check_op<Half, Half>("Min", {a, b}, [&](auto& v) { return f(v[1]) < f(v[0]) ? v[1] : v[0]; });
  check_op<Half, Half>("Max", {a, b}, [&](auto& v) { return f(v[1]) > f(v[0]) ? v[1] : v[0]; });
  check_op<Half, Half>("Mod", {a, b}, [&](auto& v) { return h(std::fmod(f(v[0]), f(v[1]))); },
                       {{"fmod", 1}});
  check_op<Half, bool>("Less", {a, b}, [&](auto& v) { return f(v[0]) < f(v[1]); });
  check_op<Half, bool>("Greater", {a, b}, [&](auto& v) { return f(v[0]) > f(v[1]); });
  check_op<Half, bool>("GreaterOrEqual", {a, b}, [&](auto& v) { return f(v[0]) >= f(v[1]); });
  check_op<Half, bool>("Equal", {a, a}, [&](auto& v) { return f(v[0]) == f(v[1]); });
  // Sum rounds after each addition, as the float16 kernel does.
  check_op<Half, Half>("Sum", {a, b, b},
                       [&](auto& v) { return h(f(h(f(v[0]) + f(v[1]))) + f(v[2])); });
}

TEST(FloatDtypes, MinMaxPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = tensor_of<double>({3}, {1.0, nan, 3.0});
  Tensor b = tensor_of<double>({3}, {nan, 2.0, 1.0});
  for (const char* op : {"Min", "Max"}) {
    std::vector<double> got = test::to_doubles(run_op(op, {a, b})[0]);
    EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1])) << op;
    EXPECT_EQ(got[2], std::string(op) == "Min" ? 1.0 : 3.0);
  }
}

// ---- Pow ----

TEST(PowDtypes, IntegerBaseWithIntegerExponent) {
  Tensor base32 = random_of<int32_t>({3, 4}, 30, -9, 9);
  Tensor exp32 = random_of<int32_t>({4}, 31, -2, 12);
  auto ipow = [](auto b, auto e) {  // repeated multiplication, wrapping
    using T = decltype(b);
    if (e < 0) return static_cast<T>(b == 1 ? 1 : b == -1 ? (e % 2 ? -1 : 1) : 0);
    uint64_t r = 1;
    for (int64_t i = 0; i < e; ++i) r *= static_cast<uint64_t>(b);
    return static_cast<T>(r);
  };
  check_op<int32_t, int32_t>("Pow", {base32, exp32}, [&](auto& v) { return ipow(v[0], v[1]); });
  Tensor base64 = random_of<int64_t>({5}, 32, -40, 40);
  Tensor exp64 = random_of<int64_t>({2, 1}, 33, 0, 30);
  check_op<int64_t, int64_t>("Pow", {base64, exp64}, [&](auto& v) { return ipow(v[0], v[1]); });
  // Negative exponents: the truncated reciprocal power.
  Tensor b = Tensor::from_vector<int32_t>({6}, {1, -1, -1, 0, 2, -3});
  Tensor e = Tensor::from_vector<int32_t>({6}, {-3, -3, -2, -1, -1, -2});
  expect_elems<int32_t>(run_op("Pow", {b, e})[0], {6}, {1, -1, 1, 0, 0, 0});
}

TEST(PowDtypes, MixedBaseAndExponentTypes) {
  Tensor base = random_of<int32_t>({6}, 34, 1, 9);
  Tensor fexp = random_of<float>({6}, 35, 0, 4);
  Tensor got = run_op("Pow", {base, fexp})[0];
  std::vector<int32_t> want;
  std::vector<int32_t> bv = elems<int32_t>(base);
  std::vector<float> ev = elems<float>(fexp);
  for (size_t i = 0; i < bv.size(); ++i)
    want.push_back(static_cast<int32_t>(std::pow(static_cast<double>(bv[i]), ev[i])));
  expect_elems<int32_t>(got, base.shape(), want);

  Tensor fbase = test::random_tensor({2, 5}, 36, 0.5f, 2.0f);
  for (DType e : {DType::kUInt32, DType::kUInt64, DType::kInt8}) {
    Tensor exp = test::random_ints({5}, 37, 0, 5, e);
    std::vector<double> want_f;
    std::vector<float> fb = elems<float>(fbase);
    for (int64_t i = 0; i < fbase.numel(); ++i)
      want_f.push_back(std::pow(static_cast<double>(fb[i]), exp.item_as_double(i % 5)));
    test::expect_close(run_op("Pow", {fbase, exp})[0], fbase.shape(), want_f, 1e-6, 1e-5);
  }
  Tensor dbase = random_of<double>({4}, 38, 0.5, 3);
  Tensor dexp = random_of<double>({4}, 39, -2, 2);
  check_op<double, double>("Pow", {dbase, dexp}, [](auto& v) { return std::pow(v[0], v[1]); });
}

// ---- BitShift ----

template <typename T>
class BitShiftTest : public ::testing::Test {};
using UnsignedTypes = ::testing::Types<uint8_t, uint16_t, uint32_t, uint64_t>;
TYPED_TEST_SUITE(BitShiftTest, UnsignedTypes);

TYPED_TEST(BitShiftTest, LeftAndRightAgainstMultiplication) {
  using T = TypeParam;
  constexpr int kBits = sizeof(T) * 8;
  Tensor x = random_of<T>({3, 4}, 40, 0, highest<T>());
  Tensor s = random_of<T>({4}, 41, 0, kBits + 2);  // includes shifts past the width
  auto pow2 = [](T s) { return uint64_t{1} << s; };
  check_op<T, T>("BitShift", {x, s},
                 [&](auto& v) {
                   return v[1] >= kBits ? T(0) : wrap<T>(static_cast<uint64_t>(v[0]) * pow2(v[1]));
                 },
                 {{"direction", "LEFT"}});
  check_op<T, T>("BitShift", {x, s},
                 [&](auto& v) {
                   return v[1] >= kBits ? T(0)
                                        : static_cast<T>(static_cast<uint64_t>(v[0]) / pow2(v[1]));
                 },
                 {{"direction", "RIGHT"}});
}

// Signed types (opset 28): arithmetic right shifts, left shifts that drop what passes the sign
// bit, and negative or too-wide shifts that leave only the sign extension.
template <typename T>
class SignedBitShiftTest : public ::testing::Test {};
using SignedTypes = ::testing::Types<int8_t, int16_t, int32_t, int64_t>;
TYPED_TEST_SUITE(SignedBitShiftTest, SignedTypes);

TYPED_TEST(SignedBitShiftTest, ArithmeticRightAndWrappingLeft) {
  using T = TypeParam;
  constexpr int kBits = sizeof(T) * 8;
  Tensor x = random_of<T>({3, 4}, 42, lowest<T>(), highest<T>());
  Tensor s = random_of<T>({4}, 43, -2, kBits + 2);  // negative and past-the-width shifts too
  check_op<T, T>("BitShift", {x, s},
                 [&](auto& v) {
                   if (v[1] < 0 || v[1] >= kBits) return T(0);
                   return wrap<T>(static_cast<uint64_t>(static_cast<int64_t>(v[0])) *
                                  (uint64_t{1} << v[1]));
                 },
                 {{"direction", "LEFT"}});
  check_op<T, T>("BitShift", {x, s},
                 [&](auto& v) {
                   if (v[1] < 0 || v[1] >= kBits) return v[0] < 0 ? T(-1) : T(0);
                   return static_cast<T>(std::floor(static_cast<long double>(v[0]) /
                                                    std::ldexp(1.0L, static_cast<int>(v[1]))));
                 },
                 {{"direction", "RIGHT"}});
}

// ---- refusals ----

TEST(DtypeRefusals, BadInputsNameTheNode) {
  Tensor f32 = test::random_tensor({4}, 50);
  try {
    run_op("BitShift", {f32, f32}, {{"direction", "LEFT"}});
    FAIL() << "BitShift on float32 ran";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("node"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("BitShift"), std::string::npos) << e.what();
  }
  Tensor u8 = test::random_ints({4}, 51, 0, 5, DType::kUInt8);
  EXPECT_THROW(run_op("BitShift", {u8, u8}, {{"direction", "UP"}}), InvalidModel);
  EXPECT_THROW(run_op("BitShift", {u8, u8}), Error);
  EXPECT_THROW(run_op("BitShift", {u8, test::random_ints({4}, 52, 0, 5, DType::kUInt16)},
                      {{"direction", "RIGHT"}}),
               ShapeError);
  // 16-bit floats that a CPU kernel takes only as float32 run in float32 between Casts (the CUDA
  // backend's kernels take them as they are).
  struct CpuOnly {
    std::vector<std::string> saved = test::run_op_backends();
    CpuOnly() { test::run_op_backends() = {"cpu"}; }
    ~CpuOnly() { test::run_op_backends() = saved; }
  } cpu_only;
  Tensor base = random_of<Half>({4}, 53, 0.5, 2);
  Tensor exponent = random_of<Half>({4}, 55, -1, 1);
  Tensor got = run_op("Pow", {base, exponent})[0];
  ASSERT_EQ(got.dtype(), DType::kFloat16);
  std::vector<double> b = test::to_doubles(base), e = test::to_doubles(exponent), want;
  for (size_t i = 0; i < b.size(); ++i) want.push_back(std::pow(b[i], e[i]));
  test::expect_close(got, {4}, want, 1e-3, 2e-3);
  EXPECT_THROW(run_op("Add", {u8, test::random_ints({4}, 54, 0, 5, DType::kInt8)}), ShapeError);
}

}  // namespace
}  // namespace lumen
