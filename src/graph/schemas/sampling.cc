// Schemas of the sampling ops GridSample (opset 16), RoiAlign (opset 16), LRN (opset 13) and
// MaxUnpool (opset 11): attribute checks and output shapes per the ONNX spec.
#include <string>

#include "graph/schema.h"
#include "graph/schemas/sampling.h"

namespace lumen {
namespace {

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void require_floating(const InferContext& ctx, int i, const char* what) {
  if (!is_floating(ctx.input_dtype(i)))
    ctx.fail_shape(std::string(what) + " must be a floating-point tensor, not " +
                   dtype_name(ctx.input_dtype(i)));
}

void infer_grid_sample(InferContext& ctx) {
  grid_sample_spec(ctx);
  require_floating(ctx, 0, "X");
  require_floating(ctx, 1, "grid");
  const Shape& x = ctx.input_shape(0);
  const Shape& grid = ctx.input_shape(1);
  if (x.rank() == 5) {  // volumetric (opset 20): a grid of (x, y, z) points
    if (grid.rank() != 5 || grid[0] != x[0] || grid[4] != 3)
      ctx.fail_shape("grid must be (N, D_out, H_out, W_out, 3) with N = " + std::to_string(x[0]) +
                     ", got " + grid.to_string());
    if (ctx.attr_string("mode", "bilinear") == "cubic" ||
        ctx.attr_string("mode", "bilinear") == "bicubic")
      ctx.fail_unsupported("cubic sampling is defined for 4-D input only");
    ctx.set_output(0, ctx.input_dtype(0), Shape{x[0], x[1], grid[1], grid[2], grid[3]});
    return;
  }
  if (x.rank() != 4)
    ctx.fail_shape("X must be (N, C, H, W) or (N, C, D, H, W), got " + x.to_string());
  if (grid.rank() != 4 || grid[0] != x[0] || grid[3] != 2)
    ctx.fail_shape("grid must be (N, H_out, W_out, 2) with N = " + std::to_string(x[0]) + ", got " +
                   grid.to_string());
  ctx.set_output(0, ctx.input_dtype(0), Shape{x[0], x[1], grid[1], grid[2]});
}

void infer_roi_align(InferContext& ctx) {
  RoiAlignSpec spec = roi_align_spec(ctx);
  require_floating(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  const Shape& rois = ctx.input_shape(1);
  const Shape& idx = ctx.input_shape(2);
  if (x.rank() != 4) ctx.fail_shape("X must be (N, C, H, W), got " + x.to_string());
  if (ctx.input_dtype(1) != ctx.input_dtype(0))
    ctx.fail_shape(std::string("rois is ") + dtype_name(ctx.input_dtype(1)) + " but X is " +
                   dtype_name(ctx.input_dtype(0)));
  if (rois.rank() != 2 || rois[1] != 4)
    ctx.fail_shape("rois must be (num_rois, 4), got " + rois.to_string());
  if (ctx.input_dtype(2) != DType::kInt64)
    ctx.fail_shape(std::string("batch_indices must be int64, not ") +
                   dtype_name(ctx.input_dtype(2)));
  if (idx.rank() != 1 || idx[0] != rois[0])
    ctx.fail_shape("batch_indices must be (" + std::to_string(rois[0]) + "), got " +
                   idx.to_string());
  ctx.set_output(0, ctx.input_dtype(0),
                 Shape{rois[0], x[1], spec.output_height, spec.output_width});
}

void infer_lrn(InferContext& ctx) {
  lrn_spec(ctx);
  require_floating(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  if (x.rank() < 2) ctx.fail_shape("X must be (N, C, ...), got " + x.to_string());
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_max_unpool(InferContext& ctx) {
  require_floating(ctx, 0, "X");
  const Shape& x = ctx.input_shape(0);
  if (ctx.input_dtype(1) != DType::kInt64)
    ctx.fail_shape(std::string("I must be int64, not ") + dtype_name(ctx.input_dtype(1)));
  if (!(ctx.input_shape(1) == x))
    ctx.fail_shape("I " + ctx.input_shape(1).to_string() + " must have the shape of X " +
                   x.to_string());
  std::vector<int64_t> out = max_unpool_default_shape(ctx);
  if (ctx.has_input(2)) {
    std::vector<int64_t> given = ctx.input_ints(2, "output_shape");
    if (given.size() != out.size())
      ctx.fail_shape("output_shape " + list_string(given) + " must have " +
                     std::to_string(out.size()) + " entries");
    for (size_t i = 0; i < out.size(); ++i)
      if (i < 2 ? given[i] != out[i] : given[i] < out[i])
        ctx.fail_shape("output_shape " + list_string(given) +
                       " must keep N and C and be at least " + list_string(out));
    out = given;
  }
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

}  // namespace

std::vector<int64_t> max_unpool_default_shape(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank() < 3) ctx.fail_shape("X must be (N, C, spatial...), got " + x.to_string());
  int spatial = x.rank() - 2;
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (static_cast<int>(kernel.size()) != spatial)
    ctx.fail_model("kernel_shape " + list_string(kernel) + " has " + std::to_string(kernel.size()) +
                   " values for " + std::to_string(spatial) + " spatial dimensions");
  std::vector<int64_t> strides = ctx.attr_ints("strides", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  if (static_cast<int>(strides.size()) != spatial)
    ctx.fail_model("strides " + list_string(strides) + " must have " + std::to_string(spatial) +
                   " values");
  if (static_cast<int>(pads.size()) != 2 * spatial)
    ctx.fail_model("pads " + list_string(pads) + " must have " + std::to_string(2 * spatial) +
                   " values");
  std::vector<int64_t> out = {x[0], x[1]};
  for (int i = 0; i < spatial; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || pads[i] < 0 || pads[i + spatial] < 0)
      ctx.fail_model("kernel_shape and strides must be positive and pads not negative");
    int64_t len = (x[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + spatial];
    if (len < 1) ctx.fail_shape("the pads leave no output along spatial axis " + std::to_string(i));
    out.push_back(len);
  }
  return out;
}

GridSampleSpec grid_sample_spec(const NodeContext& ctx) {
  GridSampleSpec spec;
  std::string mode = ctx.attr_string("mode", "bilinear");
  if (mode == "bilinear" || mode == "linear") {
    spec.mode = GridSampleMode::kBilinear;
  } else if (mode == "nearest") {
    spec.mode = GridSampleMode::kNearest;
  } else if (mode == "bicubic" || mode == "cubic") {
    spec.mode = GridSampleMode::kBicubic;
  } else {
    ctx.fail_model("mode must be bilinear, nearest or bicubic, not '" + mode + "'");
  }
  std::string pad = ctx.attr_string("padding_mode", "zeros");
  if (pad == "zeros") {
    spec.padding = GridSamplePadding::kZeros;
  } else if (pad == "border") {
    spec.padding = GridSamplePadding::kBorder;
  } else if (pad == "reflection") {
    spec.padding = GridSamplePadding::kReflection;
  } else {
    ctx.fail_model("padding_mode must be zeros, border or reflection, not '" + pad + "'");
  }
  int64_t align = ctx.attr_int("align_corners", 0);
  if (align != 0 && align != 1)
    ctx.fail_model("align_corners must be 0 or 1, got " + std::to_string(align));
  spec.align_corners = align != 0;
  return spec;
}

RoiAlignSpec roi_align_spec(const NodeContext& ctx) {
  RoiAlignSpec spec;
  std::string coord = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord != "half_pixel" && coord != "output_half_pixel")
    ctx.fail_model("coordinate_transformation_mode must be half_pixel or output_half_pixel, not '" +
                   coord + "'");
  spec.half_pixel = coord == "half_pixel";
  std::string mode = ctx.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") ctx.fail_model("mode must be avg or max, not '" + mode + "'");
  spec.max = mode == "max";
  spec.output_height = ctx.attr_int("output_height", 1);
  spec.output_width = ctx.attr_int("output_width", 1);
  if (spec.output_height < 1 || spec.output_width < 1)
    ctx.fail_model("output_height and output_width must be positive");
  spec.sampling_ratio = ctx.attr_int("sampling_ratio", 0);
  if (spec.sampling_ratio < 0) ctx.fail_model("sampling_ratio must not be negative");
  spec.spatial_scale = ctx.attr_float("spatial_scale", 1.0f);
  return spec;
}

LrnSpec lrn_spec(const NodeContext& ctx) {
  LrnSpec spec;
  spec.size = ctx.attr_int("size");
  if (spec.size < 1) ctx.fail_model("size must be positive, got " + std::to_string(spec.size));
  spec.alpha = ctx.attr_float("alpha", 1e-4f);
  spec.beta = ctx.attr_float("beta", 0.75f);
  spec.bias = ctx.attr_float("bias", 1.0f);
  return spec;
}

LUMEN_REGISTER_SCHEMA(GridSample, {.min_inputs = 2,
                                   .max_inputs = 2,
                                   .attrs = {{"align_corners", AttrType::kInt},
                                             {"mode", AttrType::kString},
                                             {"padding_mode", AttrType::kString}},
                                   .infer = &infer_grid_sample});

LUMEN_REGISTER_SCHEMA(RoiAlign, {.min_inputs = 3,
                                 .max_inputs = 3,
                                 .attrs = {{"coordinate_transformation_mode", AttrType::kString},
                                           {"mode", AttrType::kString},
                                           {"output_height", AttrType::kInt},
                                           {"output_width", AttrType::kInt},
                                           {"sampling_ratio", AttrType::kInt},
                                           {"spatial_scale", AttrType::kFloat}},
                                 .infer = &infer_roi_align});

LUMEN_REGISTER_SCHEMA(LRN, {.min_inputs = 1,
                            .max_inputs = 1,
                            .attrs = {{"alpha", AttrType::kFloat},
                                      {"beta", AttrType::kFloat},
                                      {"bias", AttrType::kFloat},
                                      {"size", AttrType::kInt, true}},
                            .infer = &infer_lrn});

LUMEN_REGISTER_SCHEMA(MaxUnpool, {.min_inputs = 2,
                                  .max_inputs = 3,
                                  .attrs = {{"kernel_shape", AttrType::kInts, true},
                                            {"pads", AttrType::kInts},
                                            {"strides", AttrType::kInts}},
                                  .infer = &infer_max_unpool});

}  // namespace lumen
