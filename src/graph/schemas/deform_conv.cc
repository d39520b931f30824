// Schema of DeformConv (ONNX opsets 19 and 22): a grouped convolution whose kernel taps sample
// the input at learned fractional offsets (multilinear interpolation, zero outside the input),
// optionally scaled by a mask. Window geometry as Conv's (no auto_pad).
#include <string>
#include <vector>

#include "graph/schema.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen {
namespace {

// Checks that optional input i, when present, has X's dtype and shape `want`.
void check_input(InferContext& ctx, int i, const char* name, const Shape& want) {
  if (!ctx.has_input(i)) return;
  if (ctx.input_dtype(i) != ctx.input_dtype(0))
    ctx.fail_shape(std::string(name) + " is " + dtype_name(ctx.input_dtype(i)) + " but X is " +
                   dtype_name(ctx.input_dtype(0)));
  if (ctx.input_shape(i) != want)
    ctx.fail_shape(std::string(name) + " must have shape " + want.to_string() + ", got " +
                   ctx.input_shape(i).to_string());
}

void infer_deform_conv(InferContext& ctx) {
  check_window_input(ctx, 0);
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  if (w.rank() != x.rank())
    ctx.fail_shape("W " + w.to_string() + " must have the rank of X " + x.to_string());
  if (ctx.input_dtype(1) != ctx.input_dtype(0))
    ctx.fail_shape(std::string("W is ") + dtype_name(ctx.input_dtype(1)) + " but X is " +
                   dtype_name(ctx.input_dtype(0)));
  const int64_t group = ctx.attr_int("group", 1);
  const int64_t offset_group = ctx.attr_int("offset_group", 1);
  if (group < 1) ctx.fail_model("group must be positive, got " + std::to_string(group));
  if (offset_group < 1)
    ctx.fail_model("offset_group must be positive, got " + std::to_string(offset_group));
  const int64_t channels = x[1], out_channels = w[0];
  if (w[1] * group != channels)
    ctx.fail_shape("W " + w.to_string() + " expects " + std::to_string(w[1] * group) +
                   " input channels (group " + std::to_string(group) + "), X " + x.to_string() +
                   " has " + std::to_string(channels));
  if (out_channels % group != 0)
    ctx.fail_shape("group " + std::to_string(group) + " does not divide the " +
                   std::to_string(out_channels) + " output channels of W " + w.to_string());
  if (channels % offset_group != 0)
    ctx.fail_shape("offset_group " + std::to_string(offset_group) + " does not divide the " +
                   std::to_string(channels) + " input channels");
  const ConvGeometry g = window_geometry(ctx, x, conv_kernel_shape(ctx, w), false);
  int64_t taps = 1;
  for (int64_t k : g.kernel) taps *= k;
  std::vector<int64_t> offset = {x[0], offset_group * taps * g.spatial};
  std::vector<int64_t> mask = {x[0], offset_group * taps};
  std::vector<int64_t> out = {x[0], out_channels};
  for (int64_t o : g.out) {
    offset.push_back(o);
    mask.push_back(o);
    out.push_back(o);
  }
  if (!ctx.has_input(2)) ctx.fail_model("the offset input is required");
  check_input(ctx, 2, "offset", Shape(offset));
  check_input(ctx, 3, "B", Shape{out_channels});
  check_input(ctx, 4, "mask", Shape(mask));
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(DeformConv, {.min_inputs = 3,
                                   .max_inputs = 5,
                                   .attrs = {{"dilations", AttrType::kInts},
                                             {"group", AttrType::kInt},
                                             {"kernel_shape", AttrType::kInts},
                                             {"offset_group", AttrType::kInt},
                                             {"pads", AttrType::kInts},
                                             {"strides", AttrType::kInts}},
                                   .infer = &infer_deform_conv});

}  // namespace lumen
