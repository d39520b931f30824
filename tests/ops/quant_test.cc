// Tests of the quantization ops against naive double-precision references on random data:
// QuantizeLinear and DequantizeLinear (per tensor and per axis, int8 and uint8),
// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul (batched, broadcast), ConvInteger and
// QLinearConv (padding, strides, dilations, groups, per-channel weights), and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::expect_close;
using test::expect_equal;
using test::omitted;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

// round-half-even(v) + zp, saturated to the 8-bit range of `t`.
double ref_quantize(double v, double zp, DType t) {
  const double lo = t == DType::kUInt8 ? 0 : -128, hi = t == DType::kUInt8 ? 255 : 127;
  double r = std::nearbyint(v) + zp;
  return std::clamp(r, lo, hi);
}

using test::expect_error;

TEST(QuantizeLinear, PerTensorAndPerAxisBothDtypes) {
  for (DType qt : {DType::kUInt8, DType::kInt8}) {
    const int64_t lo = qt == DType::kUInt8 ? 0 : -128, hi = qt == DType::kUInt8 ? 255 : 127;
    Tensor x = random_tensor({2, 3, 4, 5}, 1, -300.0f, 300.0f);
    std::vector<double> xv = to_doubles(x);
    // Per tensor.
    Tensor s = Tensor::scalar<float>(1.7f);
    Tensor z = random_ints({}, 2, lo, hi, qt);
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i)
      want[i] = ref_quantize(static_cast<float>(xv[i]) / 1.7f, z.item_as_double(), qt);
    expect_equal(run_op("QuantizeLinear", {x, s, z})[0], qt, x.shape(), want);
    // Per axis: axis 2 (4 channels) and the default axis 1 (3 channels).
    for (int64_t axis : {2, 1}) {
      const int64_t c = x.shape()[static_cast<int>(axis)];
      Tensor sa = random_tensor({c}, 3 + axis, 0.5f, 4.0f);
      Tensor za = random_ints({c}, 5 + axis, lo, hi, qt);
      std::vector<double> sv = to_doubles(sa), zv = to_doubles(za);
      int64_t inner = 1;
      for (int d = static_cast<int>(axis) + 1; d < 4; ++d) inner *= x.shape()[d];
      for (size_t i = 0; i < xv.size(); ++i) {
        const int64_t ch = (static_cast<int64_t>(i) / inner) % c;
        want[i] = ref_quantize(static_cast<float>(xv[i]) / static_cast<float>(sv[ch]), zv[ch], qt);
      }
      Attributes attrs;
      if (axis != 1) attrs["axis"] = axis;
      expect_equal(run_op("QuantizeLinear", {x, sa, za}, attrs)[0], qt, x.shape(), want);
    }
  }
}

TEST(QuantizeLinear, NoZeroPointIsUInt8AndTiesGoToEven) {
  Tensor x = Tensor::from_vector<float>({6}, {0.5f, 1.5f, 2.5f, -0.5f, 600.0f, -7.0f});
  Tensor y = run_op("QuantizeLinear", {x, Tensor::scalar<float>(1.0f)})[0];
  expect_equal(y, DType::kUInt8, Shape{6}, {0, 2, 2, 0, 255, 0});
}

TEST(DequantizeLinear, PerTensorAndPerAxis) {
  for (DType qt : {DType::kUInt8, DType::kInt8, DType::kInt32}) {
    const int64_t lo = qt == DType::kUInt8 ? 0 : -128, hi = qt == DType::kUInt8 ? 255 : 127;
    Tensor x = random_ints({3, 4, 2}, 11, lo, hi, qt);
    std::vector<double> xv = to_doubles(x);
    Tensor s = random_tensor({4}, 12, 0.01f, 2.0f);
    Tensor z = random_ints({4}, 13, lo, hi, qt);
    std::vector<double> sv = to_doubles(s), zv = to_doubles(z);
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) want[i] = (xv[i] - zv[(i / 2) % 4]) * sv[(i / 2) % 4];
    expect_close(run_op("DequantizeLinear", {x, s, z})[0], x.shape(), want);
    for (size_t i = 0; i < xv.size(); ++i) want[i] = xv[i] * sv[0];
    expect_close(
        run_op("DequantizeLinear", {x, Tensor::scalar<float>(static_cast<float>(sv[0]))})[0],
        x.shape(), want);
  }
}

TEST(DynamicQuantizeLinear, ScaleZeroPointAndValues) {
  for (auto [lo, hi] : {std::pair{-3.0f, 2.0f}, std::pair{-4.0f, -1.0f}, std::pair{0.5f, 6.0f}}) {
    Tensor x = random_tensor({5, 7}, 21, lo, hi);
    std::vector<double> xv = to_doubles(x);
    float mn = 0.0f, mx = 0.0f;
    for (double v : xv) {
      mn = std::min(mn, static_cast<float>(v));
      mx = std::max(mx, static_cast<float>(v));
    }
    const float scale = (mx - mn) / 255.0f;
    const double zp = ref_quantize(static_cast<float>(-mn / scale), 0, DType::kUInt8);
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i)
      want[i] = ref_quantize(static_cast<float>(xv[i]) / scale, zp, DType::kUInt8);
    std::vector<Tensor> out = run_op("DynamicQuantizeLinear", {x}, {}, 3);
    expect_equal(out[0], DType::kUInt8, x.shape(), want);
    expect_close(out[1], Shape{}, {scale}, 0.0, 1e-7);
    expect_equal(out[2], DType::kUInt8, Shape{}, {zp});
  }
}

// acc[b, m, n] = sum_k (a - azp[m]) (b - bzp[n]) with A [batch, M, K] and B broadcast from
// [K, N] or [batch, K, N].
std::vector<double> ref_int_matmul(const Tensor& a, const Tensor& b, const std::vector<double>& azp,
                                   const std::vector<double>& bzp) {
  const Shape& as = a.shape();
  const int64_t batch = as.rank() == 3 ? as[0] : 1, m = as[-2], k = as[-1];
  const int64_t n = b.shape()[-1];
  const bool b_batched = b.shape().rank() == 3;
  std::vector<double> av = to_doubles(a), bv = to_doubles(b), out;
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t r = 0; r < k; ++r)
          acc += (av[(t * m + i) * k + r] - azp[azp.size() == 1 ? 0 : i]) *
                 (bv[((b_batched ? t : 0) * k + r) * n + j] - bzp[bzp.size() == 1 ? 0 : j]);
        out.push_back(acc);
      }
  return out;
}

TEST(MatMulInteger, ZeroPointsPerTensorPerRowPerColumn) {
  Tensor a = random_ints({3, 5, 7}, 31, 0, 255, DType::kUInt8);
  Tensor b = random_ints({7, 4}, 32, -128, 127, DType::kInt8);
  Tensor azp = random_ints({}, 33, 0, 255, DType::kUInt8);
  Tensor bzp = random_ints({4}, 34, -128, 127, DType::kInt8);
  expect_equal(run_op("MatMulInteger", {a, b, azp, bzp})[0], DType::kInt32, Shape{3, 5, 4},
               ref_int_matmul(a, b, to_doubles(azp), to_doubles(bzp)));
  Tensor azp_rows = random_ints({5}, 35, 0, 255, DType::kUInt8);
  expect_equal(run_op("MatMulInteger", {a, b, azp_rows})[0], DType::kInt32, Shape{3, 5, 4},
               ref_int_matmul(a, b, to_doubles(azp_rows), {0}));
  Tensor b3 = random_ints({3, 7, 4}, 36, 0, 255, DType::kUInt8);
  expect_equal(run_op("MatMulInteger", {a, b3})[0], DType::kInt32, Shape{3, 5, 4},
               ref_int_matmul(a, b3, {0}, {0}));
}

TEST(QLinearMatMul, RequantizesBothDtypes) {
  for (DType qt : {DType::kUInt8, DType::kInt8}) {
    const int64_t lo = qt == DType::kUInt8 ? 0 : -128, hi = qt == DType::kUInt8 ? 255 : 127;
    Tensor a = random_ints({2, 3, 6}, 41, lo, hi, qt);
    Tensor b = random_ints({2, 6, 5}, 42, lo, hi, qt);
    Tensor azp = random_ints({}, 43, lo, hi, qt), bzp = random_ints({}, 44, lo, hi, qt);
    Tensor yzp = random_ints({}, 45, lo, hi, qt);
    const float as = 0.02f, bs = 0.03f, ys = 0.05f;
    std::vector<double> acc = ref_int_matmul(a, b, to_doubles(azp), to_doubles(bzp));
    std::vector<double> want(acc.size());
    for (size_t i = 0; i < acc.size(); ++i)
      want[i] = ref_quantize(acc[i] * (double(as) * bs / ys), yzp.item_as_double(), qt);
    Tensor y =
        run_op("QLinearMatMul", {a, Tensor::scalar<float>(as), azp, b, Tensor::scalar<float>(bs),
                                 bzp, Tensor::scalar<float>(ys), yzp})[0];
    expect_equal(y, qt, Shape{2, 3, 5}, want);
  }
}

// Direct 2-D integer convolution: x [N, C, H, W], w [M, C/group, KH, KW], padding with the zero
// point (adds nothing), int accumulation in double (exact at these sizes).
std::vector<double> ref_int_conv(const Tensor& x, const Tensor& w, double xzp,
                                 const std::vector<double>& wzp, int64_t group, int64_t stride,
                                 int64_t pad, int64_t dil, Shape* out_shape) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const int64_t m = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  const int64_t oh = (h + 2 * pad - (dil * (kh - 1) + 1)) / stride + 1;
  const int64_t ow = (wd + 2 * pad - (dil * (kw - 1) + 1)) / stride + 1;
  *out_shape = Shape{n, m, oh, ow};
  std::vector<double> xv = to_doubles(x), wv = to_doubles(w), out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      const int64_t g = oc / (m / group);
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = 0;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t y = i * stride - pad + p * dil, xx = j * stride - pad + q * dil;
                if (y < 0 || y >= h || xx < 0 || xx >= wd) continue;
                const double xval = xv[((b * c + g * cg + ic) * h + y) * wd + xx] - xzp;
                const double wval = wv[((oc * cg + ic) * kh + p) * kw + q] - wzp[oc];
                acc += xval * wval;
              }
          out.push_back(acc);
        }
    }
  return out;
}

TEST(ConvInteger, PaddingStridesDilationsGroups) {
  Tensor x = random_ints({2, 4, 7, 6}, 51, 0, 255, DType::kUInt8);
  Tensor w = random_ints({6, 2, 3, 2}, 52, 0, 255, DType::kUInt8);
  Tensor xzp = random_ints({}, 53, 0, 255, DType::kUInt8);
  Tensor wzp = random_ints({6}, 54, 0, 255, DType::kUInt8);
  Shape shape;
  std::vector<double> want =
      ref_int_conv(x, w, xzp.item_as_double(), to_doubles(wzp), 2, 2, 1, 2, &shape);
  Attributes attrs = {{"group", int64_t{2}},
                      {"strides", std::vector<int64_t>{2, 2}},
                      {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                      {"dilations", std::vector<int64_t>{2, 2}}};
  expect_equal(run_op("ConvInteger", {x, w, xzp, wzp}, attrs)[0], DType::kInt32, shape, want);
  // No zero points: plain convolution of the stored integers (int8 x).
  Tensor x8 = random_ints({1, 2, 5, 5}, 55, -128, 127, DType::kInt8);
  Tensor w8 = random_ints({3, 2, 2, 2}, 56, -128, 127, DType::kInt8);
  want = ref_int_conv(x8, w8, 0, {0, 0, 0}, 1, 1, 0, 1, &shape);
  expect_equal(run_op("ConvInteger", {x8, w8})[0], DType::kInt32, shape, want);
}

TEST(QLinearConv, PerChannelWeightScalesAndBias) {
  Tensor x = random_ints({1, 3, 6, 5}, 61, 0, 255, DType::kUInt8);
  Tensor w = random_ints({4, 3, 3, 3}, 62, -128, 127, DType::kInt8);
  Tensor xzp = random_ints({}, 63, 0, 255, DType::kUInt8);
  Tensor wzp = Tensor::from_vector<int8_t>({4}, {0, 0, 0, 0});
  Tensor ws = random_tensor({4}, 64, 0.001f, 0.01f);
  Tensor bias = random_ints({4}, 65, -5000, 5000, DType::kInt32);
  Tensor yzp = random_ints({}, 66, 0, 255, DType::kUInt8);
  const float xs = 0.02f, ys = 0.3f;
  Shape shape;
  std::vector<double> acc =
      ref_int_conv(x, w, xzp.item_as_double(), {0, 0, 0, 0}, 1, 1, 1, 1, &shape);
  std::vector<double> wsv = to_doubles(ws), bv = to_doubles(bias), want(acc.size());
  const int64_t plane = shape[2] * shape[3];
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t m = (static_cast<int64_t>(i) / plane) % 4;
    want[i] = ref_quantize(static_cast<float>((acc[i] + bv[m]) * (double(xs) * wsv[m] / ys)),
                           yzp.item_as_double(), DType::kUInt8);
  }
  Tensor y =
      run_op("QLinearConv",
             {x, Tensor::scalar<float>(xs), xzp, w, ws, wzp, Tensor::scalar<float>(ys), yzp, bias},
             {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})[0];
  expect_equal(y, DType::kUInt8, shape, want);
}

TEST(Quantization, BadInputNamesTheNode) {
  Tensor x = random_tensor({2, 3}, 71);
  expect_error<ShapeError>(
      [&] {
        run_op("QuantizeLinear", {x, random_tensor({2}, 72, 0.5f, 1.0f)});
      },
      "QuantizeLinear");
  expect_error<ShapeError>(
      [&] {
        run_op("QuantizeLinear",
               {x, Tensor::scalar<float>(1.0f), random_ints({}, 73, 0, 3, DType::kInt32)});
      },
      "QuantizeLinear");
  expect_error<ShapeError>(
      [&] {
        run_op("DequantizeLinear", {x, Tensor::scalar<float>(1.0f)});
      },
      "DequantizeLinear");
  Tensor a = random_ints({2, 3}, 74, 0, 9, DType::kUInt8);
  expect_error<ShapeError>(
      [&] {
        run_op("MatMulInteger", {a, random_ints({4, 2}, 75, 0, 9, DType::kUInt8)});
      },
      "MatMulInteger");
  expect_error<ShapeError>(
      [&] {
        run_op("MatMulInteger", {a, random_ints({3, 2}, 75, 0, 9, DType::kUInt8), omitted(),
                                 random_ints({3}, 76, 0, 9, DType::kUInt8)});
      },
      "MatMulInteger");
  Tensor cx = random_ints({1, 2, 4, 4}, 77, 0, 9, DType::kUInt8);
  expect_error<ShapeError>(
      [&] {
        run_op("ConvInteger", {cx, random_ints({1, 3, 2, 2}, 78, 0, 9, DType::kUInt8)});
      },
      "ConvInteger");
  expect_error<ShapeError>([&] { run_op("DynamicQuantizeLinear", {a}, {}, 3); },
                           "DynamicQuantizeLinear");
}

}  // namespace
}  // namespace lumen
