// Transpose folding: a Transpose that swaps only the last two dimensions of a MatMul operand (as
// attention's K^T) is dropped and the MatMul becomes a FusedMatMul with trans_a / trans_b, whose
// kernel reads that operand through swapped strides (no copy).
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

class FoldTransposePass : public Pass {
 public:
  const char* name() const override { return "fold-transpose"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      Node& n = graph.node(id);
      if (n.removed) continue;
      bool matmul = n.op == OpKind::kMatMul || n.op == OpKind::kFusedMatMul;
      if (!matmul || n.inputs.size() < 2) continue;
      for (int k = 0; k < 2; ++k) {
        int v = graph.node(id).inputs[k];
        const Value& x = graph.value(v);
        if (x.producer < 0 || !swaps_last_two(graph, x.producer)) continue;
        const Value& other = graph.value(graph.node(id).inputs[1 - k]);
        if (other.type.shape.rank() < 2 || other.type.dtype != DType::kFloat32) continue;
        int t_id = x.producer;
        int source = graph.node(t_id).inputs[0];
        Node& mm = graph.node(id);
        const char* flag = k == 0 ? "trans_a" : "trans_b";
        int64_t was = 0;
        if (auto it = mm.attrs.find(flag); it != mm.attrs.end()) was = it->second.as_int();
        mm.op = OpKind::kFusedMatMul;
        mm.attrs[flag] = int64_t{1 - was};
        set_input(graph, id, k, source);
        graph.infer_node(id);
        const Value& tv = graph.value(v);
        if (tv.consumers.empty() && !tv.is_output) remove_node(graph, t_id);
        changed = true;
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fold_transpose_pass() {
  return std::make_unique<FoldTransposePass>();
}

}  // namespace lumen
