// Residual fusion: Add(conv(x), z), with the convolution a channels-last FusedConv that has no
// activation yet and whose output only this Add reads, becomes that FusedConv with z as its fourth
// input: oneDNN adds z as the output is written (a sum post-op, in place over z when z dies there)
// instead of a separate pass over both tensors. The activation the fuse-activation pass may add
// afterwards applies after the sum, as in ResNet's conv -> add -> relu.
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

bool empty_activation(const Node& conv) {
  auto act = conv.attrs.find("activation");
  return act == conv.attrs.end() || act->second.as_string().empty();
}

// The convolution whose output `y` is, when it can take a residual input.
int residual_target(const Graph& graph, int y) {
  const Value& v = graph.value(y);
  if (v.producer < 0 || v.is_output || v.consumers.size() != 1) return -1;
  const Node& conv = graph.node(v.producer);
  if (conv.op != OpKind::kFusedConv || conv.inputs.size() > 3 || !empty_activation(conv)) return -1;
  auto layout = conv.attrs.find("channels_last");
  if (layout == conv.attrs.end() || layout->second.as_int() != 1) return -1;
  return v.producer;
}

class FuseResidualPass : public Pass {
 public:
  const char* name() const override { return "fuse-residual"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      const Node& add = graph.node(id);
      if (add.removed || add.op != OpKind::kAdd || add.inputs.size() != 2) continue;
      for (int k = 0; k < 2; ++k) {
        int y = add.inputs[k], z = add.inputs[1 - k];
        if (y < 0 || z < 0 || y == z) continue;
        int conv_id = residual_target(graph, y);
        if (conv_id < 0 || graph.value(z).type != graph.value(y).type) continue;
        int out = add.outputs[0];
        if (!can_replace_uses(graph, out, y)) continue;
        Node& conv = graph.node(conv_id);
        conv.inputs.resize(3, -1);  // bias may be omitted
        conv.inputs.push_back(-1);
        set_input(graph, conv_id, 3, z);
        replace_uses(graph, out, y);
        remove_node(graph, id);
        graph.infer_node(conv_id);
        changed = true;
        break;
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_residual_pass() {
  return std::make_unique<FuseResidualPass>();
}

}  // namespace lumen
