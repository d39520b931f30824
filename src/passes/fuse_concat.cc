// Concat fusion: Concat(axis) -> Mul(constant scale) -> Add(constant shift) [-> Relu], each read
// by the next alone, with one scale and one shift per channel of the axis, becomes one
// FusedConcat: the pieces are read once and written scaled, shifted and rectified into their
// slices, instead of concatenated into a tensor the element-wise pass then reads again. That is
// DenseNet's pre-activation layer (Concat -> BatchNormalization -> ReLU -> conv), once the
// bn-to-affine pass has turned its BatchNormalization into the Mul and Add.
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// The constant operand of binary node `n` whose other operand is `x`, when it holds one float32
// value per index of `axis` of x (rank `rank`) and broadcasts along that axis only; else -1.
int per_channel_constant(const Graph& graph, const Node& n, int x, int axis, int rank,
                         int64_t channels) {
  const int other = n.outputs.size() == 1 ? other_input(n, x) : -1;
  if (other < 0) return -1;
  const Value& c = graph.value(other);
  if (!is_constant(c) || c.type.dtype != DType::kFloat32 || c.data->numel() != channels) return -1;
  const std::vector<int64_t>& dims = c.type.shape.dims();
  const int lead = rank - static_cast<int>(dims.size());
  if (lead < 0) return -1;
  for (int d = 0; d < static_cast<int>(dims.size()); ++d)
    if (d + lead != axis && dims[d] != 1) return -1;
  if (axis < lead && channels != 1) return -1;
  return other;
}

class FuseConcatPass : public Pass {
 public:
  const char* name() const override { return "fuse-concat"; }

  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && graph.node(id).op == OpKind::kConcat)
        changed = fuse(graph, id) || changed;
    return changed;
  }

 private:
  static bool fuse(Graph& graph, int concat) {
    const Node& cat = graph.node(concat);
    const int y = cat.outputs[0];
    const Value& yv = graph.value(y);
    if (yv.type.dtype != DType::kFloat32 || !yv.type.shape.is_static()) return false;
    const int rank = yv.type.shape.rank();
    const int64_t axis_attr = cat.attrs.at("axis").as_int();
    const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
    const int64_t channels = yv.type.shape.dims()[axis];
    for (int in : cat.inputs)
      if (in < 0) return false;
    const int mul = sole_reader(graph, y);
    if (mul < 0 || graph.node(mul).op != OpKind::kMul) return false;
    const int scale = per_channel_constant(graph, graph.node(mul), y, axis, rank, channels);
    const int scaled = graph.node(mul).outputs[0];
    const int add = sole_reader(graph, scaled);
    if (scale < 0 || add < 0 || graph.node(add).op != OpKind::kAdd) return false;
    const int shift = per_channel_constant(graph, graph.node(add), scaled, axis, rank, channels);
    int out = graph.node(add).outputs[0];
    if (shift < 0 || !(graph.value(out).type == yv.type)) return false;
    const int relu = sole_reader(graph, out);
    const bool rectified = relu >= 0 && graph.node(relu).op == OpKind::kRelu;
    if (rectified) out = graph.node(relu).outputs[0];

    std::vector<int> inputs = {scale, shift};
    inputs.insert(inputs.end(), cat.inputs.begin(), cat.inputs.end());
    Attributes attrs;
    attrs["axis"] = int64_t{axis};
    attrs["activation"] = std::string(rectified ? "Relu" : "");
    Node& fused = graph.add_node(OpKind::kFusedConcat, inputs, 1, attrs,
                                 graph.unique_name(graph.node(concat).name + "_affine"));
    const int fused_id = fused.id, fused_out = fused.outputs[0];
    graph.infer_node(fused_id);
    if (!(graph.value(fused_out).type == graph.value(out).type) ||
        (graph.value(out).is_output && !can_replace_uses(graph, out, fused_out))) {
      remove_node(graph, fused_id);
      return false;
    }
    replace_uses(graph, out, fused_out);
    if (rectified) remove_node(graph, relu);
    remove_node(graph, add);
    remove_node(graph, mul);
    remove_node(graph, concat);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_concat_pass() {
  return std::make_unique<FuseConcatPass>();
}

}  // namespace lumen
