// Constant folding: evaluates deterministic nodes whose inputs are all constants (not user
// weights) with the CPU node evaluator, and turns their outputs into constants; nodes whose outputs
// were already computed when the graph was built become constants as they are.
#include "graph/schema.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// Folding precomputes tensors into the model; beyond this many output elements it would cost more
// memory than it saves time.
constexpr int64_t kMaxFoldElements = int64_t{16} << 20;

class ConstantFoldPass : public Pass {
 public:
  const char* name() const override { return "constant-fold"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (fold(graph, id)) changed = true;
    return changed;
  }

 private:
  static bool fold(Graph& graph, int id) {
    Node& n = graph.node(id);
    if (!op_schema(n.op).foldable || graph.is_kept_unfolded(n)) return false;
    for (const auto& [key, attr] : n.attrs)
      if (attr.type() == AttrType::kGraph) return false;
    bool known = true;
    int64_t elements = 0;
    for (int out : n.outputs) {
      const Value& v = graph.value(out);
      if (!v.type.shape.is_static()) return false;
      elements += v.type.shape.numel();
      known = known && v.data.has_value();
    }
    // Outputs already known at build time (Shape of an activation, small folded arithmetic) need
    // no evaluation and no constant inputs.
    if (!known && elements > kMaxFoldElements) return false;
    std::vector<Tensor> ins;
    for (int in : n.inputs) {
      if (known) break;
      if (in >= 0 && !is_constant(graph.value(in))) return false;
      ins.push_back(in < 0 ? Tensor() : *graph.value(in).data);
    }
    if (!known) {
      if (node_evaluator() == nullptr) return false;
      std::vector<Tensor> outs;
      try {
        outs = node_evaluator()(graph, n, ins);
      } catch (const UnsupportedOp&) {
        return false;  // no kernel for this variant: it runs at execute time
      }
      if (outs.size() != n.outputs.size()) return false;
      for (size_t k = 0; k < outs.size(); ++k) {
        const Value& v = graph.value(n.outputs[k]);
        if (!(TensorType{outs[k].dtype(), outs[k].shape()} == v.type))
          throw InvalidModel("constant-fold: node '" + n.name + "' (" + op_name(n.op) +
                             ") evaluated output " + std::to_string(k) + " to " +
                             TensorType{outs[k].dtype(), outs[k].shape()}.to_string() +
                             ", inferred " + v.type.to_string());
      }
      for (size_t k = 0; k < outs.size(); ++k) graph.value(n.outputs[k]).data = outs[k];
    }
    for (int out : n.outputs) graph.value(out).producer = -1;
    std::vector<int> inputs = n.inputs;
    remove_node(graph, id);
    for (int in : inputs)
      if (in >= 0) release_if_unused(graph, in);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_constant_fold_pass() {
  return std::make_unique<ConstantFoldPass>();
}

}  // namespace lumen
