// Resize, float32, over at most two axes (the rest kept as they are): the per-axis taps of every
// mode (nearest, linear, cubic, antialiased; every coordinate transformation) are worked out on
// the host once (resize_taps.h, as for the CPU and CUDA kernels), copied to the device as one
// table, and blended by shaders/resize.comp, one thread per output.
#include <cstring>
#include <string>
#include <vector>

#include "backends/resize_taps.h"
#include "backends/vulkan/vulkan_context.h"
#include "graph/op_kind.h"

namespace lumen::vulkan {
namespace {

struct ResizePush {
  uint64_t x = 0, y = 0, table = 0;
  uint32_t n = 0, outer = 1, mid = 1, inner = 1;
  uint32_t in_a = 1, out_a = 1, in_b = 1, out_b = 1;
  uint32_t taps_a = 1, taps_b = 1;
};

// The taps of every axis, and which axes they change.
struct ResizeMaps {
  std::vector<ResizeAxisMap> maps;
  std::vector<int> resized;
  bool outside = false;
};

ResizeMaps resize_maps(const NodeContext& ctx) {
  const ResizeSpec spec = resize_spec(ctx);
  const Shape& x = ctx.input_shape(0);
  const int rank = x.rank();
  std::vector<std::pair<double, double>> roi(rank, {0.0, 1.0});
  if (spec.coord == ResizeCoord::kTfCropAndResize) roi = resize_roi(ctx, rank);
  ResizeMaps r;
  for (int a = 0; a < rank; ++a) {
    r.maps.push_back(resize_axis_map(spec, ctx, x[a], spec.output[a], spec.scales[a], roi[a]));
    const ResizeAxisMap& m = r.maps.back();
    r.outside = r.outside || m.any_outside;
    bool identity = m.taps == 1 && x[a] == spec.output[a];
    for (int64_t o = 0; identity && o < spec.output[a]; ++o) identity = m.idx[o] == o;
    if (!identity) r.resized.push_back(a);
  }
  return r;
}

std::string check_resize(const NodeContext& ctx) {
  std::string why = require_float(ctx, 1);
  if (!why.empty()) return why;
  if (!ctx.input_shape(0).is_static() || !ctx.output(0).shape.is_static())
    return "shapes known only at run time";
  const ResizeMaps r = resize_maps(ctx);
  if (r.resized.size() > 2) return "more than two resized axes";
  if (r.outside) return "tf_crop_and_resize with outputs outside the input (extrapolation)";
  return "";
}

std::unique_ptr<Kernel> make_resize(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& y = ctx.output(0).shape;
  const ResizeMaps r = resize_maps(ctx);
  const int rank = x.rank();
  // Axes a and b; a missing one is a virtual axis of length 1 after the last dim.
  const int a = r.resized.empty() ? rank : r.resized[0];
  const int b = r.resized.size() < 2 ? rank : r.resized[1];
  ResizePush base;
  base.n = static_cast<uint32_t>(y.numel());
  auto product = [&](int from, int to) {
    int64_t p = 1;
    for (int d = from; d < to && d < rank; ++d) p *= x[d];
    return static_cast<uint32_t>(p);
  };
  base.outer = product(0, a);
  base.mid = product(a + 1, b);
  base.inner = product(b + 1, rank);
  // The table: idx_a, wt_a, idx_b, wt_b (indices as int32 bits).
  std::vector<uint32_t> table;
  auto add_axis = [&](int axis, uint32_t* in, uint32_t* out, uint32_t* taps) {
    if (axis >= rank) {
      table.push_back(0);
      float one = 1.f;
      uint32_t bits = 0;
      std::memcpy(&bits, &one, sizeof(bits));
      table.push_back(bits);
      return;
    }
    const ResizeAxisMap& m = r.maps[axis];
    *in = static_cast<uint32_t>(x[axis]);
    *out = static_cast<uint32_t>(y[axis]);
    *taps = static_cast<uint32_t>(m.taps);
    for (int64_t i : m.idx) table.push_back(static_cast<uint32_t>(i));
    for (float w : m.wt) {
      uint32_t bits = 0;
      std::memcpy(&bits, &w, sizeof(bits));
      table.push_back(bits);
    }
  };
  add_axis(a, &base.in_a, &base.out_a, &base.taps_a);
  add_axis(b, &base.in_b, &base.out_b, &base.taps_b);
  Tensor host = Tensor::empty(Shape{static_cast<int64_t>(table.size())}, DType::kFloat32);
  std::memcpy(host.raw_data(), table.data(), table.size() * sizeof(uint32_t));
  const Tensor device_table = host.to(Device::vulkan(0));
  const Pipeline& pipe = pipeline(shader_for("resize", ctx.output(0).dtype));
  return make_fn_kernel([&pipe, base, device_table](KernelContext& k) {
    if (base.n == 0) return;
    ResizePush push = base;
    push.x = address(k.inputs[0]);
    push.y = address(k.outputs[0]);
    push.table = address(device_table);
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(base.n, 256));
  });
}

}  // namespace

LUMEN_REGISTER_VULKAN_KERNEL(Resize, &make_resize, &check_resize);

}  // namespace lumen::vulkan
