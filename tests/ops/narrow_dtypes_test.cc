// Tests of ONNX's narrow types (float8 variants, float8e8m0, float4e2m1, int4/uint4, int2/uint2):
// the conversions against references written from the formats' definitions (narrow_reference.h),
// Cast and CastLike between them and the other dtypes (saturate, round_mode, the opset 19-23 FNUZ
// infinity rule), TensorProto reading and writing (packed raw data, int32_data, a model with
// narrow inputs, initializers and Constant attributes), and bad input.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/narrow_types.h"
#include "lumen/lumen.h"
#include "onnx/tensor_proto.h"
#include "ops/narrow_reference.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::ref_decode;
using test::ref_encode;
using test::ref_format;
using test::run_op;

const DType kFloat8Types[] = {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                              DType::kFloat8E5M2FNUZ};
const DType kSubByteInts[] = {DType::kInt4, DType::kUInt4, DType::kInt2, DType::kUInt2};
const DType kNarrowTypes[] = {DType::kFloat8E4M3FN,   DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                              DType::kFloat8E5M2FNUZ, DType::kFloat8E8M0,     DType::kFloat4E2M1,
                              DType::kInt4,           DType::kUInt4,          DType::kInt2,
                              DType::kUInt2};

int64_t onnx_code(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 1;
    case DType::kUInt8:
      return 2;
    case DType::kInt8:
      return 3;
    case DType::kFloat16:
      return 10;
    case DType::kFloat64:
      return 11;
    case DType::kInt64:
      return 7;
    case DType::kInt32:
      return 6;
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

int sub_byte_bits(DType t) {
  return t == DType::kInt4 || t == DType::kUInt4 ? 4 : 2;
}
bool is_signed_int(DType t) {
  return t == DType::kInt4 || t == DType::kInt2;
}

Tensor byte_tensor(DType t, const std::vector<uint8_t>& bytes) {
  Tensor out = Tensor::empty(Shape{static_cast<int64_t>(bytes.size())}, t);
  if (!bytes.empty()) std::memcpy(out.raw_data(), bytes.data(), bytes.size());
  return out;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return std::vector<uint8_t>(p, p + t.numel());
}

Tensor cast(const Tensor& x, DType to, Attributes attrs = {}) {
  attrs["to"] = onnx_code(to);
  return run_op("Cast", {x}, attrs)[0];
}

// Test values for a format: every representable value, every midpoint between neighbours (exact
// ties) and a float step either side, zeros, infinities, NaN, far out of range and random values.
std::vector<float> probe_values(const test::RefFloat& f, uint64_t seed) {
  std::vector<double> pos;
  const uint32_t sign_mask = 1u << (f.exp_bits + f.mant_bits);
  for (uint32_t p = 0; p < sign_mask; ++p) {
    const double v = ref_decode(p, f);
    if (std::isfinite(v)) pos.push_back(v);
  }
  std::vector<float> out;
  for (size_t i = 0; i < pos.size(); ++i) {
    out.push_back(static_cast<float>(pos[i]));
    const double next = i + 1 < pos.size() ? pos[i + 1] : pos[i] * 1.2;
    const float mid = static_cast<float>((pos[i] + next) / 2);
    out.push_back(mid);
    out.push_back(std::nextafter(mid, 0.0f));
    out.push_back(std::nextafter(mid, INFINITY));
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> expo(-30.0, 20.0);
  for (int i = 0; i < 200; ++i) out.push_back(static_cast<float>(std::exp2(expo(rng))));
  for (float v : {0.0f, 1e30f, 3e38f, INFINITY, NAN, 1e-30f}) out.push_back(v);
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) out.push_back(-out[i]);
  return out;
}

TEST(NarrowConversions, Float8AndFloat4DecodeEveryPattern) {
  for (DType t : {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                  DType::kFloat8E5M2FNUZ, DType::kFloat4E2M1}) {
    const test::RefFloat f = ref_format(t);
    const int patterns = 1 << test::ref_bits(f);
    for (int p = 0; p < patterns; ++p) {
      const double want = ref_decode(static_cast<uint32_t>(p), f);
      const float got = narrow_to_float(t, static_cast<uint8_t>(p));
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(got)) << dtype_name(t) << " pattern " << p;
      else
        EXPECT_EQ(static_cast<double>(got), want) << dtype_name(t) << " pattern " << p;
    }
  }
  for (int p = 0; p < 256; ++p) {
    const float got = float8e8m0_to_float(static_cast<uint8_t>(p));
    if (p == 255)
      EXPECT_TRUE(std::isnan(got));
    else
      EXPECT_EQ(static_cast<double>(got), std::ldexp(1.0, p - 127)) << p;
  }
}

TEST(NarrowConversions, FloatToFloat8AndFloat4RoundNearestEvenWithOverflowRules) {
  for (DType t : {DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2,
                  DType::kFloat8E5M2FNUZ, DType::kFloat4E2M1}) {
    const test::RefFloat f = ref_format(t);
    for (bool saturate : {true, false}) {
      int reported = 0;
      for (float x : probe_values(f, 7)) {
        const uint32_t want = ref_encode(x, f, saturate);
        const uint8_t got = float_to_narrow_float(t, x, saturate);
        const bool both_nan = std::isnan(ref_decode(want, f)) && std::isnan(narrow_to_float(t, got));
        if ((got != want && !both_nan) && reported++ < 10)
          ADD_FAILURE() << dtype_name(t) << " saturate " << saturate << " x " << x << ": got "
                        << int{got} << ", want " << want;
      }
    }
  }
}

TEST(NarrowConversions, Float8E8M0RoundingModes) {
  std::vector<float> xs = {0.0f, 1.0f, 1.5f, 1.4999999f, 1.5000001f, 3.0f, 0.75f, 0.124f, 2.0f,
                           1e-30f, 3e38f, 1.7e38f, 1.0e38f, INFINITY, NAN};
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> expo(-120.0, 127.9);
  for (int i = 0; i < 500; ++i) xs.push_back(static_cast<float>(std::exp2(expo(rng))));
  for (const char* mode : {"up", "down", "nearest"}) {
    const E8M0Rounding m = std::string(mode) == "up"     ? E8M0Rounding::kUp
                           : std::string(mode) == "down" ? E8M0Rounding::kDown
                                                         : E8M0Rounding::kNearest;
    for (bool saturate : {true, false})
      for (float x : xs)
        EXPECT_EQ(float_to_float8e8m0(x, saturate, m), test::ref_e8m0(x, mode, saturate))
            << mode << " saturate " << saturate << " x " << x;
  }
}

TEST(NarrowConversions, SubByteIntegersWrapAndPack) {
  for (DType t : kSubByteInts) {
    for (int64_t v = -40; v <= 40; ++v) {
      const int64_t want = test::ref_wrap(v, sub_byte_bits(t), is_signed_int(t));
      const uint8_t got = wrap_sub_byte(t, v);
      EXPECT_EQ(is_signed_int(t) ? int64_t{static_cast<int8_t>(got)} : int64_t{got}, want)
          << dtype_name(t) << " " << v;
      EXPECT_EQ(narrow_to_float(t, got), static_cast<float>(want));
    }
  }
  // Packing: first element lowest. int4 {1, -2, 7} -> 0xE1, 0x07; uint2 {1, 2, 3, 0, 3} -> 0x39, 0x03.
  const uint8_t int4_values[] = {1, static_cast<uint8_t>(-2), 7};
  uint8_t packed[2];
  pack_sub_byte(DType::kInt4, int4_values, 3, packed);
  EXPECT_EQ(packed[0], 0xE1);
  EXPECT_EQ(packed[1], 0x07);
  uint8_t back[3];
  unpack_sub_byte(DType::kInt4, packed, 3, back);
  EXPECT_EQ(std::vector<uint8_t>(back, back + 3), std::vector<uint8_t>(int4_values, int4_values + 3));
  const uint8_t uint2_values[] = {1, 2, 3, 0, 3};
  pack_sub_byte(DType::kUInt2, uint2_values, 5, packed);
  EXPECT_EQ(packed[0], 0x39);
  EXPECT_EQ(packed[1], 0x03);
}

// --- Cast and CastLike ---

TEST(NarrowCast, FloatToFloat8BothSaturateModes) {
  for (DType t : kFloat8Types) {
    const test::RefFloat f = ref_format(t);
    std::vector<float> xs = probe_values(f, 11);
    Tensor x = Tensor::from_vector<float>({static_cast<int64_t>(xs.size())}, xs);
    for (int64_t saturate : {1, 0}) {
      Attributes attrs;
      if (saturate == 0) attrs["saturate"] = saturate;
      Tensor y = cast(x, t, attrs);
      ASSERT_EQ(y.dtype(), t);
      std::vector<uint8_t> got = bytes_of(y);
      int reported = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const uint32_t want = ref_encode(xs[i], f, saturate != 0);
        const bool ok = got[i] == want ||
                        (std::isnan(ref_decode(want, f)) && std::isnan(ref_decode(got[i], f)));
        if (!ok && reported++ < 10)
          ADD_FAILURE() << dtype_name(t) << " saturate " << saturate << " x " << xs[i]
                        << ": got " << int{got[i]} << ", want " << want;
      }
    }
  }
}

TEST(NarrowCast, Float8ToWideTypesIsExact) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  for (DType t : kFloat8Types) {
    const test::RefFloat f = ref_format(t);
    Tensor x = byte_tensor(t, all);
    for (DType to : {DType::kFloat32, DType::kFloat16, DType::kFloat64}) {
      Tensor y = cast(x, to);
      for (int p = 0; p < 256; ++p) {
        const double want = ref_decode(static_cast<uint32_t>(p), f);
        const double got = y.item_as_double(p);
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(got)) << dtype_name(t) << " " << p;
        else
          EXPECT_EQ(got, want) << dtype_name(t) << " to " << dtype_name(to) << " " << p;
      }
    }
    // To int32: truncation toward zero, NaN to 0.
    Tensor yi = cast(x, DType::kInt32);
    for (int p = 0; p < 256; ++p) {
      const double v = ref_decode(static_cast<uint32_t>(p), f);
      if (std::isfinite(v)) {
        EXPECT_EQ(yi.item_as_double(p), std::trunc(v)) << p;
      }
    }
  }
}

TEST(NarrowCast, BetweenNarrowFloats) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  for (DType from : kFloat8Types)
    for (DType to : {DType::kFloat8E5M2, DType::kFloat8E4M3FNUZ, DType::kFloat4E2M1}) {
      if (from == to) continue;
      const test::RefFloat ff = ref_format(from), ft = ref_format(to);
      std::vector<uint8_t> got = bytes_of(cast(byte_tensor(from, all), to));
      for (int p = 0; p < 256; ++p) {
        const uint32_t want = ref_encode(ref_decode(static_cast<uint32_t>(p), ff), ft, true);
        const bool ok =
            got[p] == want || (std::isnan(ref_decode(want, ft)) && std::isnan(ref_decode(got[p], ft)));
        EXPECT_TRUE(ok) << dtype_name(from) << " " << p << " to " << dtype_name(to) << ": got "
                        << int{got[p]} << ", want " << want;
      }
    }
}

TEST(NarrowCast, WideSourcesRoundOnce) {
  // 1 + 1/16 is half way between E4M3FN's 1 and 1.125; a double just above it must round up,
  // though as a float it is exactly the tie (which rounds to even, down).
  const double above = 1.0625 + std::ldexp(1.0, -40);
  Tensor x = Tensor::from_vector<double>({2}, {above, -above});
  EXPECT_EQ(bytes_of(cast(x, DType::kFloat8E4M3FN)), (std::vector<uint8_t>{0x39, 0xB9}));
  // int64 beyond float's precision: 2^40 + 1 to E5M2 is 2^40 (saturated to 57344).
  Tensor big = Tensor::from_vector<int64_t>({2}, {(int64_t{1} << 40) + 1, 3});
  EXPECT_EQ(bytes_of(cast(big, DType::kFloat8E5M2)), (std::vector<uint8_t>{0x7B, 0x42}));
  // bool and float16 sources.
  EXPECT_EQ(bytes_of(cast(Tensor::from_vector<bool>({2}, {true, false}), DType::kFloat8E4M3FN)),
            (std::vector<uint8_t>{0x38, 0x00}));
  Tensor h = cast(Tensor::from_vector<float>({3}, {0.4375f, -3.0f, 65504.0f}), DType::kFloat16);
  EXPECT_EQ(bytes_of(cast(h, DType::kFloat4E2M1)), (std::vector<uint8_t>{0x01, 0x0D, 0x07}));
}

TEST(NarrowCast, SubByteIntegersFromAndTo) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> dist(-300, 300);
  std::vector<int64_t> iv(64);
  for (auto& v : iv) v = dist(rng);
  std::vector<float> fv = {-9.7f, -8.5f, -2.5f, -1.9f, -0.5f, 0.5f, 1.9f, 7.99f, 15.5f, 16.5f, 1e9f};
  for (DType t : kSubByteInts) {
    const int bits = sub_byte_bits(t);
    const bool sgn = is_signed_int(t);
    // int64 -> narrow: wraps.
    std::vector<uint8_t> got = bytes_of(cast(Tensor::from_vector<int64_t>({64}, iv), t));
    for (size_t i = 0; i < iv.size(); ++i) {
      const int64_t g = sgn ? static_cast<int8_t>(got[i]) : got[i];
      EXPECT_EQ(g, test::ref_wrap(iv[i], bits, sgn)) << dtype_name(t) << " " << iv[i];
    }
    // float -> narrow: truncates toward zero, then wraps.
    got = bytes_of(cast(Tensor::from_vector<float>({static_cast<int64_t>(fv.size())}, fv), t));
    for (size_t i = 0; i < fv.size(); ++i) {
      const int64_t want = test::ref_wrap(
          static_cast<int64_t>(std::trunc(std::min(static_cast<double>(fv[i]), 2147483647.0))),
          bits, sgn);
      EXPECT_EQ(sgn ? int64_t{static_cast<int8_t>(got[i])} : int64_t{got[i]}, want)
          << dtype_name(t) << " " << fv[i];
    }
    // narrow -> float32, int8, uint8, int64: the value (to uint8, wrapped).
    const int64_t lo = sgn ? -(int64_t{1} << (bits - 1)) : 0;
    std::vector<uint8_t> all;
    std::vector<double> values;
    for (int64_t v = lo; v < lo + (int64_t{1} << bits); ++v) {
      all.push_back(static_cast<uint8_t>(v));
      values.push_back(static_cast<double>(v));
    }
    Tensor x = byte_tensor(t, all);
    const Shape s{static_cast<int64_t>(all.size())};
    test::expect_equal(cast(x, DType::kFloat32), DType::kFloat32, s, values);
    test::expect_equal(cast(x, DType::kInt8), DType::kInt8, s, values);
    test::expect_equal(cast(x, DType::kInt64), DType::kInt64, s, values);
    std::vector<double> wrapped;
    for (double v : values) wrapped.push_back(static_cast<double>(test::ref_wrap(static_cast<int64_t>(v), 8, false)));
    test::expect_equal(cast(x, DType::kUInt8), DType::kUInt8, s, wrapped);
    // narrow -> another narrow integer: wraps; -> float8: the value.
    for (DType to : kSubByteInts) {
      if (to == t) continue;
      got = bytes_of(cast(x, to));
      for (size_t i = 0; i < values.size(); ++i) {
        const int64_t want = test::ref_wrap(static_cast<int64_t>(values[i]), sub_byte_bits(to),
                                            is_signed_int(to));
        EXPECT_EQ(is_signed_int(to) ? int64_t{static_cast<int8_t>(got[i])} : int64_t{got[i]}, want);
      }
    }
    got = bytes_of(cast(x, DType::kFloat8E4M3FN));
    for (size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(got[i], ref_encode(values[i], ref_format(DType::kFloat8E4M3FN), true));
  }
}

TEST(NarrowCast, E8M0RoundModeAndSaturate) {
  std::vector<float> xs = {0.0f, 0.124f, 0.25f, 1.1f, 1.5f, 1.49f, 3.0f, 2e38f, INFINITY, NAN};
  Tensor x = Tensor::from_vector<float>({static_cast<int64_t>(xs.size())}, xs);
  for (const char* mode : {"up", "down", "nearest"})
    for (int64_t saturate : {1, 0}) {
      Attributes attrs;
      attrs["round_mode"] = std::string(mode);
      attrs["saturate"] = saturate;
      std::vector<uint8_t> got = bytes_of(cast(x, DType::kFloat8E8M0, attrs));
      for (size_t i = 0; i < xs.size(); ++i)
        EXPECT_EQ(got[i], test::ref_e8m0(xs[i], mode, saturate != 0))
            << mode << " " << saturate << " " << xs[i];
    }
  // And back: 2^(b - 127), 0xFF NaN.
  Tensor back = cast(byte_tensor(DType::kFloat8E8M0, {0, 127, 130, 254, 255}), DType::kFloat32);
  EXPECT_EQ(back.item_as_double(0), std::ldexp(1.0, -127));
  EXPECT_EQ(back.item_as_double(1), 1.0);
  EXPECT_EQ(back.item_as_double(2), 8.0);
  EXPECT_EQ(back.item_as_double(3), std::ldexp(1.0, 127));
  EXPECT_TRUE(std::isnan(back.item_as_double(4)));
}

TEST(NarrowCast, CastLikeAndTheOpset23FnuzInfinityRule) {
  Tensor x = Tensor::from_vector<float>({4}, {INFINITY, -INFINITY, 1e6f, 1.0f});
  Tensor like = byte_tensor(DType::kFloat8E4M3FN, {0});
  Attributes no_sat;
  no_sat["saturate"] = int64_t{0};
  Tensor y = run_op("CastLike", {x, like}, no_sat)[0];
  ASSERT_EQ(y.dtype(), DType::kFloat8E4M3FN);
  EXPECT_EQ(bytes_of(y), (std::vector<uint8_t>{0x7F, 0xFF, 0x7F, 0x38}));
  y = run_op("CastLike", {x, like})[0];
  EXPECT_EQ(bytes_of(y), (std::vector<uint8_t>{0x7E, 0xFE, 0x7E, 0x38}));
  // Opsets 19-23 (the importer sets fnuz_inf_to_nan): infinity to FNUZ is NaN even saturating.
  Attributes legacy;
  legacy["fnuz_inf_to_nan"] = int64_t{1};
  for (DType t : {DType::kFloat8E4M3FNUZ, DType::kFloat8E5M2FNUZ}) {
    EXPECT_EQ(bytes_of(cast(x, t, legacy))[0], 0x80);
    EXPECT_EQ(bytes_of(cast(x, t, legacy))[2], 0x7F);
    EXPECT_EQ(bytes_of(cast(x, t))[0], 0x7F);
  }
}

TEST(NarrowCast, BadRoundModeAndArithmeticOnNarrowTypes) {
  Tensor x = Tensor::from_vector<float>({2}, {1.0f, 2.0f});
  Attributes attrs;
  attrs["round_mode"] = std::string("sideways");
  test::expect_error<InvalidModel>([&] { cast(x, DType::kFloat8E8M0, attrs); }, "Cast");
  // Arithmetic kernels do not take the 4-bit integers: an error, not a wrong answer.
  Tensor a = byte_tensor(DType::kInt4, {1, 2, 3});
  EXPECT_THROW(run_op("Add", {a, a}), Error);
  Tensor e = byte_tensor(DType::kFloat8E4M3FN, {0x38, 0x40});
  EXPECT_THROW(run_op("Relu", {e}), Error);
}

// --- Data movement: narrow tensors move by byte ---

TEST(NarrowMovement, ShapeAndCopyOpsMoveBytes) {
  for (DType t : {DType::kFloat8E4M3FN, DType::kInt4, DType::kFloat4E2M1}) {
    std::vector<uint8_t> bytes(24);
    for (int i = 0; i < 24; ++i) bytes[i] = static_cast<uint8_t>(t == DType::kInt4 ? i % 16 - 8 : i % 16);
    Tensor x = Tensor::empty(Shape{2, 3, 4}, t);
    std::memcpy(x.raw_data(), bytes.data(), 24);
    auto same = [&](const Tensor& y, const Shape& shape, const std::vector<uint8_t>& want,
                    const char* op) {
      EXPECT_EQ(y.dtype(), t) << op;
      EXPECT_EQ(y.shape(), shape) << op;
      EXPECT_EQ(bytes_of(y), want) << op << " " << dtype_name(t);
    };
    same(run_op("Identity", {x})[0], {2, 3, 4}, bytes, "Identity");
    same(run_op("Reshape", {x, test::constant(Tensor::from_vector<int64_t>({2}, {4, 6}))})[0],
         {4, 6}, bytes, "Reshape");
    same(run_op("Flatten", {x})[0], {2, 12}, bytes, "Flatten");
    same(run_op("Unsqueeze", {x, test::constant(Tensor::from_vector<int64_t>({1}, {0}))})[0],
         {1, 2, 3, 4}, bytes, "Unsqueeze");
    // Transpose (2, 0, 1): y[c][a][b] = x[a][b][c].
    std::vector<uint8_t> tr;
    for (int c = 0; c < 4; ++c)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 3; ++b) tr.push_back(bytes[(a * 3 + b) * 4 + c]);
    same(run_op("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}})[0], {4, 2, 3}, tr,
         "Transpose");
    std::vector<uint8_t> twice = bytes;
    twice.insert(twice.end(), bytes.begin(), bytes.end());
    same(run_op("Concat", {x, x}, {{"axis", 0}})[0], {4, 3, 4}, twice, "Concat");
    // Gather rows 1, 0 of axis 0.
    std::vector<uint8_t> swapped(bytes.begin() + 12, bytes.end());
    swapped.insert(swapped.end(), bytes.begin(), bytes.begin() + 12);
    same(run_op("Gather", {x, Tensor::from_vector<int64_t>({2}, {1, 0})})[0], {2, 3, 4}, swapped,
         "Gather");
    // Pad the last axis by one constant value on each side.
    Tensor pad_value = Tensor::empty(Shape{}, t);
    static_cast<uint8_t*>(pad_value.raw_data())[0] = 0x05;
    std::vector<uint8_t> padded;
    for (int row = 0; row < 6; ++row) {
      padded.push_back(0x05);
      for (int c = 0; c < 4; ++c) padded.push_back(bytes[row * 4 + c]);
      padded.push_back(0x05);
    }
    same(run_op("Pad", {x, test::constant(Tensor::from_vector<int64_t>({6}, {0, 0, 1, 0, 0, 1})),
                        test::constant(pad_value)})[0],
         {2, 3, 6}, padded, "Pad");
    EXPECT_EQ(run_op("Shape", {x})[0].item_as_double(2), 4.0);
    // NonZero: float8's and float4's negative zero is zero.
    Tensor z = byte_tensor(t, {0x00, t == DType::kFloat8E4M3FN ? uint8_t{0x80} : uint8_t{0x08},
                               0x01, 0x00});
    Tensor nz = run_op("NonZero", {z})[0];
    EXPECT_EQ(nz.shape(), (Shape{1, t == DType::kInt4 ? 2 : 1})) << dtype_name(t);
    EXPECT_EQ(run_op("Size", {x})[0].item_as_double(0), 24.0);
  }
}

// --- TensorProto ---

TEST(NarrowTensorProto, RoundTripThroughRawData) {
  std::mt19937_64 rng(9);
  for (DType t : kNarrowTypes) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{12}}) {
      std::vector<uint8_t> bytes(static_cast<size_t>(n));
      for (auto& b : bytes) {
        b = static_cast<uint8_t>(rng());
        if (is_sub_byte_int(t)) {
          const int64_t w = test::ref_wrap(b, sub_byte_bits(t), is_signed_int(t));
          b = static_cast<uint8_t>(w);
        } else if (t == DType::kFloat4E2M1) {
          b &= 0xF;
        }
      }
      Tensor x = byte_tensor(t, bytes);
      onnx::TensorProto proto;
      onnx_import::tensor_to_proto(x, &proto);
      EXPECT_EQ(proto.data_type(), onnx_code(t));
      const int bits = packed_bits(t) ? packed_bits(t) : 8;
      ASSERT_EQ(proto.raw_data().size(), static_cast<size_t>((n * bits + 7) / 8)) << dtype_name(t);
      // The packed bytes, by hand: element i in bits [bits * (i % per), ...) of byte i / per.
      for (int64_t i = 0; i < n; ++i) {
        const int per = 8 / bits;
        const uint32_t field = (static_cast<uint8_t>(proto.raw_data()[i / per]) >>
                                (bits * (i % per))) & ((1u << bits) - 1);
        EXPECT_EQ(field, bytes[i] & ((1u << bits) - 1)) << dtype_name(t) << " " << i;
      }
      Tensor back = onnx_import::tensor_from_proto(proto, ".", "t");
      EXPECT_EQ(back.dtype(), t);
      EXPECT_EQ(back.shape(), x.shape());
      EXPECT_EQ(bytes_of(back), bytes) << dtype_name(t);
    }
  }
}

TEST(NarrowTensorProto, Int32DataHoldsPatternsAndPackedBytes) {
  onnx::TensorProto p;
  p.set_data_type(17);  // FLOAT8E4M3FN, one pattern per entry
  p.add_dims(3);
  for (int v : {0x38, 0xC0, 0x7F}) p.add_int32_data(v);
  Tensor t = onnx_import::tensor_from_proto(p, ".", "t");
  EXPECT_EQ(bytes_of(t), (std::vector<uint8_t>{0x38, 0xC0, 0x7F}));
  EXPECT_EQ(t.item_as_double(0), 1.0);
  EXPECT_EQ(t.item_as_double(1), -2.0);

  onnx::TensorProto q;
  q.set_data_type(22);  // INT4: two to an entry, first in the low nibble
  q.add_dims(5);
  for (int v : {0x87, 0x1F, 0x08}) q.add_int32_data(v);
  t = onnx_import::tensor_from_proto(q, ".", "t");
  test::expect_equal(cast(t, DType::kFloat32), DType::kFloat32, Shape{5}, {7, -8, -1, 1, -8});

  onnx::TensorProto r;
  r.set_data_type(25);  // UINT2: four to an entry
  r.add_dims(6);
  for (int v : {0xE4, 0x0B}) r.add_int32_data(v);
  t = onnx_import::tensor_from_proto(r, ".", "t");
  EXPECT_EQ(bytes_of(t), (std::vector<uint8_t>{0, 1, 2, 3, 3, 2}));
}

TEST(NarrowTensorProto, WrongSizesAreInvalidModels) {
  onnx::TensorProto q;
  q.set_data_type(21);  // UINT4 [5] needs 3 entries
  q.add_dims(5);
  for (int v : {1, 2, 3, 4, 5}) q.add_int32_data(v);
  EXPECT_THROW(onnx_import::tensor_from_proto(q, ".", "t"), InvalidModel);
  onnx::TensorProto raw;
  raw.set_data_type(26);  // INT2 [9] needs 3 bytes
  raw.add_dims(9);
  raw.set_raw_data(std::string(9, '\0'));
  EXPECT_THROW(onnx_import::tensor_from_proto(raw, ".", "t"), InvalidModel);
  onnx::TensorProto f8;
  f8.set_data_type(19);
  f8.add_dims(2);
  f8.add_int32_data(1);
  EXPECT_THROW(onnx_import::tensor_from_proto(f8, ".", "t"), InvalidModel);
  onnx::TensorProto f6;
  f6.set_data_type(27);  // FLOAT6E2M3: lumen has no such dtype
  f6.add_dims(1);
  f6.add_int32_data(1);
  EXPECT_THROW(onnx_import::tensor_from_proto(f6, ".", "t"), UnsupportedOp);
}

void add_value(onnx::ValueInfoProto* v, const std::string& name, int elem_type, int64_t n) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  tt->mutable_shape()->add_dim()->set_dim_value(n);
}

onnx::NodeProto* add_cast(onnx::GraphProto* g, const std::string& in, const std::string& out,
                          int to) {
  auto* n = g->add_node();
  n->set_op_type("Cast");
  n->add_input(in);
  n->add_output(out);
  auto* a = n->add_attribute();
  a->set_name("to");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(to);
  return n;
}

// A model reading narrow types three ways: a graph input (FLOAT8E4M3FNUZ), an initializer (INT4
// in raw data) and a Constant attribute (UINT2 in int32_data), each cast to float; and a Cast of
// a float input to FLOAT8E4M3FNUZ, whose infinity rule depends on the opset.
onnx::ModelProto narrow_model(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  add_value(g->add_input(), "x", 18, 3);
  add_value(g->add_input(), "f", 1, 2);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(22);
  w->add_dims(3);
  w->set_raw_data(std::string("\xF9\x07", 2));  // -7, -1, 7
  auto* c = g->add_node();
  c->set_op_type("Constant");
  c->add_output("k");
  auto* value = c->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(25);
  value->mutable_t()->add_dims(5);
  value->mutable_t()->add_int32_data(0x1B);  // 3, 2, 1, 0
  value->mutable_t()->add_int32_data(0x02);  // 2
  add_cast(g, "x", "xf", 1);
  add_cast(g, "w", "wf", 1);
  add_cast(g, "k", "kf", 1);
  add_cast(g, "f", "f8", 18);
  add_value(g->add_output(), "xf", 1, 3);
  add_value(g->add_output(), "wf", 1, 3);
  add_value(g->add_output(), "kf", 1, 5);
  add_value(g->add_output(), "f8", 18, 2);
  return m;
}

TEST(NarrowTensorProto, ModelInputsInitializersAndConstants) {
  for (int64_t opset : {23, 24}) {
    Graph g = load_onnx_bytes(narrow_model(opset).SerializeAsString());
    Runtime rt;
    Tensor x = byte_tensor(DType::kFloat8E4M3FNUZ, {0x40, 0xC8, 0x80});  // 1, -2, NaN
    Tensor f = Tensor::from_vector<float>({2}, {INFINITY, 3.0f});
    auto out = g.compile(&rt)->execute(std::vector<Tensor>{x, f});
    ASSERT_EQ(out.size(), 4u);
    test::expect_close(out[0], Shape{3}, {1.0, -2.0, NAN}, 0, 0);
    test::expect_close(out[1], Shape{3}, {-7.0, -1.0, 7.0}, 0, 0);
    test::expect_close(out[2], Shape{5}, {3.0, 2.0, 1.0, 0.0, 2.0}, 0, 0);
    ASSERT_EQ(out[3].dtype(), DType::kFloat8E4M3FNUZ);
    // Infinity: NaN (0x80) before opset 24, the largest value (0x7F) from it.
    EXPECT_EQ(bytes_of(out[3])[0], opset < 24 ? 0x80 : 0x7F) << opset;
    EXPECT_EQ(bytes_of(out[3])[1], 0x4C);  // 3.0
  }
}

}  // namespace
}  // namespace lumen
