// Channel-shuffle fusion: ShuffleNet's channel shuffle, as exporters write it,
//   [Concat(axis a)] -> Reshape (axis a split into [groups, C / groups]) -> Transpose (swapping
//   those two axes) -> Reshape (back to the Concat's shape) [-> Slices or a Split along a that
//   cut it into equal parts],
// becomes one ChannelShuffle node: one copy from the Concat's inputs into the parts, where the
// chain copied the whole tensor four or five times (Concat, Transpose, the Slices, and two
// Transposes when the channels-last pass keeps the convolutions around it in (N, H, W, C) but
// meets a rank-5 Reshape it cannot carry over). ChannelShuffle joins channels-last regions.
#include <algorithm>

#include "graph/node_context.h"
#include "graph/op_kind.h"
#include "graph/schemas/movement.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

const std::vector<int64_t>& dims_of(const Graph& graph, int value) {
  return graph.value(value).type.shape.dims();
}

// The parts `y` (C channels along `axis`) is cut into by its readers, in channel order: the
// outputs of Slices along `axis` alone, step 1, covering [0, C) in equal pieces, or of one Split
// into equal pieces along `axis`. Empty when its readers are anything else.
std::vector<int> equal_parts(const Graph& graph, int y, int axis) {
  const Value& v = graph.value(y);
  if (v.is_output || v.consumers.empty()) return {};
  const std::vector<int64_t>& dims = v.type.shape.dims();
  const int64_t channels = dims[axis];
  const int rank = static_cast<int>(dims.size());
  std::vector<std::pair<int64_t, int>> parts;  // (first channel, output value)
  int64_t size = -1;
  for (int reader : v.consumers) {
    const Node& n = graph.node(reader);
    if (n.inputs.empty() || n.inputs[0] != y) return {};
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (n.inputs[k] == y) return {};
    if (n.op == OpKind::kSplit) {
      if (v.consumers.size() != 1) return {};
      NodeContext ctx(graph, n);
      int64_t a = ctx.attr_int("axis", 0);
      if ((a < 0 ? a + rank : a) != axis) return {};
      int64_t first = 0;
      for (int out : n.outputs) {
        const int64_t c = dims_of(graph, out)[axis];
        if (size < 0) size = c;
        if (c != size) return {};
        parts.emplace_back(first, out);
        first += c;
      }
      continue;
    }
    if (n.op != OpKind::kSlice || n.outputs.size() != 1) return {};
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (n.inputs[k] >= 0 && !is_constant(graph.value(n.inputs[k]))) return {};
    SliceSpec spec = slice_spec(NodeContext(graph, n));
    for (int d = 0; d < rank; ++d) {
      if (spec.steps[d] != 1) return {};
      if (d != axis && (spec.starts[d] != 0 || spec.output.dims()[d] != dims[d])) return {};
    }
    const int64_t c = spec.output.dims()[axis];
    if (size < 0) size = c;
    if (c != size) return {};
    parts.emplace_back(spec.starts[axis], n.outputs[0]);
  }
  std::sort(parts.begin(), parts.end());
  if (size <= 0 || static_cast<int64_t>(parts.size()) * size != channels) return {};
  std::vector<int> outs;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].first != static_cast<int64_t>(i) * size) return {};
    outs.push_back(parts[i].second);
  }
  return outs;
}

class FuseChannelShufflePass : public Pass {
 public:
  const char* name() const override { return "fuse-channel-shuffle"; }

  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && graph.node(id).op == OpKind::kTranspose)
        changed = fuse(graph, id) || changed;
    return changed;
  }

 private:
  static bool fuse(Graph& graph, int transpose) {
    const Node& t = graph.node(transpose);
    if (t.inputs.empty() || t.outputs.size() != 1) return false;
    const int split = graph.value(t.inputs[0]).producer;
    const int merge = sole_reader(graph, t.outputs[0]);
    if (split < 0 || merge < 0 || sole_reader(graph, t.inputs[0]) != transpose) return false;
    const Node& r1 = graph.node(split);
    const Node& r2 = graph.node(merge);
    if (r1.op != OpKind::kReshape || r2.op != OpKind::kReshape) return false;
    const int x = r1.inputs[0], y = r2.outputs[0];
    const Shape& xs = graph.value(x).type.shape;
    if (!xs.is_static() || !(graph.value(y).type == graph.value(x).type)) return false;
    // r1 splits axis a of x into [groups, C / groups]; t swaps exactly those two axes.
    const std::vector<int64_t>& xd = xs.dims();
    const std::vector<int64_t>& sd = dims_of(graph, t.inputs[0]);
    const int rank = static_cast<int>(xd.size());
    if (static_cast<int>(sd.size()) != rank + 1) return false;
    int axis = 0;
    while (axis < rank && sd[axis] == xd[axis]) ++axis;
    if (axis == rank || sd[axis] * sd[axis + 1] != xd[axis] || sd[axis] < 2 || sd[axis + 1] < 2)
      return false;
    for (int d = axis + 1; d < rank; ++d)
      if (sd[d + 1] != xd[d]) return false;
    std::vector<int64_t> swap(rank + 1);
    for (int d = 0; d <= rank; ++d) swap[d] = d;
    std::swap(swap[axis], swap[axis + 1]);
    if (transpose_perm(NodeContext(graph, t)) != swap) return false;
    const int64_t groups = sd[axis];

    // The shuffled tensor's source: the Concat's inputs where x is a Concat along the axis read
    // by r1 alone, else x itself.
    std::vector<int> inputs = {x};
    int concat = graph.value(x).producer;
    if (concat >= 0) {
      const Node& c = graph.node(concat);
      NodeContext ctx(graph, c);
      const int64_t a = c.op == OpKind::kConcat ? ctx.attr_int("axis") : -1;
      if (c.op == OpKind::kConcat && (a < 0 ? a + rank : a) == axis &&
          sole_reader(graph, x) == split &&
          std::find(c.inputs.begin(), c.inputs.end(), -1) == c.inputs.end())
        inputs = c.inputs;
      else
        concat = -1;
    }
    std::vector<int> parts = equal_parts(graph, y, axis);
    std::vector<int> readers(graph.value(y).consumers);  // the Slices or Split, when parts
    if (parts.empty()) {
      parts = {y};
      readers.clear();
    }
    Attributes attrs;
    attrs["axis"] = int64_t{axis};
    attrs["groups"] = groups;
    Node& fused = graph.add_node(OpKind::kChannelShuffle, inputs, static_cast<int>(parts.size()),
                                 attrs, graph.unique_name(graph.node(transpose).name + "_shuffle"));
    const int fused_id = fused.id;
    const std::vector<int> outs = fused.outputs;
    graph.infer_node(fused_id);
    for (size_t i = 0; i < parts.size(); ++i) {
      if (!(graph.value(outs[i]).type == graph.value(parts[i]).type) ||
          (graph.value(parts[i]).is_output && !can_replace_uses(graph, parts[i], outs[i]))) {
        remove_node(graph, fused_id);
        return false;
      }
    }
    for (size_t i = 0; i < parts.size(); ++i) replace_uses(graph, parts[i], outs[i]);
    std::vector<int> dead(readers);
    dead.insert(dead.end(), {merge, transpose, split});
    if (concat >= 0) dead.push_back(concat);
    for (int n : dead) {
      std::vector<int> ins = graph.node(n).inputs;
      remove_node(graph, n);
      for (int in : ins)
        if (in >= 0) release_if_unused(graph, in);
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_channel_shuffle_pass() {
  return std::make_unique<FuseChannelShufflePass>();
}

}  // namespace lumen
