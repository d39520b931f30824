// Lumen's int8 GEMM (src/backends/cpu/int8_gemm.h) against an int64 reference with the reference
// kernels' requantize (double product, float32 rounding, ties to even, saturation), on random data
// with full-range weights and the saturating extremes: every output element equal, at edge shapes
// (rows and columns off the 6 x 16 micro-kernel, odd k, k across its 256-column blocks, one row,
// k = 0), u8 and s8 activations and outputs, with and without a bias; and QLinearMatMul with such
// weights equal to the reference loops where the GEMM runs (AVX2 without VNNI), within one unit
// elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/int8_gemm.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/quant_dnnl.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;
using test::random_ints;
using test::random_tensor;

int32_t value_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt8 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
}

struct Case {
  int64_t m, k, n;
  DType a_type, y_type;
  bool bias, extremes;
};

TEST(Int8Gemm, MatchesExactReference) {
  if (!cpu::has_avx2())
    GTEST_SKIP() << "int8_gemm has an AVX2 form only, and this CPU level lacks AVX2";
  const std::vector<Case> cases = {
      {1, 1, 1, DType::kUInt8, DType::kUInt8, false, false},
      {3, 0, 5, DType::kUInt8, DType::kUInt8, true, false},
      {5, 3, 15, DType::kUInt8, DType::kInt8, true, false},
      {6, 16, 16, DType::kInt8, DType::kUInt8, false, false},
      {7, 17, 17, DType::kInt8, DType::kInt8, true, false},
      {1, 300, 70, DType::kUInt8, DType::kUInt8, true, false},
      {50, 96, 130, DType::kUInt8, DType::kUInt8, false, true},
      {131, 301, 130, DType::kInt8, DType::kInt8, true, true},
      {64, 768, 40, DType::kUInt8, DType::kUInt8, true, true},
  };
  uint64_t seed = 1000;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.m << "x" << c.k << "x" << c.n);
    const bool a_signed = c.a_type == DType::kInt8;
    Tensor a = random_ints({c.m, c.k}, ++seed, a_signed ? -128 : 0, a_signed ? 127 : 255, c.a_type);
    Tensor b = random_ints({c.k, c.n}, ++seed, -128, 127, DType::kInt8);
    const int32_t a_zero = a_signed ? -7 : 121;
    if (c.extremes) {
      // Whole rows at A's extremes against whole columns at B's: every pairwise sum at +-65280.
      for (int64_t j = 0; j < c.k; ++j) {
        if (a_signed) {
          a.data<int8_t>()[j] = -128;
        } else {
          a.data<uint8_t>()[j] = 255;
          a.data<uint8_t>()[c.k + j] = 0;
        }
        b.data<int8_t>()[j * c.n] = -128;
        b.data<int8_t>()[j * c.n + 1] = 127;
      }
    }
    Tensor scales = random_tensor({c.n}, ++seed, 1e-5f, 4e-5f);
    Tensor bias = random_ints({c.n}, ++seed, -40000, 40000, DType::kInt32);
    std::vector<double> scale(c.n);
    for (int64_t j = 0; j < c.n; ++j) scale[j] = scales.data<float>()[j];
    const int32_t y_zero = c.y_type == DType::kInt8 ? 5 : 130;
    Tensor y = Tensor::empty({c.m, c.n}, c.y_type);
    cpu::Int8GemmOutput out;
    out.scale = scale.data();
    out.bias = c.bias ? bias.data<int32_t>() : nullptr;
    out.y_zero = y_zero;
    out.dtype = c.y_type;
    out.y = y.raw_data();
    out.ldy = c.n;
    cpu::int8_gemm(c.m, a.raw_data(), a_signed, a_zero, c.k,
                   cpu::Int8PackedMatrix(b.data<int8_t>(), c.k, c.n), out);
    const double lo = c.y_type == DType::kInt8 ? -128 : 0,
                 hi = c.y_type == DType::kInt8 ? 127 : 255;
    int64_t distinct_low = 0, distinct_high = 0;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        int64_t acc = c.bias ? bias.data<int32_t>()[j] : 0;
        for (int64_t t = 0; t < c.k; ++t)
          acc += static_cast<int64_t>(value_at(a, i * c.k + t) - a_zero) *
                 b.data<int8_t>()[t * c.n + j];
        const float f = static_cast<float>(static_cast<double>(acc) * scale[j]);
        const double want =
            std::min(std::max(static_cast<double>(std::nearbyint(f)) + y_zero, lo), hi);
        const int32_t got = value_at(y, i * c.n + j);
        ASSERT_EQ(got, want) << "at (" << i << ", " << j << "), sum " << acc;
        distinct_low += got == lo;
        distinct_high += got == hi;
      }
    }
    // The data exercise the range, not only the saturated ends.
    EXPECT_LT(distinct_low + distinct_high, c.m * c.n);
  }
}

// QLinearMatMul with constant full-range weights and s8 activations (oneDNN without VNNI has no
// exact form for s8 activations; the GEMM does) equals the same op with runtime weights (the
// reference loops), element by element.
TEST(Int8Gemm, QLinearMatMulEqualsReferenceLoops) {
  for (DType a_type : {DType::kUInt8, DType::kInt8}) {
    const bool s8 = a_type == DType::kInt8;
    const Tensor a = random_ints({3, 37, 200}, 1100, s8 ? -128 : 0, s8 ? 127 : 255, a_type);
    const Tensor b = random_ints({200, 45}, 1101, -128, 127, DType::kInt8);
    const Tensor bs = random_tensor({45}, 1102, 0.0005f, 0.001f);
    auto run = [&](bool const_b) {
      return test::run_op(
          "QLinearMatMul",
          {a, constant(Tensor::scalar<float>(0.02f)),
           constant(random_ints({}, 1103, s8 ? -9 : 121, s8 ? -9 : 121, a_type)),
           test::OpInput(b, const_b), constant(bs), constant(Tensor::zeros({45}, DType::kInt8)),
           constant(Tensor::scalar<float>(0.05f)),
           constant(random_ints({}, 1104, 128, 128, DType::kUInt8))})[0];
    };
    const Tensor got = run(true), want = run(false);
    ASSERT_EQ(got.shape(), want.shape());
    // oneDNN's own requantize (with VNNI) rounds in float32 and may differ by one unit.
    const int tol = cpu::has_avx2() && !cpu::dnnl_int8_exact(128, false) ? 0 : 1;
    for (int64_t i = 0; i < got.numel(); ++i)
      ASSERT_LE(std::abs(got.data<uint8_t>()[i] - want.data<uint8_t>()[i]), tol) << "element " << i;
  }
}

}  // namespace
}  // namespace lumen
