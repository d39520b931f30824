// LayerNormalization fusion: the decomposed form exporters write for opsets before 17 (torch 1.13
// writes it for nn.LayerNorm)
//   m = ReduceMean(x, axes)      d = Sub(x, m)       p = Pow(d, 2) or Mul(d, d)
//   v = ReduceMean(p, axes)      s = Sqrt(Add(v, eps))
//   y = Div(d, s) [Mul gamma] [Add beta]           (Mul and Add operands in either order)
// becomes one LayerNormalization(x, gamma, beta, axis, epsilon), whose kernel reads each row
// once for its statistics and once to write it, instead of the nine full passes and six
// intermediates of the decomposition. The axes must be the trailing dims [axis, rank) and every
// intermediate must have no other reader. Without a Mul, gamma is a constant of ones. The RMS
// form (no mean subtracted, no beta: Llama's RMSNorm) becomes one RMSNormalization the same way.
#include <algorithm>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// The first reduced axis when ReduceMean node `id` (keepdims=1) reduces exactly the trailing
// dims [axis, rank) of its input, else -1.
int trailing_axis(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  auto keep = n.attrs.find("keepdims");
  if (keep != n.attrs.end() && keep->second.as_int() != 1) return -1;
  const int rank = graph.value(n.inputs[0]).type.shape.rank();
  std::vector<int64_t> axes;
  if (auto it = n.attrs.find("axes"); it != n.attrs.end()) {
    axes = it->second.as_ints();
  } else if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    const Value& a = graph.value(n.inputs[1]);
    if (!a.data.has_value() || a.data->dtype() != DType::kInt64) return -1;
    for (int64_t i = 0; i < a.data->numel(); ++i) axes.push_back(a.data->data<int64_t>()[i]);
  }
  if (axes.empty()) {
    auto noop = n.attrs.find("noop_with_empty_axes");
    if (noop != n.attrs.end() && noop->second.as_int() != 0) return -1;
    return rank > 0 ? 0 : -1;  // every axis
  }
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i)) return -1;
  return static_cast<int>(axes[0]);
}

// Whether a Scale or B value of shape `p` broadcasts onto x's normalised dims [axis, rank) only
// (LayerNormalization's rule), so that the fused op gives the same shape as the Mul or Add.
bool fits_norm_dims(const Shape& x, const Shape& p, int axis) {
  if (p.rank() > x.rank()) return false;
  for (int k = 1; k <= p.rank(); ++k) {
    int xd = x.rank() - k;
    int64_t pd = p.dims()[p.rank() - k];
    if (xd >= axis ? (pd != x.dims()[xd] && pd != 1) : pd != 1) return false;
  }
  return true;
}

// A float32 constant of ones over x's normalised dims [axis, rank): the scale of a norm without
// a Mul.
int ones_over(Graph& graph, const Shape& x, int axis, const char* name) {
  Shape norm(std::vector<int64_t>(x.dims().begin() + axis, x.dims().end()));
  Tensor ones = Tensor::empty(norm, DType::kFloat32);
  std::fill(ones.data<float>(), ones.data<float>() + ones.numel(), 1.0f);
  return graph.add_constant(graph.unique_name(name), ones)->id;
}

class FuseLayerNormPass : public Pass {
 public:
  const char* name() const override { return "fuse-layer-norm"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && (fuse(graph, id) || fuse_rms(graph, id))) changed = true;
    return changed;
  }

 private:
  // The RMS form (Llama's RMSNorm as torch exports it), from its ReduceMean `mean_id`:
  //   p = Pow(x, 2) or Mul(x, x)    m = ReduceMean(p, axes)    s = Sqrt(Add(m, eps))
  //   y = Div(x, s), or Mul(x, Div(1, s) or Reciprocal(s)) (either order)    [Mul gamma]
  // becomes one RMSNormalization(x, gamma, axis, epsilon).
  static bool fuse_rms(Graph& graph, int mean_id) {
    const Node& mean = graph.node(mean_id);
    if (mean.op != OpKind::kReduceMean || mean.outputs.size() != 1) return false;
    const int axis = trailing_axis(graph, mean_id);
    const int p = mean.inputs[0];
    const int square = graph.value(p).producer;
    if (axis < 0 || square < 0 || sole_reader(graph, p) != mean_id) return false;
    const Node& sq = graph.node(square);
    const bool pow2 = sq.op == OpKind::kPow && is_scalar(graph, sq.inputs[1], 2.0f);
    const bool mul2 = sq.op == OpKind::kMul && sq.inputs[0] == sq.inputs[1];
    if (!pow2 && !mul2) return false;
    const int x = sq.inputs[0];
    const TensorType& xt = graph.value(x).type;
    if (xt.dtype != DType::kFloat32 || !(graph.value(p).type == xt)) return false;
    std::vector<int> chain = {square, mean_id};
    const int add_eps = sole_reader(graph, mean.outputs[0]);
    if (add_eps < 0 || graph.node(add_eps).op != OpKind::kAdd) return false;
    float eps = 0.0f;
    if (!scalar_constant(graph, other_input(graph.node(add_eps), mean.outputs[0]), &eps) ||
        eps < 0.0f ||
        !(graph.value(graph.node(add_eps).outputs[0]).type == graph.value(mean.outputs[0]).type))
      return false;
    chain.push_back(add_eps);
    const int sqrt = sole_reader(graph, graph.node(add_eps).outputs[0]);
    if (sqrt < 0 || graph.node(sqrt).op != OpKind::kSqrt) return false;
    chain.push_back(sqrt);
    const int s = graph.node(sqrt).outputs[0];
    const int next = sole_reader(graph, s);
    if (next < 0) return false;
    const Node& n = graph.node(next);
    int out = -1;
    if (n.op == OpKind::kDiv && n.inputs[0] == x && n.inputs[1] == s) {
      chain.push_back(next);
      out = n.outputs[0];
    } else if ((n.op == OpKind::kDiv && n.inputs[1] == s && is_scalar(graph, n.inputs[0], 1.0f)) ||
               n.op == OpKind::kReciprocal) {
      chain.push_back(next);
      const int r = n.outputs[0];
      const int mul = sole_reader(graph, r);
      if (mul < 0 || graph.node(mul).op != OpKind::kMul || other_input(graph.node(mul), r) != x)
        return false;
      chain.push_back(mul);
      out = graph.node(mul).outputs[0];
    } else {
      return false;
    }
    if (!(graph.value(out).type == xt)) return false;
    int gamma = -1;
    if (int mul = sole_reader(graph, out); mul >= 0 && graph.node(mul).op == OpKind::kMul) {
      const int g = other_input(graph.node(mul), out);
      if (g >= 0 && graph.value(g).type.dtype == DType::kFloat32 &&
          fits_norm_dims(xt.shape, graph.value(g).type.shape, axis) &&
          graph.value(graph.node(mul).outputs[0]).type == xt) {
        gamma = g;
        chain.push_back(mul);
        out = graph.node(mul).outputs[0];
      }
    }
    if (gamma < 0) gamma = ones_over(graph, xt.shape, axis, "rms_norm_scale");
    const std::string name = mean.name.empty() ? "rms_norm" : mean.name;
    Attributes attrs;
    attrs["axis"] = static_cast<int64_t>(axis);
    attrs["epsilon"] = eps;
    Node& rms = graph.add_node(OpKind::kRMSNormalization, {x, gamma}, 1, attrs,
                               graph.unique_name(name + "_rms_fused"));
    const int rms_id = rms.id;
    const int rms_out = rms.outputs[0];
    graph.infer_node(rms_id);
    replace_chain(graph, chain, out, rms_out);
    return true;
  }

  // Matches the pattern starting at the first ReduceMean `mean_id` and rewrites it.
  static bool fuse(Graph& graph, int mean_id) {
    const Node& mean = graph.node(mean_id);
    if (mean.op != OpKind::kReduceMean || mean.outputs.size() != 1) return false;
    const int x = mean.inputs[0];
    const TensorType& xt = graph.value(x).type;
    if (xt.dtype != DType::kFloat32) return false;
    const int axis = trailing_axis(graph, mean_id);
    if (axis < 0) return false;
    std::vector<int> chain = {mean_id};  // matched nodes, in order

    const int sub = sole_reader(graph, mean.outputs[0]);
    if (sub < 0 || graph.node(sub).op != OpKind::kSub || graph.node(sub).inputs[0] != x ||
        graph.node(sub).inputs[1] != mean.outputs[0])
      return false;
    chain.push_back(sub);
    const int d = graph.node(sub).outputs[0];
    if (!(graph.value(d).type == xt) || graph.value(d).is_output) return false;
    // d feeds the square and the Div (twice for Mul(d, d)).
    int square = -1, div = -1;
    for (int c : graph.value(d).consumers) {
      const Node& n = graph.node(c);
      if (n.removed) return false;
      if (n.op == OpKind::kDiv && n.inputs[0] == d && n.inputs[1] != d) {
        if (div >= 0 && div != c) return false;
        div = c;
      } else if ((n.op == OpKind::kPow && n.inputs[0] == d &&
                  is_scalar(graph, n.inputs[1], 2.0f)) ||
                 (n.op == OpKind::kMul && n.inputs[0] == d && n.inputs[1] == d)) {
        if (square >= 0 && square != c) return false;
        square = c;
      } else {
        return false;
      }
    }
    if (square < 0 || div < 0) return false;
    chain.push_back(square);

    const int var = sole_reader(graph, graph.node(square).outputs[0]);
    if (var < 0 || graph.node(var).op != OpKind::kReduceMean || trailing_axis(graph, var) != axis)
      return false;
    chain.push_back(var);
    const int add_eps = sole_reader(graph, graph.node(var).outputs[0]);
    if (add_eps < 0 || graph.node(add_eps).op != OpKind::kAdd) return false;
    float eps = 0.0f;
    const int eps_id = other_input(graph.node(add_eps), graph.node(var).outputs[0]);
    if (!scalar_constant(graph, eps_id, &eps) || eps < 0.0f) return false;
    if (!(graph.value(graph.node(add_eps).outputs[0]).type ==
          graph.value(graph.node(var).outputs[0]).type))
      return false;
    chain.push_back(add_eps);
    const int sqrt = sole_reader(graph, graph.node(add_eps).outputs[0]);
    if (sqrt < 0 || graph.node(sqrt).op != OpKind::kSqrt) return false;
    chain.push_back(sqrt);
    if (sole_reader(graph, graph.node(sqrt).outputs[0]) != div ||
        graph.node(div).inputs[1] != graph.node(sqrt).outputs[0])
      return false;
    chain.push_back(div);
    int out = graph.node(div).outputs[0];
    if (!(graph.value(out).type == xt)) return false;

    // Optional affine tail: Mul by gamma, then Add beta.
    int gamma = -1, beta = -1;
    if (int mul = sole_reader(graph, out); mul >= 0 && graph.node(mul).op == OpKind::kMul) {
      int g = other_input(graph.node(mul), out);
      if (g >= 0 && graph.value(g).type.dtype == DType::kFloat32 &&
          fits_norm_dims(xt.shape, graph.value(g).type.shape, axis)) {
        gamma = g;
        chain.push_back(mul);
        out = graph.node(mul).outputs[0];
      }
    }
    if (gamma >= 0) {
      if (int add = sole_reader(graph, out); add >= 0 && graph.node(add).op == OpKind::kAdd) {
        int b = other_input(graph.node(add), out);
        if (b >= 0 && graph.value(b).type.dtype == DType::kFloat32 &&
            fits_norm_dims(xt.shape, graph.value(b).type.shape, axis)) {
          beta = b;
          chain.push_back(add);
          out = graph.node(add).outputs[0];
        }
      }
    }
    if (!(graph.value(out).type == xt)) return false;
    if (gamma < 0) gamma = ones_over(graph, xt.shape, axis, "layer_norm_scale");

    std::string name = graph.node(sub).name.empty() ? "layer_norm" : graph.node(sub).name;
    std::vector<int> inputs = {x, gamma};
    if (beta >= 0) inputs.push_back(beta);
    Attributes attrs;
    attrs["axis"] = static_cast<int64_t>(axis);
    attrs["epsilon"] = eps;
    Node& ln = graph.add_node(OpKind::kLayerNormalization, inputs, 1, attrs,
                              graph.unique_name(name + "_fused"));
    const int ln_id = ln.id;
    const int ln_out = ln.outputs[0];
    graph.infer_node(ln_id);
    replace_chain(graph, chain, out, ln_out);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_layer_norm_pass() {
  return std::make_unique<FuseLayerNormPass>();
}

}  // namespace lumen
