// CUDA kernel class of AxisLayerNorm (schema in graph/schemas/axis_layer_norm.cc): the geometry is
// read once at compile time; axis_layer_norm.cu's kernel runs it.
#include <memory>
#include <string>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/axis_layer_norm.h"

namespace lumen::cuda {
namespace {

// The grid's second dimension walks the dims before the axis.
constexpr int64_t kMostOuter = 65535;

struct AxisView3 {
  int64_t outer = 1, channels = 1, inner = 1;
};

AxisView3 axis_view3(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int axis = normalize_axis(ctx.attr_int("axis"), x.rank());
  AxisView3 v;
  for (int d = 0; d < axis; ++d) v.outer *= x[d];
  for (int d = axis + 1; d < x.rank(); ++d) v.inner *= x[d];
  v.channels = x[axis];
  return v;
}

std::string check_axis_layer_norm(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  if (axis_view3(ctx).outer > kMostOuter) return "more than 65535 rows before the axis";
  return "";
}

std::unique_ptr<Kernel> make_axis_layer_norm(const NodeContext& ctx) {
  const AxisView3 v = axis_view3(ctx);
  const float epsilon = ctx.attr_float("epsilon", 1e-5f);
  const bool axis_last = ctx.attr_int("axis_last", 0) != 0;
  const bool has_bias = ctx.has_input(2);
  const Storage st = storage_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_axis_layer_norm(st, in(k, 0), in(k, 1), has_bias ? in(k, 2) : nullptr, out(k), v.outer,
                           v.channels, v.inner, epsilon, axis_last, s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(AxisLayerNorm, &make_axis_layer_norm, &check_axis_layer_norm);

}  // namespace lumen::cuda
