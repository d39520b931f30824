// Channel-scale fusion: Mul(x, s) with s one value per image and channel, read only by a
// channels-last pointwise FusedConv, becomes that FusedConv with s as its fifth input. In
// EfficientNet, MobileNet-V3 and RegNet-Y every squeeze-and-excitation block ends this way
// (depthwise conv -> pool -> two small convs -> sigmoid -> Mul -> 1x1 projection); the Mul was a
// full pass over the block's widest activations (16 of them, 0.59 ms of EfficientNet-B0's 6.7 on
// 2 cores), and the projection's GEMM can scale the pixels as it packs them instead.
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

int64_t int_attr(const Node& n, const char* name, int64_t fallback) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? fallback : it->second.as_int();
}

// Whether every value of the ints attribute `name` (absent: none) equals `want`.
bool ints_all(const Node& n, const char* name, int64_t want) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return true;
  for (int64_t v : it->second.as_ints())
    if (v != want) return false;
  return true;
}

// The FusedConv that reads `y` alone as its input X, when it can take a channel scale: channels
// last, 1x1 with known weights, stride 1, no padding, one group, no scale yet.
int scale_target(const Graph& graph, int y) {
  const Value& v = graph.value(y);
  if (v.is_output || v.consumers.size() != 1) return -1;
  const int id = v.consumers[0];
  const Node& conv = graph.node(id);
  if (conv.op != OpKind::kFusedConv || conv.inputs.empty() || conv.inputs[0] != y ||
      conv.inputs.size() > 4 || int_attr(conv, "channels_last", 0) != 1 ||
      int_attr(conv, "group", 1) != 1 || !ints_all(conv, "strides", 1) ||
      !ints_all(conv, "pads", 0) || !ints_all(conv, "dilations", 1))
    return -1;
  auto pad = conv.attrs.find("auto_pad");
  if (pad != conv.attrs.end() && pad->second.as_string() != "NOTSET" &&
      pad->second.as_string() != "VALID" && !pad->second.as_string().empty())
    return -1;
  for (size_t k = 1; k < conv.inputs.size(); ++k)
    if (conv.inputs[k] == y) return -1;
  const Value& w = graph.value(conv.inputs[1]);
  if (!is_constant(w) || w.type.shape.rank() != 4 || w.type.shape[2] != 1 || w.type.shape[3] != 1)
    return -1;
  return id;
}

class FuseChannelScalePass : public Pass {
 public:
  const char* name() const override { return "fuse-channel-scale"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      const Node& mul = graph.node(id);
      if (mul.removed || mul.op != OpKind::kMul || mul.inputs.size() != 2) continue;
      const int out = mul.outputs[0];
      const int conv_id = scale_target(graph, out);
      if (conv_id < 0) continue;
      for (int k = 0; k < 2; ++k) {
        const int x = mul.inputs[k], s = mul.inputs[1 - k];
        if (x < 0 || s < 0 || x == s) continue;
        const TensorType& xt = graph.value(x).type;
        const TensorType& st = graph.value(s).type;
        const Shape& xs = xt.shape;
        const Shape& ss = st.shape;
        if (xt != graph.value(out).type || st.dtype != DType::kFloat32 ||
            xt.dtype != DType::kFloat32 || xs.rank() != 4 || ss.rank() != 4 || !xs.is_static() ||
            !ss.is_static() || ss[1] != 1 || ss[2] != 1 || ss[3] != xs[3] ||
            (ss[0] != 1 && ss[0] != xs[0]))
          continue;
        Node& conv = graph.node(conv_id);
        conv.inputs.resize(4, -1);  // bias and residual may be omitted
        conv.inputs.push_back(-1);
        set_input(graph, conv_id, 0, x);
        set_input(graph, conv_id, 4, s);
        remove_node(graph, id);
        graph.infer_node(conv_id);
        changed = true;
        break;
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_channel_scale_pass() {
  return std::make_unique<FuseChannelScalePass>();
}

}  // namespace lumen
