// Schemas of the data-movement ops Transpose, Slice, Gather, Expand, Tile, Pad and Resize, and the
// resolution of their attributes and build-time inputs (movement.h) that the CPU kernels share.
#include "graph/schemas/movement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

std::string list_string(const std::vector<int64_t>& v) {
  return Shape(v).to_string();
}

// Wraps a possibly negative axis; an axis outside [-rank, rank) is a malformed model.
int resolve_axis(const NodeContext& ctx, int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank)
    ctx.fail_model(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Resolves an axes list (negative allowed) and rejects repeats.
std::vector<int> resolve_axes(const NodeContext& ctx, const std::vector<int64_t>& axes, int rank,
                              const char* what) {
  std::vector<int> out;
  std::vector<bool> seen(rank, false);
  for (int64_t a : axes) {
    int axis = resolve_axis(ctx, a, rank, what);
    if (seen[axis]) ctx.fail_model(std::string(what) + " repeat axis " + std::to_string(axis));
    seen[axis] = true;
    out.push_back(axis);
  }
  return out;
}

void require_1d(const NodeContext& ctx, int i, const char* what) {
  if (ctx.input_shape(i).rank() != 1)
    ctx.fail_shape(std::string("the ") + what + " input must be 1-D, got shape " +
                   ctx.input_shape(i).to_string());
}

// --- Transpose ---

void infer_transpose(InferContext& ctx) {
  std::vector<int64_t> perm = transpose_perm(ctx);
  const Shape& in = ctx.input_shape(0);
  std::vector<int64_t> out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in.dims()[perm[i]];
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(out)));
}

// --- Slice ---

void infer_slice(InferContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(0), slice_spec(ctx).output);
}

// --- Gather ---

void infer_gather(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& indices = ctx.input_shape(1);
  if (data.rank() < 1) ctx.fail_shape("data must have rank >= 1, got a scalar");
  DType idt = ctx.input_dtype(1);
  if (idt != DType::kInt64 && idt != DType::kInt32)
    ctx.fail_shape(std::string("indices must be int64 or int32, not ") + dtype_name(idt));
  int axis = resolve_axis(ctx, ctx.attr_int("axis", 0), data.rank(), "axis");
  int64_t dim = data.dims()[axis];
  // Indices known now are checked now; others are checked by the kernel before it writes.
  if (ctx.input_value(1) != nullptr)
    for (int64_t k : ctx.input_ints(1, "indices"))
      if (k < -dim || k >= dim)
        ctx.fail_model("index " + std::to_string(k) + " is out of range for axis " +
                       std::to_string(axis) + " of size " + std::to_string(dim));
  std::vector<int64_t> out(data.dims().begin(), data.dims().begin() + axis);
  out.insert(out.end(), indices.dims().begin(), indices.dims().end());
  out.insert(out.end(), data.dims().begin() + axis + 1, data.dims().end());
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(out)));
}

// --- Expand ---

void infer_expand(InferContext& ctx) {
  require_1d(ctx, 1, "shape");
  std::vector<int64_t> shape = ctx.input_ints(1, "shape");
  for (int64_t d : shape)
    if (d < 0) ctx.fail_shape("shape " + list_string(shape) + " has a negative dimension");
  const Shape& in = ctx.input_shape(0);
  int r = std::max(in.rank(), static_cast<int>(shape.size()));
  std::vector<int64_t> out(r);
  for (int i = 0; i < r; ++i) {
    int ia = in.rank() - r + i, ib = static_cast<int>(shape.size()) - r + i;
    int64_t da = ia >= 0 ? in.dims()[ia] : 1;
    int64_t db = ib >= 0 ? shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      ctx.fail_shape("input shape " + in.to_string() + " cannot be expanded to " +
                     list_string(shape));
    out[i] = da == 1 ? db : da;
  }
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(out)));
}

// --- Tile ---

void infer_tile(InferContext& ctx) {
  require_1d(ctx, 1, "repeats");
  std::vector<int64_t> repeats = ctx.input_ints(1, "repeats");
  const Shape& in = ctx.input_shape(0);
  if (static_cast<int>(repeats.size()) != in.rank())
    ctx.fail_shape("repeats " + list_string(repeats) + " must have one entry per axis of " +
                   in.to_string());
  std::vector<int64_t> out(in.rank());
  for (int i = 0; i < in.rank(); ++i) {
    if (repeats[i] < 0) ctx.fail_model("repeats " + list_string(repeats) + " has a negative entry");
    if (__builtin_mul_overflow(in.dims()[i], repeats[i], &out[i]))
      ctx.fail_shape("repeats " + list_string(repeats) + " overflow the output size");
  }
  ctx.set_output(0, ctx.input_dtype(0), Shape(std::move(out)));
}

// --- Pad ---

void infer_pad(InferContext& ctx) {
  PadSpec spec = pad_spec(ctx);
  if (ctx.has_input(2)) {
    if (ctx.input_dtype(2) != ctx.input_dtype(0))
      ctx.fail_shape(std::string("constant_value is ") + dtype_name(ctx.input_dtype(2)) +
                     ", data is " + dtype_name(ctx.input_dtype(0)));
    if (ctx.input_shape(2).numel() != 1)
      ctx.fail_shape("constant_value must hold one value, got shape " +
                     ctx.input_shape(2).to_string());
  }
  ctx.set_output(0, ctx.input_dtype(0), spec.output);
}

// --- Resize ---

void infer_resize(InferContext& ctx) {
  ResizeSpec spec = resize_spec(ctx);
  if (spec.coord == ResizeCoord::kTfCropAndResize) {
    if (!ctx.has_input(1) || ctx.input_shape(1).numel() == 0)
      ctx.fail_model("coordinate_transformation_mode 'tf_crop_and_resize' needs the roi input");
    if (ctx.input_value(1) == nullptr)
      ctx.fail_shape("the roi input must be known when the graph is built");
  }
  ctx.set_output(0, ctx.input_dtype(0), spec.output);
}

}  // namespace

std::vector<int64_t> transpose_perm(const NodeContext& ctx) {
  int rank = ctx.input_shape(0).rank();
  std::vector<int64_t> perm(rank);
  for (int i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
  if (ctx.has_attr("perm")) perm = ctx.attr_ints("perm");
  if (static_cast<int>(perm.size()) != rank)
    ctx.fail_model("perm " + list_string(perm) + " has " + std::to_string(perm.size()) +
                   " entries for an input of rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      ctx.fail_model("perm " + list_string(perm) + " is not a permutation of the input's axes");
    seen[p] = true;
  }
  return perm;
}

SliceSpec slice_spec(const NodeContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  int rank = in.rank();
  require_1d(ctx, 1, "starts");
  require_1d(ctx, 2, "ends");
  std::vector<int64_t> starts = ctx.input_ints(1, "starts");
  std::vector<int64_t> ends = ctx.input_ints(2, "ends");
  size_t n = starts.size();
  if (ends.size() != n)
    ctx.fail_shape("starts has " + std::to_string(n) + " entries, ends " +
                   std::to_string(ends.size()));
  std::vector<int64_t> axes_in(n);
  for (size_t i = 0; i < n; ++i) axes_in[i] = static_cast<int64_t>(i);
  if (ctx.has_input(3)) {
    require_1d(ctx, 3, "axes");
    axes_in = ctx.input_ints(3, "axes");
  }
  std::vector<int64_t> steps_in(n, 1);
  if (ctx.has_input(4)) {
    require_1d(ctx, 4, "steps");
    steps_in = ctx.input_ints(4, "steps");
  }
  if (axes_in.size() != n || steps_in.size() != n)
    ctx.fail_shape("starts, ends, axes and steps must have the same length");
  std::vector<int> axes = resolve_axes(ctx, axes_in, rank, "axes");

  SliceSpec spec;
  spec.starts.assign(rank, 0);
  spec.steps.assign(rank, 1);
  std::vector<int64_t> out = in.dims();
  for (size_t i = 0; i < n; ++i) {
    int axis = axes[i];
    int64_t d = in.dims()[axis];
    int64_t step = steps_in[i];
    if (step == 0) ctx.fail_model("steps must not be 0");
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += d;  // cannot overflow: start >= INT64_MIN and d >= 0
    if (end < 0) end += d;
    int64_t count;
    if (d == 0) {
      count = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, d);
      end = std::clamp<int64_t>(end, 0, d);
      count = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, d - 1);
      end = std::clamp<int64_t>(end, -1, d - 1);
      // |step| as a positive int64 (INT64_MIN's magnitude does not fit, and any |step| > d
      // takes one element, so INT64_MAX stands in for it).
      int64_t mag =
          step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
      count = start > end ? (start - end - 1) / mag + 1 : 0;
    }
    spec.starts[axis] = count > 0 ? start : 0;
    spec.steps[axis] = count > 1 ? step : 1;  // so stride * step never overflows
    out[axis] = count;
  }
  spec.output = Shape(std::move(out));
  return spec;
}

PadSpec pad_spec(const NodeContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  int rank = in.rank();
  PadSpec spec;
  std::string mode = ctx.attr_string("mode", "constant");
  if (mode == "constant") {
    spec.mode = PadMode::kConstant;
  } else if (mode == "reflect") {
    spec.mode = PadMode::kReflect;
  } else if (mode == "edge") {
    spec.mode = PadMode::kEdge;
  } else if (mode == "wrap") {
    spec.mode = PadMode::kWrap;
  } else {
    ctx.fail_model("unknown mode '" + mode + "'");
  }
  require_1d(ctx, 1, "pads");
  std::vector<int64_t> pads = ctx.input_ints(1, "pads");
  std::vector<int> axes(rank);
  for (int i = 0; i < rank; ++i) axes[i] = i;
  if (ctx.has_input(3)) {
    require_1d(ctx, 3, "axes");
    axes = resolve_axes(ctx, ctx.input_ints(3, "axes"), rank, "axes");
  }
  size_t n = axes.size();
  if (pads.size() != 2 * n)
    ctx.fail_shape("pads " + list_string(pads) + " must have " + std::to_string(2 * n) +
                   " entries (begin and end for each of " + std::to_string(n) + " axes)");
  spec.begin.assign(rank, 0);
  spec.end.assign(rank, 0);
  for (size_t i = 0; i < n; ++i) {
    spec.begin[axes[i]] = pads[i];
    spec.end[axes[i]] = pads[i + n];
  }
  std::vector<int64_t> out(rank);
  for (int a = 0; a < rank; ++a) {
    int64_t d = in.dims()[a], b = spec.begin[a], e = spec.end[a];
    if (__builtin_add_overflow(d, b, &out[a]) || __builtin_add_overflow(out[a], e, &out[a]))
      ctx.fail_shape("pads " + list_string(pads) + " overflow the output size");
    if (out[a] < 0)
      ctx.fail_shape("pads " + list_string(pads) + " crop axis " + std::to_string(a) + " of size " +
                     std::to_string(d) + " below zero");
    if (spec.mode == PadMode::kConstant) continue;
    // Cropping comes first; what is left must hold the elements that edge or reflect copy.
    int64_t kept = d + std::min<int64_t>(b, 0) + std::min<int64_t>(e, 0);
    int64_t grow = std::max<int64_t>(std::max<int64_t>(b, 0), std::max<int64_t>(e, 0));
    if (grow > 0 && (spec.mode == PadMode::kEdge || spec.mode == PadMode::kWrap) && kept <= 0)
      ctx.fail_shape(std::string(spec.mode == PadMode::kEdge ? "edge" : "wrap") +
                     " padding of axis " + std::to_string(a) + " has no element to repeat");
    if (grow > 0 && spec.mode == PadMode::kReflect && grow >= kept)
      ctx.fail_shape("reflect padding of axis " + std::to_string(a) + " by " +
                     std::to_string(grow) + " needs a dimension larger than the pad, got " +
                     std::to_string(kept));
  }
  spec.output = Shape(std::move(out));
  return spec;
}

double resize_source_coord(ResizeCoord coord, int64_t x, double scale, int64_t in_len,
                           int64_t out_len) {
  double xr = static_cast<double>(x);
  switch (coord) {
    case ResizeCoord::kHalfPixel:
      return (xr + 0.5) / scale - 0.5;
    case ResizeCoord::kPytorchHalfPixel:
      return out_len > 1 ? (xr + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoord::kAlignCorners: {
      // ONNX measures the resized length as scale * in_len, unrounded (equal to out_len when the
      // model gives sizes).
      double resized = scale * static_cast<double>(in_len);
      return out_len == 1 || resized <= 1.0
                 ? 0.0
                 : xr * static_cast<double>(in_len - 1) / (resized - 1.0);
    }
    case ResizeCoord::kAsymmetric:
      return xr / scale;
    case ResizeCoord::kTfHalfPixel:
      return (xr + 0.5) / scale;
    case ResizeCoord::kHalfPixelSymmetric: {
      // The resized length scale * in_len is rounded down to out_len; the sampling grid is
      // shifted so that the rounding is shared by both ends of the axis.
      const double resized = scale * static_cast<double>(in_len);
      const double adjustment = resized > 0 ? static_cast<double>(out_len) / resized : 1.0;
      const double center = static_cast<double>(in_len) / 2;
      return center * (1 - adjustment) + (xr + 0.5) / scale - 0.5;
    }
    case ResizeCoord::kTfCropAndResize:
      break;
  }
  throw UnsupportedOp(
      "Resize: coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
}

ResizeSpec resize_spec(const NodeContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  int rank = in.rank();
  ResizeSpec spec;
  std::string mode = ctx.attr_string("mode", "nearest");
  if (mode == "nearest") {
    spec.mode = ResizeMode::kNearest;
  } else if (mode == "linear") {
    spec.mode = ResizeMode::kLinear;
  } else if (mode == "cubic") {
    spec.mode = ResizeMode::kCubic;
  } else {
    ctx.fail_model("unknown mode '" + mode + "'");
  }
  std::string coord = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") {
    spec.coord = ResizeCoord::kHalfPixel;
  } else if (coord == "pytorch_half_pixel") {
    spec.coord = ResizeCoord::kPytorchHalfPixel;
  } else if (coord == "align_corners") {
    spec.coord = ResizeCoord::kAlignCorners;
  } else if (coord == "asymmetric") {
    spec.coord = ResizeCoord::kAsymmetric;
  } else if (coord == "tf_half_pixel_for_nearest") {
    spec.coord = ResizeCoord::kTfHalfPixel;
  } else if (coord == "tf_crop_and_resize") {
    spec.coord = ResizeCoord::kTfCropAndResize;
  } else if (coord == "half_pixel_symmetric") {
    spec.coord = ResizeCoord::kHalfPixelSymmetric;
  } else {
    ctx.fail_model("unknown coordinate_transformation_mode '" + coord + "'");
  }
  std::string nearest = ctx.attr_string("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") {
    spec.nearest = ResizeNearest::kRoundPreferFloor;
  } else if (nearest == "round_prefer_ceil") {
    spec.nearest = ResizeNearest::kRoundPreferCeil;
  } else if (nearest == "floor") {
    spec.nearest = ResizeNearest::kFloor;
  } else if (nearest == "ceil") {
    spec.nearest = ResizeNearest::kCeil;
  } else {
    ctx.fail_model("unknown nearest_mode '" + nearest + "'");
  }
  std::string policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    ctx.fail_model("unknown keep_aspect_ratio_policy '" + policy + "'");
  spec.antialias = ctx.attr_int("antialias", 0) != 0;

  std::vector<int> axes(rank);
  for (int i = 0; i < rank; ++i) axes[i] = i;
  if (ctx.has_attr("axes")) axes = resolve_axes(ctx, ctx.attr_ints("axes"), rank, "axes");
  size_t n = axes.size();

  // An empty scales or sizes tensor stands for an omitted input (opset 11 needed a placeholder).
  bool has_scales = ctx.has_input(2) && ctx.input_shape(2).numel() > 0;
  bool has_sizes = ctx.has_input(3) && ctx.input_shape(3).numel() > 0;
  if (has_scales == has_sizes)
    ctx.fail_model(has_scales ? "takes scales or sizes, not both" : "needs scales or sizes");
  spec.scales.assign(rank, 1.0);
  std::vector<int64_t> out = in.dims();
  if (has_scales) {
    require_1d(ctx, 2, "scales");
    const Tensor* t = ctx.input_value(2);
    if (t == nullptr) ctx.fail_shape("the scales input must be known when the graph is built");
    // A float16 (bfloat16) compile narrows the scales of a node placed on the GPU
    // (runtime/half_storage.cc); those kernels take the output shape inferred before.
    const bool narrowed = t->dtype() == DType::kFloat16 || t->dtype() == DType::kBFloat16;
    if (t->dtype() != DType::kFloat32 && !narrowed)
      ctx.fail_model(std::string("scales must be float32, not ") + dtype_name(t->dtype()));
    if (static_cast<size_t>(t->numel()) != n)
      ctx.fail_shape("scales has " + std::to_string(t->numel()) + " entries for " +
                     std::to_string(n) + " axes");
    for (size_t i = 0; i < n; ++i) {
      double s = t->item_as_double(static_cast<int64_t>(i));
      if (!(s > 0) || !std::isfinite(s)) ctx.fail_model("scales must be positive and finite");
      int a = axes[i];
      spec.scales[a] = s;
      double len = std::floor(static_cast<double>(in.dims()[a]) * s);
      if (len > 0x1p62) ctx.fail_shape("scales make axis " + std::to_string(a) + " too large");
      out[a] = static_cast<int64_t>(len);
    }
  } else {
    require_1d(ctx, 3, "sizes");
    std::vector<int64_t> sizes = ctx.input_ints(3, "sizes");
    if (sizes.size() != n)
      ctx.fail_shape("sizes has " + std::to_string(sizes.size()) + " entries for " +
                     std::to_string(n) + " axes");
    for (size_t i = 0; i < n; ++i) {
      int a = axes[i];
      if (sizes[i] < 0) ctx.fail_shape("sizes " + list_string(sizes) + " has a negative entry");
      out[a] = sizes[i];
      int64_t d = in.dims()[a];
      spec.scales[a] = d > 0 ? static_cast<double>(sizes[i]) / static_cast<double>(d) : 1.0;
    }
    if (policy != "stretch") {
      // One scale for every resized axis, the smallest (not_larger: the result fits inside
      // sizes) or the largest (not_smaller: it covers sizes); lengths round half up.
      double common = spec.scales[axes[0]];
      for (size_t i = 1; i < n; ++i)
        common = policy == "not_larger" ? std::min(common, spec.scales[axes[i]])
                                        : std::max(common, spec.scales[axes[i]]);
      for (size_t i = 0; i < n; ++i) {
        int a = axes[i];
        spec.scales[a] = common;
        out[a] = static_cast<int64_t>(std::floor(common * static_cast<double>(in.dims()[a]) + 0.5));
      }
    }
  }
  for (int a = 0; a < rank; ++a)
    if (in.dims()[a] == 0 && out[a] > 0)
      ctx.fail_shape("cannot resize an empty axis " + std::to_string(a) + " to size " +
                     std::to_string(out[a]));
  spec.output = Shape(std::move(out));
  return spec;
}

LUMEN_REGISTER_SCHEMA(Transpose, {.min_inputs = 1,
                                  .max_inputs = 1,
                                  .attrs = {{"perm", AttrType::kInts}},
                                  .infer = &infer_transpose});
LUMEN_REGISTER_SCHEMA(Slice,
                      {.min_inputs = 3, .max_inputs = 5, .attrs = {}, .infer = &infer_slice});
LUMEN_REGISTER_SCHEMA(Gather, {.min_inputs = 2,
                               .max_inputs = 2,
                               .attrs = {{"axis", AttrType::kInt}},
                               .infer = &infer_gather});
LUMEN_REGISTER_SCHEMA(Expand,
                      {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_expand});
LUMEN_REGISTER_SCHEMA(Tile, {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_tile});
LUMEN_REGISTER_SCHEMA(Pad, {.min_inputs = 2,
                            .max_inputs = 4,
                            .attrs = {{"mode", AttrType::kString}},
                            .infer = &infer_pad});
LUMEN_REGISTER_SCHEMA(Resize, {.min_inputs = 1,
                               .max_inputs = 4,
                               .attrs = {{"mode", AttrType::kString},
                                         {"coordinate_transformation_mode", AttrType::kString},
                                         {"nearest_mode", AttrType::kString},
                                         {"cubic_coeff_a", AttrType::kFloat},
                                         {"exclude_outside", AttrType::kInt},
                                         {"extrapolation_value", AttrType::kFloat},
                                         {"antialias", AttrType::kInt},
                                         {"axes", AttrType::kInts},
                                         {"keep_aspect_ratio_policy", AttrType::kString}},
                               .infer = &infer_resize});

}  // namespace lumen
