// Tests of QuantizeLinear and DequantizeLinear with ONNX's newer types and forms (opsets 19-25):
// int16/uint16, int4/uint4, int2/uint2, the float8 types (saturate), float4e2m1, blocked scales
// (block_size, with a partial last block), output_dtype, float16 inputs and scales, `precision`,
// float8e8m0 scales and int32 inputs, against naive references on random data; and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "lumen/lumen.h"
#include "ops/narrow_reference.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::random_tensor;
using test::ref_decode;
using test::ref_encode;
using test::ref_format;
using test::run_op;

int64_t onnx_code(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 1;
    case DType::kFloat16:
      return 10;
    case DType::kBFloat16:
      return 16;
    case DType::kInt16:
      return 5;
    case DType::kUInt16:
      return 4;
    case DType::kFloat8E4M3FN:
      return 17;
    case DType::kFloat8E4M3FNUZ:
      return 18;
    case DType::kFloat8E5M2:
      return 19;
    case DType::kFloat8E5M2FNUZ:
      return 20;
    case DType::kUInt4:
      return 21;
    case DType::kInt4:
      return 22;
    case DType::kFloat4E2M1:
      return 23;
    case DType::kFloat8E8M0:
      return 24;
    case DType::kUInt2:
      return 25;
    case DType::kInt2:
      return 26;
    default:
      return 0;
  }
}

// The range of an integer quantized type.
void int_range(DType t, int64_t& lo, int64_t& hi) {
  switch (t) {
    case DType::kInt16:
      lo = -32768, hi = 32767;
      break;
    case DType::kUInt16:
      lo = 0, hi = 65535;
      break;
    case DType::kInt4:
      lo = -8, hi = 7;
      break;
    case DType::kUInt4:
      lo = 0, hi = 15;
      break;
    case DType::kInt2:
      lo = -2, hi = 1;
      break;
    case DType::kUInt2:
      lo = 0, hi = 3;
      break;
    case DType::kInt8:
      lo = -128, hi = 127;
      break;
    default:
      lo = 0, hi = 255;
      break;
  }
}

bool is_float_type(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E4M3FNUZ || t == DType::kFloat8E5M2 ||
         t == DType::kFloat8E5M2FNUZ || t == DType::kFloat4E2M1;
}

// Random values of an integer quantized type in its range, or random finite float8/float4
// patterns.
Tensor random_quantized(const Shape& shape, DType t, uint64_t seed) {
  Tensor out = Tensor::empty(shape, t);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (is_float_type(t)) {
      const test::RefFloat f = ref_format(t);
      uint32_t p;
      do {
        p = static_cast<uint32_t>(rng()) & ((1u << test::ref_bits(f)) - 1);
      } while (!std::isfinite(ref_decode(p, f)));
      static_cast<uint8_t*>(out.raw_data())[i] = static_cast<uint8_t>(p);
      continue;
    }
    int64_t lo, hi;
    int_range(t, lo, hi);
    const int64_t v = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
    if (t == DType::kInt16)
      static_cast<int16_t*>(out.raw_data())[i] = static_cast<int16_t>(v);
    else if (t == DType::kUInt16)
      static_cast<uint16_t*>(out.raw_data())[i] = static_cast<uint16_t>(v);
    else
      static_cast<uint8_t*>(out.raw_data())[i] = static_cast<uint8_t>(v);
  }
  return out;
}

// The parameter index of flat element k of x: per tensor (scale of one element), per axis
// (1-D scale) or blocked (scale of x's rank).
int64_t param_index(int64_t k, const Shape& x, const Shape& s, int axis, int64_t block) {
  if (s.numel() == 1 && s.rank() <= 1) return 0;
  std::vector<int64_t> idx = test::unravel(k, x);
  if (s.rank() == 1) return idx[axis];
  idx[axis] /= block;
  return test::ravel(idx, s);
}

float half_round(float v) {
  return half_to_float(float_to_half(v));
}

// Stored bytes (or int16 values) of a quantized result as comparable numbers: the integer value,
// or the bit pattern for float types.
std::vector<int64_t> quantized_values(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (is_float_type(t.dtype()))
      out[i] = static_cast<const uint8_t*>(t.raw_data())[i];
    else
      out[i] = static_cast<int64_t>(t.item_as_double(i));
  }
  return out;
}

// Every element of `got` equals `want` exactly (infinities included; NaN matches NaN).
void expect_exact(const Tensor& got, const Shape& shape, const std::vector<double>& want) {
  ASSERT_EQ(got.shape(), shape);
  int reported = 0;
  for (int64_t k = 0; k < got.numel(); ++k) {
    const double g = got.item_as_double(k);
    if (!(g == want[k] || (std::isnan(g) && std::isnan(want[k]))) && reported++ < 10)
      ADD_FAILURE() << "element " << k << ": got " << g << ", want " << want[k];
  }
}

struct QuantCase {
  Shape x;
  Shape s;
  int axis;
  int64_t block;
};

const QuantCase kCases[] = {
    {{2, 3, 5}, {}, 1, 0},          // per tensor
    {{2, 3, 5}, {3}, 1, 0},         // per axis
    {{2, 3, 5}, {5}, -1, 0},        // per axis, negative axis
    {{2, 7, 4}, {2, 3, 4}, 1, 3},   // blocked, last block partial (7 = 3 + 3 + 1)
    {{6, 4}, {6, 2}, 1, 2},         // blocked on the last axis
};

Attributes layout_attrs(const QuantCase& c) {
  Attributes a;
  a["axis"] = int64_t{c.axis};
  if (c.block > 0) a["block_size"] = c.block;
  return a;
}

TEST(NarrowQuantize, IntegerTypesEveryLayout) {
  const DType types[] = {DType::kInt16, DType::kUInt16, DType::kInt4,
                         DType::kUInt4, DType::kInt2,   DType::kUInt2};
  uint64_t seed = 1;
  for (DType t : types) {
    int64_t lo, hi;
    int_range(t, lo, hi);
    for (const QuantCase& c : kCases) {
      const float span = static_cast<float>(hi - lo);
      Tensor x = random_tensor(c.x, ++seed, -span, span);
      Tensor s = random_tensor(c.s, ++seed, 0.5f, 2.0f);
      for (bool with_zp : {true, false}) {
        Tensor zp = random_quantized(c.s, t, ++seed);
        Attributes attrs = layout_attrs(c);
        if (!with_zp) attrs["output_dtype"] = onnx_code(t);
        Tensor y = with_zp ? run_op("QuantizeLinear", {x, s, zp}, attrs)[0]
                           : run_op("QuantizeLinear", {x, s}, attrs)[0];
        ASSERT_EQ(y.dtype(), t);
        const int axis = c.axis < 0 ? c.axis + c.x.rank() : c.axis;
        std::vector<int64_t> got = quantized_values(y);
        for (int64_t k = 0; k < x.numel(); ++k) {
          const int64_t p = param_index(k, c.x, c.s, axis, c.block);
          const float q = x.data<float>()[k] / s.data<float>()[p];
          const double z = with_zp ? zp.item_as_double(p) : 0.0;
          const int64_t want =
              static_cast<int64_t>(std::clamp(std::nearbyint(q) + z, double(lo), double(hi)));
          ASSERT_EQ(got[k], want) << dtype_name(t) << " case " << c.x.to_string() << " k " << k;
        }
      }
    }
  }
}

TEST(NarrowQuantize, FloatTypesSaturateOrNot) {
  const DType types[] = {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                         DType::kFloat8E5M2FNUZ, DType::kFloat4E2M1};
  uint64_t seed = 100;
  for (DType t : types) {
    const test::RefFloat f = ref_format(t);
    for (const QuantCase& c : kCases) {
      Tensor x = random_tensor(c.x, ++seed, -1e5f, 1e5f);
      Tensor s = random_tensor(c.s, ++seed, 0.5f, 300.0f);
      Tensor zp = random_quantized(c.s, t, ++seed);
      for (int64_t saturate : {1, 0}) {
        Attributes attrs = layout_attrs(c);
        attrs["saturate"] = saturate;
        Tensor y = run_op("QuantizeLinear", {x, s, zp}, attrs)[0];
        ASSERT_EQ(y.dtype(), t);
        const int axis = c.axis < 0 ? c.axis + c.x.rank() : c.axis;
        std::vector<int64_t> got = quantized_values(y);
        for (int64_t k = 0; k < x.numel(); ++k) {
          const int64_t p = param_index(k, c.x, c.s, axis, c.block);
          const float q = x.data<float>()[k] / s.data<float>()[p];
          const double z = ref_decode(static_cast<const uint8_t*>(zp.raw_data())[p], f);
          const uint32_t want = ref_encode(static_cast<float>(q + z), f, saturate != 0);
          const bool ok = got[k] == want || (std::isnan(ref_decode(want, f)) &&
                                             std::isnan(ref_decode(static_cast<uint32_t>(got[k]), f)));
          ASSERT_TRUE(ok) << dtype_name(t) << " saturate " << saturate << " k " << k << " q " << q
                          << ": got " << got[k] << ", want " << want;
        }
      }
    }
  }
}

TEST(NarrowQuantize, Float16InputsScalesAndPrecision) {
  Tensor xf = random_tensor({4, 6}, 7, -500.0f, 500.0f);
  Attributes to_half;
  to_half["to"] = int64_t{10};
  Tensor xh = run_op("Cast", {xf}, to_half)[0];
  Tensor sf = random_tensor({6}, 8, 0.3f, 3.0f);
  Tensor sh = run_op("Cast", {sf}, to_half)[0];
  Attributes axis1;
  axis1["axis"] = int64_t{1};
  axis1["output_dtype"] = onnx_code(DType::kInt16);
  // float16 x and scale: the division in float16 (the scale's type).
  Tensor y = run_op("QuantizeLinear", {xh, sh}, axis1)[0];
  // float32 x and scale with precision float16: the same.
  Attributes prec = axis1;
  prec["precision"] = int64_t{10};
  Tensor y2 = run_op("QuantizeLinear", {xf, sf}, prec)[0];
  // float32 x and scale: float32 division.
  Tensor y3 = run_op("QuantizeLinear", {xf, sf}, axis1)[0];
  for (int64_t k = 0; k < xf.numel(); ++k) {
    const float xk = half_round(xf.data<float>()[k]), sk = half_round(sf.data<float>()[k % 6]);
    const double want =
        std::clamp(static_cast<double>(std::nearbyint(half_round(xk / sk))), -32768.0, 32767.0);
    EXPECT_EQ(y.item_as_double(k), want) << k;
    EXPECT_EQ(y2.item_as_double(k), want) << k;
    const double want32 =
        std::nearbyint(xf.data<float>()[k] / sf.data<float>()[k % 6]);
    EXPECT_EQ(y3.item_as_double(k), want32) << k;
  }
}

TEST(NarrowQuantize, E8M0ScalesAndInt32Inputs) {
  Tensor x = random_tensor({3, 8}, 11, -2000.0f, 2000.0f);
  Tensor s = Tensor::empty(Shape{3}, DType::kFloat8E8M0);
  const uint8_t exps[] = {127, 130, 120};  // 1, 8, 2^-7
  std::memcpy(s.raw_data(), exps, 3);
  Attributes attrs;
  attrs["axis"] = int64_t{0};
  attrs["output_dtype"] = onnx_code(DType::kInt4);
  Tensor y = run_op("QuantizeLinear", {x, s}, attrs)[0];
  for (int64_t k = 0; k < x.numel(); ++k) {
    const double sc = std::ldexp(1.0, exps[k / 8] - 127);
    EXPECT_EQ(y.item_as_double(k),
              std::clamp(static_cast<double>(std::nearbyint(x.data<float>()[k] / static_cast<float>(sc))),
                         -8.0, 7.0));
  }
  // int32 x: the quotient in float64, rounded to float32 first.
  Tensor xi = test::random_ints({10}, 12, -100000, 100000, DType::kInt32);
  Tensor s1 = Tensor::scalar<float>(37.0f);
  Attributes u16;
  u16["output_dtype"] = onnx_code(DType::kUInt16);
  Tensor yi = run_op("QuantizeLinear", {xi, s1}, u16)[0];
  for (int64_t k = 0; k < xi.numel(); ++k) {
    const float q = static_cast<float>(xi.item_as_double(k) / 37.0);
    EXPECT_EQ(yi.item_as_double(k), std::clamp(std::nearbyint(double(q)), 0.0, 65535.0));
  }
}

TEST(NarrowDequantize, EveryNarrowTypeEveryLayout) {
  const DType types[] = {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                         DType::kFloat8E5M2FNUZ, DType::kFloat4E2M1,     DType::kInt4,
                         DType::kUInt4,          DType::kInt2,           DType::kUInt2,
                         DType::kInt16,          DType::kUInt16};
  uint64_t seed = 300;
  for (DType t : types) {
    for (const QuantCase& c : kCases) {
      Tensor x = random_quantized(c.x, t, ++seed);
      Tensor zp = random_quantized(c.s, t, ++seed);
      Tensor s = random_tensor(c.s, ++seed, -3.0f, 3.0f);
      for (bool half_out : {false, true}) {
        Attributes attrs = layout_attrs(c);
        if (half_out) attrs["output_dtype"] = onnx_code(DType::kFloat16);
        Tensor y = run_op("DequantizeLinear", {x, s, zp}, attrs)[0];
        ASSERT_EQ(y.dtype(), half_out ? DType::kFloat16 : DType::kFloat32);
        const int axis = c.axis < 0 ? c.axis + c.x.rank() : c.axis;
        std::vector<double> want(static_cast<size_t>(x.numel()));
        for (int64_t k = 0; k < x.numel(); ++k) {
          const int64_t p = param_index(k, c.x, c.s, axis, c.block);
          double d;
          if (is_float_type(t)) {
            const test::RefFloat f = ref_format(t);
            d = ref_decode(static_cast<const uint8_t*>(x.raw_data())[k], f) -
                ref_decode(static_cast<const uint8_t*>(zp.raw_data())[p], f);
          } else {
            d = x.item_as_double(k) - zp.item_as_double(p);
          }
          const float sc = s.data<float>()[p];
          want[k] = half_out ? half_round(half_round(static_cast<float>(d)) * half_round(sc))
                             : static_cast<float>(static_cast<float>(d) * sc);
        }
        expect_exact(y, c.x, want);
      }
    }
  }
}

TEST(NarrowDequantize, E8M0ScaleNeedsOutputDtype) {
  Tensor x = random_quantized({2, 4}, DType::kFloat4E2M1, 5);
  Tensor s = Tensor::empty(Shape{2, 1}, DType::kFloat8E8M0);
  const uint8_t exps[] = {126, 131};  // 0.5, 16
  std::memcpy(s.raw_data(), exps, 2);
  Attributes attrs;
  attrs["axis"] = int64_t{1};
  attrs["block_size"] = int64_t{4};
  attrs["output_dtype"] = onnx_code(DType::kFloat32);
  Tensor y = run_op("DequantizeLinear", {x, s}, attrs)[0];
  std::vector<double> want(8);
  for (int k = 0; k < 8; ++k)
    want[k] = ref_decode(static_cast<const uint8_t*>(x.raw_data())[k],
                         ref_format(DType::kFloat4E2M1)) *
              std::ldexp(1.0, exps[k / 4] - 127);
  expect_exact(y, Shape{2, 4}, want);
  attrs.erase("output_dtype");
  test::expect_error<InvalidModel>([&] { run_op("DequantizeLinear", {x, s}, attrs); },
                                   "DequantizeLinear");
}

TEST(NarrowQuantize, BadInput) {
  Tensor x = random_tensor({4, 6}, 1);
  // A blocked scale whose blocked axis does not fit: 6 in blocks of 2 needs 3.
  Attributes blocked;
  blocked["axis"] = int64_t{1};
  blocked["block_size"] = int64_t{2};
  test::expect_error<ShapeError>(
      [&] { run_op("QuantizeLinear", {x, random_tensor({4, 2}, 2, 1.0f, 2.0f)}, blocked); },
      "QuantizeLinear");
  // The other dims must match x's.
  test::expect_error<ShapeError>(
      [&] { run_op("QuantizeLinear", {x, random_tensor({2, 3}, 2, 1.0f, 2.0f)}, blocked); },
      "QuantizeLinear");
  Attributes negative;
  negative["block_size"] = int64_t{-1};
  test::expect_error<InvalidModel>(
      [&] { run_op("QuantizeLinear", {x, random_tensor({6}, 3, 1.0f, 2.0f)}, negative); },
      "QuantizeLinear");
  // output_dtype and the zero point's type disagree.
  Attributes mismatch;
  mismatch["output_dtype"] = onnx_code(DType::kInt4);
  test::expect_error<InvalidModel>(
      [&] {
        run_op("QuantizeLinear",
               {x, Tensor::scalar<float>(1.0f), random_quantized({}, DType::kUInt4, 4)}, mismatch);
      },
      "QuantizeLinear");
  // float8e8m0 is a scale type, not a quantized one.
  Attributes e8m0;
  e8m0["output_dtype"] = onnx_code(DType::kFloat8E8M0);
  test::expect_error<ShapeError>(
      [&] { run_op("QuantizeLinear", {x, Tensor::scalar<float>(1.0f)}, e8m0); },
      "QuantizeLinear");
  // DequantizeLinear: the zero point's type must be x's.
  Tensor q = random_quantized({4}, DType::kInt4, 6);
  test::expect_error<ShapeError>(
      [&] {
        run_op("DequantizeLinear",
               {q, Tensor::scalar<float>(1.0f), random_quantized({}, DType::kUInt4, 7)});
      },
      "DequantizeLinear");
}

}  // namespace
}  // namespace lumen
