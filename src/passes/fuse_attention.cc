// Scaled-dot-product attention fusion:
//   s = MatMul([Q * c1 | Q / c1], [K^T * c3 | K^T / c3]) [* c2 | / c2] [+ mask]
//   p = Softmax(s, last axis)
//   y = MatMul(p, V)
// becomes FusedAttention(Q, K^T, V, [mask], scale = product of the scalar factors,
// k_transposed = 1), whose kernel keeps one block of score rows per thread instead of writing the
// [..., Sq, Sk] scores, their scaled and masked copies and the probabilities. torch 1.13 exports
// nn.MultiheadAttention this way (Q pre-scaled by 1/sqrt(D), K^T from a Transpose, and for causal
// models a Mul by 1 and an Add of the mask). Where K^T is a Transpose of K's last two dims, the
// fused node reads K itself (k_transposed = 0) and the Transpose goes when nothing else reads it
// (GPT-2's decoder transposed its whole key cache at every step); the Transposes and Reshapes
// around stay as they are.
// Q, K^T and V must have one rank and identical leading dims (no MatMul broadcasting), the mask
// must broadcast onto the scores, and every intermediate must have no other reader.
#include <algorithm>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// When value `id` is a Mul or Div of another value by a float32 scalar constant and read only
// by `reader`, returns that node and sets *inner to the other operand and *factor to the factor
// (1/c for a Div); else -1.
int scalar_scaling(const Graph& graph, int id, int reader, int* inner, float* factor) {
  const int p = graph.value(id).producer;
  if (p < 0 || sole_reader(graph, id) != reader) return -1;
  const Node& n = graph.node(p);
  if (n.removed || n.inputs.size() != 2) return -1;
  float c = 0.0f;
  if (n.op == OpKind::kDiv && scalar_constant(graph, n.inputs[1], &c) && c != 0.0f) {
    *inner = n.inputs[0];
    *factor = 1.0f / c;
    return p;
  }
  if (n.op != OpKind::kMul) return -1;
  for (int k = 0; k < 2; ++k) {
    if (scalar_constant(graph, n.inputs[k], &c)) {
      *inner = n.inputs[1 - k];
      *factor = c;
      return p;
    }
  }
  return -1;
}

// Whether the mask of shape `m` broadcasts onto scores of shape `s` without growing them.
bool mask_fits(const Shape& s, const Shape& m) {
  if (m.rank() > s.rank()) return false;
  for (int i = 1; i <= m.rank(); ++i) {
    int64_t md = m.dims()[m.rank() - i];
    if (md != 1 && md != s.dims()[s.rank() - i]) return false;
  }
  return true;
}

class FuseAttentionPass : public Pass {
 public:
  const char* name() const override { return "fuse-attention"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && fuse(graph, id)) changed = true;
    return changed;
  }

 private:
  // Matches the pattern around Softmax node `sm_id` and rewrites it.
  static bool fuse(Graph& graph, int sm_id) {
    const Node& sm = graph.node(sm_id);
    if (sm.op != OpKind::kSoftmax || sm.outputs.size() != 1) return false;
    const TensorType& st = graph.value(sm.inputs[0]).type;
    const int rank = st.shape.rank();
    if (st.dtype != DType::kFloat32 || rank < 2) return false;
    int64_t axis = -1;
    if (auto it = sm.attrs.find("axis"); it != sm.attrs.end()) axis = it->second.as_int();
    if (axis != -1 && axis != rank - 1) return false;

    std::vector<int> chain = {sm_id};
    // Softmax <- [Add mask] <- [scale] <- MatMul(Q', K^T)
    int s = sm.inputs[0];
    int reader = sm_id;
    int mask = -1;
    if (int add = graph.value(s).producer;
        add >= 0 && graph.node(add).op == OpKind::kAdd && sole_reader(graph, s) == sm_id) {
      // The scores are the operand that comes from a MatMul, possibly through a scaling.
      for (int k = 0; k < 2 && mask < 0; ++k) {
        int cand = graph.node(add).inputs[k];
        int inner = -1;
        float f = 1.0f;
        if (scalar_scaling(graph, cand, add, &inner, &f) >= 0) cand = inner;
        if (producer_of(graph, cand, OpKind::kMatMul) >= 0) {
          mask = graph.node(add).inputs[1 - k];
          s = graph.node(add).inputs[k];
        }
      }
      if (mask < 0) return false;
      const TensorType& mt = graph.value(mask).type;
      if (mt.dtype != DType::kFloat32 || !mask_fits(st.shape, mt.shape) || mask == s) return false;
      if (!(graph.value(s).type == st)) return false;
      chain.push_back(add);
      reader = add;
    }
    float scale = 1.0f;
    {
      int inner = -1;
      float f = 1.0f;
      if (int n = scalar_scaling(graph, s, reader, &inner, &f); n >= 0) {
        if (!(graph.value(inner).type == st)) return false;
        chain.push_back(n);
        scale *= f;
        reader = n;
        s = inner;
      }
    }
    const int qk = producer_of(graph, s, OpKind::kMatMul);
    if (qk < 0 || sole_reader(graph, s) != reader) return false;
    chain.push_back(qk);
    int q = graph.node(qk).inputs[0];
    int kt = graph.node(qk).inputs[1];
    // Scalings of Q and of K^T (torch 2.x multiplies both by the root of the scale).
    for (int* operand : {&q, &kt}) {
      int inner = -1;
      float f = 1.0f;
      if (int n = scalar_scaling(graph, *operand, qk, &inner, &f);
          n >= 0 && graph.value(inner).type == graph.value(*operand).type) {
        chain.push_back(n);
        scale *= f;
        *operand = inner;
      }
    }
    // Softmax -> MatMul(p, V)
    const int p = sm.outputs[0];
    const int pv = sole_reader(graph, p);
    if (pv < 0 || graph.node(pv).op != OpKind::kMatMul || graph.node(pv).inputs[0] != p ||
        graph.node(pv).inputs[1] == p)
      return false;
    const int v = graph.node(pv).inputs[1];
    const int out = graph.node(pv).outputs[0];

    // Shapes: one rank, identical leading dims, float32.
    const TensorType& qt = graph.value(q).type;
    const TensorType& ktt = graph.value(kt).type;
    const TensorType& vt = graph.value(v).type;
    if (qt.dtype != DType::kFloat32 || ktt.dtype != DType::kFloat32 || vt.dtype != DType::kFloat32)
      return false;
    if (qt.shape.rank() != rank || ktt.shape.rank() != rank || vt.shape.rank() != rank)
      return false;
    for (int d = 0; d < rank - 2; ++d)
      if (qt.shape.dims()[d] != st.shape.dims()[d] || ktt.shape.dims()[d] != st.shape.dims()[d] ||
          vt.shape.dims()[d] != st.shape.dims()[d])
        return false;

    // K^T made by a Transpose of K's last two dims: the kernel reads K as it is instead.
    int k_in = kt;
    int64_t k_transposed = 1;
    if (const int tr = graph.value(kt).producer;
        tr >= 0 && !graph.node(tr).removed && swaps_last_two(graph, tr)) {
      k_in = graph.node(tr).inputs[0];
      k_transposed = 0;
      if (sole_reader(graph, kt) == qk) chain.push_back(tr);
    }

    std::string base = graph.node(qk).name.empty() ? "attention" : graph.node(qk).name;
    std::vector<int> inputs = {q, k_in, v};
    if (mask >= 0) inputs.push_back(mask);
    Attributes attrs;
    attrs["scale"] = scale;
    attrs["k_transposed"] = k_transposed;
    Node& fused = graph.add_node(OpKind::kFusedAttention, inputs, 1, attrs,
                                 graph.unique_name(base + "_attention"));
    const int fused_id = fused.id;
    const int fused_out = fused.outputs[0];
    graph.infer_node(fused_id);
    if (!(graph.value(fused_out).type == graph.value(out).type)) {
      remove_node(graph, fused_id);
      return false;
    }
    std::vector<int> constants;
    chain.push_back(pv);
    for (int n : chain)
      for (int in : graph.node(n).inputs)
        if (in >= 0 && is_constant(graph.value(in)) && in != mask) constants.push_back(in);
    replace_uses(graph, out, fused_out);
    std::vector<int> order = graph.topological_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it)
      if (std::find(chain.begin(), chain.end(), *it) != chain.end()) remove_node(graph, *it);
    for (int k : constants) release_if_unused(graph, k);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_attention_pass() {
  return std::make_unique<FuseAttentionPass>();
}

}  // namespace lumen
