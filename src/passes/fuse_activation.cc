// Activation fusion: Conv -> activation becomes FusedConv, whose kernel applies the activation as
// each output is written (a oneDNN eltwise post-op on the CPU).
#include <limits>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// oneDNN 2.6 runs a pointwise (1x1, stride 1, unpadded, ungrouped) convolution on plain layouts
// as a GEMM, and there an eltwise post-op is a slow second pass: measured on mobilenet_v2, fusing
// every Conv made the model 2x slower (6.9 -> 14.3 ms), so those convolutions stay unfused.
bool runs_as_gemm(const Graph& graph, const Node& conv) {
  const Value& w = graph.value(conv.inputs[1]);
  for (int i = 2; i < w.type.shape.rank(); ++i)
    if (w.type.shape[i] != 1) return false;
  auto all = [&](const char* name, int64_t want) {
    auto it = conv.attrs.find(name);
    if (it == conv.attrs.end()) return true;
    for (int64_t v : it->second.as_ints())
      if (v != want) return false;
    return true;
  };
  auto group = conv.attrs.find("group");
  bool grouped = group != conv.attrs.end() && group->second.as_int() != 1;
  auto pad = conv.attrs.find("auto_pad");
  bool auto_pad = pad != conv.attrs.end() && pad->second.as_string() != "NOTSET";
  return !grouped && !auto_pad && all("strides", 1) && all("pads", 0);
}

// A Conv, or a channels-last FusedConv without an activation yet (the channels-last pass makes
// those; in (N, H, W, C) oneDNN runs 1x1 convolutions as brgemm kernels that apply post-ops as
// they write, so pointwise ones fuse too).
// Other backends (CUDA) apply the activation as the output is written for every convolution, so
// off the CPU (`cpu_only` false) pointwise convolutions and residual FusedConvs fuse too.
bool fusion_target(const Graph& graph, const Node& conv, bool cpu_only) {
  if (conv.op == OpKind::kConv) return !cpu_only || !runs_as_gemm(graph, conv);
  if (conv.op != OpKind::kFusedConv) return false;
  auto layout = conv.attrs.find("channels_last");
  auto act = conv.attrs.find("activation");
  const bool channels_last = layout != conv.attrs.end() && layout->second.as_int() == 1;
  return (channels_last || !cpu_only) &&
         (act == conv.attrs.end() || act->second.as_string().empty());
}

class FuseActivationPass : public Pass {
 public:
  FuseActivationPass(bool cpu_only, bool gated) : cpu_only_(cpu_only), gated_(gated) {}
  const char* name() const override { return "fuse-activation"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed &&
          ((gated_ && fuse_gated(graph, id, cpu_only_)) || fuse(graph, id, cpu_only_)))
        changed = true;
    return changed;
  }

 private:
  // SiLU and HardSwish as exporters write them, Mul(y, Sigmoid(y)) and Mul(y, HardSigmoid(y))
  // with HardSwish's alpha and beta (either operand order), with y a convolution's output read by
  // those two nodes only: one FusedConv with a Swish or HardSwish activation.
  static bool fuse_gated(Graph& graph, int mul_id, bool cpu_only) {
    const Node& mul = graph.node(mul_id);
    if (mul.op != OpKind::kMul || mul.inputs.size() != 2 || mul.outputs.size() != 1) return false;
    for (int k = 0; k < 2; ++k) {
      int y = mul.inputs[k], s = mul.inputs[1 - k];
      if (y < 0 || s < 0) return false;
      const Value& yv = graph.value(y);
      const Value& sv = graph.value(s);
      if (sv.producer < 0 || sv.is_output || sv.consumers.size() != 1) continue;
      const Node& gate = graph.node(sv.producer);
      const bool swish = gate.op == OpKind::kSigmoid;
      if ((!swish && !is_hard_swish_gate(gate)) || gate.inputs[0] != y) continue;
      if (yv.producer < 0 || yv.is_output || yv.consumers.size() != 2) continue;
      if (yv.type.dtype != DType::kFloat32 ||
          !fusion_target(graph, graph.node(yv.producer), cpu_only))
        continue;
      int conv_id = yv.producer, gate_id = sv.producer, out = mul.outputs[0];
      if (!can_replace_uses(graph, out, y)) return false;
      Node& conv = graph.node(conv_id);
      conv.op = OpKind::kFusedConv;
      conv.attrs["activation"] = swish ? "Swish" : "HardSwish";
      replace_uses(graph, out, y);
      remove_node(graph, mul_id);
      remove_node(graph, gate_id);
      graph.infer_node(conv_id);
      return true;
    }
    return false;
  }

  static bool fuse(Graph& graph, int act_id, bool cpu_only) {
    const Node& act = graph.node(act_id);
    if (act.inputs.empty() || act.inputs[0] < 0 || act.outputs.size() != 1) return false;
    const Value& x = graph.value(act.inputs[0]);
    if (x.producer < 0 || x.is_output || x.consumers.size() != 1) return false;
    if (x.type.dtype != DType::kFloat32) return false;
    int conv_id = x.producer;
    if (!fusion_target(graph, graph.node(conv_id), cpu_only)) return false;
    Attributes extra;
    if (!activation_attributes(graph, act, &extra)) return false;
    int conv_out = x.id, act_out = act.outputs[0];
    if (!can_replace_uses(graph, act_out, conv_out)) return false;
    std::vector<int> act_inputs = act.inputs;
    Node& conv = graph.node(conv_id);
    conv.op = OpKind::kFusedConv;
    for (auto& [key, value] : extra) conv.attrs[key] = value;
    replace_uses(graph, act_out, conv_out);
    remove_node(graph, act_id);
    graph.infer_node(conv_id);
    for (size_t k = 1; k < act_inputs.size(); ++k)
      if (act_inputs[k] >= 0) release_if_unused(graph, act_inputs[k]);
    return true;
  }

  bool cpu_only_;
  bool gated_;
};

}  // namespace

std::unique_ptr<Pass> make_fuse_activation_pass(bool cpu_only, bool gated) {
  return std::make_unique<FuseActivationPass>(cpu_only, gated);
}

}  // namespace lumen
