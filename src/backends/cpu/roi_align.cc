// CPU RoiAlign (opset 16) for float32, mode avg: each output bin of a region of interest is the
// mean of sampling_ratio^2 (or adaptive) bilinear samples of its feature map, with the
// half_pixel or output_half_pixel coordinate mode. Mode max is not run: ONNX's spec (max of the
// samples) and its reference (max of the weighted corner values) disagree.
#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/sampling.h"

namespace lumen::cpu {
namespace {

// One bilinear sample point: 4 plane offsets and weights (all zero when outside the map).
struct Sample {
  int64_t off[4] = {0, 0, 0, 0};
  float w[4] = {0, 0, 0, 0};
};

// The bilinear sample of a (height x width) map at (y, x); points more than one pixel outside
// contribute nothing, nearer ones are clamped to the edge.
Sample bilinear_sample(double y, double x, int64_t height, int64_t width) {
  Sample s;
  if (height <= 0 || width <= 0 || y < -1.0 || y > static_cast<double>(height) || x < -1.0 ||
      x > static_cast<double>(width))
    return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= height - 1) {
    y0 = y1 = height - 1;
    y = static_cast<double>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= width - 1) {
    x0 = x1 = width - 1;
    x = static_cast<double>(x0);
  } else {
    x1 = x0 + 1;
  }
  double ly = y - y0, lx = x - x0, hy = 1 - ly, hx = 1 - lx;
  s.off[0] = y0 * width + x0;
  s.off[1] = y0 * width + x1;
  s.off[2] = y1 * width + x0;
  s.off[3] = y1 * width + x1;
  s.w[0] = static_cast<float>(hy * hx);
  s.w[1] = static_cast<float>(hy * lx);
  s.w[2] = static_cast<float>(ly * hx);
  s.w[3] = static_cast<float>(ly * lx);
  return s;
}

class RoiAlignKernel final : public Kernel {
 public:
  explicit RoiAlignKernel(const NodeContext& ctx)
      : where_(ctx.where()), spec_(roi_align_spec(ctx)) {
    const Shape& x = ctx.input_shape(0);
    n_ = x[0];
    c_ = x[1];
    h_ = x[2];
    w_ = x[3];
    rois_ = ctx.input_shape(1)[0];
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    const float* rois = ctx.inputs[1].data<float>();
    const int64_t* batch = ctx.inputs[2].data<int64_t>();
    float* y = ctx.outputs[0].data<float>();
    for (int64_t r = 0; r < rois_; ++r)
      if (batch[r] < 0 || batch[r] >= n_)
        throw InvalidArgument(where_ + ": batch_indices[" + std::to_string(r) +
                              "] = " + std::to_string(batch[r]) + " is outside [0, " +
                              std::to_string(n_) + ")");
    int64_t oh = spec_.output_height, ow = spec_.output_width;
#pragma omp parallel for schedule(dynamic) if (rois_ > 1)
    for (int64_t r = 0; r < rois_; ++r) {
      std::vector<Sample> samples;
      std::vector<int64_t> bin_start(oh * ow + 1);
      roi_samples(rois + 4 * r, &samples, &bin_start);
      const float* xn = x + batch[r] * c_ * h_ * w_;
      float* yr = y + r * c_ * oh * ow;
      for (int64_t c = 0; c < c_; ++c) {
        const float* plane = xn + c * h_ * w_;
        for (int64_t b = 0; b < oh * ow; ++b) {
          int64_t first = bin_start[b], last = bin_start[b + 1];
          float acc = 0.0f;
          for (int64_t i = first; i < last; ++i) {
            const Sample& s = samples[i];
            acc += s.w[0] * plane[s.off[0]] + s.w[1] * plane[s.off[1]] + s.w[2] * plane[s.off[2]] +
                   s.w[3] * plane[s.off[3]];
          }
          int64_t count = std::max<int64_t>(last - first, 1);
          yr[c * oh * ow + b] = acc / static_cast<float>(count);
        }
      }
    }
  }

 private:
  // The sample points of one region, bin by bin: bin b uses samples [bin_start[b],
  // bin_start[b + 1]).
  void roi_samples(const float* roi, std::vector<Sample>* samples,
                   std::vector<int64_t>* bin_start) const {
    double offset = spec_.half_pixel ? 0.5 : 0.0, scale = spec_.spatial_scale;
    double x0 = roi[0] * scale - offset, y0 = roi[1] * scale - offset;
    double rw = roi[2] * scale - offset - x0, rh = roi[3] * scale - offset - y0;
    if (!spec_.half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    int64_t oh = spec_.output_height, ow = spec_.output_width;
    double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
    int64_t gh =
        spec_.sampling_ratio > 0 ? spec_.sampling_ratio : static_cast<int64_t>(std::ceil(rh / oh));
    int64_t gw =
        spec_.sampling_ratio > 0 ? spec_.sampling_ratio : static_cast<int64_t>(std::ceil(rw / ow));
    gh = std::max<int64_t>(gh, 0);
    gw = std::max<int64_t>(gw, 0);
    samples->reserve(oh * ow * gh * gw);
    for (int64_t ph = 0; ph < oh; ++ph)
      for (int64_t pw = 0; pw < ow; ++pw) {
        (*bin_start)[ph * ow + pw] = static_cast<int64_t>(samples->size());
        for (int64_t iy = 0; iy < gh; ++iy) {
          double sy = y0 + ph * bh + (iy + 0.5) * bh / static_cast<double>(gh);
          for (int64_t ix = 0; ix < gw; ++ix) {
            double sx = x0 + pw * bw + (ix + 0.5) * bw / static_cast<double>(gw);
            samples->push_back(bilinear_sample(sy, sx, h_, w_));
          }
        }
      }
    (*bin_start)[oh * ow] = static_cast<int64_t>(samples->size());
  }

  std::string where_;
  RoiAlignSpec spec_;
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, rois_ = 0;
};

std::string check_roi_align(const NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32)
    return std::string("X is ") + dtype_name(ctx.input_dtype(0)) + "; the CPU kernel takes float32";
  if (roi_align_spec(ctx).max) return "mode 'max' is not supported";
  return "";
}

std::unique_ptr<Kernel> make_roi_align(const NodeContext& ctx) {
  return std::make_unique<RoiAlignKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(RoiAlign, &make_roi_align, &check_roi_align);

}  // namespace lumen::cpu
