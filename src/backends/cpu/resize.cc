// CPU Resize for float32: nearest (every nearest_mode), N-linear and N-cubic interpolation
// (cubic_coeff_a, exclude_outside) over any set of resized axes, with every
// coordinate_transformation_mode including tf_crop_and_resize (roi, extrapolation_value).
// Per-axis source indices and weights are computed once at compile time; a run walks output rows,
// combining the weighted source rows of the outer resized axes, then samples the last axis.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/movement.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelElements = 1 << 15;
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

// How one axis is sampled: output coordinate o blends input idx[o * taps + j] with weight
// wt[o * taps + j]; outside[o] (tf_crop_and_resize only) marks outputs set to the extrapolation
// value instead.
struct AxisMap {
  int taps = 1;
  std::vector<int64_t> idx;
  std::vector<float> wt;
  std::vector<char> outside;
  bool any_outside = false;
};

// The region of interest of tf_crop_and_resize as (start, end) per input axis.
std::vector<std::pair<double, double>> read_roi(const NodeContext& ctx, int rank) {
  std::vector<std::pair<double, double>> roi(rank, {0.0, 1.0});
  const Tensor* t = ctx.has_input(1) ? ctx.input_value(1) : nullptr;
  if (t == nullptr || t->numel() == 0)
    ctx.fail_model("tf_crop_and_resize needs a roi input known when the graph is built");
  if (t->dtype() != DType::kFloat32 && t->dtype() != DType::kFloat64)
    ctx.fail_model(std::string("roi must be float32 or float64, not ") + dtype_name(t->dtype()));
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
  auto at = [t](int64_t i) {
    return t->dtype() == DType::kFloat32 ? static_cast<double>(t->data<float>()[i])
                                         : t->data<double>()[i];
  };
  for (int64_t i = 0; i < n; ++i) roi[axes[i]] = {at(i), at(i + n)};
  return roi;
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
void simplify(AxisMap& m, int64_t out) {
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
AxisMap antialias_axis_map(const ResizeSpec& spec, const NodeContext& ctx, int64_t in,
                           int64_t out, double scale) {
  const bool cubic = spec.mode == ResizeMode::kCubic;
  const double s = std::min(scale, 1.0);
  const double a = ctx.attr_float("cubic_coeff_a", -0.75f);
  const bool exclude = ctx.attr_int("exclude_outside", 0) != 0;
  const int64_t start = static_cast<int64_t>(std::floor((cubic ? -2.0 : -1.0) / s)) + 1;
  AxisMap m;
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

AxisMap make_axis_map(const ResizeSpec& spec, const NodeContext& ctx, int64_t in, int64_t out,
                      double scale, std::pair<double, double> roi) {
  if (spec.antialias && spec.mode != ResizeMode::kNearest &&
      spec.coord != ResizeCoord::kTfCropAndResize && scale < 1.0 && in > 0)
    return antialias_axis_map(spec, ctx, in, out, scale);
  AxisMap m;
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

class ResizeKernel final : public Kernel {
 public:
  explicit ResizeKernel(const NodeContext& ctx) {
    ResizeSpec spec = resize_spec(ctx);
    in_dims_ = ctx.input_shape(0).dims();
    out_dims_ = spec.output.dims();
    int rank = static_cast<int>(in_dims_.size());
    std::vector<std::pair<double, double>> roi(rank, {0.0, 1.0});
    if (spec.coord == ResizeCoord::kTfCropAndResize) {
      roi = read_roi(ctx, rank);
      extrapolation_ = ctx.attr_float("extrapolation_value", 0.0f);
    }
    in_strides_.assign(rank, 1);
    for (int a = rank - 2; a >= 0; --a) in_strides_[a] = in_strides_[a + 1] * in_dims_[a + 1];
    for (int a = 0; a < rank; ++a)
      maps_.push_back(make_axis_map(spec, ctx, in_dims_[a], out_dims_[a], spec.scales[a], roi[a]));
  }

  void run(KernelContext& ctx) const override {
    Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return;
    const float* src = ctx.inputs[0].data<float>();
    float* dst = y.data<float>();
    int rank = static_cast<int>(out_dims_.size());
    if (rank == 0) {
      dst[0] = src[0];
      return;
    }
    int64_t inner = out_dims_.back();
    int64_t rows = y.numel() / inner;
    bool parallel = y.numel() >= kParallelElements;
#pragma omp parallel if (parallel)
    {
      // (input offset, weight) of each source row the current output row blends.
      std::vector<int64_t> off, next_off;
      std::vector<float> wt, next_wt;
      std::vector<float> tmp(static_cast<size_t>(in_dims_.back()));
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows; ++row) {
        off.assign(1, 0);
        wt.assign(1, 1.0f);
        bool outside = false;
        int64_t rest = row;
        for (int a = rank - 2; a >= 0; --a) {
          int64_t o = rest % out_dims_[a];
          rest /= out_dims_[a];
          const AxisMap& m = maps_[a];
          outside = outside || (m.any_outside && m.outside[o]);
          int64_t s = in_strides_[a];
          if (m.taps == 1) {
            for (int64_t& v : off) v += m.idx[o] * s;
            continue;
          }
          next_off.clear();
          next_wt.clear();
          for (size_t c = 0; c < off.size(); ++c)
            for (int j = 0; j < m.taps; ++j) {
              float w = m.wt[o * m.taps + j];
              if (w == 0.0f) continue;
              next_off.push_back(off[c] + m.idx[o * m.taps + j] * s);
              next_wt.push_back(wt[c] * w);
            }
          off.swap(next_off);
          wt.swap(next_wt);
        }
        float* out = dst + row * inner;
        if (outside) {
          std::fill(out, out + inner, extrapolation_);
          continue;
        }
        blend_row(src, out, off, wt, maps_.back(), tmp.data(), in_dims_.back());
      }
    }
  }

 private:
  // Blends the source rows into one input-length row first (contiguous, so it vectorises), then
  // samples that row along the last axis.
  void blend_row(const float* src, float* out, const std::vector<int64_t>& off,
                 const std::vector<float>& wt, const AxisMap& last, float* tmp,
                 int64_t in_len) const {
    const float* p = src + off[0];
    if (off.size() > 1 || wt[0] != 1.0f) {
      float w0 = wt[0];
      for (int64_t k = 0; k < in_len; ++k) tmp[k] = w0 * p[k];
      for (size_t c = 1; c < off.size(); ++c) {
        const float* q = src + off[c];
        float wc = wt[c];
        for (int64_t k = 0; k < in_len; ++k) tmp[k] += wc * q[k];
      }
      p = tmp;
    }
    int64_t n = static_cast<int64_t>(last.idx.size()) / last.taps;
    const int64_t* idx = last.idx.data();
    const float* w = last.wt.data();
    switch (last.taps) {
      case 1:
        for (int64_t j = 0; j < n; ++j) out[j] = p[idx[j]];
        break;
      case 2:
        for (int64_t j = 0; j < n; ++j)
          out[j] = w[2 * j] * p[idx[2 * j]] + w[2 * j + 1] * p[idx[2 * j + 1]];
        break;
      case 4:
        for (int64_t j = 0; j < n; ++j) {
          const int64_t* i = idx + 4 * j;
          const float* v = w + 4 * j;
          out[j] = v[0] * p[i[0]] + v[1] * p[i[1]] + v[2] * p[i[2]] + v[3] * p[i[3]];
        }
        break;
      default:  // antialiased downsampling: the filter spans 2 / scale or 4 / scale inputs
        for (int64_t j = 0; j < n; ++j) {
          const int64_t* i = idx + last.taps * j;
          const float* v = w + last.taps * j;
          float sum = 0.0f;
          for (int k = 0; k < last.taps; ++k) sum += v[k] * p[i[k]];
          out[j] = sum;
        }
        break;
    }
    if (last.any_outside)
      for (int64_t j = 0; j < n; ++j)
        if (last.outside[j]) out[j] = extrapolation_;
  }

  std::vector<int64_t> in_dims_, out_dims_, in_strides_;
  std::vector<AxisMap> maps_;
  float extrapolation_ = 0.0f;
};

std::string check_resize(const NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32)
    return std::string("input X is ") + dtype_name(ctx.input_dtype(0)) +
           "; the CPU kernel takes float32";
  ResizeSpec spec = resize_spec(ctx);
  return "";
}

std::unique_ptr<Kernel> make_resize(const NodeContext& ctx) {
  return std::make_unique<ResizeKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Resize, &make_resize, &check_resize);

}  // namespace lumen::cpu
