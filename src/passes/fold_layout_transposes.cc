// Layout-transpose folding: the Transposes a channels-last block writes between (N, C, H, W)
// convolutions (ConvNeXt: Conv -> Transpose(0,2,3,1) -> LayerNorm -> MatMuls ->
// Transpose(0,3,1,2) -> scale and residual Add) stop being copies of their own:
//  - LayerNormalization over the last axis of a Transpose that moved one axis last becomes
//    AxisLayerNorm over that axis of the Transpose's input, writing channels-last; and where the
//    norm's only reader is the Transpose that moves the axis back, AxisLayerNorm writes the
//    input's own layout and that Transpose goes too.
//  - A FusedElementwise input made by a Transpose only it reads is read through the Transpose in
//    place (the node's `perms` attribute; the kernels gather it by strides).
// Each fold removes a launch and a round trip of the tensor through memory.
#include <numeric>

#include "graph/fused_elementwise.h"
#include "graph/node_context.h"
#include "graph/op_kind.h"
#include "graph/schemas/movement.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

std::vector<int64_t> perm_of(const Graph& graph, int transpose) {
  return transpose_perm(NodeContext(graph, graph.node(transpose)));
}

// The axis a perm moves last, keeping the others in order ([0, 2, 3, 1] -> 1), or -1.
int moved_last(const std::vector<int64_t>& perm) {
  const int rank = static_cast<int>(perm.size());
  if (rank < 2) return -1;
  const auto axis = static_cast<int>(perm[rank - 1]);
  for (int d = 0, src = 0; d < rank - 1; ++d, ++src) {
    if (src == axis) ++src;
    if (perm[d] != src) return -1;
  }
  return axis == rank - 1 ? -1 : axis;
}

// Whether `perm` moves the last axis back to `axis` ([0, 3, 1, 2] for axis 1 of rank 4).
bool moves_last_to(const std::vector<int64_t>& perm, int axis) {
  const auto rank = static_cast<int64_t>(perm.size());
  std::vector<int64_t> want;
  for (int64_t d = 0; d < rank; ++d) want.push_back(d < axis ? d : d == axis ? rank - 1 : d - 1);
  return perm == want;
}

bool is_float_static(const Value& v) {
  return (v.type.dtype == DType::kFloat32 || v.type.dtype == DType::kFloat16) &&
         v.type.shape.is_static();
}

// Transpose -> LayerNormalization(last axis) [-> the inverse Transpose] as one AxisLayerNorm.
bool fold_norm(Graph& graph, int ln_id) {
  const Node& ln = graph.node(ln_id);
  if (ln.inputs.size() < 2 || ln.outputs.empty()) return false;
  for (size_t k = 1; k < ln.outputs.size(); ++k)
    if (ln.outputs[k] >= 0 &&
        (graph.value(ln.outputs[k]).is_output || !graph.value(ln.outputs[k]).consumers.empty()))
      return false;  // Mean or InvStdDev read
  const int transpose = producer_of(graph, ln.inputs[0], OpKind::kTranspose);
  if (transpose < 0 || sole_reader(graph, ln.inputs[0]) != ln_id) return false;
  const int x = graph.node(transpose).inputs[0];
  const Value& xv = graph.value(x);
  if (!is_float_static(xv)) return false;
  const int rank = xv.type.shape.rank();
  NodeContext ctx(graph, ln);
  if (normalize_axis(ctx.attr_int("axis", -1), rank) != rank - 1) return false;
  if (ctx.attr_int("stash_type", 1) != 1) return false;
  const int axis = moved_last(perm_of(graph, transpose));
  if (axis < 0) return false;
  const int64_t channels = xv.type.shape[axis];
  for (size_t k = 1; k < ln.inputs.size(); ++k)
    if (ln.inputs[k] >= 0 && graph.value(ln.inputs[k]).type.shape.numel() != channels) return false;
  // The norm's sole reader moving the axis back: AxisLayerNorm writes x's own layout.
  const int back = sole_reader(graph, ln.outputs[0]);
  const bool same_layout = back >= 0 && graph.node(back).op == OpKind::kTranspose &&
                           moves_last_to(perm_of(graph, back), axis);
  const int out = same_layout ? graph.node(back).outputs[0] : ln.outputs[0];
  Attributes attrs;
  attrs["axis"] = int64_t{axis};
  attrs["epsilon"] = ctx.attr_float("epsilon", 1e-5f);
  attrs["axis_last"] = int64_t{same_layout ? 0 : 1};
  std::vector<int> inputs = {x, ln.inputs[1]};
  if (ln.inputs.size() > 2 && ln.inputs[2] >= 0) inputs.push_back(ln.inputs[2]);
  Node& fused = graph.add_node(OpKind::kAxisLayerNorm, inputs, 1, attrs,
                               graph.unique_name(ln.name + "_axis"));
  const int fused_id = fused.id, y = fused.outputs[0];
  graph.infer_node(fused_id);
  if (!(graph.value(y).type == graph.value(out).type) || !can_replace_uses(graph, out, y)) {
    remove_node(graph, fused_id);
    return false;
  }
  std::vector<int> chain = {transpose, ln_id};
  if (same_layout) chain.push_back(back);
  replace_chain(graph, chain, out, y);
  return true;
}

// FusedElementwise inputs made by Transposes only it reads, read in place through `perms`.
bool fold_elementwise(Graph& graph, int id) {
  const Node& n = graph.node(id);
  std::vector<int> ranks;
  ranks.reserve(n.inputs.size());
  for (int v : n.inputs) ranks.push_back(graph.value(v).type.shape.rank());
  std::vector<std::vector<int64_t>> perms;
  std::string error;
  auto it = n.attrs.find("perms");
  if (!decode_ew_perms(it == n.attrs.end() ? std::vector<int64_t>{} : it->second.as_ints(), ranks,
                       &perms, &error))
    return false;
  bool changed = false;
  std::vector<int> dead;
  std::vector<int> inputs = n.inputs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int transpose = producer_of(graph, inputs[k], OpKind::kTranspose);
    if (transpose < 0 || sole_reader(graph, inputs[k]) != id) continue;
    const int x = graph.node(transpose).inputs[0];
    const Value& xv = graph.value(x);
    if (xv.type.dtype != DType::kFloat32 || !xv.type.shape.is_static()) continue;
    // Read T(x) through perms[k]: element dims e of the read are x's dims t[p[e]].
    const std::vector<int64_t> t = perm_of(graph, transpose);
    std::vector<int64_t> combined(t.size());
    for (size_t e = 0; e < t.size(); ++e)
      combined[e] = t[perms[k].empty() ? e : static_cast<size_t>(perms[k][e])];
    perms[k] = combined;
    set_input(graph, id, static_cast<int>(k), x);
    dead.push_back(transpose);
    changed = true;
  }
  if (!changed) return false;
  std::vector<int64_t> flat;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int rank = graph.value(graph.node(id).inputs[k]).type.shape.rank();
    for (int d = 0; d < rank; ++d)
      flat.push_back(perms[k].empty() ? d : perms[k][static_cast<size_t>(d)]);
  }
  graph.node(id).attrs["perms"] = flat;
  graph.infer_node(id);
  for (int t : dead) {
    const Value& out = graph.value(graph.node(t).outputs[0]);
    if (out.consumers.empty() && !out.is_output) remove_node(graph, t);
  }
  return true;
}

class FoldLayoutTransposesPass : public Pass {
 public:
  const char* name() const override { return "fold-layout-transposes"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      const Node& n = graph.node(id);
      if (n.removed) continue;
      if (n.op == OpKind::kLayerNormalization)
        changed = fold_norm(graph, id) || changed;
      else if (n.op == OpKind::kFusedElementwise)
        changed = fold_elementwise(graph, id) || changed;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fold_layout_transposes_pass() {
  return std::make_unique<FoldLayoutTransposesPass>();
}

}  // namespace lumen
