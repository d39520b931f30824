// Conv + BatchNormalization folding: a float32 Conv with constant weights (and constant bias, if
// any) whose only reader is an inference BatchNormalization with constant scale, bias, mean and
// variance becomes one Conv with new constant weights W * s and bias (B - mean) * s + beta, where
// s = scale / sqrt(var + epsilon) per output channel.
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// Whether `id` is a float32 constant of `numel` elements.
bool is_float_constant(const Graph& graph, int id, int64_t numel) {
  if (id < 0) return false;
  const Value& v = graph.value(id);
  return is_constant(v) && v.data->dtype() == DType::kFloat32 && v.data->numel() == numel;
}

class ConvBnFoldPass : public Pass {
 public:
  const char* name() const override { return "conv-bn-fold"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && fold(graph, id)) changed = true;
    return changed;
  }

 private:
  static bool fold(Graph& graph, int bn_id) {
    const Node& bn = graph.node(bn_id);
    if (bn.op != OpKind::kBatchNormalization || bn.outputs.size() != 1) return false;
    const Value& x = graph.value(bn.inputs[0]);
    if (x.producer < 0 || x.is_output || x.consumers.size() != 1) return false;
    if (x.type.dtype != DType::kFloat32) return false;
    int conv_id = x.producer;
    const Node& conv = graph.node(conv_id);
    if (conv.op != OpKind::kConv || conv.outputs.size() != 1) return false;
    int w_id = conv.inputs[1];
    const Value& w = graph.value(w_id);
    if (!is_constant(w) || w.data->dtype() != DType::kFloat32 || w.data->rank() < 1) return false;
    int64_t channels = w.data->shape()[0];
    int b_id = conv.inputs.size() > 2 ? conv.inputs[2] : -1;
    if (b_id >= 0 && !is_float_constant(graph, b_id, channels)) return false;
    std::vector<double> s, shift;
    if (!batch_norm_affine(graph, bn, channels, &s, &shift)) return false;

    int conv_out = conv.outputs[0];
    int bn_out = bn.outputs[0];
    if (!can_replace_uses(graph, bn_out, conv_out)) return false;

    const float* bias = b_id >= 0 ? graph.value(b_id).data->data<float>() : nullptr;
    const float* weights = w.data->data<float>();
    int64_t per_channel = channels ? w.data->numel() / channels : 0;

    Tensor new_w = Tensor::empty(w.data->shape(), DType::kFloat32);
    Tensor new_b = Tensor::empty(Shape{channels}, DType::kFloat32);
    float* nw = new_w.data<float>();
    float* nb = new_b.data<float>();
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t i = 0; i < per_channel; ++i)
        nw[c * per_channel + i] = static_cast<float>(weights[c * per_channel + i] * s[c]);
      nb[c] = static_cast<float>((bias ? bias[c] : 0.0) * s[c] + shift[c]);
    }
    std::string base = graph.node(conv_id).name.empty() ? "conv" : graph.node(conv_id).name;
    int new_w_id = graph.add_constant(graph.unique_name(base + "_bn_weight"), new_w)->id;
    int new_b_id = graph.add_constant(graph.unique_name(base + "_bn_bias"), new_b)->id;

    set_input(graph, conv_id, 1, new_w_id);
    if (graph.node(conv_id).inputs.size() > 2) {
      set_input(graph, conv_id, 2, new_b_id);
    } else {
      graph.node(conv_id).inputs.push_back(new_b_id);
      graph.value(new_b_id).consumers.push_back(conv_id);
    }
    std::vector<int> bn_inputs = graph.node(bn_id).inputs;
    replace_uses(graph, bn_out, conv_out);
    remove_node(graph, bn_id);
    graph.infer_node(conv_id);
    release_if_unused(graph, w_id);
    if (b_id >= 0) release_if_unused(graph, b_id);
    for (size_t k = 1; k < bn_inputs.size(); ++k) release_if_unused(graph, bn_inputs[k]);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_conv_bn_fold_pass() {
  return std::make_unique<ConvBnFoldPass>();
}

}  // namespace lumen
