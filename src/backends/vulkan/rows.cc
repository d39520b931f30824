// Row-wise kernels: Softmax and LogSoftmax over any axis, LayerNormalization and RMSNormalization
// over trailing dims.
#include "backends/vulkan/vulkan_context.h"
#include "graph/op_kind.h"

namespace lumen::vulkan {
namespace {

int normalized_axis(const NodeContext& ctx, int64_t axis, int rank) {
  if (axis < -rank || axis >= std::max(rank, 1))
    ctx.fail_model("axis " + std::to_string(axis) + " is out of range");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

struct SoftmaxPush {
  uint64_t x, y;
  uint32_t lines, n, inner;
};

std::unique_ptr<Kernel> make_softmax(const NodeContext& ctx) {
  const int rank = ctx.input_shape(0).rank();
  const int axis = rank == 0 ? 0 : normalized_axis(ctx, ctx.attr_int("axis", -1), rank);
  const int32_t constants[] = {ctx.op() == OpKind::kLogSoftmax ? 1 : 0};
  const Pipeline& pipe = pipeline(shader_for("softmax", ctx.output(0).dtype), constants);
  return make_fn_kernel([&pipe, axis](KernelContext& k) {
    const Shape& x = k.inputs[0].shape();
    int64_t outer = 1, n = x.rank() ? x[axis] : 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= x[d];
    for (int d = axis + 1; d < x.rank(); ++d) inner *= x[d];
    const int64_t lines = outer * inner;
    if (lines == 0 || n == 0) return;
    SoftmaxPush push{address(k.inputs[0]), address(k.outputs[0]), static_cast<uint32_t>(lines),
                     static_cast<uint32_t>(n), static_cast<uint32_t>(inner)};
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(lines, 1));
  });
}

struct LayerNormPush {
  uint64_t x, scale, bias, y;
  uint32_t rows, n;
  float eps;
  uint32_t groups = 1, spatial = 1;  // CHANNELS = 1 only
};

std::string check_layer_norm(const NodeContext& ctx) {
  std::string why = require_float(ctx);
  if (!why.empty()) return why;
  if (ctx.num_outputs() > 1) return "the Mean and InvStdDev outputs";
  if (ctx.op() == OpKind::kRMSNormalization && ctx.attr_int("stash_type", 1) != 1)
    return "stash_type other than float32";
  const Shape& x = ctx.input_shape(0);
  if (!x.is_static() || !ctx.input_shape(1).is_static()) return "shapes known only at run time";
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += x.rank();
  int64_t n = 1;
  for (int d = static_cast<int>(axis); d < x.rank(); ++d) n *= x[d];
  if (ctx.input_shape(1).numel() != n || (ctx.has_input(2) && ctx.input_shape(2).numel() != n))
    return "scale and bias must cover the normalised dims exactly";
  return "";
}

std::unique_ptr<Kernel> make_layer_norm(const NodeContext& ctx) {
  const int rank = ctx.input_shape(0).rank();
  const int axis = normalized_axis(ctx, ctx.attr_int("axis", -1), rank);
  const float eps = ctx.attr_float("epsilon", 1e-5f);
  const int32_t constants[] = {ctx.op() == OpKind::kRMSNormalization ? 1 : 0, 0};
  const Pipeline& pipe = pipeline(shader_for("layer_norm", ctx.output(0).dtype), constants);
  return make_fn_kernel([&pipe, axis, eps](KernelContext& k) {
    const Shape& x = k.inputs[0].shape();
    int64_t rows = 1, n = 1;
    for (int d = 0; d < axis; ++d) rows *= x[d];
    for (int d = axis; d < x.rank(); ++d) n *= x[d];
    if (rows == 0 || n == 0) return;
    const bool bias = k.inputs.size() > 2 && k.inputs[2].defined();
    LayerNormPush push{address(k.inputs[0]),
                       address(k.inputs[1]),
                       bias ? address(k.inputs[2]) : 0,
                       address(k.outputs[0]),
                       static_cast<uint32_t>(rows),
                       static_cast<uint32_t>(n),
                       eps};
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(rows, 1));
  });
}

std::string check_channel_norm(const NodeContext& ctx) {
  std::string why = require_float(ctx);
  if (!why.empty()) return why;
  if (!ctx.input_shape(0).is_static()) return "shapes known only at run time";
  if (ctx.op() == OpKind::kGroupNormalization && ctx.attr_int("stash_type", 1) != 1)
    return "stash_type other than float32";
  return "";
}

// InstanceNormalization and GroupNormalization (scale and bias per channel): rows of one group of
// channels of one sample.
std::unique_ptr<Kernel> make_channel_norm(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int64_t channels = x[1];
  const int64_t groups =
      ctx.op() == OpKind::kGroupNormalization ? ctx.attr_int("num_groups") : channels;
  int64_t spatial = 1;
  for (int d = 2; d < x.rank(); ++d) spatial *= x[d];
  LayerNormPush base{};
  base.rows = static_cast<uint32_t>(x[0] * groups);
  base.n = static_cast<uint32_t>(channels / groups * spatial);
  base.eps = ctx.attr_float("epsilon", 1e-5f);
  base.groups = static_cast<uint32_t>(groups);
  base.spatial = static_cast<uint32_t>(std::max<int64_t>(spatial, 1));
  const int32_t constants[] = {0, 1};
  const Pipeline& pipe = pipeline(shader_for("layer_norm", ctx.output(0).dtype), constants);
  return make_fn_kernel([&pipe, base](KernelContext& k) {
    if (base.rows == 0 || base.n == 0) return;
    LayerNormPush push = base;
    push.x = address(k.inputs[0]);
    push.scale = address(k.inputs[1]);
    push.bias = address(k.inputs[2]);
    push.y = address(k.outputs[0]);
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(base.rows, 1));
  });
}

}  // namespace

LUMEN_REGISTER_VULKAN_KERNEL(InstanceNormalization, &make_channel_norm, &check_channel_norm);
LUMEN_REGISTER_VULKAN_KERNEL(GroupNormalization, &make_channel_norm, &check_channel_norm);
LUMEN_REGISTER_VULKAN_KERNEL(Softmax, &make_softmax, &require_float);
LUMEN_REGISTER_VULKAN_KERNEL(LogSoftmax, &make_softmax, &require_float);
LUMEN_REGISTER_VULKAN_KERNEL(LayerNormalization, &make_layer_norm, &check_layer_norm);
LUMEN_REGISTER_VULKAN_KERNEL(RMSNormalization, &make_layer_norm, &check_layer_norm);

}  // namespace lumen::vulkan
