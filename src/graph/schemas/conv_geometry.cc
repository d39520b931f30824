// Window geometry shared by Conv, ConvTranspose and the pools (see conv_geometry.h).
#include "graph/schemas/conv_geometry.h"

#include <algorithm>
#include <string>

namespace lumen {
namespace {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

AutoPad read_auto_pad(const NodeContext& ctx) {
  std::string s = ctx.attr_string("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  ctx.fail_model("auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, not '" + s + "'");
}

std::string list_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// An ints attribute of exactly `count` values, each >= `min_value`, or `count` copies of
// `fallback` when absent.
std::vector<int64_t> read_ints(const NodeContext& ctx, const char* name, size_t count,
                               int64_t fallback, int64_t min_value) {
  std::vector<int64_t> v = ctx.attr_ints(name, std::vector<int64_t>(count, fallback));
  if (v.size() != count)
    ctx.fail_model(std::string(name) + " has " + std::to_string(v.size()) + " values, expected " +
                   std::to_string(count));
  for (int64_t x : v)
    if (x < min_value)
      ctx.fail_model(std::string(name) + " " + list_string(v) +
                     " must be >= " + std::to_string(min_value));
  return v;
}

ConvGeometry base_geometry(const NodeContext& ctx, const Shape& x,
                           const std::vector<int64_t>& kernel) {
  ConvGeometry g;
  g.spatial = x.rank() - 2;
  g.in.assign(x.dims().begin() + 2, x.dims().end());
  g.kernel = kernel;
  if (static_cast<int>(kernel.size()) != g.spatial)
    ctx.fail_model("kernel_shape " + list_string(kernel) + " has " + std::to_string(kernel.size()) +
                   " values for " + std::to_string(g.spatial) + " spatial dimensions");
  for (int64_t k : kernel)
    if (k < 1) ctx.fail_model("kernel_shape " + list_string(kernel) + " must be positive");
  g.strides = read_ints(ctx, "strides", g.spatial, 1, 1);
  g.dilations = read_ints(ctx, "dilations", g.spatial, 1, 1);
  std::vector<int64_t> pads = read_ints(ctx, "pads", 2 * g.spatial, 0, 0);
  g.pad_begin.assign(pads.begin(), pads.begin() + g.spatial);
  g.pad_end.assign(pads.begin() + g.spatial, pads.end());
  return g;
}

}  // namespace

void check_window_input(const NodeContext& ctx, int input, int max_rank) {
  const TensorType& t = ctx.input(input);
  if (!is_floating(t.dtype))
    ctx.fail_shape(std::string("input ") + std::to_string(input) + " must be floating point, not " +
                   dtype_name(t.dtype));
  if (t.shape.rank() < 3 || t.shape.rank() > max_rank)
    ctx.fail_shape("input " + std::to_string(input) + " must be (N, C, spatial...) of rank 3 to " +
                   std::to_string(max_rank) + ", got " + t.shape.to_string());
}

ConvGeometry window_geometry(const NodeContext& ctx, const Shape& x,
                             const std::vector<int64_t>& kernel, bool ceil_mode) {
  ConvGeometry g = base_geometry(ctx, x, kernel);
  AutoPad mode = read_auto_pad(ctx);
  g.out.resize(g.spatial);
  for (int i = 0; i < g.spatial; ++i) {
    int64_t in = g.in[i], s = g.strides[i], ek = g.extent(i);
    if (mode == AutoPad::kSameUpper || mode == AutoPad::kSameLower) {
      g.out[i] = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * s + ek - in);
      int64_t small = total / 2;
      g.pad_begin[i] = mode == AutoPad::kSameUpper ? small : total - small;
      g.pad_end[i] = total - g.pad_begin[i];
      continue;
    }
    if (mode == AutoPad::kValid) g.pad_begin[i] = g.pad_end[i] = 0;
    int64_t padded = in + g.pad_begin[i] + g.pad_end[i];
    if (padded < ek)
      ctx.fail_shape("the kernel (extent " + std::to_string(ek) + " along spatial axis " +
                     std::to_string(i) + ") is larger than the padded input (" +
                     std::to_string(padded) + ") of " + x.to_string());
    bool use_ceil = ceil_mode && mode == AutoPad::kNotSet;
    g.out[i] = (padded - ek + (use_ceil ? s - 1 : 0)) / s + 1;
    // A window that would start inside the right padding is dropped.
    if (use_ceil && (g.out[i] - 1) * s >= in + g.pad_begin[i]) --g.out[i];
  }
  return g;
}

ConvGeometry conv_transpose_geometry(const NodeContext& ctx, const Shape& x,
                                     const std::vector<int64_t>& kernel) {
  ConvGeometry g = base_geometry(ctx, x, kernel);
  AutoPad mode = read_auto_pad(ctx);
  g.output_padding = read_ints(ctx, "output_padding", g.spatial, 0, 0);
  std::vector<int64_t> shape = ctx.attr_ints("output_shape", {});
  if (!shape.empty()) {
    if (static_cast<int>(shape.size()) == g.spatial + 2)
      shape.erase(shape.begin(), shape.begin() + 2);
    if (static_cast<int>(shape.size()) != g.spatial)
      ctx.fail_model("output_shape " + list_string(shape) + " does not have " +
                     std::to_string(g.spatial) + " spatial sizes");
  }
  g.out.resize(g.spatial);
  for (int i = 0; i < g.spatial; ++i) {
    int64_t full = g.strides[i] * (g.in[i] - 1) + g.output_padding[i] + g.extent(i);
    if (!shape.empty() || mode == AutoPad::kSameUpper || mode == AutoPad::kSameLower) {
      g.out[i] = shape.empty() ? g.in[i] * g.strides[i] : shape[i];
      if (g.out[i] < 1) ctx.fail_model("output_shape " + list_string(shape) + " must be positive");
      // An output_shape beyond the positions the input reaches (as onnxruntime and ONNX's
      // reference run it) adds trailing positions that receive only the bias.
      int64_t total = std::max<int64_t>(full - g.out[i], 0);
      // ONNX: SAME_UPPER puts the smaller half first; otherwise the larger half goes first.
      g.pad_begin[i] = mode == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      g.pad_end[i] = total - g.pad_begin[i];
    } else {
      if (mode == AutoPad::kValid) g.pad_begin[i] = g.pad_end[i] = 0;
      g.out[i] = full - g.pad_begin[i] - g.pad_end[i];
      if (g.out[i] < 1)
        ctx.fail_shape("pads " + list_string(g.pad_begin) + " / " + list_string(g.pad_end) +
                       " leave no output along spatial axis " + std::to_string(i));
    }
    // Fold output_padding (and any SAME shortfall) into the end padding.
    g.pad_end[i] = full - g.output_padding[i] - g.pad_begin[i] - g.out[i];
  }
  return g;
}

std::vector<int64_t> conv_kernel_shape(const NodeContext& ctx, const Shape& w) {
  std::vector<int64_t> from_w(w.dims().begin() + 2, w.dims().end());
  if (!ctx.has_attr("kernel_shape")) return from_w;
  std::vector<int64_t> k = ctx.attr_ints("kernel_shape");
  if (k != from_w)
    ctx.fail_shape("kernel_shape " + list_string(k) + " does not match the weight " +
                   w.to_string());
  return k;
}

Shape to_channels_first(const Shape& channels_last) {
  std::vector<int64_t> d = channels_last.dims();
  if (d.size() < 3) return channels_last;
  int64_t c = d.back();
  d.pop_back();
  d.insert(d.begin() + 1, c);
  return Shape(d);
}

Shape to_channels_last(const Shape& channels_first) {
  std::vector<int64_t> d = channels_first.dims();
  if (d.size() < 3) return channels_first;
  int64_t c = d[1];
  d.erase(d.begin() + 1);
  d.push_back(c);
  return Shape(d);
}

bool is_channels_last(const NodeContext& ctx) {
  int64_t v = ctx.attr_int("channels_last", 0);
  if (v != 0 && v != 1) ctx.fail_model("channels_last must be 0 or 1, got " + std::to_string(v));
  return v == 1;
}

}  // namespace lumen
