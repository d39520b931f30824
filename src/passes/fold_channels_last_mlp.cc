// Channels-last MLPs as pointwise convolutions: ConvNeXt's block moves the channels last for its
// LayerNorm and two linear layers, then back, then scales by its layer scale and adds the
// residual:
//   x (N, C, H, W) -> Transpose(0,2,3,1) -> LayerNormalization(last axis) -> FusedMatMul(W1, b1,
//   activation) -> FusedMatMul(W2, b2) -> Transpose(0,3,1,2) [-> Mul(gamma, [C, 1, 1])]
// The same arithmetic in x's own layout is AxisLayerNorm over axis 1, then two 1x1 convolutions:
//   AxisLayerNorm(x) -> FusedConv(W1^T, b1, activation) -> Conv((W2 gamma)^T, b2 gamma)
// with the layer scale folded into the second weight and bias. The residual Add that follows then
// fuses into that convolution (fuse-residual), so a block is four launches where it was five with
// a strided element-wise pass (the scale, the transposed read and the residual) of its own: 18
// launches fewer in ConvNeXt-T. Only CUDA gains (the CPU keeps its channels-last regions), so the
// pass runs where CUDA is among the backends, like fold-layout-transposes.
#include <string>
#include <vector>

#include "graph/node_context.h"
#include "graph/op_kind.h"
#include "graph/schemas/movement.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

const std::vector<int64_t> kToLast = {0, 2, 3, 1};
const std::vector<int64_t> kToFirst = {0, 3, 1, 2};

bool is_transpose(const Graph& graph, int id, const std::vector<int64_t>& perm) {
  return id >= 0 && transpose_perm(NodeContext(graph, graph.node(id))) == perm;
}

// A float32 constant of `numel` elements, or -1 (absent) when `allow_absent`.
bool float_constant(const Graph& graph, int id, int64_t numel, bool allow_absent) {
  if (id < 0) return allow_absent;
  const Value& v = graph.value(id);
  return is_constant(v) && v.data->dtype() == DType::kFloat32 && v.data->numel() == numel;
}

// FusedMatMul node `id` as a plain linear layer of rank-2 constant weights [k, n]: no transposes,
// residual or row norm; its bias (input 2) a constant [n] or absent. Its weight's sizes go to *k
// and *n.
bool linear_layer(const Graph& graph, int id, int64_t* k, int64_t* n) {
  if (id < 0) return false;
  const Node& mm = graph.node(id);
  if (mm.inputs.size() < 2 || mm.inputs.size() > 3 || mm.outputs.size() != 1) return false;
  NodeContext ctx(graph, mm);
  if (ctx.attr_int("trans_a", 0) != 0 || ctx.attr_int("trans_b", 0) != 0) return false;
  const Value& w = graph.value(mm.inputs[1]);
  if (!is_constant(w) || w.data->dtype() != DType::kFloat32 || w.data->rank() != 2) return false;
  *k = w.data->shape()[0];
  *n = w.data->shape()[1];
  return float_constant(graph, mm.inputs.size() > 2 ? mm.inputs[2] : -1, *n, true);
}

// A [out, in, 1, 1] convolution weight w^T * scale[o] from the [in, out] matrix w (scale may be
// null), and the bias b[o] * scale[o] (b null: none, -1).
int conv_weight(Graph& graph, const Tensor& w, const float* scale, const std::string& name) {
  const int64_t in = w.shape()[0], out = w.shape()[1];
  Tensor t = Tensor::empty(Shape{out, in, 1, 1}, DType::kFloat32);
  const float* src = w.data<float>();
  float* dst = t.data<float>();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      dst[o * in + i] = scale != nullptr ? src[i * out + o] * scale[o] : src[i * out + o];
  return graph.add_constant(graph.unique_name(name), std::move(t))->id;
}

int conv_bias(Graph& graph, int bias, const float* scale, const std::string& name) {
  if (bias < 0 || scale == nullptr) return bias;
  const Tensor& b = *graph.value(bias).data;
  Tensor t = Tensor::empty(Shape{b.numel()}, DType::kFloat32);
  for (int64_t o = 0; o < b.numel(); ++o) t.data<float>()[o] = b.data<float>()[o] * scale[o];
  return graph.add_constant(graph.unique_name(name), std::move(t))->id;
}

// The chain ending at Transpose `back` (see the top of the file) as AxisLayerNorm and two 1x1
// convolutions.
bool fold(Graph& graph, int back) {
  if (!is_transpose(graph, back, kToFirst)) return false;
  const int m2 = producer_of(graph, graph.node(back).inputs[0], OpKind::kFusedMatMul);
  if (m2 < 0 || sole_reader(graph, graph.node(m2).outputs[0]) != back) return false;
  const int m1 = producer_of(graph, graph.node(m2).inputs[0], OpKind::kFusedMatMul);
  if (m1 < 0 || sole_reader(graph, graph.node(m1).outputs[0]) != m2) return false;
  const int ln = producer_of(graph, graph.node(m1).inputs[0], OpKind::kLayerNormalization);
  if (ln < 0 || sole_reader(graph, graph.node(ln).outputs[0]) != m1) return false;
  const Node& norm = graph.node(ln);
  for (size_t k = 1; k < norm.outputs.size(); ++k)
    if (norm.outputs[k] >= 0 &&
        (graph.value(norm.outputs[k]).is_output || !graph.value(norm.outputs[k]).consumers.empty()))
      return false;  // Mean or InvStdDev read
  const int to_last = producer_of(graph, norm.inputs[0], OpKind::kTranspose);
  if (!is_transpose(graph, to_last, kToLast) || sole_reader(graph, norm.inputs[0]) != ln)
    return false;
  const int x = graph.node(to_last).inputs[0];
  const Value& xv = graph.value(x);
  if (xv.type.dtype != DType::kFloat32 || !xv.type.shape.is_static() || xv.type.shape.rank() != 4)
    return false;
  const int64_t channels = xv.type.shape[1];
  NodeContext norm_ctx(graph, norm);
  if (normalize_axis(norm_ctx.attr_int("axis", -1), 4) != 3 ||
      norm_ctx.attr_int("stash_type", 1) != 1 ||
      !float_constant(graph, norm.inputs.size() > 1 ? norm.inputs[1] : -1, channels, false) ||
      !float_constant(graph, norm.inputs.size() > 2 ? norm.inputs[2] : -1, channels, true))
    return false;
  int64_t k1 = 0, hidden = 0, k2 = 0, n2 = 0;
  if (!linear_layer(graph, m1, &k1, &hidden) || !linear_layer(graph, m2, &k2, &n2) ||
      k1 != channels || k2 != hidden || n2 != channels)
    return false;
  NodeContext m2_ctx(graph, graph.node(m2));
  if (!m2_ctx.attr_string("activation", "").empty()) return false;
  // The layer scale: a Mul of the result by a constant of C elements along the channels.
  int out = graph.node(back).outputs[0];
  int scale_mul = -1;
  const float* scale = nullptr;
  const int reader = sole_reader(graph, out);
  if (reader >= 0 && graph.node(reader).op == OpKind::kMul) {
    const int other = other_input(graph.node(reader), out);
    const Value* g = other >= 0 ? &graph.value(other) : nullptr;
    if (g != nullptr && float_constant(graph, other, channels, false) &&
        g->type.shape.rank() >= 3 && g->type.shape[-1] == 1 && g->type.shape[-2] == 1 &&
        graph.value(graph.node(reader).outputs[0]).type == graph.value(out).type) {
      scale_mul = reader;
      scale = g->data->data<float>();
      out = graph.node(reader).outputs[0];
    }
  }
  if (!can_replace_uses(graph, out, x)) return false;

  const std::string base = graph.node(m1).name;
  Attributes norm_attrs;
  norm_attrs["axis"] = int64_t{1};
  norm_attrs["epsilon"] = norm_ctx.attr_float("epsilon", 1e-5f);
  norm_attrs["axis_last"] = int64_t{0};
  std::vector<int> norm_inputs = {x, norm.inputs[1]};
  if (norm.inputs.size() > 2 && norm.inputs[2] >= 0) norm_inputs.push_back(norm.inputs[2]);
  const int normed = graph
                         .add_node(OpKind::kAxisLayerNorm, norm_inputs, 1, norm_attrs,
                                   graph.unique_name(norm.name + "_axis"))
                         .outputs[0];
  graph.infer_node(graph.value(normed).producer);

  const Node& first = graph.node(m1);
  Attributes conv1_attrs;
  conv1_attrs["kernel_shape"] = std::vector<int64_t>{1, 1};
  for (const char* a : {"activation", "activation_alpha", "activation_beta"}) {
    auto it = first.attrs.find(a);
    if (it != first.attrs.end()) conv1_attrs[a] = it->second;
  }
  std::vector<int> conv1_inputs = {
      normed, conv_weight(graph, *graph.value(first.inputs[1]).data, nullptr, base + "_w_conv")};
  if (first.inputs.size() > 2 && first.inputs[2] >= 0) conv1_inputs.push_back(first.inputs[2]);
  const int hidden_v = graph
                           .add_node(OpKind::kFusedConv, conv1_inputs, 1, conv1_attrs,
                                     graph.unique_name(base + "_conv"))
                           .outputs[0];
  graph.infer_node(graph.value(hidden_v).producer);

  const Node& second = graph.node(m2);
  const std::string base2 = second.name;
  std::vector<int> conv2_inputs = {
      hidden_v, conv_weight(graph, *graph.value(second.inputs[1]).data, scale, base2 + "_w_conv")};
  if (second.inputs.size() > 2 && second.inputs[2] >= 0)
    conv2_inputs.push_back(conv_bias(graph, second.inputs[2], scale, base2 + "_b_conv"));
  Attributes conv2_attrs;
  conv2_attrs["kernel_shape"] = std::vector<int64_t>{1, 1};
  const int conv2 =
      graph
          .add_node(OpKind::kConv, conv2_inputs, 1, conv2_attrs, graph.unique_name(base2 + "_conv"))
          .id;
  graph.infer_node(conv2);
  const int y = graph.node(conv2).outputs[0];
  if (!(graph.value(y).type == graph.value(out).type) || !can_replace_uses(graph, out, y)) {
    // Not expected for a chain that matched; undo by removing what was added.
    remove_node(graph, conv2);
    remove_node(graph, graph.value(hidden_v).producer);
    remove_node(graph, graph.value(normed).producer);
    return false;
  }
  std::vector<int> chain = {to_last, ln, m1, m2, back};
  if (scale_mul >= 0) chain.push_back(scale_mul);
  replace_chain(graph, chain, out, y);
  return true;
}

class FoldChannelsLastMlpPass : public Pass {
 public:
  const char* name() const override { return "fold-channels-last-mlp"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      const Node& n = graph.node(id);
      if (!n.removed && n.op == OpKind::kTranspose) changed = fold(graph, id) || changed;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fold_channels_last_mlp_pass() {
  return std::make_unique<FoldChannelsLastMlpPass>();
}

}  // namespace lumen
