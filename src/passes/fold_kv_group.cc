// Grouped-query attention without repeated keys: Llama-style exports repeat each key/value head
// for the G query heads that share it (repeat_kv: Unsqueeze [..., Hk, 1, S, D], Expand to
// [..., Hk, G, S, D], Reshape to [..., Hk G, S, D]) before the attention, a copy of the whole
// key/value cache per layer and step. A FusedAttention whose K and V both come out of such a
// repetition with the same G reads the unrepeated [..., Hk, S, D] instead, with kv_group = G
// (query head h reads key/value head h / G). Runs after attention-views, which leaves the
// attention of a decoding step on CUDA as a FusedAttention; every backend's FusedAttention kernel
// takes kv_group (Vulkan's refuses it, so that node goes to another backend).
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

struct Unrepeated {
  int value = -1;   // [..., Hk, S, D]: an existing value, or -1 when `source` must be reshaped
  int source = -1;  // the Expand's input [..., Hk, 1, S, D]
  Shape shape;      // [..., Hk, S, D]
  int64_t group = 0;
};

// `id` as a repetition of key/value heads (rank R, heads at R - 3), or group 0.
Unrepeated unrepeat(const Graph& graph, int id) {
  Unrepeated out;
  const Value& y = graph.value(id);
  const int rank = y.type.shape.rank();
  if (y.producer < 0 || rank < 3 || !y.type.shape.is_static()) return out;
  const Node& reshape = graph.node(y.producer);
  if (reshape.op != OpKind::kReshape || reshape.inputs.empty() || reshape.inputs[0] < 0) return out;
  const Value& e = graph.value(reshape.inputs[0]);
  if (e.producer < 0 || graph.node(e.producer).op != OpKind::kExpand) return out;
  const Node& expand = graph.node(e.producer);
  if (expand.inputs.empty() || expand.inputs[0] < 0) return out;
  const Value& x = graph.value(expand.inputs[0]);
  const Shape& es = e.type.shape;
  const Shape& xs = x.type.shape;
  // x [..., Hk, 1, S, D] -> e [..., Hk, G, S, D] -> y [..., Hk G, S, D]
  if (!es.is_static() || es.rank() != rank + 1 || xs.rank() != rank + 1) return out;
  const int g = rank - 2;  // the group dim in x and e
  if (xs.dims()[g] != 1) return out;
  for (int d = 0; d <= rank; ++d)
    if (d != g && xs.dims()[d] != es.dims()[d]) return out;
  for (int d = 0; d < rank; ++d) {
    const int64_t want =
        d == rank - 3 ? es.dims()[g - 1] * es.dims()[g] : es.dims()[d < g ? d : d + 1];
    if (y.type.shape.dims()[d] != want) return out;
  }
  out.group = es.dims()[g];
  out.source = expand.inputs[0];
  std::vector<int64_t> dims = xs.dims();
  dims.erase(dims.begin() + g);
  out.shape = Shape(dims);
  // x is often an Unsqueeze (or Reshape) of the cache itself: read that.
  if (x.producer >= 0) {
    const Node& up = graph.node(x.producer);
    if ((up.op == OpKind::kUnsqueeze || up.op == OpKind::kReshape) && !up.inputs.empty() &&
        up.inputs[0] >= 0 && graph.value(up.inputs[0]).type.shape == out.shape)
      out.value = up.inputs[0];
  }
  return out;
}

// `u` as a value of its unrepeated shape (a new Reshape of the Expand's input where needed).
int materialize(Graph& graph, const Unrepeated& u) {
  if (u.value >= 0) return u.value;
  return add_reshape(graph, u.source, u.shape, graph.value(u.source).name + "/heads");
}

class FoldKvGroupPass : public Pass {
 public:
  const char* name() const override { return "fold-kv-group"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      const Node& att = graph.node(id);
      if (att.removed || att.op != OpKind::kFusedAttention || att.inputs.size() < 3) continue;
      auto group = att.attrs.find("kv_group");
      if (group != att.attrs.end() && group->second.as_int() != 1) continue;
      const Unrepeated k = unrepeat(graph, att.inputs[1]);
      const Unrepeated v = unrepeat(graph, att.inputs[2]);
      if (k.group < 2 || v.group != k.group) continue;
      const int new_k = materialize(graph, k);
      const int new_v = materialize(graph, v);
      set_input(graph, id, 1, new_k);
      set_input(graph, id, 2, new_v);
      graph.node(id).attrs["kv_group"] = k.group;
      graph.infer_node(id);  // the repetitions left unread go with dead-code
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fold_kv_group_pass() {
  return std::make_unique<FoldKvGroupPass>();
}

}  // namespace lumen
