// Constant additions through a reshape and back: Swin's shifted windows add the relative position
// bias to the scores [windows, heads, N, N], reshape them to [1, windows, heads, N, N] to add the
// shift mask [1, windows, 1, N, N], and reshape them back before the softmax:
//   Reshape(Add(Reshape(Y), C2))          (the outer Reshape back to Y's shape, C2 a constant)
// is Add(Y, C2') with C2' = Reshape(Expand(C2, the inner shape), Y's shape), and where Y is
// Add(S, C1) with C1 a constant, Add(S, Add(C1, C2')): the two constants fold into one (constant
// folding computes them), and the attention fusion then sees Softmax(S + mask), which it takes.
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// Whether value `id` is a constant the optimizer may rely on (rewrite.h).
bool constant(const Graph& graph, int id) {
  return id >= 0 && is_constant(graph.value(id));
}

// Rewrites the outer Reshape node `id` of the form above; returns whether it did.
bool rewrite(Graph& graph, int id) {
  const Node& outer = graph.node(id);
  if (outer.op != OpKind::kReshape || outer.outputs.size() != 1) return false;
  const int add = producer_of(graph, outer.inputs[0], OpKind::kAdd);
  if (add < 0 || sole_reader(graph, outer.inputs[0]) != id) return false;
  const Node& a = graph.node(add);
  if (a.inputs.size() != 2) return false;
  const int ci = constant(graph, a.inputs[1]) ? 1 : constant(graph, a.inputs[0]) ? 0 : -1;
  if (ci < 0) return false;
  const int c2 = a.inputs[ci];
  const int inner = producer_of(graph, a.inputs[1 - ci], OpKind::kReshape);
  if (inner < 0 || sole_reader(graph, a.inputs[1 - ci]) != add) return false;
  const int y = graph.node(inner).inputs[0];
  const TensorType& yt = graph.value(y).type;
  const TensorType& mid = graph.value(a.inputs[1 - ci]).type;
  const int out = outer.outputs[0];
  if (!yt.shape.is_static() || !mid.shape.is_static() || !(graph.value(out).type == yt) ||
      !(graph.value(a.outputs[0]).type == mid) || graph.value(c2).type.dtype != yt.dtype)
    return false;
  const std::string name = outer.name;
  // C2 over the inner shape, then as Y's shape.
  const std::vector<int64_t>& mid_dims = mid.shape.dims();
  const int mid_shape =
      graph
          .add_constant(graph.unique_name(name + "_mid"),
                        Tensor::from_vector(Shape{static_cast<int64_t>(mid_dims.size())}, mid_dims))
          ->id;
  Node& expand =
      graph.add_node(OpKind::kExpand, {c2, mid_shape}, 1, {}, graph.unique_name(name + "_expand"));
  const int expanded = expand.outputs[0];
  graph.infer_node(expand.id);
  int mask = add_reshape(graph, expanded, yt.shape, name + "_mask");
  // Y = Add(S, C1): the constants together.
  int base = y;
  std::vector<int> chain = {id, add, inner};  // replaced, each node read only by the next
  const int y_add = producer_of(graph, y, OpKind::kAdd);
  if (y_add >= 0 && sole_reader(graph, y) == inner && graph.node(y_add).inputs.size() == 2) {
    const Node& ya = graph.node(y_add);
    const int k = constant(graph, ya.inputs[1]) ? 1 : constant(graph, ya.inputs[0]) ? 0 : -1;
    if (k >= 0 && graph.value(ya.inputs[k]).type.dtype == yt.dtype) {
      const int c1 = ya.inputs[k];
      base = ya.inputs[1 - k];
      chain.push_back(y_add);
      Node& sum = graph.add_node(OpKind::kAdd, {c1, mask}, 1, {}, graph.unique_name(name + "_sum"));
      mask = sum.outputs[0];
      graph.infer_node(sum.id);
    }
  }
  Node& result = graph.add_node(OpKind::kAdd, {base, mask}, 1, {}, graph.unique_name(name));
  const int z = result.outputs[0];
  graph.infer_node(result.id);
  if (!can_replace_uses(graph, out, z) || !(graph.value(z).type == yt)) {
    remove_node(graph, result.id);
    return false;  // the constant nodes left unread go with dead-code removal
  }
  // The chain goes (so that the scores have one reader again).
  replace_chain(graph, chain, out, z);
  return true;
}

class FoldReshapedAddPass : public Pass {
 public:
  const char* name() const override { return "fold-reshaped-add"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && rewrite(graph, id)) changed = true;
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fold_reshaped_add_pass() {
  return std::make_unique<FoldReshapedAddPass>();
}

}  // namespace lumen
