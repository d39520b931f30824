// FusedAttention (the optimizer's scaled-dot-product attention): blocks of query rows against
// tiles of keys with an online softmax where the depths are at most 128
// (shaders/attention_tiled.comp), else one workgroup per query row with its scores in shared
// memory (shaders/attention.comp).
#include <algorithm>

#include "backends/vulkan/vulkan_context.h"
#include "graph/op_kind.h"

namespace lumen::vulkan {
namespace {

constexpr int64_t kMaxKeys = 4096;
constexpr int64_t kMaxDepth = 256;
constexpr int64_t kMaxTiledDepth = 128;

struct AttentionPush {
  uint64_t q = 0, k = 0, v = 0, mask = 0, y = 0;
  int32_t sq = 0, sk = 0, d = 0, dv = 0, heads = 1;
  int32_t m_b0 = 0, m_b1 = 0, m_i = 0, m_j = 0;
  float scale = 1.f;
  int32_t rows = 0;
};

std::string check_attention(const NodeContext& ctx) {
  std::string why = require_float32(ctx);
  if (!why.empty()) return why;
  const Shape& q = ctx.input_shape(0);
  const Shape& k = ctx.input_shape(1);
  if (!q.is_static() || !k.is_static() || !ctx.input_shape(2).is_static() ||
      (ctx.has_input(3) && !ctx.input_shape(3).is_static()))
    return "shapes known only at run time";
  if (q.rank() > 4) return "more than two leading dims";
  const bool kt = ctx.attr_int("k_transposed", 0) == 1;
  if (k[kt ? -1 : -2] > kMaxKeys) return "more than 4096 keys";
  if (q[-1] > kMaxDepth) return "a depth above 256";
  return "";
}

std::unique_ptr<Kernel> make_attention(const NodeContext& ctx) {
  const Shape& q = ctx.input_shape(0);
  const Shape& v = ctx.input_shape(2);
  const bool kt = ctx.attr_int("k_transposed", 0) == 1;
  const int rank = q.rank();
  AttentionPush base;
  base.sq = static_cast<int32_t>(q[-2]);
  base.sk = static_cast<int32_t>(v[-2]);
  base.d = static_cast<int32_t>(q[-1]);
  base.dv = static_cast<int32_t>(v[-1]);
  base.heads = rank == 4 ? static_cast<int32_t>(q[1]) : 1;
  base.scale = ctx.attr_float("scale", 1.f);
  if (ctx.has_input(3)) {
    // The mask's element strides over the scores [b0, b1, i, j] (rank 4 after padding), 0 where
    // it broadcasts.
    std::vector<int64_t> scores(4, 1);
    scores[2] = q[-2];
    scores[3] = v[-2];
    if (rank == 4) {
      scores[0] = q[0];
      scores[1] = q[1];
    } else if (rank == 3) {
      scores[1] = q[0];
    }
    const Shape& m = ctx.input_shape(3);
    std::vector<int64_t> md(4, 1);
    for (int i = 0; i < m.rank(); ++i) md[4 - m.rank() + i] = m[i];
    int64_t stride = 1;
    int32_t strides[4];
    for (int d = 3; d >= 0; --d) {
      strides[d] = md[d] == 1 ? 0 : static_cast<int32_t>(stride);
      stride *= md[d];
    }
    base.m_b0 = strides[0];
    base.m_b1 = strides[1];
    base.m_i = strides[2];
    base.m_j = strides[3];
  }
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= q[d];
  const int64_t sq = q[-2];
  const bool tiled = q[-1] <= kMaxTiledDepth && v[-1] <= kMaxTiledDepth;
  // Blocks of 16 rows where that still gives about two workgroups per multiprocessor of a large
  // GPU, else 8.
  const int64_t block = (rows / std::max<int64_t>(sq, 1)) * ((sq + 15) / 16) >= 264 ? 16 : 8;
  const int64_t groups = tiled ? (rows / std::max<int64_t>(sq, 1)) * ((sq + block - 1) / block) : rows;
  const int32_t constants[] = {kt ? 1 : 0, static_cast<int32_t>(16 * block)};
  const Pipeline& pipe = tiled ? pipeline("attention_tiled", constants)
                               : pipeline("attention", std::span<const int32_t>(constants, 1));
  return make_fn_kernel([&pipe, base, rows, groups](KernelContext& k) {
    if (rows == 0 || k.outputs[0].numel() == 0) return;
    AttentionPush push = base;
    push.rows = static_cast<int32_t>(rows);
    push.q = address(k.inputs[0]);
    push.k = address(k.inputs[1]);
    push.v = address(k.inputs[2]);
    if (k.inputs.size() > 3 && k.inputs[3].defined()) push.mask = address(k.inputs[3]);
    push.y = address(k.outputs[0]);
    const int64_t gx = std::min<int64_t>(groups, 65535), gy = (groups + 65534) / 65535;
    stream_of(k).dispatch(pipe, &push, sizeof(push), static_cast<uint32_t>(gx),
                          static_cast<uint32_t>(gy));
  });
}

}  // namespace

LUMEN_REGISTER_VULKAN_KERNEL(FusedAttention, &make_attention, &check_attention);

}  // namespace lumen::vulkan
