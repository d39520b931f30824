// CPU Resize for float32: nearest (every nearest_mode) and N-linear interpolation over any set of
// resized axes (bilinear on NCHW is the common case), with every coordinate_transformation_mode
// but tf_crop_and_resize. Per-axis source indices and weights are computed once at compile time;
// a run walks output rows, combining the 2^k corner rows of the outer resized axes.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/movement.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelElements = 1 << 15;

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

// How one axis is sampled: output coordinate o reads input i0[o] (weight 1 - w[o]) and, when the
// axis interpolates, i1[o] (weight w[o]).
struct AxisMap {
  bool interpolates = false;
  std::vector<int64_t> i0, i1;
  std::vector<float> w;
};

class ResizeKernel final : public Kernel {
 public:
  explicit ResizeKernel(const NodeContext& ctx) {
    ResizeSpec spec = resize_spec(ctx);
    in_dims_ = ctx.input_shape(0).dims();
    out_dims_ = spec.output.dims();
    int rank = static_cast<int>(in_dims_.size());
    in_strides_.assign(rank, 1);
    for (int a = rank - 2; a >= 0; --a) in_strides_[a] = in_strides_[a + 1] * in_dims_[a + 1];
    maps_.resize(rank);
    for (int a = 0; a < rank; ++a) {
      int64_t in = in_dims_[a], out = out_dims_[a];
      AxisMap& m = maps_[a];
      for (int64_t o = 0; o < out; ++o) {
        double x = resize_source_coord(spec.coord, o, spec.scales[a], in, out);
        if (spec.mode == ResizeMode::kNearest) {
          m.i0.push_back(std::clamp<int64_t>(nearest_index(spec.nearest, x), 0, in - 1));
          continue;
        }
        double f = std::floor(x);
        int64_t lo = static_cast<int64_t>(f);
        m.i0.push_back(std::clamp<int64_t>(lo, 0, in - 1));
        m.i1.push_back(std::clamp<int64_t>(lo + 1, 0, in - 1));
        m.w.push_back(static_cast<float>(x - f));
      }
      // A linear axis that reads whole input coordinates only is a plain index map.
      if (spec.mode == ResizeMode::kLinear)
        for (int64_t o = 0; o < out; ++o)
          m.interpolates = m.interpolates || (m.w[o] != 0.0f && m.i0[o] != m.i1[o]);
    }
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
    const AxisMap& last = maps_.back();
    bool parallel = y.numel() >= kParallelElements;
#pragma omp parallel if (parallel)
    {
      // (input offset, weight) of each corner row the current output row blends.
      std::vector<int64_t> off;
      std::vector<float> wt;
      std::vector<float> tmp(static_cast<size_t>(in_dims_.back()));
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows; ++row) {
        off.assign(1, 0);
        wt.assign(1, 1.0f);
        int64_t rest = row;
        for (int a = rank - 2; a >= 0; --a) {
          int64_t o = rest % out_dims_[a];
          rest /= out_dims_[a];
          const AxisMap& m = maps_[a];
          int64_t s = in_strides_[a];
          size_t n = off.size();
          if (m.interpolates && m.w[o] != 0.0f) {
            float w = m.w[o];
            for (size_t c = 0; c < n; ++c) {
              off.push_back(off[c] + m.i1[o] * s);
              wt.push_back(wt[c] * w);
              off[c] += m.i0[o] * s;
              wt[c] *= 1.0f - w;
            }
          } else {
            for (size_t c = 0; c < n; ++c) off[c] += m.i0[o] * s;
          }
        }
        blend_row(src, dst + row * inner, off, wt, last, tmp.data(), in_dims_.back());
      }
    }
  }

 private:
  // Blends the corner rows into one input-length row first (contiguous, so it vectorises), then
  // samples that row along the last axis.
  static void blend_row(const float* src, float* out, const std::vector<int64_t>& off,
                        const std::vector<float>& wt, const AxisMap& last, float* tmp,
                        int64_t in_len) {
    const float* p = src + off[0];
    if (off.size() > 1) {
      float w0 = wt[0];
      for (int64_t k = 0; k < in_len; ++k) tmp[k] = w0 * p[k];
      for (size_t c = 1; c < off.size(); ++c) {
        const float* q = src + off[c];
        float wc = wt[c];
        for (int64_t k = 0; k < in_len; ++k) tmp[k] += wc * q[k];
      }
      p = tmp;
    }
    int64_t n = static_cast<int64_t>(last.i0.size());
    const int64_t* i0 = last.i0.data();
    if (!last.interpolates) {
      for (int64_t j = 0; j < n; ++j) out[j] = p[i0[j]];
      return;
    }
    const int64_t* i1 = last.i1.data();
    const float* w = last.w.data();
    for (int64_t j = 0; j < n; ++j) {
      float a = p[i0[j]], b = p[i1[j]];
      out[j] = a + w[j] * (b - a);
    }
  }

  std::vector<int64_t> in_dims_, out_dims_, in_strides_;
  std::vector<AxisMap> maps_;
};

std::string check_resize(const NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32)
    return std::string("input X is ") + dtype_name(ctx.input_dtype(0)) +
           "; the CPU kernel takes float32";
  ResizeSpec spec = resize_spec(ctx);
  if (spec.mode == ResizeMode::kCubic) return "mode 'cubic' is not supported";
  if (spec.coord == ResizeCoord::kTfCropAndResize)
    return "coordinate_transformation_mode 'tf_crop_and_resize' is not supported";
  if (spec.antialias) return "antialias is not supported";
  return "";
}

std::unique_ptr<Kernel> make_resize(const NodeContext& ctx) {
  return std::make_unique<ResizeKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Resize, &make_resize, &check_resize);

}  // namespace lumen::cpu
