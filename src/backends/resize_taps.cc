// Resize's per-axis taps (resize_taps.h): source indices and weights per output coordinate, in
// double precision, rounded to float once.
#include "backends/resize_taps.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace lumen {
namespace {

// Weights this close to 0 or 1 (rounding in the cubic polynomial) are taken as exact.
constexpr double kWeightEps = 1e-12;

int64_t nearest_index(ResizeNearest mode, double x) {
  double f = std::floor(x);
  switch (mode) {
    case ResizeNearest::kRoundPreferFloor:
      return static_cast<int64_t>(x == f + 0.5 ? f : std::round(x));
    case ResizeNearest::kRoundPreferCeil:
      return static_cast<int64_t>(x == f + 0.5 ? f + 1.0 : std::round(x));
    case ResizeNearest::kFloor:
      return static_cast<int64_t>(f);
    case ResizeNearest::kCeil:
      return static_cast<int64_t>(std::ceil(x));
  }
  return static_cast<int64_t>(f);
}

// Keys' cubic convolution weights of the 4 taps floor(x)-1 .. floor(x)+2 at fraction t of x.
void cubic_weights(double t, double a, double* w) {
  auto near = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // |d| <= 1
  auto far = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < |d| < 2
  w[0] = far(1 + t);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// Source coordinate of output o under tf_crop_and_resize (ONNX formula).
double crop_coord(int64_t o, std::pair<double, double> roi, double scale, int64_t in, int64_t out) {
  double span = static_cast<double>(in - 1);
  if (out == 1) return 0.5 * (roi.first + roi.second) * span;
  double resized = scale * static_cast<double>(in);
  return roi.first * span +
         static_cast<double>(o) * (roi.second - roi.first) * span / (resized - 1);
}

// Merges taps that read one index and, when every output reads one input with weight 1, turns
// the axis into a plain index map.
void simplify(ResizeAxisMap& m, int64_t out) {
  if (m.taps == 1) return;
  bool plain = true;
  std::vector<int64_t> single(out);
  for (int64_t o = 0; o < out && plain; ++o) {
    int64_t* idx = &m.idx[o * m.taps];
    float* wt = &m.wt[o * m.taps];
    for (int j = 0; j < m.taps; ++j)
      for (int k = j + 1; k < m.taps; ++k)
        if (idx[k] == idx[j] && wt[k] != 0.0f) {
          wt[j] += wt[k];
          wt[k] = 0.0f;
        }
    int nonzero = 0;
    for (int j = 0; j < m.taps; ++j)
      if (wt[j] != 0.0f) {
        ++nonzero;
        single[o] = idx[j];
        plain = plain && std::abs(wt[j] - 1.0f) <= 1e-7f;
      }
    plain = plain && nonzero == 1;
  }
  if (!plain) return;
  m.taps = 1;
  m.idx = std::move(single);
  m.wt.assign(out, 1.0f);
}

// Keys' cubic convolution kernel at distance x (coefficient a).
double cubic_kernel(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// Antialiased linear or cubic sampling (ONNX Resize, antialias = 1): when an axis shrinks
// (scale < 1) the filter is stretched by 1 / scale, so each output averages every input it
// covers; the weights are normalised to sum to 1. Source coordinate x blends the inputs
// lo + start + j (clamped to the axis: edge padding) for j < taps, where lo = ceil(x) - 1 and the
// weight is the filter at (start + j - (x - lo)) * scale.
ResizeAxisMap antialias_axis_map(const ResizeSpec& spec, const NodeContext& ctx, int64_t in,
                                 int64_t out, double scale) {
  const bool cubic = spec.mode == ResizeMode::kCubic;
  const double s = std::min(scale, 1.0);
  const double a = ctx.attr_float("cubic_coeff_a", -0.75f);
  const bool exclude = ctx.attr_int("exclude_outside", 0) != 0;
  const int64_t start = static_cast<int64_t>(std::floor((cubic ? -2.0 : -1.0) / s)) + 1;
  ResizeAxisMap m;
  m.taps = static_cast<int>(2 - 2 * start);
  m.idx.assign(out * m.taps, 0);
  m.wt.assign(out * m.taps, 0.0f);
  std::vector<double> w(m.taps);
  for (int64_t o = 0; o < out; ++o) {
    const double x = resize_source_coord(spec.coord, o, scale, in, out);
    const double lo = std::ceil(x) - 1;
    const double t = x - lo;
    double sum = 0;
    for (int j = 0; j < m.taps; ++j) {
      const double d = (static_cast<double>(start + j) - t) * s;
      w[j] = cubic ? cubic_kernel(d, a) : std::clamp(1.0 - std::abs(d), 0.0, 1.0);
      const int64_t i = static_cast<int64_t>(lo) + start + j;
      if (exclude && (i < 0 || i >= in)) w[j] = 0;
      m.idx[o * m.taps + j] = std::clamp<int64_t>(i, 0, in - 1);
      sum += w[j];
    }
    for (int j = 0; j < m.taps; ++j)
      m.wt[o * m.taps + j] = sum != 0 ? static_cast<float>(w[j] / sum) : 0.0f;
  }
  simplify(m, out);
  return m;
}

}  // namespace

std::vector<std::pair<double, double>> resize_roi(const NodeContext& ctx, int rank) {
  std::vector<std::pair<double, double>> roi(rank, {0.0, 1.0});
  const Tensor* t = ctx.has_input(1) ? ctx.input_value(1) : nullptr;
  if (t == nullptr || t->numel() == 0)
    ctx.fail_model("tf_crop_and_resize needs a roi input known when the graph is built");
  // float16 and bfloat16: a 16-bit compile narrowed the roi of a node placed on the GPU.
  if (!is_floating(t->dtype()))
    ctx.fail_model(std::string("roi must be a float tensor, not ") + dtype_name(t->dtype()));
  std::vector<int> axes;
  if (ctx.has_attr("axes")) {
    for (int64_t a : ctx.attr_ints("axes")) axes.push_back(static_cast<int>(a < 0 ? a + rank : a));
  } else {
    for (int a = 0; a < rank; ++a) axes.push_back(a);
  }
  int64_t n = static_cast<int64_t>(axes.size());
  if (t->numel() != 2 * n)
    ctx.fail_model("roi has " + std::to_string(t->numel()) + " values, expected " +
                   std::to_string(2 * n) + " (start and end per resized axis)");
  auto at = [t](int64_t i) { return t->item_as_double(i); };
  for (int64_t i = 0; i < n; ++i) roi[axes[i]] = {at(i), at(i + n)};
  return roi;
}

ResizeAxisMap resize_axis_map(const ResizeSpec& spec, const NodeContext& ctx, int64_t in,
                              int64_t out, double scale, std::pair<double, double> roi) {
  if (spec.antialias && spec.mode != ResizeMode::kNearest &&
      spec.coord != ResizeCoord::kTfCropAndResize && scale < 1.0 && in > 0)
    return antialias_axis_map(spec, ctx, in, out, scale);
  ResizeAxisMap m;
  m.taps = spec.mode == ResizeMode::kNearest ? 1 : spec.mode == ResizeMode::kLinear ? 2 : 4;
  double a = ctx.attr_float("cubic_coeff_a", -0.75f);
  bool exclude = ctx.attr_int("exclude_outside", 0) != 0;
  bool crop = spec.coord == ResizeCoord::kTfCropAndResize;
  m.idx.assign(out * m.taps, 0);
  m.wt.assign(out * m.taps, 0.0f);
  if (crop) m.outside.assign(out, 0);
  auto clamp = [in](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  for (int64_t o = 0; o < out; ++o) {
    double x = crop ? crop_coord(o, roi, scale, in, out)
                    : resize_source_coord(spec.coord, o, scale, in, out);
    if (crop && (x < 0 || x > static_cast<double>(in - 1))) {
      m.outside[o] = 1;
      m.any_outside = true;
      m.wt[o * m.taps] = 1.0f;
      continue;
    }
    int64_t* idx = &m.idx[o * m.taps];
    float* wt = &m.wt[o * m.taps];
    if (spec.mode == ResizeMode::kNearest) {
      idx[0] = clamp(nearest_index(spec.nearest, x));
      wt[0] = 1.0f;
      continue;
    }
    double f = std::floor(x), t = x - f;
    int64_t lo = static_cast<int64_t>(f);
    double w[4] = {1 - t, t, 0, 0};
    int64_t first = lo;
    if (spec.mode == ResizeMode::kCubic) {
      cubic_weights(t, a, w);
      first = lo - 1;
      if (exclude) {
        double sum = 0;
        for (int j = 0; j < 4; ++j) {
          if (first + j < 0 || first + j >= in) w[j] = 0;
          sum += w[j];
        }
        if (sum != 0)
          for (int j = 0; j < 4; ++j) w[j] /= sum;
      }
    }
    for (int j = 0; j < m.taps; ++j) {
      idx[j] = clamp(first + j);
      wt[j] = std::abs(w[j]) < kWeightEps ? 0.0f : static_cast<float>(w[j]);
    }
  }
  if (!m.any_outside) simplify(m, out);
  return m;
}

}  // namespace lumen
