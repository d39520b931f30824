// Tests of RMSNormalization, GroupNormalization, LpNormalization, LpPool and GlobalLpPool against
// naive double-precision references on random data (every output element), in float32 and the
// other float dtypes, and of their refusals of bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/half.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;
using test::expect_close;
using test::expect_error;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

// `t` (float32) rounded to `dtype` (float32, float64, float16 or bfloat16).
Tensor as_dtype(const Tensor& t, DType dtype) {
  if (dtype == DType::kFloat32) return t;
  Tensor out = Tensor::empty(t.shape(), dtype);
  const float* src = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kFloat64)
      static_cast<double*>(out.raw_data())[i] = src[i];
    else if (dtype == DType::kFloat16)
      static_cast<uint16_t*>(out.raw_data())[i] = float_to_half(src[i]);
    else
      static_cast<uint16_t*>(out.raw_data())[i] = float_to_bfloat16(src[i]);
  }
  return out;
}

// Tolerances (atol, rtol) for results stored in `dtype`.
double atol_of(DType dtype) {
  return dtype == DType::kFloat16 ? 2e-3 : dtype == DType::kBFloat16 ? 2e-2 : 1e-5;
}
double rtol_of(DType dtype) {
  return dtype == DType::kFloat16 ? 2e-3 : dtype == DType::kBFloat16 ? 1e-2 : 1e-4;
}

// Index into a parameter of shape `p` that broadcasts onto the trailing dims `norm`.
int64_t param_index(int64_t flat, const Shape& norm, const Shape& p) {
  return test::broadcast_source(test::unravel(flat, norm), p);
}

// --- RMSNormalization --------------------------------------------------------------------------

std::vector<double> ref_rms_norm(const Tensor& x, int axis, const Tensor& scale, double eps) {
  const Shape& shape = x.shape();
  Shape norm(std::vector<int64_t>(shape.dims().begin() + axis, shape.dims().end()));
  const int64_t n = norm.numel();
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  std::vector<double> xv = to_doubles(x), s = to_doubles(scale), y(xv.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += xv[r * n + i] * xv[r * n + i];
    const double rms = std::sqrt(sq / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i)
      y[r * n + i] = xv[r * n + i] / rms * s[param_index(i, norm, scale.shape())];
  }
  return y;
}

void check_rms_norm(const Shape& shape, int64_t axis_attr, const Shape& scale_shape, uint64_t seed,
                    DType dtype = DType::kFloat32, float eps = 1e-5f,
                    DType scale_dtype = DType::kFloat32, bool default_axis = false) {
  const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + shape.rank() : axis_attr);
  if (dtype != DType::kFloat32 && scale_dtype == DType::kFloat32) scale_dtype = dtype;
  Tensor x = as_dtype(random_tensor(shape, seed, -3.0f, 3.0f), dtype);
  Tensor scale = as_dtype(random_tensor(scale_shape, seed + 1, 0.5f, 1.5f), scale_dtype);
  Attributes attrs;
  if (!default_axis) attrs["axis"] = axis_attr;
  if (eps != 1e-5f) attrs["epsilon"] = eps;
  auto out = run_op("RMSNormalization", {x, constant(scale)}, attrs);
  EXPECT_EQ(out[0].dtype(), scale_dtype);
  expect_close(out[0], shape, ref_rms_norm(x, axis, scale, eps),
               std::max(atol_of(dtype), atol_of(scale_dtype)),
               std::max(rtol_of(dtype), rtol_of(scale_dtype)));
}

TEST(RmsNormTest, DefaultAxisIsLast) {
  check_rms_norm({2, 3, 8}, -1, {8}, 1, DType::kFloat32, 1e-5f, DType::kFloat32, true);
}
TEST(RmsNormTest, Axis1Rank4FullScale) {
  check_rms_norm({2, 3, 4, 5}, 1, {3, 4, 5}, 2);
}
TEST(RmsNormTest, Axis0) {
  check_rms_norm({3, 4}, 0, {3, 4}, 3);
}
TEST(RmsNormTest, NegativeAxisBroadcastScale) {
  check_rms_norm({2, 3, 4, 5}, -2, {1, 5}, 4);
  check_rms_norm({2, 3, 4, 5}, -2, {4, 1}, 5);
  check_rms_norm({2, 3, 4, 5}, -1, {1, 1, 1, 5}, 6);
}
TEST(RmsNormTest, Epsilon) {
  check_rms_norm({4, 6}, -1, {6}, 7, DType::kFloat32, 0.5f);
}
TEST(RmsNormTest, ManyRowsParallel) {
  check_rms_norm({96, 4096}, -1, {4096}, 8);
}
TEST(RmsNormTest, LongRows) {
  check_rms_norm({5, 3001}, -1, {3001}, 9);
}
TEST(RmsNormTest, OtherDtypes) {
  check_rms_norm({3, 4, 33}, -1, {33}, 10, DType::kFloat64);
  check_rms_norm({3, 4, 33}, -1, {33}, 11, DType::kFloat16);
  check_rms_norm({3, 4, 33}, -1, {33}, 12, DType::kBFloat16);
}
TEST(RmsNormTest, ScaleTypeDecidesOutputType) {
  check_rms_norm({3, 17}, -1, {17}, 13, DType::kFloat16, 1e-5f, DType::kFloat32);
  check_rms_norm({3, 17}, -1, {17}, 14, DType::kFloat32, 1e-5f, DType::kFloat64);
}
TEST(RmsNormTest, EmptyRows) {
  check_rms_norm({0, 6}, -1, {6}, 15);
}

TEST(RmsNormTest, BadInputs) {
  Tensor x = random_tensor({2, 3, 4}, 20);
  Tensor s4 = random_tensor({4}, 21);
  expect_error<ShapeError>(
      [&] {
        run_op("RMSNormalization", {x, random_tensor({3}, 22)});
      },
      "RMSNormalization");
  expect_error<ShapeError>(
      [&] {
        run_op("RMSNormalization", {x, random_tensor({2, 3, 4}, 23)}, {{"axis", 1}});
      },
      "RMSNormalization");
  expect_error<ShapeError>(
      [&] {
        run_op("RMSNormalization", {x, s4}, {{"axis", 3}});
      },
      "RMSNormalization");
  expect_error<ShapeError>(
      [&] {
        run_op("RMSNormalization", {test::random_ints({2, 4}, 24, 0, 3), s4});
      },
      "RMSNormalization");
  expect_error<UnsupportedOp>(
      [&] {
        run_op("RMSNormalization", {x, s4}, {{"stash_type", 10}});
      },
      "RMSNormalization");
  expect_error<InvalidModel>(
      [&] {
        run_op("RMSNormalization", {x, s4}, {{"epsilon", -1.0f}});
      },
      "RMSNormalization");
  expect_error<InvalidModel>([&] { run_op("RMSNormalization", {x}); }, "RMSNormalization");
  expect_error<InvalidModel>(
      [&] {
        run_op("RMSNormalization", {x, s4}, {{"bias", 1}});
      },
      "RMSNormalization");
}

// --- GroupNormalization ------------------------------------------------------------------------

std::vector<double> ref_group_norm(const Tensor& x, int64_t groups, const Tensor& scale,
                                   const Tensor& bias, double eps) {
  const Shape& shape = x.shape();
  const int64_t n = shape[0], c = shape[1];
  int64_t spatial = 1;
  for (int d = 2; d < shape.rank(); ++d) spatial *= shape[d];
  const int64_t per_group = c / groups;
  std::vector<double> xv = to_doubles(x), s = to_doubles(scale), b = to_doubles(bias);
  std::vector<double> y(xv.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first = (i * c + g * per_group) * spatial, count = per_group * spatial;
      double sum = 0;
      for (int64_t k = 0; k < count; ++k) sum += xv[first + k];
      const double mean = sum / static_cast<double>(count);
      double sq = 0;
      for (int64_t k = 0; k < count; ++k) sq += (xv[first + k] - mean) * (xv[first + k] - mean);
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(count) + eps);
      for (int64_t k = 0; k < count; ++k) {
        const int64_t ch = g * per_group + k / spatial;
        y[first + k] = (xv[first + k] - mean) * inv * s[ch] + b[ch];
      }
    }
  return y;
}

void check_group_norm(const Shape& shape, int64_t groups, uint64_t seed,
                      DType dtype = DType::kFloat32, float eps = 1e-5f, float lo = -2.0f,
                      float hi = 2.0f) {
  const int64_t c = shape[1];
  Tensor x = as_dtype(random_tensor(shape, seed, lo, hi), dtype);
  Tensor scale = as_dtype(random_tensor({c}, seed + 1, 0.5f, 1.5f), dtype);
  Tensor bias = as_dtype(random_tensor({c}, seed + 2), dtype);
  Attributes attrs = {{"num_groups", groups}};
  if (eps != 1e-5f) attrs["epsilon"] = eps;
  auto out = run_op("GroupNormalization", {x, constant(scale), constant(bias)}, attrs);
  EXPECT_EQ(out[0].dtype(), dtype);
  // Values far from zero cost a few bits of the float32 mean.
  const double slack = lo > 10.0f ? 4.0 : 1.0;
  expect_close(out[0], shape, ref_group_norm(x, groups, scale, bias, eps), slack * atol_of(dtype),
               slack * rtol_of(dtype));
}

TEST(GroupNormTest, ThreeGroups) {
  check_group_norm({2, 6, 5, 4}, 3, 30);
}
TEST(GroupNormTest, OneGroupIsLayerNorm) {
  check_group_norm({2, 6, 3, 3}, 1, 31);
}
TEST(GroupNormTest, GroupPerChannelIsInstanceNorm) {
  check_group_norm({3, 4, 7}, 4, 32);
}
TEST(GroupNormTest, Rank2AndRank5) {
  check_group_norm({4, 8}, 2, 33);
  check_group_norm({2, 4, 3, 2, 5}, 2, 34);
}
TEST(GroupNormTest, Epsilon) {
  check_group_norm({3, 4, 2, 2}, 2, 35, DType::kFloat32, 0.01f);
}
TEST(GroupNormTest, LargeGroupsFarFromZero) {
  check_group_norm({1, 32, 64, 64}, 2, 36, DType::kFloat32, 1e-5f, 100.0f, 101.0f);
}
TEST(GroupNormTest, ManyGroupsParallel) {
  check_group_norm({2, 64, 16, 16}, 32, 37);
}
TEST(GroupNormTest, OtherDtypes) {
  check_group_norm({2, 6, 5, 4}, 3, 38, DType::kFloat64);
  check_group_norm({2, 6, 5, 4}, 3, 39, DType::kFloat16);
  check_group_norm({2, 6, 5, 4}, 2, 40, DType::kBFloat16);
}
TEST(GroupNormTest, EmptyBatch) {
  check_group_norm({0, 4, 3}, 2, 41);
}

TEST(GroupNormTest, BadInputs) {
  Tensor x = random_tensor({2, 6, 3}, 50);
  Tensor c6 = random_tensor({6}, 51);
  Tensor c3 = random_tensor({3}, 52);
  expect_error<ShapeError>(
      [&] {
        run_op("GroupNormalization", {x, c6, c6}, {{"num_groups", 4}});
      },
      "GroupNormalization");
  expect_error<ShapeError>(
      [&] {
        run_op("GroupNormalization", {x, c3, c6}, {{"num_groups", 3}});
      },
      "GroupNormalization");
  expect_error<ShapeError>(
      [&] {
        run_op("GroupNormalization", {x, c6, c3}, {{"num_groups", 3}});
      },
      "GroupNormalization");
  expect_error<ShapeError>(
      [&] {
        run_op("GroupNormalization", {random_tensor({6}, 53), c6, c6}, {{"num_groups", 3}});
      },
      "GroupNormalization");
  expect_error<ShapeError>(
      [&] {
        run_op("GroupNormalization", {x, as_dtype(c6, DType::kFloat64), c6}, {{"num_groups", 3}});
      },
      "GroupNormalization");
  expect_error<InvalidModel>(
      [&] {
        run_op("GroupNormalization", {x, c6, c6});
      },
      "GroupNormalization");
  expect_error<InvalidModel>(
      [&] {
        run_op("GroupNormalization", {x, c6, c6}, {{"num_groups", 0}});
      },
      "GroupNormalization");
  expect_error<InvalidModel>(
      [&] {
        run_op("GroupNormalization", {x, c6}, {{"num_groups", 3}});
      },
      "GroupNormalization");
  expect_error<UnsupportedOp>(
      [&] {
        run_op("GroupNormalization", {x, c6, c6}, {{"num_groups", 3}, {"stash_type", 16}});
      },
      "GroupNormalization");
}

// --- LpNormalization ---------------------------------------------------------------------------

std::vector<double> ref_lp_norm(const Tensor& x, int axis, int p) {
  const Shape& shape = x.shape();
  std::vector<double> xv = to_doubles(x), y(xv.size());
  const int64_t stride = shape.strides()[axis], n = shape[axis];
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (test::unravel(i, shape)[axis] != 0) continue;
    double s = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double v = xv[i + k * stride];
      s += p == 1 ? std::fabs(v) : v * v;
    }
    const double norm = p == 1 ? s : std::sqrt(s);
    for (int64_t k = 0; k < n; ++k) y[i + k * stride] = norm == 0 ? 0.0 : xv[i + k * stride] / norm;
  }
  return y;
}

void check_lp_norm(const Shape& shape, int64_t axis_attr, int p, uint64_t seed,
                   DType dtype = DType::kFloat32, bool zero_some = false) {
  const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + shape.rank() : axis_attr);
  Tensor f = random_tensor(shape, seed, -2.0f, 2.0f);
  if (zero_some) {
    // Zero the lines along the axis whose coordinate on another dim (the first or, for axis
    // 0, the last) is 0.
    for (int64_t i = 0; i < f.numel(); ++i)
      if (test::unravel(i, shape)[axis == 0 ? shape.rank() - 1 : 0] == 0) f.data<float>()[i] = 0;
  }
  Tensor x = as_dtype(f, dtype);
  auto out = run_op("LpNormalization", {x}, {{"axis", axis_attr}, {"p", int64_t{p}}});
  expect_close(out[0], shape, ref_lp_norm(x, axis, p), atol_of(dtype), rtol_of(dtype));
}

TEST(LpNormTest, LastAxis) {
  check_lp_norm({3, 4, 7}, -1, 2, 60);
  check_lp_norm({3, 4, 7}, -1, 1, 61);
}
TEST(LpNormTest, StridedAxis) {
  check_lp_norm({3, 5, 6}, 1, 2, 62);
  check_lp_norm({4, 5, 6}, 0, 1, 63);
}
TEST(LpNormTest, WideColumnsInChunks) {
  check_lp_norm({2, 7, 1100}, 1, 2, 64);
  check_lp_norm({9, 300, 80}, 0, 1, 65);
}
TEST(LpNormTest, ZeroLinesGiveZeros) {
  check_lp_norm({4, 6}, -1, 2, 66, DType::kFloat32, true);
  check_lp_norm({4, 6}, 0, 1, 67, DType::kFloat32, true);
}
TEST(LpNormTest, DefaultsAndRank1) {
  Tensor x = random_tensor({3, 5}, 68);
  expect_close(run_op("LpNormalization", {x})[0], {3, 5}, ref_lp_norm(x, 1, 2));
  Tensor v = random_tensor({7}, 69);
  expect_close(run_op("LpNormalization", {v}, {{"axis", 0}})[0], {7}, ref_lp_norm(v, 0, 2));
}
TEST(LpNormTest, ManyRowsParallel) {
  check_lp_norm({512, 300}, -1, 2, 70);
}
TEST(LpNormTest, OtherDtypes) {
  check_lp_norm({3, 4, 5}, 1, 2, 71, DType::kFloat64);
  check_lp_norm({3, 4, 5}, -1, 1, 72, DType::kFloat16);
  check_lp_norm({3, 4, 5}, 0, 2, 73, DType::kBFloat16);
}

TEST(LpNormTest, BadInputs) {
  Tensor x = random_tensor({2, 3}, 80);
  expect_error<InvalidModel>(
      [&] {
        run_op("LpNormalization", {x}, {{"p", 3}});
      },
      "LpNormalization");
  expect_error<ShapeError>(
      [&] {
        run_op("LpNormalization", {x}, {{"axis", 2}});
      },
      "LpNormalization");
  expect_error<ShapeError>(
      [&] {
        run_op("LpNormalization", {test::random_ints({2, 3}, 81, 0, 4)});
      },
      "LpNormalization");
  expect_error<InvalidModel>(
      [&] {
        run_op("LpNormalization", {x}, {{"p", 2.0f}});
      },
      "LpNormalization");
}

// --- LpPool, GlobalLpPool ----------------------------------------------------------------------

struct PoolCase {
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string auto_pad;  // "" for none
  bool ceil_mode = false;
  float p = 2.0f;
};

// Pools x (N, C, spatial...) per the spec's shape rules; sets *out_shape.
std::vector<double> ref_lp_pool(const Tensor& x, const PoolCase& c, Shape* out_shape) {
  const Shape& shape = x.shape();
  const int sp = shape.rank() - 2;
  std::vector<int64_t> out = {shape[0], shape[1]}, begin(sp);
  for (int i = 0; i < sp; ++i) {
    const int64_t in = shape[2 + i], k = c.kernel[i];
    const int64_t s = c.strides.empty() ? 1 : c.strides[i];
    const int64_t d = c.dilations.empty() ? 1 : c.dilations[i];
    const int64_t ek = d * (k - 1) + 1;
    int64_t o;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      o = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (o - 1) * s + ek - in);
      begin[i] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (c.auto_pad == "VALID") {
      begin[i] = 0;
      o = (in - ek) / s + 1;
    } else {
      begin[i] = c.pads.empty() ? 0 : c.pads[i];
      const int64_t padded = in + begin[i] + (c.pads.empty() ? 0 : c.pads[sp + i]);
      if (c.ceil_mode) {
        o = (padded - ek + s - 1) / s + 1;
        if ((o - 1) * s >= in + begin[i]) --o;
      } else {
        o = (padded - ek) / s + 1;
      }
    }
    out.push_back(o);
  }
  *out_shape = Shape(out);
  Shape kshape(c.kernel);
  std::vector<double> xv = to_doubles(x), y(static_cast<size_t>(out_shape->numel()));
  for (int64_t flat = 0; flat < out_shape->numel(); ++flat) {
    std::vector<int64_t> o = test::unravel(flat, *out_shape);
    double sum = 0;
    for (int64_t kf = 0; kf < kshape.numel(); ++kf) {
      std::vector<int64_t> k = test::unravel(kf, kshape);
      std::vector<int64_t> idx = {o[0], o[1]};
      bool inside = true;
      for (int i = 0; i < sp; ++i) {
        const int64_t s = c.strides.empty() ? 1 : c.strides[i];
        const int64_t d = c.dilations.empty() ? 1 : c.dilations[i];
        const int64_t pos = o[2 + i] * s - begin[i] + k[i] * d;
        inside = inside && pos >= 0 && pos < shape[2 + i];
        idx.push_back(pos);
      }
      if (inside) sum += std::pow(std::fabs(xv[test::ravel(idx, shape)]), c.p);
    }
    y[flat] = std::pow(sum, 1.0 / c.p);
  }
  return y;
}

void check_lp_pool(const Shape& shape, const PoolCase& c, uint64_t seed,
                   DType dtype = DType::kFloat32, bool p_as_float = false) {
  Tensor x = as_dtype(random_tensor(shape, seed, -2.0f, 2.0f), dtype);
  Attributes attrs = {{"kernel_shape", c.kernel}};
  if (p_as_float)
    attrs["p"] = c.p;
  else
    attrs["p"] = static_cast<int64_t>(c.p);
  if (!c.strides.empty()) attrs["strides"] = c.strides;
  if (!c.dilations.empty()) attrs["dilations"] = c.dilations;
  if (!c.pads.empty()) attrs["pads"] = c.pads;
  if (!c.auto_pad.empty()) attrs["auto_pad"] = c.auto_pad;
  if (c.ceil_mode) attrs["ceil_mode"] = int64_t{1};
  Shape out_shape;
  std::vector<double> want = ref_lp_pool(x, c, &out_shape);
  expect_close(run_op("LpPool", {x}, attrs)[0], out_shape, want, atol_of(dtype), rtol_of(dtype));
}

TEST(LpPoolTest, OneTwoThreeD) {
  check_lp_pool({2, 3, 20}, {.kernel = {3}, .p = 3}, 90);
  check_lp_pool({1, 3, 12, 11}, {.kernel = {2, 2}, .p = 4}, 91);
  check_lp_pool({1, 2, 6, 7, 5}, {.kernel = {2, 3, 2}, .p = 3}, 92);
}
TEST(LpPoolTest, PowersOneAndTwo) {
  check_lp_pool({2, 3, 9, 9}, {.kernel = {3, 3}, .p = 1}, 93);
  check_lp_pool({2, 3, 9, 9}, {.kernel = {3, 3}, .strides = {2, 2}, .p = 2}, 94);
}
TEST(LpPoolTest, StridesPadsDilations) {
  check_lp_pool({1, 3, 15, 14}, {.kernel = {5, 5}, .strides = {3, 3}, .p = 2}, 95);
  check_lp_pool({1, 3, 10, 10}, {.kernel = {3, 3}, .pads = {2, 2, 2, 2}, .p = 3}, 96);
  check_lp_pool(
      {1, 1, 8, 9},
      {.kernel = {2, 2}, .strides = {1, 2}, .dilations = {2, 3}, .pads = {1, 0, 0, 2}, .p = 2}, 97);
}
TEST(LpPoolTest, AutoPad) {
  check_lp_pool({1, 3, 11, 10}, {.kernel = {2, 3}, .auto_pad = "SAME_UPPER", .p = 2}, 98);
  check_lp_pool({1, 3, 11, 10}, {.kernel = {2, 3}, .auto_pad = "SAME_LOWER", .p = 4}, 99);
  check_lp_pool({1, 3, 11, 10},
                {.kernel = {3, 2}, .strides = {2, 3}, .auto_pad = "SAME_UPPER", .p = 1}, 100);
  check_lp_pool({1, 3, 11, 10}, {.kernel = {3, 2}, .strides = {2, 2}, .auto_pad = "VALID", .p = 2},
                101);
}
TEST(LpPoolTest, CeilMode) {
  check_lp_pool({1, 2, 10, 11}, {.kernel = {3, 3}, .strides = {2, 2}, .ceil_mode = true, .p = 2},
                102);
  check_lp_pool({1, 2, 9},
                {.kernel = {2}, .strides = {3}, .pads = {1, 1}, .ceil_mode = true, .p = 3}, 103);
}
TEST(LpPoolTest, FloatP) {
  check_lp_pool({1, 2, 8, 8}, {.kernel = {2, 2}, .p = 2.0f}, 104, DType::kFloat32, true);
}
TEST(LpPoolTest, LargeParallel) {
  check_lp_pool({2, 16, 40, 40}, {.kernel = {3, 3}, .pads = {1, 1, 1, 1}, .p = 2}, 105);
}
TEST(LpPoolTest, OtherDtypes) {
  check_lp_pool({1, 3, 9, 8}, {.kernel = {2, 2}, .p = 2}, 106, DType::kFloat64);
  check_lp_pool({1, 3, 9, 8}, {.kernel = {2, 2}, .p = 3}, 107, DType::kFloat16);
  check_lp_pool({1, 3, 9, 8}, {.kernel = {2, 2}, .p = 1}, 108, DType::kBFloat16);
}

TEST(LpPoolTest, BadInputs) {
  Tensor x = random_tensor({1, 2, 5, 5}, 110);
  expect_error<InvalidModel>([&] { run_op("LpPool", {x}, {{"p", 2}}); }, "LpPool");
  expect_error<InvalidModel>(
      [&] {
        run_op("LpPool", {x}, {{"kernel_shape", {2, 2}}, {"p", 0}});
      },
      "LpPool");
  expect_error<InvalidModel>(
      [&] {
        run_op("LpPool", {x}, {{"kernel_shape", {2, 2, 2}}, {"p", 2}});
      },
      "LpPool");
  expect_error<ShapeError>(
      [&] {
        run_op("LpPool", {x}, {{"kernel_shape", {6, 2}}, {"p", 2}});
      },
      "LpPool");
  expect_error<ShapeError>(
      [&] {
        run_op("LpPool", {random_tensor({2, 5}, 111)}, {{"kernel_shape", {2}}});
      },
      "LpPool");
  expect_error<InvalidModel>(
      [&] {
        run_op("LpPool", {x}, {{"kernel_shape", {2, 2}}, {"auto_pad", "SAME"}});
      },
      "LpPool");
  expect_error<InvalidModel>(
      [&] {
        run_op("LpPool", {x}, {{"kernel_shape", {2, 2}}, {"ceil_mode", 2}});
      },
      "LpPool");
}

std::vector<double> ref_global_lp_pool(const Tensor& x, double p) {
  const int64_t rows = x.shape()[0] * x.shape()[1];
  const int64_t n = rows == 0 ? 0 : x.numel() / rows;
  std::vector<double> xv = to_doubles(x), y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::pow(std::fabs(xv[r * n + i]), p);
    y[r] = std::pow(s, 1.0 / p);
  }
  return y;
}

void check_global_lp_pool(const Shape& shape, int64_t p, uint64_t seed,
                          DType dtype = DType::kFloat32) {
  Tensor x = as_dtype(random_tensor(shape, seed, -2.0f, 2.0f), dtype);
  std::vector<int64_t> out = shape.dims();
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  Attributes attrs;
  if (p != 2) attrs["p"] = p;
  expect_close(run_op("GlobalLpPool", {x}, attrs)[0], Shape(out),
               ref_global_lp_pool(x, static_cast<double>(p)), atol_of(dtype), rtol_of(dtype));
}

TEST(GlobalLpPoolTest, RanksAndPowers) {
  check_global_lp_pool({2, 3, 10}, 2, 120);
  check_global_lp_pool({2, 3, 7, 6}, 1, 121);
  check_global_lp_pool({1, 4, 3, 5, 4}, 3, 122);
  check_global_lp_pool({4, 64, 33, 33}, 2, 123);
}
TEST(GlobalLpPoolTest, OtherDtypes) {
  check_global_lp_pool({2, 3, 5, 5}, 2, 124, DType::kFloat64);
  check_global_lp_pool({2, 3, 5, 5}, 3, 125, DType::kFloat16);
}
TEST(GlobalLpPoolTest, BadInputs) {
  expect_error<ShapeError>(
      [&] {
        run_op("GlobalLpPool", {random_tensor({3, 4}, 130)});
      },
      "GlobalLpPool");
  expect_error<InvalidModel>(
      [&] {
        run_op("GlobalLpPool", {random_tensor({1, 3, 4}, 131)}, {{"p", -1}});
      },
      "GlobalLpPool");
}

}  // namespace
}  // namespace lumen
