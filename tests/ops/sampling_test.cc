// Tests of GridSample, RoiAlign, LRN and MaxUnpool against naive double-precision references
// written from the ONNX spec, on random data, plus bad inputs that must name the node.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen::test {
namespace {

// Runs `fn`, expecting an error of type E whose message names `op`.
template <typename E, typename Fn>
void expect_error_naming(Fn fn, const std::string& op) {
  try {
    fn();
    ADD_FAILURE() << "expected an error naming " << op;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
  }
}

// --- GridSample ---

struct GridParams {
  std::string mode, padding;
  bool align;
};

// The input coordinate of grid value g along an axis of n pixels.
double grid_coord(double g, int64_t n, bool align) {
  return align ? (g + 1) * (n - 1) / 2.0 : ((g + 1) * n - 1) / 2.0;
}

// Folds x back into [lo, hi] by mirroring at the bounds, then clamps to the pixel range.
double mirror(double x, double lo, double hi) {
  if (hi <= lo) return 0;
  double period = 2 * (hi - lo);
  double t = std::fmod(std::abs(x - lo), period);
  return lo + (t <= hi - lo ? t : period - t);
}

double padded(double x, int64_t n, const GridParams& p) {
  if (p.padding == "border") return std::min(std::max(x, 0.0), double(n - 1));
  if (p.padding == "reflection") {
    double m = p.align ? mirror(x, 0, n - 1) : mirror(x, -0.5, n - 0.5);
    return std::min(std::max(m, 0.0), double(n - 1));
  }
  return x;
}

double keys075(double d) {
  const double a = -0.75;
  d = std::abs(d);
  if (d <= 1) return (a + 2) * d * d * d - (a + 3) * d * d + 1;
  if (d < 2) return a * d * d * d - 5 * a * d * d + 8 * a * d - 4 * a;
  return 0;
}

std::vector<double> grid_sample_ref(const Tensor& x, const Tensor& grid, const GridParams& p) {
  std::vector<double> xs = to_doubles(x), gs = to_doubles(grid), y;
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t OH = grid.shape()[1], OW = grid.shape()[2];
  auto pixel = [&](int64_t n, int64_t c, int64_t iy, int64_t ix) {
    if (iy < 0 || iy >= H || ix < 0 || ix >= W) return 0.0;
    return xs[((n * C + c) * H + iy) * W + ix];
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double* g = &gs[((n * OH + oh) * OW + ow) * 2];
          double cx = grid_coord(g[0], W, p.align), cy = grid_coord(g[1], H, p.align);
          double v = 0;
          if (p.mode == "nearest") {
            v = pixel(n, c, std::llrint(padded(cy, H, p)), std::llrint(padded(cx, W, p)));
          } else if (p.mode == "bilinear") {
            double px = padded(cx, W, p), py = padded(cy, H, p);
            int64_t x0 = int64_t(std::floor(px)), y0 = int64_t(std::floor(py));
            for (int64_t dy = 0; dy < 2; ++dy)
              for (int64_t dx = 0; dx < 2; ++dx)
                v += (1 - std::abs(px - (x0 + dx))) * (1 - std::abs(py - (y0 + dy))) *
                     pixel(n, c, y0 + dy, x0 + dx);
          } else {
            int64_t x0 = int64_t(std::floor(cx)), y0 = int64_t(std::floor(cy));
            for (int64_t iy = y0 - 1; iy <= y0 + 2; ++iy)
              for (int64_t ix = x0 - 1; ix <= x0 + 2; ++ix)
                v += keys075(cx - ix) * keys075(cy - iy) *
                     pixel(n, c, int64_t(padded(iy, H, p)), int64_t(padded(ix, W, p)));
          }
          y.push_back(v);
        }
  return y;
}

TEST(GridSample, Random) {
  uint64_t seed = 100;
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (bool align : {false, true}) {
        GridParams p{mode, padding, align};
        SCOPED_TRACE(std::string(mode) + " " + padding + (align ? " align_corners" : ""));
        for (auto [xs, gs] : {std::pair<Shape, Shape>{{2, 3, 5, 6}, {2, 4, 7, 2}},
                              std::pair<Shape, Shape>{{1, 2, 1, 4}, {1, 3, 3, 2}},
                              std::pair<Shape, Shape>{{1, 1, 3, 2}, {1, 5, 5, 2}}}) {
          Tensor x = random_tensor(xs, seed++);
          // Reaches past [-1, 1] to cover every padding mode; far points reflect several times.
          Tensor grid = random_tensor(gs, seed++, -2.5f, 2.5f);
          Attributes at = {
              {"mode", mode}, {"padding_mode", padding}, {"align_corners", int64_t{align}}};
          Tensor y = run_op("GridSample", {x, grid}, at)[0];
          expect_close(y, {xs[0], xs[1], gs[1], gs[2]}, grid_sample_ref(x, grid, p), 1e-5, 1e-4);
        }
      }
}

TEST(GridSample, KnownValues) {
  // 2x2 input; grid (0, 0) is the centre: bilinear averages all four, align_corners or not.
  Tensor x = Tensor::from_vector<float>(Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor grid = Tensor::from_vector<float>(Shape{1, 1, 2, 2}, {0, 0, -1, -1});
  // Without align_corners (-1, -1) is the outer corner of pixel 0: a quarter of its value.
  expect_close(run_op("GridSample", {x, grid})[0], {1, 1, 1, 2}, {2.5, 0.25});
  expect_close(run_op("GridSample", {x, grid}, {{"align_corners", int64_t{1}}})[0], {1, 1, 1, 2},
               {2.5, 1});
}

TEST(GridSample, LargeRunsInParallel) {
  Tensor x = random_tensor({2, 8, 32, 32}, 200);
  Tensor grid = random_tensor({2, 24, 40, 2}, 201, -1.1f, 1.1f);
  GridParams p{"bilinear", "zeros", false};
  expect_close(run_op("GridSample", {x, grid})[0], {2, 8, 24, 40}, grid_sample_ref(x, grid, p));
}

TEST(GridSample, BadInput) {
  Tensor x = random_tensor({1, 2, 4, 4}, 300);
  Tensor grid = random_tensor({1, 3, 3, 2}, 301);
  expect_error_naming<InvalidModel>(
      [&] {
        run_op("GridSample", {x, grid}, {{"mode", "area"}});
      },
      "GridSample");
  expect_error_naming<InvalidModel>(
      [&] {
        run_op("GridSample", {x, grid}, {{"padding_mode", "wrap"}});
      },
      "GridSample");
  expect_error_naming<ShapeError>(
      [&] {
        run_op("GridSample", {x, random_tensor({1, 3, 3, 3}, 302)});
      },
      "GridSample");
  expect_error_naming<ShapeError>(
      [&] {
        run_op("GridSample", {random_tensor({2, 4, 4}, 303), grid});
      },
      "GridSample");
  expect_error_naming<ShapeError>(
      [&] {
        run_op("GridSample", {random_tensor({2, 2, 4, 4}, 304), grid});
      },
      "GridSample");
}

// --- RoiAlign ---

struct RoiParams {
  bool half_pixel = true;
  int64_t oh = 1, ow = 1, ratio = 0;
  double scale = 1.0;
};

double roi_bilinear(const std::vector<double>& plane, int64_t H, int64_t W, double y, double x) {
  if (y < -1 || y > H || x < -1 || x > W) return 0;
  y = std::min(std::max(y, 0.0), double(H - 1));
  x = std::min(std::max(x, 0.0), double(W - 1));
  int64_t y0 = int64_t(y), x0 = int64_t(x);
  int64_t y1 = std::min(y0 + 1, H - 1), x1 = std::min(x0 + 1, W - 1);
  double ly = y - y0, lx = x - x0;
  return (1 - ly) * (1 - lx) * plane[y0 * W + x0] + (1 - ly) * lx * plane[y0 * W + x1] +
         ly * (1 - lx) * plane[y1 * W + x0] + ly * lx * plane[y1 * W + x1];
}

std::vector<double> roi_align_ref(const Tensor& x, const Tensor& rois,
                                  const std::vector<int64_t>& batch, const RoiParams& p) {
  std::vector<double> xs = to_doubles(x), rs = to_doubles(rois), y;
  int64_t C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  for (size_t r = 0; r < batch.size(); ++r) {
    double off = p.half_pixel ? 0.5 : 0;
    double x1 = rs[4 * r] * p.scale - off, y1 = rs[4 * r + 1] * p.scale - off;
    double x2 = rs[4 * r + 2] * p.scale - off, y2 = rs[4 * r + 3] * p.scale - off;
    double rw = x2 - x1, rh = y2 - y1;
    if (!p.half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    double bh = rh / p.oh, bw = rw / p.ow;
    int64_t gh = p.ratio > 0 ? p.ratio : int64_t(std::ceil(rh / p.oh));
    int64_t gw = p.ratio > 0 ? p.ratio : int64_t(std::ceil(rw / p.ow));
    for (int64_t c = 0; c < C; ++c) {
      std::vector<double> plane(xs.begin() + (batch[r] * C + c) * H * W,
                                xs.begin() + (batch[r] * C + c + 1) * H * W);
      for (int64_t ph = 0; ph < p.oh; ++ph)
        for (int64_t pw = 0; pw < p.ow; ++pw) {
          double sum = 0;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix)
              sum += roi_bilinear(plane, H, W, y1 + (ph + (iy + 0.5) / gh) * bh,
                                  x1 + (pw + (ix + 0.5) / gw) * bw);
          y.push_back(sum / std::max<int64_t>(gh * gw, 1));
        }
    }
  }
  return y;
}

void check_roi_align(const Shape& xs, int64_t num_rois, const RoiParams& p, uint64_t seed) {
  Tensor x = random_tensor(xs, seed);
  // Boxes (x1, y1, x2, y2) in input units before spatial_scale, some reaching past the map.
  std::vector<float> box;
  std::vector<int64_t> batch;
  Tensor corners = random_tensor({num_rois, 4}, seed + 1, -0.2f, 1.1f);
  std::vector<double> cv = to_doubles(corners);
  for (int64_t r = 0; r < num_rois; ++r) {
    double sx = xs[3] / p.scale, sy = xs[2] / p.scale;
    double a = cv[4 * r] * sx, b = cv[4 * r + 2] * sx, c = cv[4 * r + 1] * sy,
           d = cv[4 * r + 3] * sy;
    box.insert(box.end(), {float(std::min(a, b)), float(std::min(c, d)), float(std::max(a, b)),
                           float(std::max(c, d))});
    batch.push_back(r % xs[0]);
  }
  Tensor rois = Tensor::from_vector<float>(Shape{num_rois, 4}, box);
  Tensor bi = Tensor::from_vector<int64_t>(Shape{num_rois}, batch);
  Attributes at = {
      {"coordinate_transformation_mode", p.half_pixel ? "half_pixel" : "output_half_pixel"},
      {"output_height", p.oh},
      {"output_width", p.ow},
      {"sampling_ratio", p.ratio},
      {"spatial_scale", static_cast<float>(p.scale)}};
  Tensor y = run_op("RoiAlign", {x, rois, bi}, at)[0];
  expect_close(y, {num_rois, xs[1], p.oh, p.ow}, roi_align_ref(x, rois, batch, p), 1e-5, 1e-4);
}

TEST(RoiAlign, Random) {
  uint64_t seed = 400;
  for (bool hp : {true, false}) {
    SCOPED_TRACE(hp ? "half_pixel" : "output_half_pixel");
    check_roi_align({2, 3, 10, 12}, 5, {hp, 3, 4, 2, 1.0}, seed += 2);
    check_roi_align({2, 3, 10, 12}, 4, {hp, 2, 2, 0, 1.0}, seed += 2);  // adaptive sampling
    check_roi_align({1, 4, 8, 8}, 3, {hp, 5, 5, 0, 0.25}, seed += 2);   // feature map at 1/4
    check_roi_align({3, 2, 6, 7}, 6, {hp, 1, 1, 3, 0.5}, seed += 2);
  }
}

TEST(RoiAlign, BadInput) {
  Tensor x = random_tensor({1, 2, 6, 6}, 500);
  Tensor rois = Tensor::from_vector<float>(Shape{1, 4}, {0, 0, 3, 3});
  Tensor bi = Tensor::from_vector<int64_t>(Shape{1}, {0});
  expect_error_naming<InvalidModel>(
      [&] {
        run_op("RoiAlign", {x, rois, bi}, {{"mode", "sum"}});
      },
      "RoiAlign");
  expect_error_naming<InvalidModel>(
      [&] {
        run_op("RoiAlign", {x, rois, bi}, {{"output_height", int64_t{0}}});
      },
      "RoiAlign");
  expect_error_naming<ShapeError>(
      [&] {
        run_op("RoiAlign", {x, Tensor::from_vector<float>(Shape{1, 3}, {0, 0, 3}), bi});
      },
      "RoiAlign");
  expect_error_naming<InvalidArgument>(
      [&] {
        run_op("RoiAlign", {x, rois, Tensor::from_vector<int64_t>(Shape{1}, {1})});
      },
      "RoiAlign");
  expect_error_naming<UnsupportedOp>(
      [&] {
        run_op("RoiAlign", {x, rois, bi}, {{"mode", "max"}});
      },
      "RoiAlign");
}

// --- LRN ---

std::vector<double> lrn_ref(const Tensor& x, int64_t size, double alpha, double beta, double bias) {
  std::vector<double> xs = to_doubles(x), y(xs.size());
  int64_t C = x.shape()[1], inner = x.numel() / (x.shape()[0] * C);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = (i / inner) % C, base = i - c * inner;
    double sq = 0;
    for (int64_t k = c - (size - 1) / 2; k <= c + size / 2; ++k)
      if (k >= 0 && k < C) sq += xs[base + k * inner] * xs[base + k * inner];
    y[i] = xs[i] / std::pow(bias + alpha / size * sq, beta);
  }
  return y;
}

TEST(LRN, Random) {
  uint64_t seed = 600;
  for (int64_t size : {1, 2, 3, 4, 5}) {
    Tensor x = random_tensor({2, 6, 4, 5}, seed++, -3, 3);
    expect_close(run_op("LRN", {x}, {{"size", size}})[0], x.shape(),
                 lrn_ref(x, size, 1e-4, 0.75, 1.0));
    Attributes at = {{"size", size}, {"alpha", 0.3f}, {"beta", 0.5f}, {"bias", 2.0f}};
    expect_close(run_op("LRN", {x}, at)[0], x.shape(), lrn_ref(x, size, 0.3, 0.5, 2.0));
  }
  Tensor x3 = random_tensor({3, 5, 7}, seed++, -3, 3);
  expect_close(run_op("LRN", {x3}, {{"size", int64_t{3}}, {"alpha", 0.5f}})[0], x3.shape(),
               lrn_ref(x3, 3, 0.5, 0.75, 1.0));
  Tensor big = random_tensor({2, 32, 24, 24}, seed++, -3, 3);
  expect_close(run_op("LRN", {big}, {{"size", int64_t{5}}, {"alpha", 0.1f}})[0], big.shape(),
               lrn_ref(big, 5, 0.1, 0.75, 1.0));
}

TEST(LRN, BadInput) {
  Tensor x = random_tensor({1, 3, 4, 4}, 700);
  expect_error_naming<InvalidModel>([&] { run_op("LRN", {x}); }, "LRN");  // size is required
  expect_error_naming<InvalidModel>([&] { run_op("LRN", {x}, {{"size", int64_t{0}}}); }, "LRN");
  expect_error_naming<ShapeError>(
      [&] {
        run_op("LRN", {random_ints({1, 3, 4}, 701, 0, 5)}, {{"size", int64_t{3}}});
      },
      "LRN");
}

// --- MaxUnpool ---

TEST(MaxUnpool, InvertsMaxPool) {
  uint64_t seed = 800;
  struct Case {
    Shape x;
    std::vector<int64_t> kernel, strides, pads;
  };
  for (const Case& c :
       {Case{{2, 3, 8, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
        Case{{1, 2, 9, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}}, Case{{2, 2, 9}, {3}, {3}, {0, 0}},
        Case{{1, 2, 4, 6, 5}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0, 0, 0, 1}}}) {
    SCOPED_TRACE(c.x.to_string());
    Tensor x = random_tensor(c.x, seed++);
    Attributes at = {{"kernel_shape", c.kernel}, {"strides", c.strides}, {"pads", c.pads}};
    std::vector<Tensor> pooled = run_op("MaxPool", {x}, at, 2);
    // Expected: zeros with each pooled value written at its index (these shapes unpool back to
    // the shape of x, so MaxPool's flat indices address the output).
    int spatial = c.x.rank() - 2;
    std::vector<int64_t> out = {c.x[0], c.x[1]};
    for (int i = 0; i < spatial; ++i)
      out.push_back((pooled[0].shape()[2 + i] - 1) * c.strides[i] + c.kernel[i] - c.pads[i] -
                    c.pads[i + spatial]);
    Shape out_shape(out);
    std::vector<double> want(out_shape.numel(), 0.0), v = to_doubles(pooled[0]),
                                                      idx = to_doubles(pooled[1]);
    for (size_t i = 0; i < v.size(); ++i) want[static_cast<size_t>(idx[i])] = v[i];
    Tensor y = run_op("MaxUnpool", {pooled[0], pooled[1]}, at)[0];
    expect_close(y, out_shape, want, 0, 0);
    // A larger output_shape keeps each value at its coordinates, with trailing zeros.
    std::vector<int64_t> bigger = out;
    bigger.back() += 2;
    bigger[2] += 1;
    Shape big_shape(bigger);
    std::vector<double> want_big(big_shape.numel(), 0.0);
    for (size_t i = 0; i < v.size(); ++i)
      want_big[ravel(unravel(static_cast<int64_t>(idx[i]), out_shape), big_shape)] = v[i];
    Tensor shape_t = Tensor::from_vector<int64_t>(Shape{int64_t(bigger.size())}, bigger);
    y = run_op("MaxUnpool", {pooled[0], pooled[1], constant(shape_t)}, at)[0];
    expect_close(y, big_shape, want_big, 0, 0);
  }
}

TEST(MaxUnpool, BadInput) {
  Tensor x = random_tensor({1, 1, 2, 2}, 900);
  Tensor idx = Tensor::from_vector<int64_t>(Shape{1, 1, 2, 2}, {0, 3, 9, 16});
  Attributes at = {{"kernel_shape", std::vector<int64_t>{2, 2}},
                   {"strides", std::vector<int64_t>{2, 2}}};
  expect_error_naming<InvalidArgument>([&] { run_op("MaxUnpool", {x, idx}, at); }, "MaxUnpool");
  expect_error_naming<InvalidModel>([&] { run_op("MaxUnpool", {x, idx}); }, "MaxUnpool");
  expect_error_naming<ShapeError>(
      [&] {
        run_op("MaxUnpool", {x, Tensor::from_vector<int64_t>(Shape{1, 1, 4}, {0, 1, 2, 3})}, at);
      },
      "MaxUnpool");
  Tensor wrong = Tensor::from_vector<int64_t>(Shape{4}, {1, 2, 4, 4});  // C 2, not 1
  Tensor smaller = Tensor::from_vector<int64_t>(Shape{4}, {1, 1, 3, 4});
  expect_error_naming<ShapeError>(
      [&] {
        run_op("MaxUnpool", {x, idx, constant(smaller)}, at);
      },
      "MaxUnpool");
  expect_error_naming<ShapeError>(
      [&] {
        run_op("MaxUnpool", {x, idx, constant(wrong)}, at);
      },
      "MaxUnpool");
}

}  // namespace
}  // namespace lumen::test
