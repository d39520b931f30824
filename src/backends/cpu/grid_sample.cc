// CPU GridSample (opsets 16, 20, 22) for float32 on (N, C, H, W), and on (N, C, D, H, W) with a
// grid of (x, y, z) points (opset 20's volumetric form): linear (bi- or trilinear), nearest and
// (4-D) cubic sampling with zeros, border and reflection padding, with and without
// align_corners. Each output pixel's
// taps (input offsets and weights) are worked out once and reused across the channels; the
// semantics follow ONNX's spec (and PyTorch's grid_sample, which made its test outputs).
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/sampling.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 14;
constexpr double kCubicA = -0.75;

// Maps a grid coordinate in [-1, 1] to an input coordinate along an axis of `size` pixels.
double unnormalize(double g, int64_t size, bool align_corners) {
  double n = static_cast<double>(size);
  return align_corners ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2;
}

// Reflects x into [low, high] (given doubled, so that half-pixel bounds stay integral).
double reflect(double x, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  double low = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  x = std::abs(x - low);
  double extra = std::fmod(x, span);
  int64_t flips = static_cast<int64_t>(std::floor(x / span));
  return flips % 2 == 0 ? extra + low : span - extra + low;
}

// Applies border or reflection padding to an input coordinate (zeros padding leaves it).
double pad_coord(double x, int64_t size, GridSamplePadding padding, bool align_corners) {
  double hi = static_cast<double>(size - 1);
  switch (padding) {
    case GridSamplePadding::kZeros:
      return x;
    case GridSamplePadding::kBorder:
      return std::clamp(x, 0.0, hi);
    case GridSamplePadding::kReflection:
      x = align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
      return std::clamp(x, 0.0, hi);
  }
  return x;
}

void cubic_coeffs(double t, double* w) {
  auto near = [](double d) { return ((kCubicA + 2) * d - (kCubicA + 3)) * d * d + 1; };
  auto far = [](double d) {
    return ((kCubicA * d - 5 * kCubicA) * d + 8 * kCubicA) * d - 4 * kCubicA;
  };
  w[0] = far(1 + t);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

class GridSampleKernel final : public Kernel {
 public:
  explicit GridSampleKernel(const NodeContext& ctx) : spec_(grid_sample_spec(ctx)) {
    const Shape& x = ctx.input_shape(0);
    const Shape& g = ctx.input_shape(1);
    volumetric_ = x.rank() == 5;
    const int k = volumetric_ ? 1 : 0;
    n_ = x[0];
    c_ = x[1];
    d_ = volumetric_ ? x[2] : 1;
    h_ = x[2 + k];
    w_ = x[3 + k];
    od_ = volumetric_ ? g[1] : 1;
    oh_ = g[1 + k];
    ow_ = g[2 + k];
  }

  void run(KernelContext& ctx) const override {
    if (ctx.outputs[0].numel() == 0) return;
    const float* x = ctx.inputs[0].data<float>();
    const float* grid = ctx.inputs[1].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t out_rows = od_ * oh_;  // output rows per batch entry
    int64_t rows = n_ * out_rows;
    int64_t plane = d_ * h_ * w_, out_plane = out_rows * ow_;
    const int dims = volumetric_ ? 3 : 2;
    int taps_per_pixel = spec_.mode == GridSampleMode::kNearest    ? 1
                         : spec_.mode == GridSampleMode::kBilinear ? (volumetric_ ? 8 : 4)
                                                                   : 16;
    bool parallel = ctx.outputs[0].numel() * taps_per_pixel >= kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t n = r / out_rows, orow = r % out_rows;
      int64_t off[16];
      float wt[16];
      for (int64_t ow = 0; ow < ow_; ++ow) {
        const float* gp = grid + ((n * out_rows + orow) * ow_ + ow) * dims;
        int taps = pixel_taps(gp[0], gp[1], volumetric_ ? gp[2] : 0.0f, off, wt);
        const float* xn = x + n * c_ * plane;
        float* yo = y + n * c_ * out_plane + orow * ow_ + ow;
        for (int64_t c = 0; c < c_; ++c) {
          const float* xc = xn + c * plane;
          float acc = 0.0f;
          for (int t = 0; t < taps; ++t) acc += wt[t] * xc[off[t]];
          yo[c * out_plane] = acc;
        }
      }
    }
  }

 private:
  // Fills the in-bounds taps (offset in an input plane, weight) of grid point (gx, gy); returns
  // their number.
  // (gz and the depth axis only for volumetric input, where d_ > 1 or the grid has 3 columns.)
  int pixel_taps(float gx, float gy, float gz, int64_t* off, float* wt) const {
    bool align = spec_.align_corners;
    double ux = unnormalize(gx, w_, align), uy = unnormalize(gy, h_, align);
    double uz = volumetric_ ? unnormalize(gz, d_, align) : 0.0;
    int count = 0;
    // (ix, iy, iz) are whole numbers; tested as doubles so that far-away (or NaN) points are
    // skipped before any conversion.
    auto add3 = [&](double ix, double iy, double iz, double weight) {
      if (!(ix >= 0 && ix < w_ && iy >= 0 && iy < h_ && iz >= 0 && iz < d_) || weight == 0.0)
        return;
      off[count] = (static_cast<int64_t>(iz) * h_ + static_cast<int64_t>(iy)) * w_ +
                   static_cast<int64_t>(ix);
      wt[count] = static_cast<float>(weight);
      ++count;
    };
    auto add = [&](double ix, double iy, double weight) { add3(ix, iy, 0.0, weight); };
    switch (spec_.mode) {
      case GridSampleMode::kNearest: {
        double px = pad_coord(ux, w_, spec_.padding, align);
        double py = pad_coord(uy, h_, spec_.padding, align);
        double pz = volumetric_ ? pad_coord(uz, d_, spec_.padding, align) : 0.0;
        add3(std::nearbyint(px), std::nearbyint(py), std::nearbyint(pz), 1.0);
        break;
      }
      case GridSampleMode::kBilinear: {
        double px = pad_coord(ux, w_, spec_.padding, align);
        double py = pad_coord(uy, h_, spec_.padding, align);
        double pz = volumetric_ ? pad_coord(uz, d_, spec_.padding, align) : 0.0;
        double fx = std::floor(px), fy = std::floor(py), fz = std::floor(pz);
        double tx = px - fx, ty = py - fy, tz = pz - fz;
        for (int k = 0; k < (volumetric_ ? 2 : 1); ++k) {
          double wz = volumetric_ ? (k == 0 ? 1 - tz : tz) : 1.0;
          add3(fx, fy, fz + k, (1 - tx) * (1 - ty) * wz);
          add3(fx + 1, fy, fz + k, tx * (1 - ty) * wz);
          add3(fx, fy + 1, fz + k, (1 - tx) * ty * wz);
          add3(fx + 1, fy + 1, fz + k, tx * ty * wz);
        }
        break;
      }
      case GridSampleMode::kBicubic: {
        // Taps around the unpadded coordinate; padding then applies to each tap's index.
        double fx = std::floor(ux), fy = std::floor(uy);
        double cx[4], cy[4];
        cubic_coeffs(ux - fx, cx);
        cubic_coeffs(uy - fy, cy);
        for (int j = 0; j < 4; ++j) {
          double ty = pad_coord(fy - 1 + j, h_, spec_.padding, align);
          for (int i = 0; i < 4; ++i) {
            double tx = pad_coord(fx - 1 + i, w_, spec_.padding, align);
            add(tx, ty, cx[i] * cy[j]);
          }
        }
        break;
      }
    }
    return count;
  }

  GridSampleSpec spec_;
  bool volumetric_ = false;
  int64_t n_ = 0, c_ = 0, d_ = 1, h_ = 0, w_ = 0, od_ = 1, oh_ = 0, ow_ = 0;
};

std::unique_ptr<Kernel> make_grid_sample(const NodeContext& ctx) {
  return std::make_unique<GridSampleKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(GridSample, &make_grid_sample, &require_float32);

}  // namespace lumen::cpu
