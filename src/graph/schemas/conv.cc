// Schemas of Conv and ConvTranspose: attribute checks and output shapes per the ONNX spec.
#include <string>
#include <vector>

#include "graph/schema.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen {
namespace {

// Checks the weight against X (rank, dtype) and the optional bias against `out_channels`.
void check_weight_and_bias(InferContext& ctx, int64_t out_channels) {
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  if (w.dtype != x.dtype)
    ctx.fail_shape(std::string("W is ") + dtype_name(w.dtype) + " but X is " + dtype_name(x.dtype));
  if (!ctx.has_input(2)) return;
  const TensorType& b = ctx.input(2);
  if (b.dtype != x.dtype)
    ctx.fail_shape(std::string("B is ") + dtype_name(b.dtype) + " but X is " + dtype_name(x.dtype));
  if (b.shape.rank() != 1 || b.shape[0] != out_channels)
    ctx.fail_shape("B must have shape [" + std::to_string(out_channels) + "], got " +
                   b.shape.to_string());
}

int64_t read_group(InferContext& ctx) {
  int64_t group = ctx.attr_int("group", 1);
  if (group < 1) ctx.fail_model("group must be positive, got " + std::to_string(group));
  return group;
}

void check_weight_rank(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  if (w.rank() != x.rank())
    ctx.fail_shape("W " + w.to_string() + " must have the rank of X " + x.to_string());
}

void infer_conv(InferContext& ctx) {
  check_window_input(ctx, 0);
  check_weight_rank(ctx);
  const bool channels_last = is_channels_last(ctx);
  const Shape x = channels_last ? to_channels_first(ctx.input_shape(0)) : ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  int64_t group = read_group(ctx);
  int64_t channels = x[1], out_channels = w[0];
  if (channels % group != 0)
    ctx.fail_shape("group " + std::to_string(group) + " does not divide the " +
                   std::to_string(channels) + " input channels");
  if (out_channels % group != 0)
    ctx.fail_shape("group " + std::to_string(group) + " does not divide the " +
                   std::to_string(out_channels) + " output channels of W " + w.to_string());
  if (w[1] * group != channels)
    ctx.fail_shape("W " + w.to_string() + " expects " + std::to_string(w[1] * group) +
                   " input channels (group " + std::to_string(group) + "), X " + x.to_string() +
                   " has " + std::to_string(channels));
  check_weight_and_bias(ctx, out_channels);
  ConvGeometry g = window_geometry(ctx, x, conv_kernel_shape(ctx, w), false);
  std::vector<int64_t> out = {x[0], out_channels};
  out.insert(out.end(), g.out.begin(), g.out.end());
  ctx.set_output(0, ctx.input_dtype(0), channels_last ? to_channels_last(Shape(out)) : Shape(out));
}

void infer_conv_transpose(InferContext& ctx) {
  check_window_input(ctx, 0);
  check_weight_rank(ctx);
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  int64_t group = read_group(ctx);
  int64_t channels = x[1];
  if (channels % group != 0)
    ctx.fail_shape("group " + std::to_string(group) + " does not divide the " +
                   std::to_string(channels) + " input channels");
  if (w[0] != channels)
    ctx.fail_shape("W " + w.to_string() + " expects " + std::to_string(w[0]) +
                   " input channels, X " + x.to_string() + " has " + std::to_string(channels));
  int64_t out_channels = w[1] * group;
  check_weight_and_bias(ctx, out_channels);
  ConvGeometry g = conv_transpose_geometry(ctx, x, conv_kernel_shape(ctx, w));
  std::vector<int64_t> out = {x[0], out_channels};
  out.insert(out.end(), g.out.begin(), g.out.end());
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

// FusedConv: a Conv whose output goes through an activation in the same kernel call (made by the
// optimizer's fuse-activation and fold-channels-last-mlp passes). `activation` names the ONNX op
// ("" for none; "Swish" is SiLU, y * sigmoid(y); "GeluErf" and "GeluTanh" Gelu's two forms);
// alpha and beta are its parameters (LeakyRelu's slope; Clip's min and max). With channels_last=1
// (the channels-last pass) X and Y are (N, spatial..., C) instead of (N, C, spatial...). An
// optional fourth input Z (the fuse-residual pass), shaped like Y, is added before the activation:
// Y = activation(conv(X, W) + B + Z). An optional fifth input S (the fuse-channel-scale pass, on
// channels-last 2-D convolutions), [N or 1, 1, 1, C] for X's C channels, scales X per image and
// channel before the convolution: Y = activation(conv(X * S, W) + B + Z).
void infer_fused_conv(InferContext& ctx) {
  static const char* const kActivations[] = {"Relu",      "LeakyRelu", "Clip",    "Sigmoid", "Tanh",
                                             "HardSwish", "Swish",     "GeluErf", "GeluTanh"};
  std::string act = ctx.attr_string("activation", "");
  bool known = act.empty();
  for (const char* a : kActivations) known = known || act == a;
  if (!known) ctx.fail_model("activation '" + act + "' cannot be fused into a Conv");
  infer_conv(ctx);
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) {
    const TensorType want{ctx.input_dtype(0), ctx.output(0).shape};
    if (ctx.input_dtype(3) != want.dtype || ctx.input_shape(3) != want.shape)
      ctx.fail_shape("the residual input Z must be " + want.to_string() + " like Y, got " +
                     TensorType{ctx.input_dtype(3), ctx.input_shape(3)}.to_string());
  }
  if (ctx.num_inputs() > 4 && ctx.has_input(4)) {
    const Shape& x = ctx.input_shape(0);
    const Shape& scale = ctx.input_shape(4);
    if (ctx.attr_int("channels_last", 0) != 1 || x.rank() != 4)
      ctx.fail_model("a channel scale S needs a channels-last 2-D convolution");
    if (ctx.input_dtype(4) != ctx.input_dtype(0) || scale.rank() != 4 ||
        (scale[0] != 1 && scale[0] != x[0]) || scale[1] != 1 || scale[2] != 1 || scale[3] != x[3])
      ctx.fail_shape("the channel scale S must be [1 or " + std::to_string(x[0]) + ", 1, 1, " +
                     std::to_string(x[3]) + "] of X's type, got " +
                     TensorType{ctx.input_dtype(4), scale}.to_string());
  }
}

// Conv's attributes; FusedConv takes the same plus its activation.
std::vector<AttrSpec> conv_attrs() {
  return {{"auto_pad", AttrType::kString}, {"dilations", AttrType::kInts},
          {"group", AttrType::kInt},       {"kernel_shape", AttrType::kInts},
          {"pads", AttrType::kInts},       {"strides", AttrType::kInts}};
}

std::vector<AttrSpec> fused_conv_attrs() {
  std::vector<AttrSpec> attrs = conv_attrs();
  attrs.push_back({"activation", AttrType::kString});
  attrs.push_back({"channels_last", AttrType::kInt});
  attrs.push_back({"activation_alpha", AttrType::kFloat});
  attrs.push_back({"activation_beta", AttrType::kFloat});
  return attrs;
}

}  // namespace

LUMEN_REGISTER_SCHEMA(
    Conv, {.min_inputs = 2, .max_inputs = 3, .attrs = conv_attrs(), .infer = &infer_conv});

LUMEN_REGISTER_SCHEMA(FusedConv, {.min_inputs = 2,
                                  .max_inputs = 5,
                                  .attrs = fused_conv_attrs(),
                                  .infer = &infer_fused_conv});

LUMEN_REGISTER_SCHEMA(ConvTranspose, {.min_inputs = 2,
                                      .max_inputs = 3,
                                      .attrs = {{"auto_pad", AttrType::kString},
                                                {"dilations", AttrType::kInts},
                                                {"group", AttrType::kInt},
                                                {"kernel_shape", AttrType::kInts},
                                                {"output_padding", AttrType::kInts},
                                                {"output_shape", AttrType::kInts},
                                                {"pads", AttrType::kInts},
                                                {"strides", AttrType::kInts}},
                                      .infer = &infer_conv_transpose});

}  // namespace lumen
