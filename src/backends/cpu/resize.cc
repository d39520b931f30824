// CPU Resize for float32: nearest (every nearest_mode), N-linear and N-cubic interpolation
// (cubic_coeff_a, exclude_outside) over any set of resized axes, with every
// coordinate_transformation_mode including tf_crop_and_resize (roi, extrapolation_value).
// Per-axis source indices and weights (resize_taps.h) are computed once at compile time; a run
// walks output rows, combining the weighted source rows of the outer resized axes, then samples the
// last axis.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel_registry.h"
#include "backends/resize_taps.h"
#include "graph/schemas/movement.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelElements = 1 << 15;

class ResizeKernel final : public Kernel {
 public:
  explicit ResizeKernel(const NodeContext& ctx) {
    ResizeSpec spec = resize_spec(ctx);
    in_dims_ = ctx.input_shape(0).dims();
    out_dims_ = spec.output.dims();
    int rank = static_cast<int>(in_dims_.size());
    std::vector<std::pair<double, double>> roi(rank, {0.0, 1.0});
    if (spec.coord == ResizeCoord::kTfCropAndResize) {
      roi = resize_roi(ctx, rank);
      extrapolation_ = ctx.attr_float("extrapolation_value", 0.0f);
    }
    in_strides_.assign(rank, 1);
    for (int a = rank - 2; a >= 0; --a) in_strides_[a] = in_strides_[a + 1] * in_dims_[a + 1];
    for (int a = 0; a < rank; ++a)
      maps_.push_back(
          resize_axis_map(spec, ctx, in_dims_[a], out_dims_[a], spec.scales[a], roi[a]));
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
          const ResizeAxisMap& m = maps_[a];
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
                 const std::vector<float>& wt, const ResizeAxisMap& last, float* tmp,
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
  std::vector<ResizeAxisMap> maps_;
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
