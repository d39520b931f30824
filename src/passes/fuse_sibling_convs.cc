// Sibling-convolution fusion: convolutions that read the same input and whose outputs only a
// Concat along the channels reads, in order (SqueezeNet's fire modules: a 1x1 and a 3x3 "expand"
// convolution of the squeeze output, concatenated), become one convolution whose output is the
// Concat's. Each weight is placed at the centre of the largest kernel (zeros around it), the
// biases are concatenated, and the common activation is kept. The merged convolution does more
// multiply-adds (SqueezeNet: 1.8x its expand layers', each 1x1 weight taking 9 taps) but saves a
// launch per sibling and the Concat's copy, which is what small convolutions cost on a GPU; so
// the pass runs where CUDA is among the backends and at most doubles the work.
#include <algorithm>
#include <cstring>
#include <string>

#include "graph/node_context.h"
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// The most the merged convolution may multiply the siblings' multiply-adds by.
constexpr double kMaxWorkRatio = 2.0;

// A plain 2-D float32 convolution of constant weights (and bias), one group, no auto_pad, no
// residual, not channels-last.
bool mergeable(const Graph& graph, const Node& n) {
  if (n.removed || (n.op != OpKind::kConv && n.op != OpKind::kFusedConv)) return false;
  if (n.inputs.size() < 2 || n.inputs.size() > 3 || n.outputs.size() != 1) return false;
  const Value& w = graph.value(n.inputs[1]);
  if (w.type.dtype != DType::kFloat32 || w.type.shape.rank() != 4 || !is_constant(w)) return false;
  if (n.inputs.size() == 3 && n.inputs[2] >= 0 && !is_constant(graph.value(n.inputs[2])))
    return false;
  const NodeContext ctx(graph, n);
  if (ctx.attr_int("group", 1) != 1 || ctx.attr_string("auto_pad", "NOTSET") != "NOTSET")
    return false;
  if (ctx.attr_int("channels_last", 0) != 0) return false;
  const Value& x = graph.value(n.inputs[0]);
  return x.type.dtype == DType::kFloat32 && x.type.shape.rank() == 4 && x.type.shape.is_static();
}

// The epilogue attributes two convolutions must share.
Attributes epilogue(const Node& n) {
  Attributes a;
  for (const char* key : {"activation", "activation_alpha", "activation_beta"})
    if (auto it = n.attrs.find(key); it != n.attrs.end()) a[key] = it->second;
  return a;
}

bool fuse(Graph& graph, int concat_id) {
  const Node& concat = graph.node(concat_id);
  if (concat.outputs.size() != 1 || concat.inputs.size() < 2) return false;
  const Value& y = graph.value(concat.outputs[0]);
  const int64_t axis = NodeContext(graph, concat).attr_int("axis");
  if (y.type.shape.rank() != 4 || (axis < 0 ? axis + 4 : axis) != 1) return false;
  std::vector<int> convs;
  for (int v : concat.inputs) {
    const Value& part = graph.value(v);
    if (part.producer < 0 || part.is_output || part.consumers.size() != 1) return false;
    if (std::find(convs.begin(), convs.end(), part.producer) != convs.end()) return false;
    if (!mergeable(graph, graph.node(part.producer))) return false;
    convs.push_back(part.producer);
  }
  const Node& first = graph.node(convs[0]);
  const int x = first.inputs[0];
  const std::vector<int64_t> strides = NodeContext(graph, first).attr_ints("strides", {1, 1});
  const Attributes act = epilogue(first);
  int64_t kh = 1, kw = 1, cout = 0;
  for (int c : convs) {
    const Node& n = graph.node(c);
    const NodeContext ctx(graph, n);
    if (n.inputs[0] != x || ctx.attr_ints("strides", {1, 1}) != strides ||
        ctx.attr_ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1} ||
        !attributes_equal(epilogue(n), act))
      return false;
    const Shape& w = graph.value(n.inputs[1]).type.shape;
    kh = std::max(kh, w[2]);
    kw = std::max(kw, w[3]);
    cout += w[0];
  }
  // Every kernel centred in kh x kw, with the padding that keeps its output where it was.
  std::vector<int64_t> pads;
  double work = 0;
  for (int c : convs) {
    const Node& n = graph.node(c);
    const Shape& w = graph.value(n.inputs[1]).type.shape;
    if ((kh - w[2]) % 2 != 0 || (kw - w[3]) % 2 != 0) return false;
    const int64_t dy = (kh - w[2]) / 2, dx = (kw - w[3]) / 2;
    std::vector<int64_t> p = NodeContext(graph, n).attr_ints("pads", {0, 0, 0, 0});
    if (p.size() != 4) return false;
    const std::vector<int64_t> centred = {p[0] + dy, p[1] + dx, p[2] + dy, p[3] + dx};
    if (pads.empty()) pads = centred;
    if (centred != pads) return false;
    work += static_cast<double>(w[0] * w[2] * w[3]);
  }
  if (static_cast<double>(cout * kh * kw) > kMaxWorkRatio * work) return false;

  const int64_t cin = graph.value(x).type.shape[1];
  Tensor weight = Tensor::zeros(Shape{cout, cin, kh, kw}, DType::kFloat32);
  Tensor bias = Tensor::zeros(Shape{cout}, DType::kFloat32);
  float* wd = weight.data<float>();
  float* bd = bias.data<float>();
  int64_t at = 0;
  for (int c : convs) {
    const Node& n = graph.node(c);
    const Tensor& w = *graph.value(n.inputs[1]).data;
    const int64_t co = w.shape()[0], h = w.shape()[2], wi = w.shape()[3];
    if (w.shape()[1] != cin) return false;
    const int64_t dy = (kh - h) / 2, dx = (kw - wi) / 2;
    const float* src = w.data<float>();
    for (int64_t o = 0; o < co; ++o)
      for (int64_t i = 0; i < cin; ++i)
        for (int64_t r = 0; r < h; ++r)
          std::memcpy(wd + (((at + o) * cin + i) * kh + r + dy) * kw + dx,
                      src + ((o * cin + i) * h + r) * wi, static_cast<size_t>(wi) * sizeof(float));
    if (n.inputs.size() == 3 && n.inputs[2] >= 0)
      std::memcpy(bd + at, graph.value(n.inputs[2]).data->data<float>(),
                  static_cast<size_t>(co) * sizeof(float));
    at += co;
  }
  const std::string name = graph.unique_name(first.name + "_siblings");
  const int w_id = graph.add_constant(name + "_w", std::move(weight))->id;
  const int b_id = graph.add_constant(name + "_b", std::move(bias))->id;
  Attributes attrs = act;
  attrs["kernel_shape"] = std::vector<int64_t>{kh, kw};
  attrs["pads"] = pads;
  attrs["strides"] = strides;
  const OpKind op = act.empty() ? OpKind::kConv : OpKind::kFusedConv;
  Node& merged = graph.add_node(op, {x, w_id, b_id}, 1, attrs, name);
  const int merged_id = merged.id, out = merged.outputs[0], y_id = graph.node(concat_id).outputs[0];
  graph.infer_node(merged_id);
  if (!(graph.value(out).type == graph.value(y_id).type) || !can_replace_uses(graph, y_id, out)) {
    remove_node(graph, merged_id);
    return false;
  }
  std::vector<int> chain = {concat_id};
  chain.insert(chain.end(), convs.begin(), convs.end());
  replace_chain(graph, chain, y_id, out);
  return true;
}

class FuseSiblingConvsPass : public Pass {
 public:
  const char* name() const override { return "fuse-sibling-convs"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && graph.node(id).op == OpKind::kConcat)
        changed = fuse(graph, id) || changed;
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_sibling_convs_pass() {
  return std::make_unique<FuseSiblingConvsPass>();
}

}  // namespace lumen
