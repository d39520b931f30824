// Tests of the shape ops, part A: Identity, Reshape, Flatten, Squeeze, Unsqueeze, Concat, Split,
// Cast, Shape, ConstantOfShape and Range, each against a naive reference written here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/half.h"
#include "ops/op_test_util.h"

namespace lumen::test {
namespace {

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                DType::kInt8,    DType::kUInt8,   DType::kInt16,    DType::kUInt16,
                                DType::kInt32,   DType::kUInt32,  DType::kInt64,    DType::kUInt64,
                                DType::kBool};
constexpr DType kMainDTypes[] = {DType::kFloat32, DType::kInt64, DType::kBool, DType::kFloat16};

// Random data of any dtype: floats in [-100, 100), integers over a range that fits the type.
Tensor random_of(DType dtype, const Shape& shape, uint64_t seed) {
  switch (dtype) {
    case DType::kFloat32:
      return random_tensor(shape, seed, -100.0f, 100.0f);
    case DType::kInt8:
      return random_ints(shape, seed, -100, 100, dtype);
    case DType::kUInt8:
      return random_ints(shape, seed, 0, 255, dtype);
    case DType::kInt16:
      return random_ints(shape, seed, -30000, 30000, dtype);
    case DType::kUInt16:
      return random_ints(shape, seed, 0, 65535, dtype);
    case DType::kInt32:
      return random_ints(shape, seed, -100000, 100000, dtype);
    case DType::kUInt32:
      return random_ints(shape, seed, 0, 4000000000, dtype);
    case DType::kInt64:
      return random_ints(shape, seed, -100000, 100000, dtype);
    case DType::kUInt64:
      return random_ints(shape, seed, 0, int64_t{1} << 40, dtype);
    case DType::kBool:
      return random_ints(shape, seed, 0, 1, dtype);
    default:
      break;
  }
  Tensor f = random_tensor(shape, seed, -100.0f, 100.0f);
  Tensor g = random_tensor(shape, seed + 7919, 0.0f, 1.0f);
  Tensor t = Tensor::empty(shape, dtype);
  auto* bits = static_cast<uint16_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = f.data<float>()[i];
    if (dtype == DType::kFloat16) bits[i] = float_to_half(v);
    if (dtype == DType::kBFloat16) bits[i] = float_to_bfloat16(v);
    if (dtype == DType::kFloat64) t.data<double>()[i] = v + 1e-6 * g.data<float>()[i];
  }
  return t;
}

Tensor i64s(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
}

// The same bytes seen with another shape, as the reference of a view op.
void expect_view(const Tensor& got, const Tensor& x, const Shape& want_shape) {
  expect_equal(got, x.dtype(), want_shape, to_doubles(x));
  // On the CPU the output is the input's memory; a device backend's output comes back as a copy.
  if (run_op_backends().front() == "cpu")
    EXPECT_EQ(got.raw_data(), x.raw_data()) << "expected a view sharing the input's memory";
}

// ----- Identity, Reshape, Flatten -------------------------------------------------------------

TEST(Identity, AllDTypesAreViews) {
  for (DType dt : kAllDTypes) {
    Tensor x = random_of(dt, {3, 1, 4}, 11);
    expect_view(run_op("Identity", {x})[0], x, {3, 1, 4});
  }
}

TEST(Reshape, ZeroCopiesAndMinusOneInfers) {
  struct Case {
    std::vector<int64_t> shape;
    Shape want;
  };
  const Case cases[] = {{{0, -1}, {2, 12}}, {{4, 0, -1}, {4, 3, 2}},
                        {{-1}, {24}},       {{2, 2, -1, 3}, {2, 2, 2, 3}},
                        {{24, 1}, {24, 1}}, {{0, 0, 4}, {2, 3, 4}}};
  for (DType dt : kMainDTypes) {
    Tensor x = random_of(dt, {2, 3, 4}, 21);
    for (const Case& c : cases) {
      SCOPED_TRACE(dtype_name(dt) + std::string(" ") + Shape(c.shape).to_string());
      expect_view(run_op("Reshape", {x, constant(i64s(c.shape))})[0], x, c.want);
    }
  }
}

TEST(Reshape, AllowZero) {
  Tensor empty = random_of(DType::kFloat32, {0, 3}, 1);
  EXPECT_EQ(run_op("Reshape", {empty, constant(i64s({3, 0}))}, {{"allowzero", 1}})[0].shape(),
            (Shape{3, 0}));
  // Without allowzero the 0 copies dimension 1 (3): [3, 3] does not hold 0 elements.
  EXPECT_THROW(run_op("Reshape", {empty, constant(i64s({3, 0}))}), ShapeError);
  Tensor x = random_of(DType::kInt64, {2, 0, 4}, 2);
  EXPECT_EQ(run_op("Reshape", {x, constant(i64s({0, 4, -1}))})[0].shape(), (Shape{2, 4, 0}));
  EXPECT_THROW(run_op("Reshape", {x, constant(i64s({0, -1}))}, {{"allowzero", 1}}), ShapeError);
  Tensor y = random_of(DType::kFloat32, {2, 6}, 3);
  expect_view(run_op("Reshape", {y, constant(i64s({3, 4}))}, {{"allowzero", 1}})[0], y, {3, 4});
}

TEST(Reshape, BadShapes) {
  Tensor x = random_of(DType::kFloat32, {2, 3, 4}, 4);
  EXPECT_THROW(run_op("Reshape", {x, constant(i64s({5, 5}))}), ShapeError);
  EXPECT_THROW(run_op("Reshape", {x, constant(i64s({-1, -1}))}), ShapeError);
  EXPECT_THROW(run_op("Reshape", {x, constant(i64s({5, -1}))}), ShapeError);
  EXPECT_THROW(run_op("Reshape", {x, constant(i64s({-2, 12}))}), ShapeError);
  EXPECT_THROW(run_op("Reshape", {x, constant(i64s({2, 3, 4, 0}))}), ShapeError);
  EXPECT_THROW(run_op("Reshape", {x, i64s({4, 6})}), ShapeError);  // not known at build time
  EXPECT_THROW(run_op("Reshape", {x, constant(i64s({24}))}, {{"allowzero", 2}}), InvalidModel);
}

TEST(Flatten, Axes) {
  Tensor x = random_of(DType::kFloat32, {2, 3, 4, 5}, 5);
  const std::pair<int64_t, Shape> cases[] = {{0, {1, 120}}, {1, {2, 60}},  {2, {6, 20}},
                                             {4, {120, 1}}, {-1, {24, 5}}, {-4, {1, 120}}};
  for (const auto& [axis, want] : cases)
    expect_view(run_op("Flatten", {x}, {{"axis", axis}})[0], x, want);
  expect_view(run_op("Flatten", {x})[0], x, {2, 60});
  Tensor b = random_of(DType::kBool, {3, 0, 2}, 6);
  expect_view(run_op("Flatten", {b}, {{"axis", 2}})[0], b, {0, 2});
  EXPECT_THROW(run_op("Flatten", {x}, {{"axis", 5}}), InvalidModel);
  EXPECT_THROW(run_op("Flatten", {x}, {{"axis", -5}}), InvalidModel);
}

// ----- Squeeze, Unsqueeze ---------------------------------------------------------------------

TEST(Squeeze, InputAndAttributeForms) {
  for (DType dt : kMainDTypes) {
    Tensor x = random_of(dt, {1, 3, 1, 2}, 7);
    expect_view(run_op("Squeeze", {x})[0], x, {3, 2});
    expect_view(run_op("Squeeze", {x, constant(i64s({0}))})[0], x, {3, 1, 2});
    expect_view(run_op("Squeeze", {x}, {{"axes", {-2}}})[0], x, {1, 3, 2});
    expect_view(run_op("Squeeze", {x, constant(i64s({2, 0}))})[0], x, {3, 2});
    expect_view(run_op("Squeeze", {x}, {{"axes", {0, -2}}})[0], x, {3, 2});
    expect_view(run_op("Squeeze", {x, constant(i64s({}))})[0], x, {3, 2});
  }
  Tensor s = random_of(DType::kFloat32, {1, 1}, 8);
  expect_view(run_op("Squeeze", {s})[0], s, Shape{});
}

TEST(Squeeze, BadAxes) {
  Tensor x = random_of(DType::kFloat32, {1, 3, 1, 2}, 9);
  EXPECT_THROW(run_op("Squeeze", {x, constant(i64s({1}))}), ShapeError);
  EXPECT_THROW(run_op("Squeeze", {x}, {{"axes", {3}}}), ShapeError);
  EXPECT_THROW(run_op("Squeeze", {x, constant(i64s({0, -4}))}), InvalidModel);
  EXPECT_THROW(run_op("Squeeze", {x}, {{"axes", {4}}}), InvalidModel);
  EXPECT_THROW(run_op("Squeeze", {x, constant(i64s({0}))}, {{"axes", {0}}}), InvalidModel);
  EXPECT_THROW(run_op("Squeeze", {x, i64s({0})}), ShapeError);  // not known at build time
}

TEST(Unsqueeze, InputAndAttributeForms) {
  for (DType dt : kMainDTypes) {
    Tensor x = random_of(dt, {2, 3}, 10);
    expect_view(run_op("Unsqueeze", {x, constant(i64s({0}))})[0], x, {1, 2, 3});
    expect_view(run_op("Unsqueeze", {x}, {{"axes", {-1}}})[0], x, {2, 3, 1});
    expect_view(run_op("Unsqueeze", {x, constant(i64s({3, 0}))})[0], x, {1, 2, 3, 1});
    expect_view(run_op("Unsqueeze", {x}, {{"axes", {1, -2}}})[0], x, {2, 1, 1, 3});
    expect_view(run_op("Unsqueeze", {x, constant(i64s({-4, 2}))})[0], x, {1, 2, 1, 3});
  }
  Tensor s = Tensor::scalar<float>(2.5f);
  expect_view(run_op("Unsqueeze", {s, constant(i64s({0}))})[0], s, {1});
}

TEST(Unsqueeze, BadAxes) {
  Tensor x = random_of(DType::kFloat32, {2, 3}, 12);
  EXPECT_THROW(run_op("Unsqueeze", {x, constant(i64s({1, -3}))}), InvalidModel);
  EXPECT_THROW(run_op("Unsqueeze", {x}, {{"axes", {0, 0}}}), InvalidModel);
  EXPECT_THROW(run_op("Unsqueeze", {x, constant(i64s({4}))}), InvalidModel);
  EXPECT_THROW(run_op("Unsqueeze", {x}), InvalidModel);
}

// ----- Concat, Split --------------------------------------------------------------------------

// Naive Concat: each output element looked up in the input that holds its axis position.
std::vector<double> concat_reference(const std::vector<Tensor>& xs, int axis, const Shape& out) {
  std::vector<double> want(static_cast<size_t>(out.numel()));
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    std::vector<int64_t> idx = unravel(flat, out);
    size_t k = 0;
    while (idx[axis] >= xs[k].shape().dims()[axis]) idx[axis] -= xs[k++].shape().dims()[axis];
    want[flat] = xs[k].item_as_double(ravel(idx, xs[k].shape()));
  }
  return want;
}

void check_concat(DType dt, const Shape& base, int axis, const std::vector<int64_t>& sizes,
                  uint64_t seed, bool first_constant = false) {
  int rank = base.rank();
  int a = axis < 0 ? axis + rank : axis;
  std::vector<Tensor> xs;
  std::vector<OpInput> ins;
  Shape out = base;
  out.dims()[a] = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Shape s = base;
    s.dims()[a] = sizes[k];
    out.dims()[a] += sizes[k];
    xs.push_back(random_of(dt, s, seed + k));
    ins.push_back(OpInput(xs.back(), first_constant && k == 0));
  }
  SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis) + " out " +
               out.to_string());
  Tensor got = run_op("Concat", ins, {{"axis", axis}})[0];
  expect_equal(got, dt, out, concat_reference(xs, a, out));
}

TEST(Concat, EachAxisWithAnEmptyInput) {
  for (DType dt : kMainDTypes)
    for (int axis : {0, 1, 2, -1, -3}) check_concat(dt, {2, 3, 4}, axis, {2, 0, 3}, 100 + axis);
  check_concat(DType::kFloat64, {5}, 0, {1, 4, 0}, 120);
  check_concat(DType::kUInt8, {2, 3}, 1, {3, 1, 2}, 121, /*first_constant=*/true);
  check_concat(DType::kFloat32, {2, 0, 3}, 2, {1, 2, 3}, 122);
  check_concat(DType::kBFloat16, {2, 3}, 0, {2}, 123);
}

TEST(Concat, LargeBlocksUseAllCopyPaths) {
  check_concat(DType::kFloat32, {2, 50000}, 1, {1, 30000, 50000}, 130);  // few long rows
  check_concat(DType::kInt64, {2000, 30}, 1, {30, 0, 50}, 131);          // many short rows
  check_concat(DType::kInt8, {100000, 3}, 0, {100000, 7, 300000}, 132);  // one row
  check_concat(DType::kFloat32, {12, 64}, 1, {192 * 64, 64}, 133);  // a decoder's past + new key
}

TEST(Concat, BadInputs) {
  Tensor a = random_of(DType::kFloat32, {2, 3}, 1);
  Tensor b = random_of(DType::kFloat32, {2, 3, 1}, 2);
  Tensor c = random_of(DType::kInt64, {2, 3}, 3);
  Tensor d = random_of(DType::kFloat32, {3, 3}, 4);
  EXPECT_THROW(run_op("Concat", {a, b}, {{"axis", 0}}), ShapeError);
  EXPECT_THROW(run_op("Concat", {a, c}, {{"axis", 0}}), ShapeError);
  EXPECT_THROW(run_op("Concat", {a, d}, {{"axis", 1}}), ShapeError);
  EXPECT_THROW(run_op("Concat", {a, d}, {{"axis", 2}}), InvalidModel);
  EXPECT_THROW(run_op("Concat", {a, d}), InvalidModel);  // axis is required
}

// Naive Split of x along `axis` into pieces of `sizes`, checked against the op's outputs.
void check_split(const std::vector<Tensor>& got, const Tensor& x, int axis,
                 const std::vector<int64_t>& sizes) {
  ASSERT_EQ(got.size(), sizes.size());
  int a = axis < 0 ? axis + x.rank() : axis;
  int64_t offset = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Shape s = x.shape();
    s.dims()[a] = sizes[k];
    std::vector<double> want(static_cast<size_t>(s.numel()));
    for (int64_t flat = 0; flat < s.numel(); ++flat) {
      std::vector<int64_t> idx = unravel(flat, s);
      idx[a] += offset;
      want[flat] = x.item_as_double(ravel(idx, x.shape()));
    }
    SCOPED_TRACE("output " + std::to_string(k));
    expect_equal(got[k], x.dtype(), s, want);
    offset += sizes[k];
  }
}

TEST(Split, EqualParts) {
  for (DType dt : kMainDTypes) {
    Tensor x = random_of(dt, {4, 6, 3}, 200);
    check_split(run_op("Split", {x}, {}, 2), x, 0, {2, 2});
    check_split(run_op("Split", {x}, {{"axis", 1}}, 3), x, 1, {2, 2, 2});
    check_split(run_op("Split", {x}, {{"axis", -1}}, 3), x, -1, {1, 1, 1});
  }
}

TEST(Split, UnevenSizesAsAttributeOrInput) {
  for (DType dt : kMainDTypes) {
    Tensor x = random_of(dt, {3, 6, 2}, 210);
    check_split(run_op("Split", {x}, {{"axis", 1}, {"split", {1, 3, 2}}}, 3), x, 1, {1, 3, 2});
    check_split(run_op("Split", {x, constant(i64s({4, 0, 2}))}, {{"axis", -2}}, 3), x, 1,
                {4, 0, 2});
    check_split(run_op("Split", {x, constant(i64s({2, 1}))}, {}, 2), x, 0, {2, 1});
  }
  Tensor y = random_of(DType::kFloat32, {7, 2}, 211);
  check_split(run_op("Split", {y}, {{"num_outputs", 4}}, 4), y, 0, {2, 2, 2, 1});
  check_split(run_op("Split", {y, omitted()}, {}, 1), y, 0, {7});
}

TEST(Split, LargeBlocksUseAllCopyPaths) {
  Tensor x = random_of(DType::kFloat32, {2, 120000}, 220);
  check_split(run_op("Split", {x}, {{"axis", 1}, {"split", {70000, 0, 50000}}}, 3), x, 1,
              {70000, 0, 50000});
  Tensor y = random_of(DType::kInt32, {3000, 40}, 221);
  check_split(run_op("Split", {y}, {{"axis", 1}}, 4), y, 1, {10, 10, 10, 10});
  Tensor z = random_of(DType::kInt64, {100000, 2}, 222);
  check_split(run_op("Split", {z}, {}, 2), z, 0, {50000, 50000});
}

TEST(Split, BadSizes) {
  Tensor x = random_of(DType::kFloat32, {4, 6}, 230);
  EXPECT_THROW(run_op("Split", {x}, {{"axis", 1}, {"split", {1, 2}}}, 2), ShapeError);
  EXPECT_THROW(run_op("Split", {x, constant(i64s({3, 2}))}, {}, 2), ShapeError);
  EXPECT_THROW(run_op("Split", {x, constant(i64s({5, -1}))}, {}, 2), ShapeError);
  EXPECT_THROW(run_op("Split", {x}, {{"axis", 1}}, 4), ShapeError);  // 6 is not 4 equal parts
  EXPECT_THROW(run_op("Split", {x}, {{"split", {1, 3}}}, 3), InvalidModel);
  EXPECT_THROW(run_op("Split", {x}, {{"num_outputs", 3}}, 2), InvalidModel);
  EXPECT_THROW(run_op("Split", {x}, {{"axis", 2}}, 2), InvalidModel);
  EXPECT_THROW(run_op("Split", {x, i64s({2, 2})}, {}, 2), ShapeError);  // not known when built
}

// ----- Cast -----------------------------------------------------------------------------------

int onnx_code(DType dt) {
  switch (dt) {
    case DType::kFloat32:
      return 1;
    case DType::kUInt8:
      return 2;
    case DType::kInt8:
      return 3;
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
    case DType::kBFloat16:
      return 16;
    case DType::kInt16:
      return 5;
    case DType::kUInt16:
      return 4;
    case DType::kUInt32:
      return 12;
    case DType::kUInt64:
      return 13;
  }
  return 0;
}

// Rounds x to nearest even with `fraction_bits` bits after the leading one, subnormal below
// 2^min_exp, infinite beyond max_finite: the IEEE rounding of float16 and bfloat16, in double.
double round_to_format(double x, int fraction_bits, int min_exp, double max_finite) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  int e = 0;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  double quantum = std::ldexp(1.0, std::max(e - 1, min_exp) - fraction_bits);
  double r = std::nearbyint(x / quantum) * quantum;
  return std::fabs(r) > max_finite ? std::copysign(INFINITY, x) : r;
}
double round_half(double x) {
  return round_to_format(x, 10, -14, 65504.0);
}
double round_bf16(double x) {
  return round_to_format(x, 7, -126, std::ldexp(255.0, 120));
}

// Wraps an integer into D's range (two's complement), as C++20 integer conversion does.
double wrap_int(int64_t v, DType to) {
  switch (to) {
    case DType::kInt8:
      return static_cast<int8_t>(v);
    case DType::kUInt8:
      return static_cast<uint8_t>(v);
    case DType::kInt16:
      return static_cast<int16_t>(v);
    case DType::kUInt16:
      return static_cast<uint16_t>(v);
    case DType::kInt32:
      return static_cast<int32_t>(v);
    case DType::kUInt32:
      return static_cast<uint32_t>(v);
    case DType::kUInt64:
      return static_cast<double>(static_cast<uint64_t>(v));
    default:
      return static_cast<double>(v);
  }
}

double cast_reference(double x, DType to) {
  switch (to) {
    case DType::kFloat32:
      return static_cast<float>(x);
    case DType::kFloat64:
      return x;
    case DType::kFloat16:
      return round_half(x);
    case DType::kBFloat16:
      return round_bf16(x);
    case DType::kBool:
      return x != 0 ? 1 : 0;
    default:
      return wrap_int(static_cast<int64_t>(std::trunc(x)), to);
  }
}

TEST(Cast, AllPairsOfDTypes) {
  for (const Shape& shape : {Shape{3, 5}, Shape{201, 200}, Shape{0, 4}}) {
    for (DType from : kAllDTypes) {
      Tensor x = random_of(from, shape, 300 + static_cast<int>(from));
      std::vector<double> xs = to_doubles(x);
      for (DType to : kAllDTypes) {
        SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to) + " " +
                     shape.to_string());
        std::vector<double> want;
        for (double v : xs) want.push_back(cast_reference(v, to));
        expect_equal(run_op("Cast", {x}, {{"to", onnx_code(to)}})[0], to, shape, want);
      }
    }
  }
}

// Exact comparison in which NaN matches NaN and infinities match by sign.
void expect_exact(const Tensor& got, DType dtype, const Shape& shape,
                  const std::vector<double>& want) {
  ASSERT_EQ(got.dtype(), dtype) << dtype_name(got.dtype());
  ASSERT_EQ(got.shape(), shape) << got.shape().to_string();
  std::vector<double> g = to_doubles(got);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(g[i] == want[i] || (std::isnan(g[i]) && std::isnan(want[i])))
        << "element " << i << ": got " << g[i] << ", want " << want[i];
}

TEST(Cast, Float16KnownValuesAndRoundTrip) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {1.0f / 3.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f,   6e-8f,
                                 -2.5f,       nan,      1e5f,     -0.0f,    2049.0f, 2051.0f};
  const std::vector<double> want = {
      0.333251953125, 65504.0,      65504.0,  INFINITY, 0.0,    5.9604644775390625e-08,
      -2.5,           std::nan(""), INFINITY, 0.0,      2048.0, 2052.0};
  Shape shape{static_cast<int64_t>(in.size())};
  Tensor h = run_op("Cast", {Tensor::from_vector<float>(shape, in)}, {{"to", 10}})[0];
  expect_exact(h, DType::kFloat16, shape, want);
  expect_exact(run_op("Cast", {h}, {{"to", 1}})[0], DType::kFloat32, shape, want);
  expect_exact(run_op("Cast", {h}, {{"to", 11}})[0], DType::kFloat64, shape, want);
  Tensor b = run_op("Cast", {Tensor::from_vector<float>(Shape{1}, {1.0f / 3.0f})}, {{"to", 16}})[0];
  expect_exact(b, DType::kBFloat16, Shape{1}, {0.333984375});
  // Halves from a double input are rounded once, directly.
  Tensor d =
      run_op("Cast", {Tensor::from_vector<double>(Shape{2}, {1.0 / 3.0, 1e-8})}, {{"to", 10}})[0];
  expect_exact(d, DType::kFloat16, Shape{2}, {0.333251953125, 0.0});
}

TEST(Cast, FloatToIntTruncatesAndToBoolIsNonZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from_vector<float>(Shape{7}, {2.7f, -2.7f, -0.5f, 0.0f, -0.0f, 0.1f, nan});
  expect_equal(run_op("Cast", {x.narrow(0, 6)}, {{"to", 7}})[0], DType::kInt64, {6},
               {2, -2, 0, 0, 0, 0});
  expect_equal(run_op("Cast", {x.narrow(0, 6)}, {{"to", 6}})[0], DType::kInt32, {6},
               {2, -2, 0, 0, 0, 0});
  expect_equal(run_op("Cast", {x}, {{"to", 9}})[0], DType::kBool, {7}, {1, 1, 1, 0, 0, 1, 1});
  Tensor b = random_of(DType::kBool, {5, 3}, 400);
  expect_equal(run_op("Cast", {b}, {{"to", 1}})[0], DType::kFloat32, {5, 3}, to_doubles(b));
}

TEST(Cast, UnsupportedTargets) {
  Tensor x = random_of(DType::kFloat32, {2}, 1);
  for (int to : {8, 14, 15, 27, 28, 0, 99})
    EXPECT_THROW(run_op("Cast", {x}, {{"to", to}}), UnsupportedOp) << "to = " << to;
  EXPECT_THROW(run_op("Cast", {x}), InvalidModel);  // `to` is required
}

// ----- Shape, ConstantOfShape, Range ----------------------------------------------------------

TEST(Shape, StartAndEnd) {
  Tensor x = random_of(DType::kBool, {2, 3, 4, 5}, 500);
  struct Case {
    Attributes attrs;
    std::vector<double> want;
  };
  const Case cases[] = {{{}, {2, 3, 4, 5}},
                        {{{"start", 1}}, {3, 4, 5}},
                        {{{"end", -1}}, {2, 3, 4}},
                        {{{"start", -2}}, {4, 5}},
                        {{{"start", 1}, {"end", 3}}, {3, 4}},
                        {{{"start", 3}, {"end", 1}}, {}},
                        {{{"start", -10}, {"end", 10}}, {2, 3, 4, 5}}};
  for (const Case& c : cases) {
    Tensor got = run_op("Shape", {x}, c.attrs)[0];
    expect_equal(got, DType::kInt64, {static_cast<int64_t>(c.want.size())}, c.want);
  }
  expect_equal(run_op("Shape", {Tensor::scalar<float>(1.0f)})[0], DType::kInt64, {0}, {});
}

TEST(ConstantOfShape, DefaultAndTypedValues) {
  expect_equal(run_op("ConstantOfShape", {constant(i64s({2, 3}))})[0], DType::kFloat32, {2, 3},
               std::vector<double>(6, 0.0));
  expect_equal(run_op("ConstantOfShape", {constant(i64s({4}))},
                      {{"value", Tensor::from_vector<int64_t>({1}, {-7})}})[0],
               DType::kInt64, {4}, std::vector<double>(4, -7.0));
  expect_equal(run_op("ConstantOfShape", {constant(i64s({}))},
                      {{"value", Tensor::from_vector<float>({1}, {2.5f})}})[0],
               DType::kFloat32, Shape{}, {2.5});
  expect_equal(run_op("ConstantOfShape", {constant(i64s({3, 0}))},
                      {{"value", Tensor::from_vector<bool>({1}, {true})}})[0],
               DType::kBool, {3, 0}, {});
  Tensor half = Tensor::empty({1}, DType::kFloat16);
  static_cast<uint16_t*>(half.raw_data())[0] = 0x3555;  // 0.333251953125
  expect_equal(run_op("ConstantOfShape", {constant(i64s({2}))}, {{"value", half}})[0],
               DType::kFloat16, {2}, {0.333251953125, 0.333251953125});
  // Large enough that it is not folded at build time: the kernel fills it, in parallel.
  for (DType dt : {DType::kInt8, DType::kFloat16, DType::kInt32, DType::kFloat64}) {
    Tensor v = random_of(dt, {1}, 600 + static_cast<int>(dt));
    Tensor got = run_op("ConstantOfShape", {constant(i64s({300, 301}))}, {{"value", v}})[0];
    expect_equal(got, dt, {300, 301}, std::vector<double>(300 * 301, v.item_as_double()));
  }
}

TEST(ConstantOfShape, BadInputs) {
  EXPECT_THROW(run_op("ConstantOfShape", {constant(i64s({2, -1}))}), ShapeError);
  EXPECT_THROW(run_op("ConstantOfShape", {i64s({2, 3})}), ShapeError);  // not known when built
  EXPECT_THROW(run_op("ConstantOfShape", {constant(i64s({2}))},
                      {{"value", Tensor::from_vector<float>({2}, {1.0f, 2.0f})}}),
               InvalidModel);
}

template <typename T>
std::vector<double> range_reference(T start, T limit, T delta) {
  double n = std::ceil(static_cast<double>(limit - start) / static_cast<double>(delta));
  std::vector<double> want;
  for (int64_t i = 0; i < static_cast<int64_t>(std::max(n, 0.0)); ++i)
    want.push_back(static_cast<double>(start) + static_cast<double>(i) * delta);
  return want;
}

template <typename T>
void check_range(T start, T limit, T delta) {
  SCOPED_TRACE(std::to_string(start) + " " + std::to_string(limit) + " " + std::to_string(delta));
  std::vector<double> want = range_reference(start, limit, delta);
  Tensor got =
      run_op("Range", {constant(Tensor::scalar<T>(start)), constant(Tensor::scalar<T>(limit)),
                       constant(Tensor::scalar<T>(delta))})[0];
  Shape shape{static_cast<int64_t>(want.size())};
  if constexpr (std::is_floating_point_v<T>) {
    ASSERT_EQ(got.dtype(), DTypeOf<T>::value);
    expect_close(got, shape, want, 1e-5, 1e-6);
  } else {
    expect_equal(got, DTypeOf<T>::value, shape, want);
  }
}

TEST(Range, FloatAndIntegerWithNegativeDelta) {
  check_range<float>(0.0f, 1.0f, 0.1f);
  check_range<float>(1.5f, -3.2f, -0.7f);
  check_range<float>(2.0f, 1.0f, 0.5f);  // empty
  check_range<double>(-1.0, 1.0, 0.25);
  check_range<int64_t>(10, -5, -3);
  check_range<int64_t>(5, 1, 1);  // empty
  check_range<int32_t>(0, 10, 3);
  check_range<int32_t>(-7, 8, 5);
  check_range<int64_t>(-3, 99997, 2);  // large: runs the kernel instead of folding
  check_range<float>(-5.0f, 5000.0f, 0.125f);
}

TEST(Range, BadInputs) {
  auto c = [](auto v) { return constant(Tensor::scalar(v)); };
  EXPECT_THROW(run_op("Range", {c(int64_t{0}), c(int64_t{5}), c(int64_t{0})}), InvalidModel);
  EXPECT_THROW(run_op("Range", {c(0.0f), c(1.0f), c(0.0f)}), InvalidModel);
  EXPECT_THROW(run_op("Range", {Tensor::scalar(int64_t{0}), c(int64_t{5}), c(int64_t{1})}),
               ShapeError);  // start not known when the graph is built
  EXPECT_THROW(run_op("Range", {c(int64_t{0}), c(5.0f), c(int64_t{1})}), ShapeError);
  EXPECT_THROW(run_op("Range", {c(int8_t{0}), c(int8_t{5}), c(int8_t{1})}), ShapeError);
}

}  // namespace
}  // namespace lumen::test
