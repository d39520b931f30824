// Attention views: a FusedAttention whose Q, K (or K^T) and V are Slices, Gathers, Reshapes and
// Transposes of other tensors, and whose result goes through Transposes and Reshapes, becomes one
// StridedAttention that reads and writes those layouts in place. torch exports
// nn.MultiheadAttention (ViT, BERT and GPT-2 in the zoo) as one projection [S, N, 3E] sliced into
// Q, K and V, each reshaped to [S, N*H, D] and transposed heads-first, and the result transposed
// back and reshaped to [S*N, E]: per layer three Slices and four Transposes, each a copy, which
// the views leave out; newer torch unbinds Q, K and V from a [S, N, 3, E] form of the projection
// by Gathers of one constant index, which are views too. A chain is absorbed as far as its steps
// are views without a copy (numpy's rule for reshapes) and the kernel's unit-stride needs hold; the
// rest stays. Run only where every backend of the compile has a StridedAttention kernel (CPU,
// Vulkan and CUDA; Graph::optimize).
#include <algorithm>
#include <vector>

#include "graph/node_context.h"
#include "graph/op_kind.h"
#include "graph/schemas/movement.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

struct View {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

View contiguous(const Shape& shape) {
  View v{shape.dims(), std::vector<int64_t>(shape.rank(), 1), 0};
  for (int d = shape.rank() - 2; d >= 0; --d) v.strides[d] = v.strides[d + 1] * v.dims[d + 1];
  return v;
}

// The strides that read `in`'s elements, in row-major order, as shape `dims`, when that needs no
// copy: each group of old dims that multiplies out to a group of new dims must be contiguous
// within itself (size-1 dims take any stride).
bool reshape_view(const View& in, const std::vector<int64_t>& dims, View* out) {
  std::vector<int64_t> od, os;
  for (size_t i = 0; i < in.dims.size(); ++i) {
    if (in.dims[i] == 0) return false;
    if (in.dims[i] != 1) {
      od.push_back(in.dims[i]);
      os.push_back(in.strides[i]);
    }
  }
  out->dims = dims;
  out->strides.assign(dims.size(), 0);
  out->offset = in.offset;
  size_t i = 0, j = 0;
  while (i < od.size() || j < dims.size()) {
    if (j < dims.size() && dims[j] == 1) {
      ++j;
      continue;
    }
    if (i == od.size() || j == dims.size() || dims[j] <= 0) return false;
    const size_t i0 = i, j0 = j;
    int64_t po = od[i++], pn = dims[j++];
    while (po != pn) {
      if (po < pn) {
        if (i == od.size()) return false;
        po *= od[i++];
      } else {
        if (j == dims.size()) return false;
        pn *= dims[j++];
      }
    }
    for (size_t k = i0; k + 1 < i; ++k)
      if (os[k] != os[k + 1] * od[k + 1]) return false;
    int64_t stride = os[i - 1];
    for (size_t k = j; k-- > j0;) {
      out->strides[k] = stride;
      stride *= dims[k];
    }
  }
  return true;
}

bool reshape_like(OpKind op) {
  return op == OpKind::kReshape || op == OpKind::kFlatten || op == OpKind::kSqueeze ||
         op == OpKind::kUnsqueeze || op == OpKind::kIdentity;
}

// The view of node `n`'s output, given the view `in` of its data input.
bool apply(const Graph& graph, const Node& n, const View& in, View* out) {
  const Shape& shape = graph.value(n.outputs[0]).type.shape;
  if (reshape_like(n.op)) return reshape_view(in, shape.dims(), out);
  if (n.op == OpKind::kTranspose) {
    const std::vector<int64_t> perm = transpose_perm(NodeContext(graph, n));
    *out = in;
    for (size_t d = 0; d < perm.size(); ++d) {
      out->dims[d] = in.dims[perm[d]];
      out->strides[d] = in.strides[perm[d]];
    }
    return true;
  }
  if (n.op == OpKind::kGather) {  // one constant index: the slice at it, its axis kept or dropped
    if (n.inputs.size() != 2 || n.inputs[1] < 0 || !is_constant(graph.value(n.inputs[1])))
      return false;
    const NodeContext ctx(graph, n);
    const std::vector<int64_t> index = ctx.input_ints(1, "indices");
    const int rank = static_cast<int>(in.dims.size());
    int64_t axis = ctx.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (index.size() != 1 || axis < 0 || axis >= rank) return false;
    const int64_t at = index[0] < 0 ? index[0] + in.dims[axis] : index[0];
    if (at < 0 || at >= in.dims[axis]) return false;
    *out = in;
    out->offset += at * in.strides[axis];
    if (graph.value(n.inputs[1]).type.shape.rank() == 0) {
      out->dims.erase(out->dims.begin() + axis);
      out->strides.erase(out->strides.begin() + axis);
    } else {
      out->dims[axis] = 1;
    }
    return out->dims == shape.dims();
  }
  if (n.op == OpKind::kSlice) {
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (n.inputs[k] >= 0 && !is_constant(graph.value(n.inputs[k]))) return false;
    const SliceSpec spec = slice_spec(NodeContext(graph, n));
    *out = in;
    for (size_t d = 0; d < in.dims.size(); ++d) {
      if (spec.steps[d] < 1) return false;
      out->offset += spec.starts[d] * in.strides[d];
      out->strides[d] *= spec.steps[d];
      out->dims[d] = spec.output.dims()[d];
    }
    return true;
  }
  return false;
}

bool movement(const Node& n) {
  return (reshape_like(n.op) || n.op == OpKind::kTranspose || n.op == OpKind::kSlice ||
          n.op == OpKind::kGather) &&
         n.outputs.size() == 1 && !n.inputs.empty() && n.inputs[0] >= 0;
}

// Resolves value `id` as a view of a tensor further up through its movement producers: the
// deepest base whose view satisfies `usable` (with `transposed`, the view's last two dims are
// swapped first); `id` itself with its contiguous view when there is none.
template <typename Usable>
int view_source(const Graph& graph, int id, bool transposed, Usable usable, View* view) {
  std::vector<const Node*> chain;
  for (int cur = id; chain.size() < 8;) {
    const int p = graph.value(cur).producer;
    if (p < 0 || graph.node(p).removed || !movement(graph.node(p))) break;
    chain.push_back(&graph.node(p));
    cur = graph.node(p).inputs[0];
  }
  const auto finish = [&](View v) {
    if (transposed) {
      const size_t r = v.dims.size();
      std::swap(v.dims[r - 2], v.dims[r - 1]);
      std::swap(v.strides[r - 2], v.strides[r - 1]);
    }
    return v;
  };
  for (size_t depth = chain.size(); depth > 0; --depth) {
    const int base = chain[depth - 1]->inputs[0];
    View v = contiguous(graph.value(base).type.shape);
    bool ok = true;
    for (size_t k = depth; ok && k-- > 0;) {
      View next;
      ok = apply(graph, *chain[k], v, &next);
      v = std::move(next);
    }
    if (!ok || v.dims != graph.value(id).type.shape.dims()) continue;
    v = finish(std::move(v));
    if (usable(v)) {
      *view = std::move(v);
      return base;
    }
  }
  *view = finish(contiguous(graph.value(id).type.shape));
  return id;
}

// Follows the attention's output `y` forward through movement nodes that are each the sole
// reader of the value before: returns the last value the view reaches (or `y`) and the strides of
// Y's elements in it.
int output_view(const Graph& graph, int y, View* view) {
  std::vector<const Node*> chain;
  for (int cur = y; chain.size() < 8;) {
    const int r = sole_reader(graph, cur);
    if (r < 0) break;
    const Node& n = graph.node(r);
    if (!movement(n) || n.op == OpKind::kSlice || n.op == OpKind::kGather || n.inputs[0] != cur)
      break;
    chain.push_back(&n);
    cur = n.outputs[0];
  }
  for (size_t len = chain.size(); len > 0; --len) {
    const int z = chain[len - 1]->outputs[0];
    View v = contiguous(graph.value(z).type.shape);
    bool ok = true;
    // Back from z: each step's input view from its output view.
    for (size_t k = len; ok && k-- > 0;) {
      const Node& n = *chain[k];
      const Shape& in_shape = graph.value(n.inputs[0]).type.shape;
      View in;
      if (n.op == OpKind::kTranspose) {
        const std::vector<int64_t> perm = transpose_perm(NodeContext(graph, n));
        in = v;
        for (size_t d = 0; d < perm.size(); ++d) {
          in.dims[perm[d]] = v.dims[d];
          in.strides[perm[d]] = v.strides[d];
        }
      } else {
        ok = reshape_view(v, in_shape.dims(), &in);
      }
      v = std::move(in);
    }
    if (ok && v.strides.back() == 1) {
      *view = std::move(v);
      return z;
    }
  }
  *view = contiguous(graph.value(y).type.shape);
  return y;
}

std::vector<int64_t> view_attr(const View& v) {
  std::vector<int64_t> out = {v.offset};
  out.insert(out.end(), v.strides.begin(), v.strides.end());
  return out;
}

// With `whole_batches_only` (a backend runs StridedAttention as a pair of products per index
// before the heads: CUDA), only attention with more than kDecodeRows query rows per head is
// rewritten (a decoding step's few rows run faster on FusedAttention's split-key kernel), and with
// one such index, or with one dim of them where CUDA's fused kernel takes them all in one launch:
// at most kFusedMaxKeys keys, heads of 32, 64 or 128 for Q, K and V, every view's depth contiguous
// (Swin's windows). Otherwise a batch of several sequences would take a pair of launches each.
constexpr int64_t kDecodeRows = 4;
constexpr int64_t kFusedMaxKeys = 128;  // CUDA's kStridedAttentionMaxKeys (backends/cuda/launch.h)

bool fused_in_one_launch(const View& q, const View& k, const View& v, const View& y) {
  const size_t r = q.dims.size();
  if (r != 4 || k.dims.size() != r || v.dims.size() != r) return false;
  const int64_t depth = q.dims[r - 1];
  if (depth != 32 && depth != 64 && depth != 128) return false;
  if (k.dims[r - 1] != depth || v.dims[r - 1] != depth || k.dims[r - 2] > kFusedMaxKeys)
    return false;
  for (const View* t : {&q, &k, &v, &y})
    if (t->strides.back() != 1) return false;
  return true;
}

bool rewrite(Graph& graph, int id, bool whole_batches_only) {
  const Node& att = graph.node(id);
  if (att.op != OpKind::kFusedAttention || att.outputs.size() != 1) return false;
  if (NodeContext(graph, att).attr_int("kv_group", 1) != 1)
    return false;        // views of Q's heads only
  bool batched = false;  // several indices before the heads, with whole_batches_only
  if (whole_batches_only) {
    // Q's logical shape [..., heads, Sq, D]: more than kDecodeRows; one index before the heads,
    // or several that the fused kernel takes (checked on the views below).
    const Shape& q = graph.value(att.inputs[0]).type.shape;
    int64_t outer = 1;
    for (int d = 0; d + 3 < q.rank(); ++d) outer *= q[d];
    if (q.rank() < 2 || q[q.rank() - 2] <= kDecodeRows) return false;
    batched = outer != 1;
  }
  const bool k_transposed = NodeContext(graph, att).attr_int("k_transposed", 0) == 1;
  const auto unit_last = [](const View& v) { return v.strides.back() == 1; };
  const auto k_usable = [](const View& v) {
    const size_t r = v.strides.size();
    return v.strides[r - 1] == 1 || v.strides[r - 2] == 1;
  };
  View q, k, v, y;
  const int q_src = view_source(graph, att.inputs[0], false, unit_last, &q);
  const int k_src = view_source(graph, att.inputs[1], k_transposed, k_usable, &k);
  const int v_src = view_source(graph, att.inputs[2], false, unit_last, &v);
  const int out = att.outputs[0];
  const int z = output_view(graph, out, &y);
  if (q_src == att.inputs[0] && k_src == att.inputs[1] && v_src == att.inputs[2] && z == out)
    return false;
  if (batched && !fused_in_one_launch(q, k, v, y)) return false;
  std::vector<int> inputs = {q_src, k_src, v_src};
  if (att.inputs.size() > 3 && att.inputs[3] >= 0) inputs.push_back(att.inputs[3]);
  Attributes attrs;
  attrs["scale"] = NodeContext(graph, att).attr_float("scale", 1.0f);
  attrs["q_shape"] = q.dims;
  attrs["k_shape"] = k.dims;
  attrs["v_shape"] = v.dims;
  attrs["q_view"] = view_attr(q);
  attrs["k_view"] = view_attr(k);
  attrs["v_view"] = view_attr(v);
  attrs["y_view"] = view_attr(y);
  attrs["output_shape"] = graph.value(z).type.shape.dims();
  const std::string name = att.name + "_views";
  Node& fused = graph.add_node(OpKind::kStridedAttention, inputs, 1, std::move(attrs),
                               graph.unique_name(name));
  const int fused_id = fused.id;
  const int fused_out = fused.outputs[0];
  graph.infer_node(fused_id);
  if (!can_replace_uses(graph, z, fused_out)) {
    remove_node(graph, fused_id);
    return false;
  }
  // The output chain, from its end back to the attention, goes with the attention.
  std::vector<int> dead;
  for (int cur = z; cur != out;) {
    const int p = graph.value(cur).producer;
    dead.push_back(p);
    cur = graph.node(p).inputs[0];
  }
  dead.push_back(id);
  replace_uses(graph, z, fused_out);
  for (int n : dead) remove_node(graph, n);
  return true;
}

class AttentionViewsPass : public Pass {
 public:
  explicit AttentionViewsPass(bool whole_batches_only) : whole_batches_only_(whole_batches_only) {}
  const char* name() const override { return "attention-views"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && rewrite(graph, id, whole_batches_only_)) changed = true;
    return changed;
  }

 private:
  bool whole_batches_only_;
};

}  // namespace

std::unique_ptr<Pass> make_attention_views_pass(bool whole_batches_only) {
  return std::make_unique<AttentionViewsPass>(whole_batches_only);
}

}  // namespace lumen
