// CUDA kernels of Resize, GridSample and AffineGrid (image_ops.cu), float32 or 16-bit storage.
//   - Resize: every mode, nearest_mode, coordinate_transformation_mode (tf_crop_and_resize with a
//     constant roi), cubic_coeff_a, exclude_outside, antialias, axes and keep_aspect_ratio_policy,
//     at any rank up to kMaxRank. The per-axis taps are the CPU kernel's (resize_taps.h), worked
//     out once at compile time and kept on the device; a run blends them per output element.
//     Scales or sizes are constants (the schema requires it); shapes must be static.
//   - GridSample: 4-D (linear, nearest, cubic) and 5-D (linear, nearest), zeros, border and
//     reflection padding, align_corners; X and grid of one storage.
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/image_ops.h"
#include "backends/resize_taps.h"
#include "graph/schemas/movement.h"
#include "graph/schemas/sampling.h"

namespace lumen::cuda {
namespace {

// ---- Resize ----

class ResizeKernel final : public Kernel {
 public:
  explicit ResizeKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const ResizeSpec spec = resize_spec(ctx);
    const Shape& x = ctx.input_shape(0);
    const int rank = x.rank();
    storage_ = storage_of(ctx.input_dtype(0));
    // The output shape inferred from float32 scales: a 16-bit compile has rounded them since.
    const Shape& y = ctx.output(0).shape;
    n_ = y.numel();
    std::vector<std::pair<double, double>> roi(rank, {0.0, 1.0});
    if (spec.coord == ResizeCoord::kTfCropAndResize) {
      roi = resize_roi(ctx, rank);
      desc_.extrapolation = ctx.attr_float("extrapolation_value", 0.0f);
    }
    desc_.rank = rank;
    std::vector<int64_t> idx;
    std::vector<float> wt;
    int64_t stride = 1;
    for (int a = rank - 1; a >= 0; --a) {
      desc_.in_strides[a] = stride;
      stride *= x[a];
    }
    for (int a = 0; a < rank; ++a) {
      const int64_t out = y[a];
      ResizeAxisMap m = resize_axis_map(spec, ctx, x[a], out, spec.scales[a], roi[a]);
      desc_.out_dims[a] = out;
      desc_.taps[a] = m.taps;
      desc_.map[a] = static_cast<int64_t>(idx.size());
      for (int64_t o = 0; o < out; ++o)
        for (int j = 0; j < m.taps; ++j) {
          const bool outside = m.any_outside && m.outside[o];
          idx.push_back(outside ? -1 : m.idx[o * m.taps + j]);
          wt.push_back(m.wt[o * m.taps + j]);
        }
    }
    if (n_ == 0) return;
    if (idx.empty()) {  // rank 0: one element, no axis
      idx.push_back(0);
      wt.push_back(1.f);
    }
    const Device dev = Device::cuda();
    idx_ = Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(idx.size())}, idx).to(dev);
    wt_ = Tensor::from_vector<float>(Shape{static_cast<int64_t>(wt.size())}, wt).to(dev);
  }

  void run(KernelContext& ctx) const override {
    if (n_ == 0) return;
    launch_resize(storage_, desc_, static_cast<const int64_t*>(idx_.raw_data()),
                  static_cast<const float*>(wt_.raw_data()), ctx.inputs[0].raw_data(),
                  ctx.outputs[0].raw_data(), n_, stream_of(ctx));
    check_launch(where_);
  }

 private:
  std::string where_;
  Storage storage_ = Storage::kFloat32;
  ResizeDesc desc_;
  int64_t n_ = 0;
  Tensor idx_, wt_;  // the axes' tables on the device
};

std::string check_resize(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (!is_gpu_float(t))
    return std::string("input X is ") + dtype_name(t) +
           "; the CUDA kernel takes float32, float16 or bfloat16";
  const Shape& x = ctx.input_shape(0);
  if (!x.is_static() || !ctx.output(0).shape.is_static())
    return "the shapes are known only at run time";
  if (x.rank() > kMaxRank) return "rank above " + std::to_string(kMaxRank);
  const ResizeSpec spec = resize_spec(ctx);
  if (spec.coord == ResizeCoord::kTfCropAndResize &&
      (!ctx.has_input(1) || ctx.input_value(1) == nullptr))
    return "tf_crop_and_resize needs its roi known at build time";
  return "";
}

std::unique_ptr<Kernel> make_resize(const NodeContext& ctx) {
  return std::make_unique<ResizeKernel>(ctx);
}

// ---- GridSample ----

class GridSampleKernel final : public Kernel {
 public:
  explicit GridSampleKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const GridSampleSpec spec = grid_sample_spec(ctx);
    const Shape& x = ctx.input_shape(0);
    const Shape& g = ctx.input_shape(1);
    storage_ = storage_of(ctx.input_dtype(0));
    desc_.volumetric = x.rank() == 5;
    const int k = desc_.volumetric ? 1 : 0;
    desc_.n = x[0];
    desc_.c = x[1];
    desc_.d = desc_.volumetric ? x[2] : 1;
    desc_.h = x[2 + k];
    desc_.w = x[3 + k];
    desc_.od = desc_.volumetric ? g[1] : 1;
    desc_.oh = g[1 + k];
    desc_.ow = g[2 + k];
    desc_.mode = spec.mode == GridSampleMode::kBilinear  ? 0
                 : spec.mode == GridSampleMode::kNearest ? 1
                                                         : 2;
    desc_.padding = spec.padding == GridSamplePadding::kZeros    ? 0
                    : spec.padding == GridSamplePadding::kBorder ? 1
                                                                 : 2;
    desc_.align_corners = spec.align_corners;
  }

  void run(KernelContext& ctx) const override {
    launch_grid_sample(storage_, desc_, ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(),
                       ctx.outputs[0].raw_data(), stream_of(ctx));
    check_launch(where_);
  }

 private:
  std::string where_;
  Storage storage_ = Storage::kFloat32;
  GridSampleDesc desc_;
};

std::string check_grid_sample(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  const int rank = ctx.input_shape(0).rank();
  if (rank != 4 && rank != 5) return "4-D or 5-D input only";
  if (rank == 5 && grid_sample_spec(ctx).mode == GridSampleMode::kBicubic)
    return "cubic sampling of 5-D input";
  return "";
}

std::unique_ptr<Kernel> make_grid_sample(const NodeContext& ctx) {
  return std::make_unique<GridSampleKernel>(ctx);
}

// ---- AffineGrid ----

class AffineGridKernel final : public Kernel {
 public:
  explicit AffineGridKernel(const NodeContext& ctx)
      : where_(ctx.where()), st_(storage_of(ctx.input_dtype(0))) {
    const Shape& out = ctx.output(0).shape;
    d_.dims = static_cast<int>(out[-1]);
    d_.n = out[0];
    d_.w = out[d_.dims];
    d_.h = out[d_.dims - 1];
    d_.d = d_.dims == 3 ? out[1] : 1;
    d_.align_corners = ctx.attr_int("align_corners", 0) == 1;
  }
  void run(KernelContext& ctx) const override {
    launch_affine_grid(st_, d_, ctx.inputs[0].raw_data(), ctx.outputs[0].raw_data(),
                       stream_of(ctx));
    check_launch(where_);
  }

 private:
  std::string where_;
  Storage st_;
  AffineGridDesc d_;
};

std::string check_affine_grid(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (!is_gpu_float(t)) return std::string("theta is ") + dtype_name(t);
  if (!ctx.output(0).shape.is_static()) return "the output shape is known only at run time";
  const int64_t dims = ctx.output(0).shape[-1];
  if (dims != 2 && dims != 3) return "2-D or 3-D grids only";
  return "";
}

std::unique_ptr<Kernel> make_affine_grid(const NodeContext& ctx) {
  return std::make_unique<AffineGridKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(Resize, &make_resize, &check_resize);
LUMEN_REGISTER_CUDA_KERNEL(GridSample, &make_grid_sample, &check_grid_sample);
LUMEN_REGISTER_CUDA_KERNEL(AffineGrid, &make_affine_grid, &check_affine_grid);

}  // namespace lumen::cuda
