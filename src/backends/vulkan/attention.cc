// FusedAttention (the optimizer's scaled-dot-product attention) and StridedAttention (the same
// over strided views of one projection, made by the attention-views pass): blocks of query rows
// against tiles of keys with an online softmax, every operand read by strides, where the depths
// are at most 128 (shaders/attention_tiled.comp); else, for FusedAttention, one workgroup per
// query row with its scores in shared memory (shaders/attention.comp).
#include <algorithm>
#include <array>
#include <climits>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_context.h"
#include "graph/op_kind.h"
#include "graph/schemas/strided_attention.h"

namespace lumen::vulkan {
namespace {

constexpr int64_t kMaxKeys = 4096;
constexpr int64_t kMaxDepth = 256;
constexpr int64_t kMaxTiledDepth = 128;

// shaders/attention.comp: contiguous operands, one workgroup per query row.
struct RowPush {
  uint64_t q = 0, k = 0, v = 0, mask = 0, y = 0;
  int32_t sq = 0, sk = 0, d = 0, dv = 0, heads = 1;
  int32_t m_b0 = 0, m_b1 = 0, m_i = 0, m_j = 0;
  float scale = 1.f;
  int32_t rows = 0;
};

// shaders/attention_tiled.comp: operands by element strides over [b0, b1, row, depth].
struct TiledPush {
  uint64_t q = 0, k = 0, v = 0, mask = 0, y = 0;
  int32_t sq = 0, sk = 0, depths = 0, heads = 1, nb = 1;
  int32_t q_b0 = 0, q_b1 = 0, q_s = 0;
  int32_t k_b0 = 0, k_b1 = 0, k_s = 0;
  int32_t v_b0 = 0, v_b1 = 0, v_s = 0;
  int32_t y_b0 = 0, y_b1 = 0, y_s = 0;
  int32_t m_b0 = 0, m_b1 = 0, m_i = 0, m_j = 0;
  float scale = 1.f;
};
static_assert(sizeof(TiledPush) <= kPushBytes);

TensorView contiguous_view(const Shape& shape) {
  TensorView v{shape, 0, std::vector<int64_t>(shape.rank(), 1)};
  for (int d = shape.rank() - 2; d >= 0; --d) v.strides[d] = v.strides[d + 1] * shape[d + 1];
  return v;
}

// The views of a FusedAttention's contiguous operands; K logically [..., Sk, D] either way.
AttentionViews fused_views(const NodeContext& ctx) {
  AttentionViews v;
  v.q = contiguous_view(ctx.input_shape(0));
  v.v = contiguous_view(ctx.input_shape(2));
  v.k = contiguous_view(ctx.input_shape(1));
  if (ctx.attr_int("k_transposed", 0) == 1) {  // stored [..., D, Sk]
    const int r = v.k.shape.rank();
    std::swap(v.k.shape.dims()[r - 1], v.k.shape.dims()[r - 2]);
    std::swap(v.k.strides[r - 1], v.k.strides[r - 2]);
  }
  Shape ys = ctx.input_shape(0);
  ys.dims()[ys.rank() - 1] = ctx.input_shape(2)[-1];
  v.y = contiguous_view(ys);
  return v;
}

// The mask's element strides over the scores [b0, b1, i, j] (0 where it broadcasts).
std::array<int32_t, 4> mask_strides(const Shape& m) {
  std::vector<int64_t> md(4, 1);
  for (int i = 0; i < m.rank(); ++i) md[4 - m.rank() + i] = m[i];
  std::array<int32_t, 4> strides{};
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    strides[d] = md[d] == 1 ? 0 : static_cast<int32_t>(stride);
    stride *= md[d];
  }
  return strides;
}

// Sets a push's mask strides (RowPush or TiledPush) from the node's mask input, if any.
template <typename Push>
void set_mask_strides(const NodeContext& ctx, Push* push) {
  if (!ctx.has_input(3)) return;
  const std::array<int32_t, 4> m = mask_strides(ctx.input_shape(3));
  push->m_b0 = m[0];
  push->m_b1 = m[1];
  push->m_i = m[2];
  push->m_j = m[3];
}

// Why the tiled shader cannot take these views ("" when it can): at most two leading dims,
// depths up to 128, strides within 32 bits.
std::string tiled_refusal(const AttentionViews& v) {
  const int r = v.q.shape.rank();
  if (r > 4) return "more than two leading dims";
  if (v.q.shape[-1] > kMaxTiledDepth || v.v.shape[-1] > kMaxTiledDepth) return "a depth above 128";
  for (const TensorView* t : {&v.q, &v.k, &v.v, &v.y})
    for (int64_t s : t->strides)
      if (s > INT32_MAX) return "strides beyond 32 bits";
  return "";
}

std::string check_attention(const NodeContext& ctx) {
  std::string why = require_float(ctx);
  if (!why.empty()) return why;
  const Shape& q = ctx.input_shape(0);
  const Shape& k = ctx.input_shape(1);
  if (!q.is_static() || !k.is_static() || !ctx.input_shape(2).is_static() ||
      (ctx.has_input(3) && !ctx.input_shape(3).is_static()))
    return "shapes known only at run time";
  if (ctx.op() == OpKind::kStridedAttention) return tiled_refusal(attention_views(ctx));
  if (q.rank() > 4) return "more than two leading dims";
  if (ctx.attr_int("kv_group", 1) != 1) return "grouped key/value heads (kv_group)";
  const bool kt = ctx.attr_int("k_transposed", 0) == 1;
  if (k[kt ? -1 : -2] > kMaxKeys && !tiled_refusal(fused_views(ctx)).empty())
    return "more than 4096 keys with a depth above 128";
  if (q[-1] > kMaxDepth) return "a depth above 256";
  return "";
}

std::unique_ptr<Kernel> make_tiled(const NodeContext& ctx, const AttentionViews& views) {
  const int r = views.q.shape.rank();
  // Leading dims [b0, b1] (missing ones extent 1, stride 0).
  auto lead = [&](const TensorView& t, int i) { return r - 4 + i >= 0 ? t.strides[r - 4 + i] : 0; };
  auto extent = [&](int i) { return r - 4 + i >= 0 ? views.q.shape[r - 4 + i] : int64_t{1}; };
  TiledPush base;
  base.sq = static_cast<int32_t>(views.q.shape[-2]);
  base.sk = static_cast<int32_t>(views.k.shape[-2]);
  base.depths = static_cast<int32_t>(views.q.shape[-1] | (views.v.shape[-1] << 16));
  base.heads = static_cast<int32_t>(extent(1));
  base.nb = static_cast<int32_t>(extent(0) * extent(1));
  const bool kt = views.k.strides[r - 1] != 1;
  base.q_b0 = static_cast<int32_t>(lead(views.q, 0));
  base.q_b1 = static_cast<int32_t>(lead(views.q, 1));
  base.q_s = static_cast<int32_t>(views.q.strides[r - 2]);
  base.k_b0 = static_cast<int32_t>(lead(views.k, 0));
  base.k_b1 = static_cast<int32_t>(lead(views.k, 1));
  base.k_s = static_cast<int32_t>(views.k.strides[kt ? r - 1 : r - 2]);
  base.v_b0 = static_cast<int32_t>(lead(views.v, 0));
  base.v_b1 = static_cast<int32_t>(lead(views.v, 1));
  base.v_s = static_cast<int32_t>(views.v.strides[r - 2]);
  base.y_b0 = static_cast<int32_t>(lead(views.y, 0));
  base.y_b1 = static_cast<int32_t>(lead(views.y, 1));
  base.y_s = static_cast<int32_t>(views.y.strides[r - 2]);
  base.scale = ctx.attr_float("scale", 1.f);
  set_mask_strides(ctx, &base);
  const std::array<int64_t, 4> offsets = {views.q.offset, views.k.offset, views.v.offset,
                                          views.y.offset};
  // Blocks of 16 rows where that still gives about two workgroups per multiprocessor of a large
  // GPU, else 8 or 4.
  int64_t block = 16;
  while (block > 4 && int64_t{base.nb} * ((base.sq + block - 1) / block) < 264) block /= 2;
  const int64_t groups = int64_t{base.nb} * ((base.sq + block - 1) / block);
  const auto d4 = static_cast<int32_t>(std::max<int64_t>(1, (views.q.shape[-1] + 3) / 4));
  const auto dv4 = static_cast<int32_t>(std::max<int64_t>(1, (views.v.shape[-1] + 3) / 4));
  const int32_t scalar[] = {kt ? 1 : 0, static_cast<int32_t>(16 * block), d4, dv4, 0};
  const int32_t quads[] = {kt ? 1 : 0, static_cast<int32_t>(16 * block), d4, dv4, 1};
  const DType dtype = ctx.output(0).dtype;
  const auto bytes = static_cast<uint64_t>(dtype_size(dtype));
  const std::string shader = shader_for("attention_tiled", dtype);
  const Pipeline& by_element = pipeline(shader, scalar);
  // vec4 reads where the depths and every stride and offset of Q, V and (read along the depth) K
  // are multiples of 4; the addresses are checked per run.
  bool quad_form = views.q.shape[-1] % 4 == 0 && views.v.shape[-1] % 4 == 0;
  for (const TensorView* t : {&views.q, &views.v, kt ? nullptr : &views.k}) {
    if (t == nullptr) continue;
    quad_form = quad_form && t->offset % 4 == 0;
    for (int dim = 0; dim < r - 1; ++dim) quad_form = quad_form && t->strides[dim] % 4 == 0;
  }
  const Pipeline* by_quad = quad_form ? &pipeline(shader, quads) : nullptr;
  return make_fn_kernel([&by_element, by_quad, kt, base, offsets, groups, bytes](KernelContext& k) {
    if (groups == 0 || k.outputs[0].numel() == 0) return;
    TiledPush push = base;
    push.q = address(k.inputs[0]) + bytes * offsets[0];
    push.k = address(k.inputs[1]) + bytes * offsets[1];
    push.v = address(k.inputs[2]) + bytes * offsets[2];
    if (k.inputs.size() > 3 && k.inputs[3].defined()) push.mask = address(k.inputs[3]);
    push.y = address(k.outputs[0]) + bytes * offsets[3];
    const uint64_t quad = 4 * bytes;  // a vec4's alignment
    const bool aligned = push.q % quad == 0 && push.v % quad == 0 && (kt || push.k % quad == 0);
    const Pipeline& pipe = by_quad != nullptr && aligned ? *by_quad : by_element;
    const int64_t gx = std::min<int64_t>(groups, 65535), gy = (groups + 65534) / 65535;
    stream_of(k).dispatch(pipe, &push, sizeof(push), static_cast<uint32_t>(gx),
                          static_cast<uint32_t>(gy));
  });
}

std::unique_ptr<Kernel> make_attention(const NodeContext& ctx) {
  if (ctx.op() == OpKind::kStridedAttention) return make_tiled(ctx, attention_views(ctx));
  const AttentionViews views = fused_views(ctx);
  if (tiled_refusal(views).empty()) return make_tiled(ctx, views);
  const Shape& q = ctx.input_shape(0);
  const Shape& v = ctx.input_shape(2);
  const int rank = q.rank();
  RowPush base;
  base.sq = static_cast<int32_t>(q[-2]);
  base.sk = static_cast<int32_t>(v[-2]);
  base.d = static_cast<int32_t>(q[-1]);
  base.dv = static_cast<int32_t>(v[-1]);
  base.heads = rank == 4 ? static_cast<int32_t>(q[1]) : 1;
  base.scale = ctx.attr_float("scale", 1.f);
  set_mask_strides(ctx, &base);
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= q[d];
  const int32_t constants[] = {ctx.attr_int("k_transposed", 0) == 1 ? 1 : 0};
  const Pipeline& pipe = pipeline(shader_for("attention", ctx.output(0).dtype), constants);
  return make_fn_kernel([&pipe, base, rows](KernelContext& k) {
    if (rows == 0 || k.outputs[0].numel() == 0) return;
    RowPush push = base;
    push.rows = static_cast<int32_t>(rows);
    push.q = address(k.inputs[0]);
    push.k = address(k.inputs[1]);
    push.v = address(k.inputs[2]);
    if (k.inputs.size() > 3 && k.inputs[3].defined()) push.mask = address(k.inputs[3]);
    push.y = address(k.outputs[0]);
    const int64_t gx = std::min<int64_t>(rows, 65535), gy = (rows + 65534) / 65535;
    stream_of(k).dispatch(pipe, &push, sizeof(push), static_cast<uint32_t>(gx),
                          static_cast<uint32_t>(gy));
  });
}

}  // namespace

LUMEN_REGISTER_VULKAN_KERNEL(FusedAttention, &make_attention, &check_attention);
LUMEN_REGISTER_VULKAN_KERNEL(StridedAttention, &make_attention, &check_attention);

}  // namespace lumen::vulkan
