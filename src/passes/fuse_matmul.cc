// MatMul/Gemm epilogue fusion: MatMul -> Add(bias) -> activation (Gelu included) and Gemm ->
// activation become one FusedMatMul, whose kernel adds the bias and applies the activation as each
// output is written (a oneDNN matmul with bias and an eltwise post-op on the CPU). A MatMulNBits
// takes its activation the same way (Lumen's epilogue of graph/matmul_nbits.h): a decoder's FFN
// with 4-bit weights is then one launch fewer per layer on CUDA.
#include "graph/matmul_nbits.h"
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// The only reader of node `id`'s single output, or -1 (several readers, a graph output).
int sole_reader(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.outputs.size() != 1) return -1;
  const Value& y = graph.value(n.outputs[0]);
  if (y.is_output || y.consumers.size() != 1) return -1;
  return y.consumers[0];
}

bool has_activation(const Node& n) {
  auto it = n.attrs.find("activation");
  return it != n.attrs.end() && !it->second.as_string().empty();
}

// A float32 MatMul whose operands have rank 2 or more (FusedMatMul's domain).
bool fusible_matmul(const Graph& graph, const Node& n) {
  if (n.op != OpKind::kMatMul || n.inputs.size() != 2) return false;
  const Value& a = graph.value(n.inputs[0]);
  const Value& b = graph.value(n.inputs[1]);
  return a.type.dtype == DType::kFloat32 && a.type.shape.rank() >= 2 && b.type.shape.rank() >= 2;
}

class FuseMatMulPass : public Pass {
 public:
  const char* name() const override { return "fuse-matmul"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      if (graph.node(id).removed) continue;
      if (fuse_bias(graph, id) || fuse_activation(graph, id)) changed = true;
    }
    return changed;
  }

 private:
  // MatMul (or a FusedMatMul without bias and activation) -> Add(y, bias) with bias broadcast
  // along rows: one FusedMatMul with that bias.
  static bool fuse_bias(Graph& graph, int mm_id) {
    const Node& mm = graph.node(mm_id);
    bool plain = fusible_matmul(graph, mm);
    bool bare = mm.op == OpKind::kFusedMatMul && mm.inputs.size() == 2 && !has_activation(mm);
    if (!plain && !bare) return false;
    int add_id = sole_reader(graph, mm_id);
    if (add_id < 0) return false;
    const Node& add = graph.node(add_id);
    if (add.op != OpKind::kAdd || add.inputs.size() != 2) return false;
    int y = mm.outputs[0];
    int other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
    if (other == y || other < 0) return false;
    const Value& out = graph.value(add.outputs[0]);
    if (!(out.type == graph.value(y).type)) return false;
    // The bias must exist before the matmul runs: a constant or weight, or a graph input.
    const Value& ov = graph.value(other);
    if (ov.producer >= 0) return false;
    int add_out = add.outputs[0];
    if (!can_replace_uses(graph, add_out, y)) return false;
    int bias = row_bias_value(graph, other, graph.value(y).type.shape[-1]);
    if (bias < 0) return false;
    Node& node = graph.node(mm_id);
    node.op = OpKind::kFusedMatMul;
    graph.node(mm_id).inputs.push_back(bias);
    graph.value(bias).consumers.push_back(mm_id);
    replace_uses(graph, add_out, y);
    remove_node(graph, add_id);
    if (bias != other) release_if_unused(graph, other);
    graph.infer_node(mm_id);
    return true;
  }

  // MatMul, a FusedMatMul without activation, or a Gemm that FusedMatMul can express (alpha 1;
  // C absent, or beta 1 and C a row [N] / [1, N]) -> activation: one FusedMatMul.
  static bool fuse_activation(Graph& graph, int mm_id) {
    const Node& mm = graph.node(mm_id);
    const bool nbits = mm.op == OpKind::kMatMulNBits && !has_activation(mm);
    const bool ok =
        nbits || fusible_matmul(graph, mm) ||
        (mm.op == OpKind::kFusedMatMul && !has_activation(mm) && !fused_matmul_has_norm(mm)) ||
        gemm_fits_fused_matmul(graph, mm);
    if (!ok) return false;
    int act_id = sole_reader(graph, mm_id);
    if (act_id < 0) return false;
    const Node& act = graph.node(act_id);
    if (act.inputs.empty() || act.inputs[0] != mm.outputs[0] || act.outputs.size() != 1)
      return false;
    Attributes extra;
    if (act.op == OpKind::kGelu) {  // an activation of matmuls only (transformers' FFN)
      auto it = act.attrs.find("approximate");
      const bool tanh = it != act.attrs.end() && it->second.as_string() == "tanh";
      extra["activation"] = tanh ? "GeluTanh" : "GeluErf";
    } else if (!activation_attributes(graph, act, &extra)) {
      return false;
    }
    int y = mm.outputs[0], act_out = act.outputs[0];
    if (!can_replace_uses(graph, act_out, y)) return false;
    std::vector<int> act_inputs = act.inputs;
    if (mm.op == OpKind::kGemm) gemm_to_fused_matmul(graph, mm_id);
    Node& node = graph.node(mm_id);
    if (!nbits) node.op = OpKind::kFusedMatMul;
    for (auto& [key, value] : extra) node.attrs[key] = value;
    replace_uses(graph, act_out, y);
    remove_node(graph, act_id);
    graph.infer_node(mm_id);
    for (size_t k = 1; k < act_inputs.size(); ++k)
      if (act_inputs[k] >= 0) release_if_unused(graph, act_inputs[k]);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_matmul_pass() {
  return std::make_unique<FuseMatMulPass>();
}

}  // namespace lumen
