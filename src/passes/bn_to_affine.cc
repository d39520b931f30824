// BatchNormalization that no convolution absorbed (DenseNet's BN -> ReLU after a Concat) becomes
// Mul(x, s) then Add(., b) with constant per-channel s = scale / sqrt(var + epsilon) and
// b = beta - mean * s, shaped (C, 1, 1). As plain element-wise ops they join the channels-last
// regions around them (which take binary ops with constant operands) instead of ending one, and
// the element-wise fusion then runs them with the ReLU in one pass. CPU only: the CUDA backend
// runs BatchNormalization as one kernel.
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

class BnToAffinePass : public Pass {
 public:
  const char* name() const override { return "bn-to-affine"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && rewrite(graph, id)) changed = true;
    return changed;
  }

 private:
  static bool rewrite(Graph& graph, int bn_id) {
    const Node& bn = graph.node(bn_id);
    if (bn.op != OpKind::kBatchNormalization || bn.outputs.size() != 1 || bn.inputs.size() != 5)
      return false;
    const Value& x = graph.value(bn.inputs[0]);
    const Shape& shape = x.type.shape;
    if (x.type.dtype != DType::kFloat32 || shape.rank() != 4 || !shape.is_static()) return false;
    const int64_t channels = shape[1];
    std::vector<double> scale, shift;
    if (!batch_norm_affine(graph, bn, channels, &scale, &shift)) return false;
    Tensor s = Tensor::empty(Shape{channels, 1, 1}, DType::kFloat32);
    Tensor b = Tensor::empty(Shape{channels, 1, 1}, DType::kFloat32);
    for (int64_t c = 0; c < channels; ++c) {
      s.data<float>()[c] = static_cast<float>(scale[c]);
      b.data<float>()[c] = static_cast<float>(shift[c]);
    }
    const int out = bn.outputs[0];
    const std::string base = bn.name.empty() ? "bn" : bn.name;
    Value* xv = &graph.value(bn.inputs[0]);
    Value* scaled =
        graph.add_op("Mul", {xv, graph.add_constant(graph.unique_name(base + "_scale"), s)}, {},
                     graph.unique_name(base + "_mul"));
    Value* shifted =
        graph.add_op("Add", {scaled, graph.add_constant(graph.unique_name(base + "_shift"), b)}, {},
                     graph.unique_name(base + "_add"));
    // `shifted` is a new node's output, so it can always take over the BN output's uses.
    std::vector<int> params(graph.node(bn_id).inputs.begin() + 1, graph.node(bn_id).inputs.end());
    replace_uses(graph, out, shifted->id);
    remove_node(graph, bn_id);
    for (int p : params) release_if_unused(graph, p);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_bn_to_affine_pass() {
  return std::make_unique<BnToAffinePass>();
}

}  // namespace lumen
