// Tests of CenterCropPad, Col2Im, AffineGrid and DeformConv against plain-loop references on
// random data (every output element checked), and their bad-input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;
using test::expect_close;
using test::expect_equal;
using test::expect_error;
using test::omitted;
using test::ravel;
using test::run_op;
using test::to_doubles;
using test::unravel;

Tensor ints_tensor(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

// ---- CenterCropPad ----

// Crops or pads each listed axis to `sizes`: a crop keeps [floor((in - out) / 2), ...), a pad puts
// floor((out - in) / 2) zeros first and the rest after.
std::vector<double> center_crop_pad_reference(const std::vector<double>& x, const Shape& xs,
                                              const std::vector<int64_t>& axes,
                                              const std::vector<int64_t>& sizes, Shape* out_shape) {
  Shape out = xs;
  std::vector<int64_t> crop_start(xs.rank(), 0), pad_start(xs.rank(), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int a = normalize_axis(axes[i], xs.rank());
    out[a] = sizes[i];
    if (sizes[i] < xs[a]) crop_start[a] = (xs[a] - sizes[i]) / 2;
    if (sizes[i] > xs[a]) pad_start[a] = (sizes[i] - xs[a]) / 2;
  }
  std::vector<double> y(static_cast<size_t>(out.numel()), 0.0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, out);
    bool inside = true;
    for (int d = 0; d < xs.rank(); ++d) {
      idx[d] = idx[d] - pad_start[d] + crop_start[d];
      inside = inside && idx[d] >= 0 && idx[d] < xs[d];
    }
    if (inside) y[i] = x[ravel(idx, xs)];
  }
  *out_shape = out;
  return y;
}

void check_center_crop_pad(const Shape& xs, const std::vector<int64_t>& axes,
                           const std::vector<int64_t>& sizes, DType dtype, bool sizes_int32,
                           uint64_t seed) {
  SCOPED_TRACE(xs.to_string() + " to " + ints_tensor(sizes).to_string());
  Tensor x = dtype == DType::kFloat32 ? test::random_tensor(xs, seed)
                                      : test::random_ints(xs, seed, -50, 50, dtype);
  Tensor shape = ints_tensor(sizes);
  if (sizes_int32) {
    std::vector<int32_t> s32(sizes.begin(), sizes.end());
    shape = Tensor::from_vector<int32_t>({static_cast<int64_t>(s32.size())}, s32);
  }
  Attributes attrs;
  if (!axes.empty()) attrs["axes"] = axes;
  std::vector<int64_t> all_axes = axes;
  for (int d = 0; axes.empty() && d < xs.rank(); ++d) all_axes.push_back(d);
  Shape out;
  std::vector<double> want = center_crop_pad_reference(to_doubles(x), xs, all_axes, sizes, &out);
  expect_equal(run_op("CenterCropPad", {x, constant(shape)}, attrs)[0], dtype, out, want);
}

TEST(CenterCropPad, CropPadAndMixedAxes) {
  check_center_crop_pad({20, 10, 3}, {}, {10, 7, 3}, DType::kFloat32, false, 1);
  check_center_crop_pad({10, 7, 3}, {}, {20, 10, 3}, DType::kFloat32, false, 2);
  check_center_crop_pad({20, 8, 3}, {}, {10, 11, 3}, DType::kInt32, true, 3);
  check_center_crop_pad({20, 8, 3}, {}, {9, 13, 2}, DType::kUInt8, false, 4);
  check_center_crop_pad({3, 20, 8}, {1, 2}, {10, 9}, DType::kFloat32, false, 5);
  check_center_crop_pad({20, 8, 3}, {-3, -2}, {11, 5}, DType::kInt64, false, 6);
  check_center_crop_pad({5, 6}, {1}, {0}, DType::kFloat32, false, 7);
  check_center_crop_pad({4, 5}, {0}, {9}, DType::kFloat32, false, 8);
  check_center_crop_pad({9}, {}, {4}, DType::kInt8, false, 9);
  // Large enough for the parallel rows.
  check_center_crop_pad({64, 70, 40}, {}, {61, 90, 35}, DType::kFloat32, false, 10);
}

TEST(CenterCropPad, BadInputs) {
  Tensor x = test::random_tensor({4, 5, 6}, 1);
  auto run = [&](const Tensor& shape, const Attributes& attrs) {
    run_op("CenterCropPad", {x, constant(shape)}, attrs);
  };
  expect_error<ShapeError>([&] { run(ints_tensor({2, 2}), {}); }, "CenterCropPad");
  expect_error<ShapeError>([&] { run(ints_tensor({2, 2}), {{"axes", {0}}}); }, "CenterCropPad");
  expect_error<ShapeError>([&] { run(ints_tensor({2, -1, 3}), {}); }, "CenterCropPad");
  expect_error<InvalidModel>(
      [&] {
        run(ints_tensor({2, 2}), {{"axes", {0, -3}}});
      },
      "CenterCropPad");
  expect_error<InvalidModel>([&] { run(ints_tensor({2}), {{"axes", {3}}}); }, "CenterCropPad");
  expect_error<ShapeError>(
      [&] {
        run(Tensor::from_vector<float>({3}, {1, 2, 3}), {});
      },
      "CenterCropPad");
  expect_error<ShapeError>(
      [&] {
        run_op("CenterCropPad", {x, ints_tensor({2, 2, 2})});
      },
      "CenterCropPad");  // shape not known at build time
}

// ---- Col2Im ----

struct Col2ImCase {
  int64_t batch, channels;
  std::vector<int64_t> image, block, strides, dilations, pads;
};

// Sums every column value into the image position its block and offset land on.
void check_col2im(const Col2ImCase& c, DType dtype, uint64_t seed) {
  const size_t n = c.image.size();
  int64_t block_size = 1, blocks = 1;
  std::vector<int64_t> counts(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t extent = c.dilations[i] * (c.block[i] - 1) + 1;
    counts[i] = (c.image[i] + c.pads[i] + c.pads[i + n] - extent) / c.strides[i] + 1;
    block_size *= c.block[i];
    blocks *= counts[i];
  }
  const Shape in_shape{c.batch, c.channels * block_size, blocks};
  SCOPED_TRACE("input " + in_shape.to_string());
  Tensor x = dtype == DType::kFloat32 ? test::random_tensor(in_shape, seed)
                                      : test::random_ints(in_shape, seed, -100, 100, dtype);
  std::vector<double> xv = to_doubles(x);
  std::vector<int64_t> out_dims = {c.batch, c.channels};
  out_dims.insert(out_dims.end(), c.image.begin(), c.image.end());
  const Shape out(out_dims);
  std::vector<double> want(static_cast<size_t>(out.numel()), 0.0);
  const Shape block_shape(c.block), count_shape(counts);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t ch = 0; ch < c.channels; ++ch)
      for (int64_t k = 0; k < block_size; ++k)
        for (int64_t l = 0; l < blocks; ++l) {
          std::vector<int64_t> kk = unravel(k, block_shape), ll = unravel(l, count_shape);
          std::vector<int64_t> at = {b, ch};
          bool inside = true;
          for (size_t i = 0; i < n; ++i) {
            const int64_t p = ll[i] * c.strides[i] - c.pads[i] + kk[i] * c.dilations[i];
            inside = inside && p >= 0 && p < c.image[i];
            at.push_back(p);
          }
          if (inside)
            want[ravel(at, out)] +=
                xv[(b * c.channels * block_size + ch * block_size + k) * blocks + l];
        }
  Attributes attrs = {{"strides", c.strides}, {"dilations", c.dilations}, {"pads", c.pads}};
  Tensor y = run_op("Col2Im", {x, constant(ints_tensor(c.image)), constant(ints_tensor(c.block))},
                    attrs)[0];
  if (dtype == DType::kFloat32)
    expect_close(y, out, want, 1e-5, 1e-5);
  else
    expect_equal(y, dtype, out, want);
}

TEST(Col2Im, StridesDilationsPadsAndThreeDimensions) {
  check_col2im({1, 1, {5, 5}, {1, 5}, {1, 1}, {1, 1}, {0, 0, 0, 0}}, DType::kFloat32, 1);
  check_col2im({2, 3, {6, 7}, {2, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}}, DType::kFloat32, 2);
  check_col2im({2, 2, {9, 8}, {3, 2}, {2, 3}, {1, 2}, {1, 0, 2, 3}}, DType::kFloat32, 3);
  check_col2im({1, 4, {6, 5}, {2, 2}, {3, 1}, {2, 1}, {2, 2, 2, 2}}, DType::kInt32, 4);
  check_col2im({2, 2, {4, 5, 6}, {2, 2, 3}, {1, 2, 1}, {1, 1, 2}, {0, 1, 1, 1, 0, 1}},
               DType::kFloat32, 5);
  check_col2im({1, 2, {7}, {3}, {2}, {1}, {1, 2}}, DType::kInt64, 6);
  // Enough work for the parallel planes.
  check_col2im({2, 16, {40, 40}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, DType::kFloat32, 7);
}

TEST(Col2Im, BadInputs) {
  Tensor x = test::random_tensor({1, 4, 16}, 1);  // 2x2 blocks of a 5x5 image: 16 blocks
  Tensor image = ints_tensor({5, 5}), block = ints_tensor({2, 2});
  auto run = [&](const Tensor& in, const Tensor& im, const Tensor& bl, const Attributes& attrs) {
    run_op("Col2Im", {in, constant(im), constant(bl)}, attrs);
  };
  run(x, image, block, {});  // fits
  expect_error<ShapeError>(
      [&] {
        run(test::random_tensor({1, 4, 15}, 2), image, block, {});
      },
      "Col2Im");
  expect_error<ShapeError>(
      [&] {
        run(test::random_tensor({1, 6, 16}, 3), image, block, {});
      },
      "Col2Im");
  expect_error<ShapeError>(
      [&] {
        run(test::random_tensor({4, 16}, 4), image, block, {});
      },
      "Col2Im");
  expect_error<ShapeError>([&] { run(x, ints_tensor({5, 5, 1}), block, {}); }, "Col2Im");
  expect_error<ShapeError>([&] { run(x, ints_tensor({1, 1}), block, {}); }, "Col2Im");
  expect_error<InvalidModel>([&] { run(x, image, block, {{"strides", {1}}}); }, "Col2Im");
  expect_error<InvalidModel>([&] { run(x, image, block, {{"strides", {0, 1}}}); }, "Col2Im");
  expect_error<InvalidModel>([&] { run(x, image, block, {{"pads", {0, 0, -1, 0}}}); }, "Col2Im");
  expect_error<ShapeError>([&] { run_op("Col2Im", {x, image, constant(block)}); }, "Col2Im");
}

// ---- AffineGrid ----

void check_affine_grid(const std::vector<int64_t>& size, bool align, DType dtype, uint64_t seed) {
  SCOPED_TRACE(ints_tensor(size).to_string() + (align ? " align_corners" : ""));
  const int64_t dims = static_cast<int64_t>(size.size()) - 2;
  Tensor theta = test::random_tensor({size[0], dims, dims + 1}, seed, -2.0f, 2.0f);
  if (dtype == DType::kFloat64) {
    std::vector<double> t64(to_doubles(theta));
    theta = Tensor::from_vector<double>(theta.shape(), t64);
  }
  std::vector<double> th = to_doubles(theta);
  auto coord = [&](int64_t i, int64_t n) {
    if (align) return n == 1 ? -1.0 : -1.0 + 2.0 * i / (n - 1);
    return -1.0 + (2.0 * i + 1.0) / n;
  };
  const int64_t depth = dims == 3 ? size[2] : 1, height = size[dims], width = size[dims + 1];
  std::vector<int64_t> out_dims = {size[0]};
  out_dims.insert(out_dims.end(), size.begin() + 2, size.end());
  out_dims.push_back(dims);
  std::vector<double> want;
  for (int64_t b = 0; b < size[0]; ++b)
    for (int64_t d = 0; d < depth; ++d)
      for (int64_t h = 0; h < height; ++h)
        for (int64_t w = 0; w < width; ++w) {
          // Homogeneous point (x, y[, z], 1).
          std::vector<double> p = {coord(w, width), coord(h, height)};
          if (dims == 3) p.push_back(coord(d, depth));
          p.push_back(1.0);
          for (int64_t r = 0; r < dims; ++r) {
            double v = 0;
            for (int64_t j = 0; j <= dims; ++j) v += th[(b * dims + r) * (dims + 1) + j] * p[j];
            want.push_back(v);
          }
        }
  Tensor y = run_op("AffineGrid", {theta, constant(ints_tensor(size))},
                    {{"align_corners", int64_t{align}}})[0];
  ASSERT_EQ(y.dtype(), dtype);
  expect_close(y, Shape(out_dims), want, dtype == DType::kFloat64 ? 1e-12 : 1e-6, 1e-6);
}

TEST(AffineGrid, TwoAndThreeDimensions) {
  for (bool align : {false, true}) {
    check_affine_grid({2, 3, 5, 6}, align, DType::kFloat32, 1);
    check_affine_grid({1, 1, 1, 4}, align, DType::kFloat32, 2);
    check_affine_grid({2, 3, 4, 5, 6}, align, DType::kFloat32, 3);
    check_affine_grid({3, 1, 7, 3}, align, DType::kFloat64, 4);
    check_affine_grid({2, 1, 2, 1, 3}, align, DType::kFloat64, 5);
    check_affine_grid({4, 2, 64, 80}, align, DType::kFloat32, 6);  // the parallel rows
  }
}

TEST(AffineGrid, BadInputs) {
  Tensor theta = test::random_tensor({2, 2, 3}, 1);
  auto run = [&](const Tensor& t, const std::vector<int64_t>& size) {
    run_op("AffineGrid", {t, constant(ints_tensor(size))});
  };
  run(theta, {2, 3, 4, 5});  // fits
  expect_error<ShapeError>([&] { run(theta, {3, 3, 4, 5}); }, "AffineGrid");
  expect_error<ShapeError>([&] { run(theta, {2, 3, 4, 5, 6}); }, "AffineGrid");
  expect_error<ShapeError>([&] { run(theta, {2, 3, 4}); }, "AffineGrid");
  expect_error<ShapeError>([&] { run(theta, {2, 3, 0, 5}); }, "AffineGrid");
  expect_error<ShapeError>(
      [&] {
        run(test::random_tensor({2, 3, 3}, 2), {2, 3, 4, 5});
      },
      "AffineGrid");
  expect_error<ShapeError>(
      [&] {
        run(test::random_ints({2, 2, 3}, 3, 0, 1, DType::kInt64), {2, 3, 4, 5});
      },
      "AffineGrid");
  expect_error<InvalidModel>(
      [&] {
        run_op("AffineGrid", {theta, constant(ints_tensor({2, 3, 4, 5}))},
               {{"align_corners", int64_t{2}}});
      },
      "AffineGrid");
  expect_error<ShapeError>(
      [&] {
        run_op("AffineGrid", {theta, ints_tensor({2, 3, 4, 5})});
      },
      "AffineGrid");
}

// ---- DeformConv ----

struct DeformCase {
  Shape x;  // (N, C, spatial...)
  int64_t out_channels;
  std::vector<int64_t> kernel, strides, dilations, pads;
  int64_t group = 1, offset_group = 1;
  bool bias = false, mask = false;
};

// Multilinear interpolation of one channel plane at a fractional position; zero outside.
double interpolate(const std::vector<double>& x, int64_t plane_offset,
                   const std::vector<int64_t>& size, const std::vector<double>& pos) {
  const size_t d = size.size();
  double v = 0;
  for (int q = 0; q < (1 << d); ++q) {
    double w = 1;
    int64_t flat = 0;
    bool inside = true;
    for (size_t i = 0; i < d; ++i) {
      const double fl = std::floor(pos[i]);
      const int bit = (q >> i) & 1;
      const int64_t at = static_cast<int64_t>(fl) + bit;
      w *= bit ? pos[i] - fl : 1 - (pos[i] - fl);
      inside = inside && at >= 0 && at < size[i];
      flat = flat * size[i] + at;
    }
    if (inside) v += w * x[plane_offset + flat];
  }
  return v;
}

// The spec's definition, one output element at a time.
std::vector<double> deform_conv_reference(const DeformCase& c, const std::vector<double>& x,
                                          const std::vector<double>& w,
                                          const std::vector<double>& offset,
                                          const std::vector<double>& bias,
                                          const std::vector<double>& mask, Shape* out_shape) {
  const size_t d = c.kernel.size();
  std::vector<int64_t> in(c.x.dims().begin() + 2, c.x.dims().end()), out(d);
  int64_t in_size = 1, taps = 1;
  for (size_t i = 0; i < d; ++i) {
    out[i] = (in[i] + c.pads[i] + c.pads[i + d] - c.dilations[i] * (c.kernel[i] - 1) - 1) /
                 c.strides[i] +
             1;
    in_size *= in[i];
    taps *= c.kernel[i];
  }
  const int64_t n_batch = c.x[0], channels = c.x[1], cg = channels / c.group;
  const int64_t og = c.out_channels / c.group, per_og = channels / c.offset_group;
  std::vector<int64_t> dims = {n_batch, c.out_channels};
  dims.insert(dims.end(), out.begin(), out.end());
  *out_shape = Shape(dims);
  const Shape out_sp(out), kernel_sp(c.kernel);
  const int64_t P = out_sp.numel();
  std::vector<double> y;
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t oc = 0; oc < c.out_channels; ++oc)
      for (int64_t p = 0; p < P; ++p) {
        const std::vector<int64_t> o = unravel(p, out_sp);
        double acc = bias.empty() ? 0.0 : bias[oc];
        for (int64_t cl = 0; cl < cg; ++cl) {
          const int64_t ch = (oc / og) * cg + cl, g = ch / per_og;
          for (int64_t k = 0; k < taps; ++k) {
            const std::vector<int64_t> kk = unravel(k, kernel_sp);
            std::vector<double> pos(d);
            for (size_t i = 0; i < d; ++i) {
              const int64_t off_channel = (g * taps + k) * static_cast<int64_t>(d) + i;
              pos[i] =
                  static_cast<double>(o[i] * c.strides[i] - c.pads[i] + kk[i] * c.dilations[i]) +
                  offset[(n * c.offset_group * taps * d + off_channel) * P + p];
            }
            const double m =
                mask.empty() ? 1.0 : mask[(n * c.offset_group * taps + g * taps + k) * P + p];
            acc += w[(oc * cg + cl) * taps + k] * m *
                   interpolate(x, (n * channels + ch) * in_size, in, pos);
          }
        }
        y.push_back(acc);
      }
  return y;
}

void check_deform_conv(const DeformCase& c, DType dtype, uint64_t seed) {
  SCOPED_TRACE("X " + c.x.to_string() + " kernel " + ints_tensor(c.kernel).to_string());
  Shape out;
  const size_t d = c.kernel.size();
  std::vector<int64_t> w_dims = {c.out_channels, c.x[1] / c.group};
  w_dims.insert(w_dims.end(), c.kernel.begin(), c.kernel.end());
  int64_t taps = 1;
  std::vector<int64_t> out_sp;
  for (size_t i = 0; i < d; ++i) {
    taps *= c.kernel[i];
    out_sp.push_back(
        (c.x[2 + i] + c.pads[i] + c.pads[i + d] - c.dilations[i] * (c.kernel[i] - 1) - 1) /
            c.strides[i] +
        1);
  }
  std::vector<int64_t> off_dims = {c.x[0], c.offset_group * taps * static_cast<int64_t>(d)};
  std::vector<int64_t> mask_dims = {c.x[0], c.offset_group * taps};
  off_dims.insert(off_dims.end(), out_sp.begin(), out_sp.end());
  mask_dims.insert(mask_dims.end(), out_sp.begin(), out_sp.end());
  auto make = [&](const Shape& s, uint64_t k, float lo, float hi) {
    Tensor t = test::random_tensor(s, seed + k, lo, hi);
    if (dtype == DType::kFloat64) t = Tensor::from_vector<double>(s, to_doubles(t));
    return t;
  };
  Tensor x = make(c.x, 0, -1, 1), w = make(Shape(w_dims), 1, -1, 1);
  Tensor offset = make(Shape(off_dims), 2, -2.5f, 2.5f);
  Tensor bias = c.bias ? make(Shape{c.out_channels}, 3, -1, 1) : Tensor();
  Tensor mask = c.mask ? make(Shape(mask_dims), 4, 0, 1) : Tensor();
  std::vector<double> want =
      deform_conv_reference(c, to_doubles(x), to_doubles(w), to_doubles(offset),
                            c.bias ? to_doubles(bias) : std::vector<double>{},
                            c.mask ? to_doubles(mask) : std::vector<double>{}, &out);
  Attributes attrs = {{"kernel_shape", c.kernel}, {"strides", c.strides},
                      {"dilations", c.dilations}, {"pads", c.pads},
                      {"group", c.group},         {"offset_group", c.offset_group}};
  std::vector<test::OpInput> inputs = {x, constant(w), offset};
  if (c.bias || c.mask) inputs.push_back(c.bias ? test::OpInput(constant(bias)) : omitted());
  if (c.mask) inputs.push_back(mask);
  Tensor y = run_op("DeformConv", inputs, attrs)[0];
  ASSERT_EQ(y.dtype(), dtype);
  expect_close(y, out, want, dtype == DType::kFloat64 ? 1e-10 : 1e-4, 1e-4);
}

TEST(DeformConv, GroupsOffsetGroupsMaskAndBias) {
  check_deform_conv({{1, 1, 3, 3}, 1, {2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}}, DType::kFloat32, 1);
  check_deform_conv({{2, 4, 7, 6}, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 2, 2, true, true},
                    DType::kFloat32, 2);
  check_deform_conv({{1, 6, 9, 8}, 4, {3, 2}, {2, 1}, {2, 1}, {2, 0, 1, 1}, 2, 3, true, false},
                    DType::kFloat32, 3);
  check_deform_conv({{2, 2, 5, 5}, 3, {2, 2}, {1, 2}, {1, 1}, {1, 0, 0, 1}, 1, 1, false, true},
                    DType::kFloat64, 4);
  check_deform_conv({{1, 2, 9}, 2, {3}, {2}, {1}, {1, 1}, 1, 2, true, true}, DType::kFloat32, 5);
  check_deform_conv(
      {{1, 2, 4, 4, 5}, 2, {2, 2, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 0, 1, 0, 1}, 2, 1, true, true},
      DType::kFloat64, 6);
  // Enough work for the parallel columns.
  check_deform_conv({{1, 16, 24, 24}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, 4, true, true},
                    DType::kFloat32, 7);
}

// With zero offsets and no mask, DeformConv is a plain convolution.
TEST(DeformConv, ZeroOffsetsMatchConvolution) {
  Tensor x = test::random_tensor({2, 3, 8, 7}, 1), w = test::random_tensor({4, 3, 3, 3}, 2);
  Tensor b = test::random_tensor({4}, 3);
  Tensor offset = Tensor::zeros({2, 18, 4, 4});
  std::vector<double> want = test::conv2d_reference(to_doubles(x), x.shape(), w, b, 2, 1);
  Tensor y = run_op("DeformConv", {x, constant(w), offset, constant(b)},
                    {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}})[0];
  expect_close(y, {2, 4, 4, 4}, want, 1e-4, 1e-4);
}

TEST(DeformConv, BadInputs) {
  Tensor x = test::random_tensor({1, 4, 5, 5}, 1), w = test::random_tensor({2, 4, 3, 3}, 2);
  Tensor offset = test::random_tensor({1, 18, 3, 3}, 3);
  run_op("DeformConv", {x, w, offset});  // fits
  expect_error<ShapeError>(
      [&] {
        run_op("DeformConv", {x, w, test::random_tensor({1, 18, 4, 3}, 4)});
      },
      "DeformConv");
  expect_error<ShapeError>(
      [&] {
        run_op("DeformConv", {x, w, test::random_tensor({1, 9, 3, 3}, 5)});
      },
      "DeformConv");
  expect_error<ShapeError>(
      [&] {
        run_op("DeformConv", {x, w, offset, test::random_tensor({3}, 6)});
      },
      "DeformConv");
  expect_error<ShapeError>(
      [&] {
        run_op("DeformConv", {x, w, offset, omitted(), test::random_tensor({1, 18, 3, 3}, 7)});
      },
      "DeformConv");
  expect_error<ShapeError>(
      [&] {
        run_op("DeformConv", {x, w, offset}, {{"group", int64_t{2}}});
      },
      "DeformConv");
  expect_error<ShapeError>(
      [&] {
        run_op("DeformConv", {x, w, offset}, {{"offset_group", int64_t{3}}});
      },
      "DeformConv");
  expect_error<ShapeError>(
      [&] {
        run_op("DeformConv", {x, w, offset}, {{"kernel_shape", {2, 2}}});
      },
      "DeformConv");
  expect_error<InvalidModel>(
      [&] {
        run_op("DeformConv", {x, w, offset}, {{"strides", {0, 1}}});
      },
      "DeformConv");
  expect_error<InvalidModel>(
      [&] {
        run_op("DeformConv", {x, w, offset}, {{"auto_pad", "SAME_UPPER"}});
      },
      "DeformConv");
  Tensor xi = test::random_ints({1, 4, 5, 5}, 8, 0, 3, DType::kInt32);
  expect_error<ShapeError>([&] { run_op("DeformConv", {xi, w, offset}); }, "DeformConv");
}

}  // namespace
}  // namespace lumen
