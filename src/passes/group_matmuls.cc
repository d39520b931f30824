// Sibling products as one node: MatMuls that read the same A with constant 2-D float32 weights
// (a transformer layer's query, key and value projections; a SwiGLU block's gate and up
// projections, where the exporter wrote them apart) become one GroupedMatMul with an output per
// weight. A decoding step then reads the weights in one launch instead of one each: on CUDA a
// kernel's fixed cost is several microseconds, as much as streaming megabytes of weights. The
// weights stay the model's tensors (no concatenated copy, so packed and device copies are shared
// with every other plan of the model). Run once the other fusions are done (a MatMul that took a
// bias, an activation or a residual is not plain any more), where every backend of the compile has
// a GroupedMatMul kernel (the CPU and CUDA).
#include <map>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// A MatMul of float32 A (rank 2 or more) by a constant float32 2-D weight.
bool weight_product(const Graph& graph, const Node& n) {
  if (n.removed || n.op != OpKind::kMatMul || n.inputs.size() != 2 || n.inputs[0] < 0 ||
      n.inputs[1] < 0)
    return false;
  const Value& a = graph.value(n.inputs[0]);
  const Value& b = graph.value(n.inputs[1]);
  return a.type.dtype == DType::kFloat32 && a.type.shape.rank() >= 2 &&
         b.type.dtype == DType::kFloat32 && b.type.shape.rank() == 2 && is_constant(b);
}

class GroupMatMulsPass : public Pass {
 public:
  const char* name() const override { return "group-matmuls"; }
  bool run(Graph& graph) override {
    std::map<int, std::vector<int>> by_input;  // A -> its weight products, in topological order
    for (int id : graph.topological_order())
      if (weight_product(graph, graph.node(id))) by_input[graph.node(id).inputs[0]].push_back(id);
    bool changed = false;
    for (const auto& [a, members] : by_input) {
      if (members.size() < 2) continue;
      std::vector<int> inputs = {a};
      for (int m : members) inputs.push_back(graph.node(m).inputs[1]);
      const std::string name = graph.unique_name(graph.node(members.front()).name + "_grouped");
      const int id =
          graph.add_node(OpKind::kGroupedMatMul, inputs, static_cast<int>(members.size()), {}, name)
              .id;
      graph.infer_node(id);
      for (size_t i = 0; i < members.size(); ++i) {
        const int old_out = graph.node(members[i]).outputs[0];
        const int new_out = graph.node(id).outputs[i];
        replace_uses(graph, old_out, new_out);
        remove_node(graph, members[i]);
      }
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_group_matmuls_pass() {
  return std::make_unique<GroupMatMulsPass>();
}

}  // namespace lumen
