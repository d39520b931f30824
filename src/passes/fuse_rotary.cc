// Rotary embedding fusion: the form Llama-style models export (rotate_half),
//   y = x * Cos(u) + Concat(Neg(x[..., h:]), x[..., :h]) * Sin(u)      (h = head_size / 2)
// with u = Concat(a, a) on the last axis (possibly through Unsqueeze or Reshape), a the angles
// [batch, seq, h], x [batch, heads, seq, head_size] and Cos(u), Sin(u) [batch, 1, seq, head_size],
// becomes one RotaryEmbedding(x, Cos(a'), Sin(a')) (opset 23's form without position ids, a' the
// angles as [batch, seq, h]): one kernel instead of two Slices, a Neg, a Concat, two Muls and an
// Add per rotated tensor. Every commutative operand order is accepted; the Slices, Neg, Concat
// and Muls must have no other reader.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// Whether node `id` is a Slice of `x` along its last axis taking [begin, end) with step 1 (ends
// past the axis clamp).
bool last_axis_slice(const Graph& graph, int id, int x, int64_t begin, int64_t end) {
  AxisSlice s;
  return id >= 0 && !graph.node(id).outputs.empty() &&
         axis_slice(graph, graph.node(id).outputs[0], &s) && s.source == x &&
         s.axis == graph.value(x).type.shape.rank() - 1 && s.begin == begin && s.end == end;
}

// The value behind views (Unsqueeze, Reshape, Identity) of value `id`.
int through_views(const Graph& graph, int id) {
  while (id >= 0) {
    const int p = graph.value(id).producer;
    if (p < 0) break;
    const Node& n = graph.node(p);
    if (n.removed ||
        (n.op != OpKind::kUnsqueeze && n.op != OpKind::kReshape && n.op != OpKind::kIdentity))
      break;
    id = n.inputs[0];
  }
  return id;
}

class FuseRotaryPass : public Pass {
 public:
  const char* name() const override { return "fuse-rotary"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && fuse(graph, id)) changed = true;
    return changed;
  }

 private:
  // Matches y = Add(Mul(x, C), Mul(R, S)) at Add node `add_id` and rewrites it.
  static bool fuse(Graph& graph, int add_id) {
    const Node& add = graph.node(add_id);
    if (add.op != OpKind::kAdd || add.inputs.size() != 2 || add.outputs.size() != 1) return false;
    for (int first = 0; first < 2; ++first) {
      const int m1 = producer_of(graph, add.inputs[first], OpKind::kMul);
      const int m2 = producer_of(graph, add.inputs[1 - first], OpKind::kMul);
      if (m1 < 0 || m2 < 0 || sole_reader(graph, add.inputs[first]) != add_id ||
          sole_reader(graph, add.inputs[1 - first]) != add_id)
        continue;
      for (int xi = 0; xi < 2; ++xi)
        for (int ri = 0; ri < 2; ++ri)
          if (rewrite(graph, add_id, m1, xi, m2, ri)) return true;
    }
    return false;
  }

  // m1 = Mul(x, C) with x its input xi; m2 = Mul(R, S) with R its input ri.
  static bool rewrite(Graph& graph, int add_id, int m1, int xi, int m2, int ri) {
    const int x = graph.node(m1).inputs[xi], c = graph.node(m1).inputs[1 - xi];
    const int r = graph.node(m2).inputs[ri], sv = graph.node(m2).inputs[1 - ri];
    const TensorType& xt = graph.value(x).type;
    if (xt.dtype != DType::kFloat32 || xt.shape.rank() != 4 || !xt.shape.is_static()) return false;
    const int64_t batch = xt.shape[0], seq = xt.shape[2], hd = xt.shape[3], h = hd / 2;
    if (hd % 2 != 0 || h == 0) return false;
    const Shape want_cs{batch, 1, seq, hd};
    if (graph.value(c).type.shape != want_cs || graph.value(sv).type.shape != want_cs ||
        !(graph.value(graph.node(add_id).outputs[0]).type == xt))
      return false;
    // R = Concat(Neg(x[..., h:]), x[..., :h]) on the last axis.
    const int cat = producer_of(graph, r, OpKind::kConcat);
    if (cat < 0 || sole_reader(graph, r) != m2) return false;
    const Node& cn = graph.node(cat);
    if (cn.inputs.size() != 2 || (cn.attrs.at("axis").as_int() + 4) % 4 != 3) return false;
    const int neg = producer_of(graph, cn.inputs[0], OpKind::kNeg);
    if (neg < 0 || sole_reader(graph, cn.inputs[0]) != cat) return false;
    const int hi = graph.value(graph.node(neg).inputs[0]).producer;
    const int lo = graph.value(cn.inputs[1]).producer;
    if (!last_axis_slice(graph, hi, x, h, hd) || !last_axis_slice(graph, lo, x, 0, h) ||
        sole_reader(graph, graph.node(neg).inputs[0]) != neg ||
        sole_reader(graph, cn.inputs[1]) != cat)
      return false;
    // C = Cos(u), S = Sin(u), u = views of Concat(a, a) on the last axis, a [batch, seq, h].
    const int cos = producer_of(graph, c, OpKind::kCos);
    const int sin = producer_of(graph, sv, OpKind::kSin);
    if (cos < 0 || sin < 0 || graph.node(cos).inputs[0] != graph.node(sin).inputs[0]) return false;
    const int twice =
        producer_of(graph, through_views(graph, graph.node(cos).inputs[0]), OpKind::kConcat);
    if (twice < 0) return false;
    const Node& tn = graph.node(twice);
    const int a = tn.inputs.size() == 2 && tn.inputs[0] == tn.inputs[1] ? tn.inputs[0] : -1;
    if (a < 0) return false;
    const TensorType& at = graph.value(a).type;
    const int a_rank = at.shape.rank();
    if (at.dtype != DType::kFloat32 || at.shape.numel() != batch * seq * h || at.shape[-1] != h ||
        (tn.attrs.at("axis").as_int() + a_rank) % a_rank != a_rank - 1)
      return false;

    std::vector<int> chain = {graph.value(graph.node(neg).inputs[0]).producer,
                              neg,
                              graph.value(cn.inputs[1]).producer,
                              cat,
                              m1,
                              m2,
                              add_id};
    const int out = graph.node(add_id).outputs[0];
    const std::string name = graph.node(add_id).name.empty() ? "rotary" : graph.node(add_id).name;
    Value* shape = graph.add_constant(graph.unique_name(name + "_angles_shape"),
                                      Tensor::from_vector<int64_t>({3}, {batch, seq, h}));
    const int angles = graph.add_op("Reshape", {&graph.value(a), shape})->id;
    const int half_cos = graph.add_op("Cos", {&graph.value(angles)})->id;
    const int half_sin = graph.add_op("Sin", {&graph.value(angles)})->id;
    Attributes attrs;
    attrs["interleaved"] = int64_t{0};
    Node& rot = graph.add_node(OpKind::kRotaryEmbedding, {x, half_cos, half_sin}, 1, attrs,
                               graph.unique_name(name + "_rotary"));
    const int rot_id = rot.id;
    const int rot_out = rot.outputs[0];
    graph.infer_node(rot_id);
    replace_chain(graph, chain, out, rot_out);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_rotary_pass() {
  return std::make_unique<FuseRotaryPass>();
}

}  // namespace lumen
