// Roll fusion: torch.roll(x, shift, dim) exports as
//   Concat(Slice(x, s:, axis a), Slice(x, :s, axis a)) along a        (0 < s < n = x's size on a)
// two copies and a third to join them. It becomes one Gather(x, [s, ..., n-1, 0, ..., s-1], a):
// one copy through a constant index. Swin's shifted windows roll twice (two axes) before and after
// every second block's attention: 12 steps a block become 4.
#include <cstdint>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// Rewrites Concat node `id` where it is a roll; returns whether it did.
bool rewrite(Graph& graph, int id) {
  const Node& cat = graph.node(id);
  if (cat.op != OpKind::kConcat || cat.inputs.size() != 2 || cat.outputs.size() != 1) return false;
  AxisSlice hi, lo;
  if (!axis_slice(graph, cat.inputs[0], &hi) || !axis_slice(graph, cat.inputs[1], &lo) ||
      hi.source != lo.source || hi.axis != lo.axis)
    return false;
  const Shape& shape = graph.value(hi.source).type.shape;
  int64_t axis = cat.attrs.at("axis").as_int();
  if (axis < 0) axis += shape.rank();
  const int64_t n = shape[hi.axis];
  const int64_t s = hi.begin;
  if (axis != hi.axis || s <= 0 || s >= n || hi.end != n || lo.begin != 0 || lo.end != s)
    return false;
  std::vector<int64_t> index(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) index[static_cast<size_t>(i)] = (i + s) % n;
  const std::string name = cat.name;
  const int out = cat.outputs[0];
  const int x = hi.source;
  const int idx = graph
                      .add_constant(graph.unique_name(name + "_roll_index"),
                                    Tensor::from_vector(Shape{n}, index))
                      ->id;
  Attributes attrs;
  attrs["axis"] = axis;
  Node& gather =
      graph.add_node(OpKind::kGather, {x, idx}, 1, std::move(attrs), graph.unique_name(name));
  const int gathered = gather.outputs[0];
  graph.infer_node(gather.id);
  if (!can_replace_uses(graph, out, gathered)) {
    remove_node(graph, gather.id);
    return false;
  }
  replace_uses(graph, out, gathered);
  remove_node(graph, id);
  return true;
}

class FuseRollPass : public Pass {
 public:
  const char* name() const override { return "fuse-roll"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && rewrite(graph, id)) changed = true;
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_roll_pass() {
  return std::make_unique<FuseRollPass>();
}

}  // namespace lumen
