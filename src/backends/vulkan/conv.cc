// Convolutions and pooling, NCHW: Conv and FusedConv (1-D as 2-D of one row) (bias, residual and
// activation in the epilogue) as an implicit GEMM, or one thread per output where groups have few
// output channels (depthwise); Max/Average pooling and their global forms.
#include "backends/vulkan/gemm.h"
#include "backends/vulkan/vulkan_context.h"
#include "graph/op_kind.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::vulkan {
namespace {

struct ConvPush {
  uint64_t x = 0, w = 0, b = 0, z = 0, y = 0;
  int32_t c = 0, h = 0, wd = 0, o = 0, oh = 0, ow = 0;
  int32_t kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0, dh = 0, dw = 0;
  int32_t groups = 1;
  float act_a = 0.f, act_b = 0.f;
  int32_t k_split = 0;
};

// FusedConv's activation as a code of shaders/common.glsl; -1 where the shaders have none.
int conv_activation(const NodeContext& ctx) {
  static const std::pair<const char*, int> kCodes[] = {
      {"", 0},        {"Relu", 1}, {"LeakyRelu", 2}, {"Clip", 3},
      {"Sigmoid", 4}, {"Tanh", 5}, {"HardSwish", 7}, {"Swish", 8}};
  const std::string act = ctx.op() == OpKind::kFusedConv ? ctx.attr_string("activation", "") : "";
  for (const auto& [name, code] : kCodes)
    if (act == name) return code;
  return -1;
}

// A window's geometry in two dims (height, width): a 1-D window as one over a single row.
struct Window2d {
  int32_t h = 1, w = 1, oh = 1, ow = 1, kh = 1, kw = 1, sh = 1, sw = 1;
  int32_t ph = 0, pw = 0, dh = 1, dw = 1, pad_bottom = 0, pad_right = 0;
};

Window2d window_2d(const ConvGeometry& g) {
  const size_t at = g.in.size() == 1 ? 0 : 1;  // the width's index in g's vectors
  auto set = [&](const std::vector<int64_t>& v, int32_t* height, int32_t* width) {
    *width = static_cast<int32_t>(v[at]);
    if (at == 1) *height = static_cast<int32_t>(v[0]);
  };
  Window2d w;
  set(g.in, &w.h, &w.w);
  set(g.out, &w.oh, &w.ow);
  set(g.kernel, &w.kh, &w.kw);
  set(g.strides, &w.sh, &w.sw);
  set(g.pad_begin, &w.ph, &w.pw);
  set(g.dilations, &w.dh, &w.dw);
  set(g.pad_end, &w.pad_bottom, &w.pad_right);
  return w;
}

std::string check_conv(const NodeContext& ctx) {
  std::string why = require_float(ctx);
  if (!why.empty()) return why;
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  if ((x.rank() != 3 && x.rank() != 4) || w.rank() != x.rank())
    return "1-D and 2-D convolutions only";
  if (!x.is_static() || !w.is_static() || !ctx.output(0).shape.is_static())
    return "shapes known only at run time";
  if (ctx.attr_int("channels_last", 0) != 0) return "the channels-last form is the CPU's";
  if (conv_activation(ctx) < 0) return "no activation '" + ctx.attr_string("activation", "") + "'";
  // Asymmetric padding needs nothing more: the shaders read the leading pads and the output size.
  window_geometry(ctx, x, std::vector<int64_t>(w.dims().begin() + 2, w.dims().end()), false);
  return "";
}

std::unique_ptr<Kernel> make_conv(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  const Shape& y = ctx.output(0).shape;
  ConvGeometry g =
      window_geometry(ctx, x, std::vector<int64_t>(w.dims().begin() + 2, w.dims().end()), false);
  // A 1-D convolution runs as a 2-D one of a single row (the same memory: [N, C, 1, L]).
  const Window2d win = window_2d(g);
  ConvPush base;
  base.c = static_cast<int32_t>(x[1]);
  base.o = static_cast<int32_t>(y[1]);
  base.h = win.h;
  base.wd = win.w;
  base.oh = win.oh;
  base.ow = win.ow;
  base.kh = win.kh;
  base.kw = win.kw;
  base.sh = win.sh;
  base.sw = win.sw;
  base.ph = win.ph;
  base.pw = win.pw;
  base.dh = win.dh;
  base.dw = win.dw;
  base.groups = static_cast<int32_t>(ctx.attr_int("group", 1));
  if (ctx.op() == OpKind::kFusedConv) {
    base.act_a = ctx.attr_float("activation_alpha", 0.f);
    base.act_b = ctx.attr_float("activation_beta", 0.f);
  }
  const int act = conv_activation(ctx);
  const int64_t images = x[0];
  // A pointwise convolution is a product per image: W (O x C) by X (C x HW), bias per row.
  if (base.kh == 1 && base.kw == 1 && base.sh == 1 && base.sw == 1 && base.ph == 0 &&
      base.pw == 0 && base.groups == 1 && base.oh == base.h && base.ow == base.wd) {
    const DType dtype = ctx.output(0).dtype;
    return make_fn_kernel([base, act, images, dtype](KernelContext& k) {
      if (k.outputs[0].numel() == 0) return;
      const int32_t hw = base.h * base.wd;
      GemmPush g;
      g.a = address(k.inputs[1]);
      g.b = address(k.inputs[0]);
      g.y = address(k.outputs[0]);
      g.m = base.o;
      g.n = hw;
      g.k = base.c;
      g.a_rs = base.c;
      g.a_cs = 1;
      g.b_bs = base.c * hw;
      g.b_rs = hw;
      g.b_cs = 1;
      if (k.inputs.size() > 2 && k.inputs[2].defined()) {
        g.c = address(k.inputs[2]);
        g.c_rs = 1;
        g.beta = 1.f;
      }
      if (k.inputs.size() > 3 && k.inputs[3].defined()) {
        g.d = address(k.inputs[3]);
        g.d_bs = base.o * hw;
        g.d_rs = hw;
        g.d_cs = 1;
      }
      g.act_a = base.act_a;
      g.act_b = base.act_b;
      enqueue_gemm(stream_of(k), g, images, act, dtype);
    });
  }
  // Few output channels per group (depthwise): one thread per output; else the implicit GEMM,
  // in 64x64 tiles, or 32x32 where those leave a large GPU idle (late, small planes), split along
  // the depth (channels x window) where the tiles alone still do.
  const bool direct = base.o / base.groups < 16;
  const int64_t plane_n = int64_t{base.oh} * base.ow, rows = base.o / base.groups;
  const int64_t depth = int64_t{base.c / base.groups} * base.kh * base.kw;
  auto groups_at = [&](int64_t edge) {
    return (plane_n + edge - 1) / edge * ((rows + edge - 1) / edge) * images * base.groups;
  };
  auto split_at = [&](int64_t edge) {
    return base.groups == 1 ? plan_split(groups_at(edge), depth, 16, images * base.o * plane_n)
                            : SplitK{};
  };
  int32_t tile = 4;
  SplitK split = split_at(64);
  if (groups_at(64) * split.splits < kBusyGroups) {
    tile = 2;
    split = split_at(32);
  }
  const int32_t direct_constants[] = {act};
  const int32_t gemm_constants[] = {split.splits > 1 ? 0 : act, tile, tile};
  const Pipeline& pipe =
      direct ? pipeline(shader_for("conv_direct", ctx.output(0).dtype), direct_constants)
             : pipeline(shader_for("conv", ctx.output(0).dtype), gemm_constants);
  const Pipeline& reduce =
      pipeline(shader_for("gemm_reduce", ctx.output(0).dtype), direct_constants);
  const uint64_t workspace =
      split.splits > 1 ? require_vulkan_backend().context().split_workspace() : 0;
  return make_fn_kernel(
      [&pipe, &reduce, base, direct, images, tile, split, workspace](KernelContext& k) {
        ConvPush push = base;
        push.x = address(k.inputs[0]);
        push.w = address(k.inputs[1]);
        if (k.inputs.size() > 2 && k.inputs[2].defined()) push.b = address(k.inputs[2]);
        if (k.inputs.size() > 3 && k.inputs[3].defined()) push.z = address(k.inputs[3]);
        push.y = address(k.outputs[0]);
        if (k.outputs[0].numel() == 0) return;
        VulkanStream& s = stream_of(k);
        const int64_t plane = int64_t{push.oh} * push.ow;
        if (direct) {
          s.dispatch(pipe, &push, sizeof(push), groups_for(push.o * plane, 256),
                     static_cast<uint32_t>(images));
          return;
        }
        const int64_t edge = int64_t{16} * tile;
        const auto gx = static_cast<uint32_t>((plane + edge - 1) / edge);
        const auto gy = static_cast<uint32_t>((push.o / push.groups + edge - 1) / edge);
        const auto gz = static_cast<uint32_t>(images * push.groups * split.splits);
        if (split.splits == 1) {
          s.dispatch(pipe, &push, sizeof(push), gx, gy, gz);
          return;
        }
        // Partial sums into the workspace; the reduction adds them, the bias (C) and Z (D).
        ReducePush r;
        r.c = push.b;
        r.c_rs = 1;
        r.beta = 1.f;
        r.d = push.z;
        r.d_bs = static_cast<int32_t>(push.o * plane);
        r.d_rs = static_cast<int32_t>(plane);
        r.d_cs = 1;
        r.y = push.y;
        r.m = push.o;
        r.n = static_cast<int32_t>(plane);
        r.batch = static_cast<int32_t>(images);
        r.splits = split.splits;
        r.act_a = push.act_a;
        r.act_b = push.act_b;
        push.b = push.z = 0;
        push.y = r.w = workspace;
        push.k_split = split.k_split;
        const VulkanStream::Dispatch work[] = {
            {&pipe, &push, sizeof(push), gx, gy, gz},
            {&reduce, &r, sizeof(r), groups_for(int64_t{r.batch} * r.m * r.n, 256)}};
        s.dispatch(work);
      });
}

struct PoolPush {
  uint64_t x = 0, y = 0;
  int32_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int32_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int32_t count_include_pad = 0, pad_bottom = 0, pad_right = 0;
};

std::string check_pool(const NodeContext& ctx) {
  std::string why = require_float(ctx);
  if (!why.empty()) return why;
  const bool global = ctx.op() == OpKind::kGlobalAveragePool || ctx.op() == OpKind::kGlobalMaxPool;
  const int rank = ctx.input_shape(0).rank();
  if (global ? rank < 3 : rank != 3 && rank != 4) return "1-D and 2-D pooling only";
  if (!ctx.input_shape(0).is_static() || !ctx.output(0).shape.is_static())
    return "shapes known only at run time";
  if (ctx.attr_int("channels_last", 0) != 0) return "the channels-last form is the CPU's";
  if (ctx.num_outputs() > 1) return "no Indices output";
  if (ctx.op() == OpKind::kMaxPool && ctx.attr_int("storage_order", 0) != 0)
    return "column-major storage_order";
  return "";
}

std::unique_ptr<Kernel> make_pool(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const bool global = ctx.op() == OpKind::kGlobalAveragePool || ctx.op() == OpKind::kGlobalMaxPool;
  const bool max = ctx.op() == OpKind::kMaxPool || ctx.op() == OpKind::kGlobalMaxPool;
  PoolPush base;
  base.planes = static_cast<int32_t>(x[0] * x[1]);
  if (global) {  // every spatial value of a plane as one row
    base.h = base.oh = base.kh = 1;
    base.w = static_cast<int32_t>(x.numel() / (x[0] * x[1]));
    base.ow = 1;
    base.kw = base.w;
  } else {
    std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
    ConvGeometry g = window_geometry(ctx, x, kernel, ctx.attr_int("ceil_mode", 0) != 0);
    // A 1-D window runs as a 2-D one over a single row.
    const Window2d win = window_2d(g);
    base.h = win.h;
    base.w = win.w;
    base.oh = win.oh;
    base.ow = win.ow;
    base.kh = win.kh;
    base.kw = win.kw;
    base.sh = win.sh;
    base.sw = win.sw;
    base.ph = win.ph;
    base.pw = win.pw;
    base.dh = win.dh;
    base.dw = win.dw;
    base.pad_bottom = win.pad_bottom;
    base.pad_right = win.pad_right;
    base.count_include_pad = ctx.attr_int("count_include_pad", 0) != 0 ? 1 : 0;
  }
  const int32_t constants[] = {max ? 1 : 0};
  const Pipeline& pipe = pipeline(shader_for("pool", ctx.output(0).dtype), constants);
  return make_fn_kernel([&pipe, base](KernelContext& k) {
    PoolPush push = base;
    push.x = address(k.inputs[0]);
    push.y = address(k.outputs[0]);
    const int64_t n = k.outputs[0].numel();
    if (n == 0) return;
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(n, 256));
  });
}

}  // namespace

LUMEN_REGISTER_VULKAN_KERNEL(Conv, &make_conv, &check_conv);
LUMEN_REGISTER_VULKAN_KERNEL(FusedConv, &make_conv, &check_conv);
LUMEN_REGISTER_VULKAN_KERNEL(MaxPool, &make_pool, &check_pool);
LUMEN_REGISTER_VULKAN_KERNEL(AveragePool, &make_pool, &check_pool);
LUMEN_REGISTER_VULKAN_KERNEL(GlobalAveragePool, &make_pool, &check_pool);
LUMEN_REGISTER_VULKAN_KERNEL(GlobalMaxPool, &make_pool, &check_pool);

}  // namespace lumen::vulkan
