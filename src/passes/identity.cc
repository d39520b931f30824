// No-op removal: Identity (and Dropout, which the importer turns into Identity), Reshape, Flatten,
// Squeeze, Unsqueeze and Expand to the input's own shape, Transpose with the identity permutation,
// Cast to the input's own dtype, and Pad by zero everywhere (PyTorch exports AvgPool2d as such a
// Pad and an AveragePool; left in, it cut DenseNet's channels-last regions at every transition).
// Their readers read the input instead.
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// Whether node `n` returns its first input unchanged.
bool is_noop(const Graph& graph, const Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] < 0) return false;
  const Value& in = graph.value(n.inputs[0]);
  const Value& out = graph.value(n.outputs[0]);
  if (!(in.type == out.type) || !in.type.shape.is_static()) return false;
  switch (n.op) {
    case OpKind::kIdentity:
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kExpand:
    case OpKind::kCast:
      return true;
    case OpKind::kPad: {
      // The pads: an attribute before opset 11, then a constant int64 input.
      std::vector<int64_t> pads;
      if (auto it = n.attrs.find("pads"); it != n.attrs.end()) {
        pads = it->second.as_ints();
      } else {
        if (n.inputs.size() < 2 || n.inputs[1] < 0) return false;
        const Value& p = graph.value(n.inputs[1]);
        if (!p.data.has_value() || p.data->dtype() != DType::kInt64) return false;
        pads.assign(p.data->data<int64_t>(), p.data->data<int64_t>() + p.data->numel());
      }
      for (int64_t v : pads)
        if (v != 0) return false;
      return true;
    }
    case OpKind::kTranspose: {
      auto it = n.attrs.find("perm");
      if (it == n.attrs.end()) return in.type.shape.rank() <= 1;
      const std::vector<int64_t>& perm = it->second.as_ints();
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] != static_cast<int64_t>(i)) return false;
      return true;
    }
    default:
      return false;
  }
}

class IdentityPass : public Pass {
 public:
  const char* name() const override { return "identity"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      const Node& n = graph.node(id);
      if (!is_noop(graph, n)) continue;
      int in = n.inputs[0];
      int out = n.outputs[0];
      // A graph output fed straight by a graph input (or a constant) keeps its node, so both
      // names stay.
      if (!can_replace_uses(graph, out, in)) continue;
      replace_uses(graph, out, in);
      remove_node(graph, id);
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_identity_pass() {
  return std::make_unique<IdentityPass>();
}

}  // namespace lumen
