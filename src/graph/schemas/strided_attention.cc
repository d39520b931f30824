// Schema of StridedAttention, FusedAttention over strided views of its inputs and output, which
// the optimizer's attention-views pass makes where a FusedAttention reads Q, K and V through
// Slices, Reshapes and Transposes of one projection and its result goes through a Transpose and
// a Reshape (the layout torch exports nn.MultiheadAttention in):
//   Y = softmax(scale * Q @ K^T + mask, last axis) @ V
// over the views of attention_views() (strided_attention.h). Attributes: q_shape, k_shape,
// v_shape (the logical [..., S, D] shapes), q_view, k_view, v_view, y_view (each the offset and
// then one stride per dim, in elements) and output_shape; the optional mask (input 3) broadcasts
// onto the scores [..., Sq, Sk] as FusedAttention's does.
#include "graph/schemas/strided_attention.h"

#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

// The view named `name` ("q", "k", "v" or "y") of a tensor of `numel` elements, checked to lie
// inside it.
TensorView read_view(const NodeContext& ctx, const std::string& name, const Shape& shape,
                     int64_t numel) {
  const std::vector<int64_t> v = ctx.attr_ints(name + "_view");
  const int rank = shape.rank();
  if (static_cast<int>(v.size()) != rank + 1)
    ctx.fail_model(name + "_view must hold an offset and " + std::to_string(rank) + " strides");
  TensorView view{shape, v[0], std::vector<int64_t>(v.begin() + 1, v.end())};
  int64_t last = view.offset;
  bool empty = false;
  for (int d = 0; d < rank; ++d) {
    if (view.strides[d] < 0 || shape.dims()[d] < 0)
      ctx.fail_model(name + "_view has a negative stride or dim");
    empty = empty || shape.dims()[d] == 0;
    last += (shape.dims()[d] - 1) * view.strides[d];
  }
  if (view.offset < 0 || (!empty && last >= numel))
    ctx.fail_shape(name + "'s view " + shape.to_string() + " runs past its tensor of " +
                   std::to_string(numel) + " elements");
  return view;
}

void infer_strided_attention(InferContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::kFloat32)
      ctx.fail_shape("input " + std::to_string(i) + " must be float32, not " +
                     dtype_name(ctx.input_dtype(i)));
  const AttentionViews views = attention_views(ctx);
  check_attention_mask(ctx, views.q.shape, views.k.shape.dims()[views.k.shape.rank() - 2]);
  ctx.set_output(0, DType::kFloat32, Shape(ctx.attr_ints("output_shape")));
}

}  // namespace

void check_attention_mask(const NodeContext& ctx, const Shape& q, int64_t sk) {
  if (!ctx.has_input(3)) return;
  const Shape& m = ctx.input_shape(3);
  const int rank = q.rank();
  bool ok = m.rank() <= rank;
  for (int i = 1; ok && i <= m.rank(); ++i) {
    const int64_t md = m.dims()[m.rank() - i];
    const int64_t sd = i == 1 ? sk : q.dims()[rank - i];
    ok = md == sd || md == 1;
  }
  if (!ok)
    ctx.fail_shape("mask " + m.to_string() + " does not broadcast onto the scores [..., " +
                   std::to_string(q.dims()[rank - 2]) + ", " + std::to_string(sk) + "]");
}

AttentionViews attention_views(const NodeContext& ctx) {
  const Shape qs(ctx.attr_ints("q_shape")), ks(ctx.attr_ints("k_shape")),
      vs(ctx.attr_ints("v_shape"));
  const int rank = qs.rank();
  if (rank < 2 || ks.rank() != rank || vs.rank() != rank)
    ctx.fail_model("Q, K and V must have one rank of 2 or more, got " + qs.to_string() + ", " +
                   ks.to_string() + ", " + vs.to_string());
  for (int d = 0; d < rank - 2; ++d)
    if (ks.dims()[d] != qs.dims()[d] || vs.dims()[d] != qs.dims()[d])
      ctx.fail_model("Q " + qs.to_string() + ", K " + ks.to_string() + " and V " + vs.to_string() +
                     " must share their leading dims");
  if (ks.dims()[rank - 1] != qs.dims()[rank - 1] || vs.dims()[rank - 2] != ks.dims()[rank - 2])
    ctx.fail_model("Q " + qs.to_string() + ", K " + ks.to_string() + " and V " + vs.to_string() +
                   " do not fit together");
  Shape ys = qs;
  ys.dims()[rank - 1] = vs.dims()[rank - 1];
  const Shape out(ctx.attr_ints("output_shape"));
  if (out.numel() != ys.numel())
    ctx.fail_model("output_shape " + out.to_string() + " does not hold Y " + ys.to_string());
  AttentionViews views;
  views.q = read_view(ctx, "q", qs, ctx.input_shape(0).numel());
  views.k = read_view(ctx, "k", ks, ctx.input_shape(1).numel());
  views.v = read_view(ctx, "v", vs, ctx.input_shape(2).numel());
  views.y = read_view(ctx, "y", ys, out.numel());
  if (views.q.strides[rank - 1] != 1 || views.v.strides[rank - 1] != 1 ||
      views.y.strides[rank - 1] != 1 ||
      (views.k.strides[rank - 1] != 1 && views.k.strides[rank - 2] != 1))
    ctx.fail_model("the views of Q, V and Y need a contiguous last dim, K's one of its last two");
  return views;
}

LUMEN_REGISTER_SCHEMA(StridedAttention, {.min_inputs = 3,
                                         .max_inputs = 4,
                                         .attrs = {{"scale", AttrType::kFloat, true},
                                                   {"q_shape", AttrType::kInts, true},
                                                   {"k_shape", AttrType::kInts, true},
                                                   {"v_shape", AttrType::kInts, true},
                                                   {"q_view", AttrType::kInts, true},
                                                   {"k_view", AttrType::kInts, true},
                                                   {"v_view", AttrType::kInts, true},
                                                   {"y_view", AttrType::kInts, true},
                                                   {"output_shape", AttrType::kInts, true}},
                                         .infer = &infer_strided_attention});

}  // namespace lumen
