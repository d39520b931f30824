// The Reduce ops (Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp) over any set
// of axes, float32: one workgroup per output element (shaders/reduce.comp). The axes come from the
// attribute or, from opset 18, input 1, which must be known at build time.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "backends/vulkan/vulkan_context.h"
#include "graph/op_kind.h"

namespace lumen::vulkan {
namespace {

struct ReducePush {
  uint64_t x = 0, y = 0;
  uint32_t n_out = 0, n_red = 0, kept_rank = 0, red_rank = 0;
  uint32_t kept_dims[kMaxRank] = {}, kept_strides[kMaxRank] = {};
  uint32_t red_dims[kMaxRank] = {}, red_strides[kMaxRank] = {};
};
static_assert(sizeof(ReducePush) <= kPushBytes);

// The shader's code of a Reduce op.
int reduce_code(OpKind op) {
  switch (op) {
    case OpKind::kReduceMean:
      return 1;
    case OpKind::kReduceMax:
      return 2;
    case OpKind::kReduceMin:
      return 3;
    case OpKind::kReduceProd:
      return 4;
    case OpKind::kReduceSumSquare:
      return 5;
    case OpKind::kReduceL1:
      return 6;
    case OpKind::kReduceL2:
      return 7;
    case OpKind::kReduceLogSum:
      return 8;
    case OpKind::kReduceLogSumExp:
      return 9;
    default:
      return 0;
  }
}

// Which dims the node reduces (none with noop_with_empty_axes and no axes: then it copies).
std::vector<bool> reduced_dims(const NodeContext& ctx) {
  const int rank = ctx.input_shape(0).rank();
  const std::vector<int64_t> axes =
      ctx.has_input(1) ? ctx.input_ints(1, "axes") : ctx.attr_ints("axes", {});
  const bool noop = axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(rank, axes.empty() && !noop);
  for (int64_t a : axes) {
    if (a < -rank || a >= std::max(rank, 1))
      ctx.fail_model("axis " + std::to_string(a) + " is out of range");
    if (rank > 0) reduced[a < 0 ? a + rank : a] = true;
  }
  return reduced;
}

std::string check_reduce(const NodeContext& ctx) {
  std::string why = require_float(ctx, 1);
  if (!why.empty()) return why;
  if (!ctx.input_shape(0).is_static()) return "shapes known only at run time";
  if (ctx.has_input(1) && ctx.input_value(1) == nullptr) return "axes known only at run time";
  return "";
}

std::unique_ptr<Kernel> make_reduce(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const std::vector<bool> reduced = reduced_dims(ctx);
  ReducePush base;
  int64_t stride = 1, n_out = 1, n_red = 1;
  std::vector<std::pair<int64_t, int64_t>> kept, red;  // (dim, stride), outermost first
  for (int d = x.rank() - 1; d >= 0; --d) {
    auto& dims = reduced[d] ? red : kept;
    dims.insert(dims.begin(), {x[d], stride});
    (reduced[d] ? n_red : n_out) *= x[d];
    stride *= x[d];
  }
  base.n_out = static_cast<uint32_t>(n_out);
  base.n_red = static_cast<uint32_t>(n_red);
  base.kept_rank = static_cast<uint32_t>(kept.size());
  base.red_rank = static_cast<uint32_t>(red.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    base.kept_dims[i] = static_cast<uint32_t>(kept[i].first);
    base.kept_strides[i] = static_cast<uint32_t>(kept[i].second);
  }
  for (size_t i = 0; i < red.size(); ++i) {
    base.red_dims[i] = static_cast<uint32_t>(red[i].first);
    base.red_strides[i] = static_cast<uint32_t>(red[i].second);
  }
  const int32_t constants[] = {reduce_code(ctx.op())};
  const Pipeline& pipe = pipeline(shader_for("reduce", ctx.output(0).dtype), constants);
  return make_fn_kernel([&pipe, base](KernelContext& k) {
    if (base.n_out == 0) return;
    ReducePush push = base;
    push.x = address(k.inputs[0]);
    push.y = address(k.outputs[0]);
    const uint32_t gx = base.n_out < 65535 ? base.n_out : 65535;
    const uint32_t gy = (base.n_out + 65534) / 65535;
    stream_of(k).dispatch(pipe, &push, sizeof(push), gx, gy);
  });
}

}  // namespace

LUMEN_REGISTER_VULKAN_KERNEL(ReduceSum, &make_reduce, &check_reduce);
LUMEN_REGISTER_VULKAN_KERNEL(ReduceMean, &make_reduce, &check_reduce);
LUMEN_REGISTER_VULKAN_KERNEL(ReduceMax, &make_reduce, &check_reduce);
LUMEN_REGISTER_VULKAN_KERNEL(ReduceMin, &make_reduce, &check_reduce);
LUMEN_REGISTER_VULKAN_KERNEL(ReduceProd, &make_reduce, &check_reduce);
LUMEN_REGISTER_VULKAN_KERNEL(ReduceSumSquare, &make_reduce, &check_reduce);
LUMEN_REGISTER_VULKAN_KERNEL(ReduceL1, &make_reduce, &check_reduce);
LUMEN_REGISTER_VULKAN_KERNEL(ReduceL2, &make_reduce, &check_reduce);
LUMEN_REGISTER_VULKAN_KERNEL(ReduceLogSum, &make_reduce, &check_reduce);
LUMEN_REGISTER_VULKAN_KERNEL(ReduceLogSumExp, &make_reduce, &check_reduce);

}  // namespace lumen::vulkan
