// Sibling products as one node: MatMuls that read the same A with constant 2-D float32 weights
// (a transformer layer's query, key and value projections; a SwiGLU block's gate and up
// projections, where the exporter wrote them apart) become one GroupedMatMul with an output per
// weight. A decoding step then reads the weights in one launch instead of one each: on CUDA a
// kernel's fixed cost is several microseconds, as much as streaming megabytes of weights. The
// weights stay the model's tensors (no concatenated copy, so packed and device copies are shared
// with every other plan of the model). Run once the other fusions are done (a MatMul that took a
// bias, an activation or a residual is not plain any more), where every backend of the compile has
// a GroupedMatMul kernel (the CPU and CUDA). Where A is an RMSNormalization (Llama's pre-attention
// and pre-MLP norms) read by the group alone, at a decoding step's few rows, the normalization
// becomes the group's prologue (its X and gamma the group's A and last input): CUDA's one launch
// normalizes as it reads, which saves the norm's own launch.
#include <algorithm>
#include <map>

#include "graph/node_context.h"
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

// Where CUDA's one launch takes a group (gemv.cu: at most 8 rows, 4 weights, widths a multiple of
// 4), the only place the prologue saves anything.
constexpr int64_t kPrologueMaxRows = 8;
constexpr size_t kPrologueMaxWeights = 4;

// The RMSNormalization over the last dim that makes A, with a constant float32 gamma [K], whose
// output only `members` read, where the group qualifies for the prologue; else -1.
int rms_norm_prologue(const Graph& graph, int a, const std::vector<int>& members) {
  const Value& av = graph.value(a);
  if (av.producer < 0 || av.is_output || members.size() > kPrologueMaxWeights) return -1;
  const Node& norm = graph.node(av.producer);
  if (norm.op != OpKind::kRMSNormalization || norm.inputs.size() != 2 || norm.inputs[1] < 0)
    return -1;
  const Shape& s = av.type.shape;
  const int64_t k = s[-1];
  if (!s.is_static() || k <= 0 || s.numel() / k > kPrologueMaxRows) return -1;
  const NodeContext ctx(graph, norm);
  const int64_t axis = ctx.attr_int("axis", -1);
  if ((axis != -1 && axis != s.rank() - 1) || ctx.attr_int("stash_type", 1) != 1) return -1;
  const Value& x = graph.value(norm.inputs[0]);
  const Value& gamma = graph.value(norm.inputs[1]);
  if (x.type.dtype != DType::kFloat32 || gamma.type.dtype != DType::kFloat32 ||
      gamma.type.shape != Shape{k} || !is_constant(gamma))
    return -1;
  for (int c : av.consumers)
    if (std::find(members.begin(), members.end(), c) == members.end()) return -1;
  for (int m : members)
    if (graph.value(graph.node(m).outputs[0]).type.shape[-1] % 4 != 0) return -1;
  return av.producer;
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
      const int norm = rms_norm_prologue(graph, a, members);
      std::vector<int> inputs = {norm < 0 ? a : graph.node(norm).inputs[0]};
      for (int m : members) inputs.push_back(graph.node(m).inputs[1]);
      Attributes attrs;
      if (norm >= 0) {
        inputs.push_back(graph.node(norm).inputs[1]);
        attrs["rms_norm_epsilon"] =
            NodeContext(graph, graph.node(norm)).attr_float("epsilon", 1e-5f);
      }
      const std::string name = graph.unique_name(graph.node(members.front()).name + "_grouped");
      const int id = graph
                         .add_node(OpKind::kGroupedMatMul, inputs, static_cast<int>(members.size()),
                                   std::move(attrs), name)
                         .id;
      graph.infer_node(id);
      for (size_t i = 0; i < members.size(); ++i) {
        const int old_out = graph.node(members[i]).outputs[0];
        const int new_out = graph.node(id).outputs[i];
        replace_uses(graph, old_out, new_out);
        remove_node(graph, members[i]);
      }
      if (norm >= 0) remove_node(graph, norm);
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
