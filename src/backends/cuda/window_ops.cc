// CUDA kernel classes of LpPool, GlobalLpPool, MaxUnpool, Col2Im, RoiAlign and DeformConv: each
// reads its geometry once at compile time (through the schemas' helpers the CPU kernels use, so
// both agree) and launches window_ops.cu's kernels at run time.
#include <memory>
#include <string>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/window_ops.h"
#include "graph/schemas/col2im.h"
#include "graph/schemas/conv_geometry.h"
#include "graph/schemas/sampling.h"

namespace lumen::cuda {

WindowDesc window_desc(const ConvGeometry& g) {
  WindowDesc d;
  for (int i = 0; i < g.spatial; ++i) {
    const int a = 3 - g.spatial + i;
    d.in[a] = g.in[i];
    d.out[a] = g.out[i];
    d.k[a] = g.kernel[i];
    d.stride[a] = g.strides[i];
    d.dilation[a] = g.dilations[i];
    d.pad_begin[a] = g.pad_begin[i];
  }
  return d;
}

namespace {

// float16, bfloat16, float32 or float64 data and static shapes.
std::string check_float_any(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (!is_gpu_float(t) && t != DType::kFloat64) return std::string(dtype_name(t)) + " data";
  return check_static_shapes(ctx);
}

// ---- LpPool, GlobalLpPool ----

std::string check_lp_pool(const NodeContext& ctx) {
  const int rank = ctx.input_shape(0).rank();
  if (rank < 3 || rank > 5) return "only 1-D to 3-D windows";
  return check_float_any(ctx);
}

std::unique_ptr<Kernel> make_lp_pool(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const ConvGeometry g =
      window_geometry(ctx, x, ctx.attr_ints("kernel_shape"), ctx.attr_int("ceil_mode", 0) != 0);
  const WindowDesc d = window_desc(g);
  const int64_t planes = x[0] * x[1];
  const float p = ctx.attr_float("p", 2.0f);
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_lp_pool(e, d, planes, p, in(k, 0), out(k), s);
  });
}

std::string check_global_lp_pool(const NodeContext& ctx) {
  if (ctx.input_shape(0).rank() < 2) return "rank below 2";
  return check_float_any(ctx);
}

std::unique_ptr<Kernel> make_global_lp_pool(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int64_t rows = x[0] * x[1];
  const int64_t n = rows == 0 ? 0 : x.numel() / rows;
  const float p = ctx.attr_float("p", 2.0f);
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_global_lp_pool(e, p, in(k, 0), out(k), rows, n, s);
  });
}

// ---- MaxUnpool: any element type of the generic kernels; int64 indices ----

std::string check_max_unpool(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (t == DType::kBool || !elem_of(t).has_value()) return std::string(dtype_name(t)) + " data";
  if (ctx.input_dtype(1) != DType::kInt64) return "indices must be int64";
  if (ctx.output(0).shape.rank() > 8) return "rank above 8";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_max_unpool(const NodeContext& ctx) {
  const std::vector<int64_t> dims = max_unpool_default_shape(ctx);
  const Shape& out_shape = ctx.output(0).shape;
  UnpoolDesc d;
  d.rank = static_cast<int>(dims.size());
  d.total = 1;
  for (int a = 0; a < d.rank; ++a) {
    d.dims[a] = dims[a];
    d.out_dims[a] = out_shape[a];
    d.total *= dims[a];
    d.reshaped = d.reshaped || dims[a] != out_shape[a];
  }
  d.out_n = out_shape.numel();
  const int64_t n = ctx.input_shape(0).numel();
  const int bytes = element_bytes(ctx.input_dtype(0));
  const IndexCheck check = index_check(ctx);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_max_unpool(bytes, d, in(k, 0), static_cast<const int64_t*>(in(k, 1)), n, out(k), check,
                      s);
  });
}

// ---- Col2Im: every numeric type but bool ----

std::string check_col2im(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (t == DType::kBool || !elem_of(t).has_value()) return std::string(dtype_name(t)) + " data";
  if (ctx.input_value(1) == nullptr || ctx.input_value(2) == nullptr)
    return "image_shape and block_shape must be known at build time";
  if (ctx.output(0).shape.rank() > 8) return "more than 6 spatial axes";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_col2im(const NodeContext& ctx) {
  const Col2ImGeometry g = col2im_geometry(ctx);
  Col2ImDesc d;
  d.rank = static_cast<int>(g.image.size());
  for (int a = 0; a < d.rank; ++a) {
    d.image[a] = g.image[a];
    d.block[a] = g.block[a];
    d.stride[a] = g.strides[a];
    d.dilation[a] = g.dilations[a];
    d.pad_begin[a] = g.pad_begin[a];
    d.counts[a] = g.counts[a];
    d.plane *= g.image[a];
    d.block_size *= g.block[a];
    d.blocks *= g.counts[a];
  }
  d.planes = ctx.input_shape(0)[0] * g.channels;
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_col2im(e, d, in(k, 0), out(k), s);
  });
}

// ---- RoiAlign: float32, mode avg ----

std::string check_roi_align(const NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32 || ctx.input_dtype(1) != DType::kFloat32)
    return "float32 only";
  if (ctx.input_dtype(2) != DType::kInt64) return "batch_indices must be int64";
  if (roi_align_spec(ctx).max) return "mode 'max' is not supported";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_roi_align(const NodeContext& ctx) {
  const RoiAlignSpec spec = roi_align_spec(ctx);
  const Shape& x = ctx.input_shape(0);
  RoiAlignDesc d;
  d.n = x[0];
  d.c = x[1];
  d.h = x[2];
  d.w = x[3];
  d.count = ctx.input_shape(1)[0];
  d.out_h = spec.output_height;
  d.out_w = spec.output_width;
  d.sampling_ratio = spec.sampling_ratio;
  d.spatial_scale = spec.spatial_scale;
  d.half_pixel = spec.half_pixel;
  const IndexCheck check = index_check(ctx);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_roi_align(d, static_cast<const float*>(in(k, 0)), static_cast<const float*>(in(k, 1)),
                     static_cast<const int64_t*>(in(k, 2)), static_cast<float*>(out(k)), check, s);
  });
}

// ---- DeformConv: float32 or float64, 1 to 3 spatial axes ----

std::string check_deform_conv(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (t != DType::kFloat32 && t != DType::kFloat64) return std::string(dtype_name(t)) + " data";
  for (int i = 1; i < 5; ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != t) return "inputs of different types";
  const int rank = ctx.input_shape(0).rank();
  if (rank < 3 || rank > 5) return "only 1 to 3 spatial axes";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_deform_conv(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  const ConvGeometry g = window_geometry(ctx, x, conv_kernel_shape(ctx, w), false);
  DeformConvDesc d;
  d.spatial = g.spatial;
  d.batch = x[0];
  d.channels = x[1];
  d.out_channels = w[0];
  d.group = ctx.attr_int("group", 1);
  d.offset_group = ctx.attr_int("offset_group", 1);
  d.window = window_desc(g);
  const bool is_double = ctx.input_dtype(0) == DType::kFloat64;
  const bool has_bias = ctx.has_input(3), has_mask = ctx.has_input(4);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_deform_conv(is_double, d, in(k, 0), in(k, 1), in(k, 2), has_bias ? in(k, 3) : nullptr,
                       has_mask ? in(k, 4) : nullptr, out(k), s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(LpPool, &make_lp_pool, &check_lp_pool);
LUMEN_REGISTER_CUDA_KERNEL(GlobalLpPool, &make_global_lp_pool, &check_global_lp_pool);
LUMEN_REGISTER_CUDA_KERNEL(MaxUnpool, &make_max_unpool, &check_max_unpool);
LUMEN_REGISTER_CUDA_KERNEL(Col2Im, &make_col2im, &check_col2im);
LUMEN_REGISTER_CUDA_KERNEL(RoiAlign, &make_roi_align, &check_roi_align);
LUMEN_REGISTER_CUDA_KERNEL(DeformConv, &make_deform_conv, &check_deform_conv);

}  // namespace lumen::cuda
