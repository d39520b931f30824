// GELU fusion: the two decomposed forms exporters write become one Gelu (opset 20), whose
// vectorised kernel reads x once instead of five to eight element-wise passes:
//   erf form:  x * 0.5 * (1 + Erf(x / sqrt(2)))         (or Erf(x * (1/sqrt(2)))) -> "none"
//   tanh form: 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))           -> "tanh"
// x^3 as Pow(x, 3) or Mul(Mul(x, x), x). Every commutative operand order is accepted, and the
// product x * 0.5 * (1 + f) in each association torch and other exporters emit:
// (x * a) * 0.5, x * (a * 0.5), (x * 0.5) * a. Every intermediate must have no other reader.
#include <algorithm>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

constexpr float kSqrt2 = 1.41421356237f;
constexpr float kSqrtHalf = 0.70710678118f;
constexpr float kSqrt2OverPi = 0.79788456080f;
constexpr float kCubeCoefficient = 0.044715f;

// Whether node `id` is a live two-input `op` with `a` as one of its inputs; the other goes to
// *other.
bool binary_with(const Graph& graph, int id, OpKind op, int a, int* other) {
  if (id < 0) return false;
  const Node& n = graph.node(id);
  if (n.removed || n.op != op || n.outputs.size() != 1) return false;
  *other = other_input(n, a);
  return *other >= 0;
}

// Whether value `id` is x^3: Pow(x, 3) or Mul(Mul(x, x), x) in either order, each node read only
// by the next; the matched nodes are appended to *chain.
bool is_cube(const Graph& graph, int id, int x, std::vector<int>* chain) {
  const int p = graph.value(id).producer;
  if (p < 0 || graph.node(p).removed) return false;
  const Node& n = graph.node(p);
  if (n.op == OpKind::kPow) {
    if (n.inputs[0] != x || !is_scalar(graph, n.inputs[1], 3.0f)) return false;
    chain->push_back(p);
    return true;
  }
  if (n.op != OpKind::kMul) return false;
  int sq = other_input(n, x);
  int sq_node = producer_of(graph, sq, OpKind::kMul);
  if (sq_node < 0 || sole_reader(graph, sq) != p) return false;
  const Node& s = graph.node(sq_node);
  if (s.inputs[0] != x || s.inputs[1] != x) return false;
  chain->push_back(sq_node);
  chain->push_back(p);
  return true;
}

class FuseGeluPass : public Pass {
 public:
  const char* name() const override { return "fuse-gelu"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      const Node& n = graph.node(id);
      if (n.removed) continue;
      if (n.op == OpKind::kErf && fuse_erf(graph, id)) changed = true;
      if (n.op == OpKind::kTanh && fuse_tanh(graph, id)) changed = true;
    }
    return changed;
  }

 private:
  // Erf node `erf`: its input must be x / sqrt(2) or x * (1/sqrt(2)).
  static bool fuse_erf(Graph& graph, int erf) {
    const int u = graph.node(erf).inputs[0];
    const int scale = graph.value(u).producer;
    if (scale < 0 || sole_reader(graph, u) != erf) return false;
    const Node& s = graph.node(scale);
    int x = -1;
    if (s.op == OpKind::kDiv && is_scalar(graph, s.inputs[1], kSqrt2)) {
      x = s.inputs[0];
    } else if (s.op == OpKind::kMul) {
      if (is_scalar(graph, s.inputs[1], kSqrtHalf)) x = s.inputs[0];
      if (is_scalar(graph, s.inputs[0], kSqrtHalf)) x = s.inputs[1];
    }
    if (x < 0) return false;
    return fuse_tail(graph, x, {scale, erf}, "none");
  }

  // Tanh node `tanh`: its input must be sqrt(2/pi) * (x + 0.044715 * x^3).
  static bool fuse_tanh(Graph& graph, int tanh) {
    const int u = graph.node(tanh).inputs[0];
    const int outer = graph.value(u).producer;
    if (outer < 0 || sole_reader(graph, u) != tanh || graph.node(outer).op != OpKind::kMul)
      return false;
    const Node& o = graph.node(outer);
    int inner = -1;
    if (is_scalar(graph, o.inputs[0], kSqrt2OverPi)) inner = o.inputs[1];
    if (is_scalar(graph, o.inputs[1], kSqrt2OverPi)) inner = o.inputs[0];
    const int add = producer_of(graph, inner, OpKind::kAdd);
    if (add < 0 || sole_reader(graph, inner) != outer) return false;
    // x + 0.044715 * x^3, either order: try each Add operand as x.
    for (int k = 0; k < 2; ++k) {
      const int x = graph.node(add).inputs[k];
      const int term = graph.node(add).inputs[1 - k];
      const int mul = producer_of(graph, term, OpKind::kMul);
      if (mul < 0 || sole_reader(graph, term) != add) continue;
      const Node& m = graph.node(mul);
      int cube = -1;
      if (is_scalar(graph, m.inputs[0], kCubeCoefficient)) cube = m.inputs[1];
      if (is_scalar(graph, m.inputs[1], kCubeCoefficient)) cube = m.inputs[0];
      std::vector<int> chain;
      if (cube < 0 || sole_reader(graph, cube) != mul || !is_cube(graph, cube, x, &chain)) continue;
      for (int n : {mul, add, outer, tanh}) chain.push_back(n);
      return fuse_tail(graph, x, chain, "tanh");
    }
    return false;
  }

  // `chain` ends in the node computing f (Erf or Tanh) of x; matches a = 1 + f and the product
  // 0.5 * x * a, then replaces it all with Gelu(x, approximate).
  static bool fuse_tail(Graph& graph, int x, std::vector<int> chain, const char* approximate) {
    const TensorType& xt = graph.value(x).type;
    if (xt.dtype != DType::kFloat32) return false;
    const int f = graph.node(chain.back()).outputs[0];
    const int add1 = sole_reader(graph, f);
    int one = -1;
    if (!binary_with(graph, add1, OpKind::kAdd, f, &one) || !is_scalar(graph, one, 1.0f))
      return false;
    chain.push_back(add1);
    const int a = graph.node(add1).outputs[0];
    const int m1 = sole_reader(graph, a);
    int other = -1;
    if (!binary_with(graph, m1, OpKind::kMul, a, &other)) return false;
    chain.push_back(m1);
    const int m1_out = graph.node(m1).outputs[0];
    int out = -1;
    int c = -1;
    if (other == x) {  // (x * a) * 0.5
      const int m2 = sole_reader(graph, m1_out);
      if (!binary_with(graph, m2, OpKind::kMul, m1_out, &c) || !is_scalar(graph, c, 0.5f))
        return false;
      chain.push_back(m2);
      out = graph.node(m2).outputs[0];
    } else if (is_scalar(graph, other, 0.5f)) {  // x * (a * 0.5)
      const int m2 = sole_reader(graph, m1_out);
      if (!binary_with(graph, m2, OpKind::kMul, m1_out, &c) || c != x) return false;
      chain.push_back(m2);
      out = graph.node(m2).outputs[0];
    } else {  // (x * 0.5) * a
      const int half = producer_of(graph, other, OpKind::kMul);
      if (half < 0 || sole_reader(graph, other) != m1) return false;
      int h = -1;
      if (!binary_with(graph, half, OpKind::kMul, x, &h) || !is_scalar(graph, h, 0.5f))
        return false;
      chain.push_back(half);
      out = m1_out;
    }
    // Every intermediate has the shape of x (no broadcasting hides in the chain).
    for (int n : chain)
      if (!(graph.value(graph.node(n).outputs[0]).type == xt)) return false;
    // Intermediates other than `out` are read only inside the chain.
    for (int n : chain) {
      const Value& v = graph.value(graph.node(n).outputs[0]);
      if (v.id == out) continue;
      if (v.is_output) return false;
      for (int r : v.consumers)
        if (std::find(chain.begin(), chain.end(), r) == chain.end()) return false;
    }

    std::string base =
        graph.node(chain.back()).name.empty() ? "gelu" : graph.node(chain.back()).name;
    Attributes attrs;
    attrs["approximate"] = std::string(approximate);
    Node& gelu = graph.add_node(OpKind::kGelu, {x}, 1, attrs, graph.unique_name(base + "_gelu"));
    const int gelu_id = gelu.id;
    const int gelu_out = gelu.outputs[0];
    graph.infer_node(gelu_id);
    replace_chain(graph, chain, out, gelu_out);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_gelu_pass() {
  return std::make_unique<FuseGeluPass>();
}

}  // namespace lumen
