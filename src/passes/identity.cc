// No-op removal: Identity (and Dropout, which the importer turns into Identity), Reshape, Flatten,
// Squeeze, Unsqueeze and Expand to the input's own shape, Transpose with the identity permutation,
// Cast to the input's own dtype, Slice keeping every element in order (Swin's x[:, :H, :W]), and
// Pad by zero everywhere (PyTorch exports AvgPool2d as such a
// Pad and an AveragePool; left in, it cut DenseNet's channels-last regions at every transition).
// Their readers read the input instead.
//
// A Transpose that moves only dims of size 1 becomes a Reshape (a view).
//
// A Transpose of a Transpose reads the first one's input with the composed permutation, and is a
// no-op when the two cancel: the channels-last pass's way out of a region, (N, H, W, C) ->
// (N, C, H, W), met by the model's own NCHW -> NHWC Permute (ConvNeXt's blocks: two such pairs
// per block, 89 Transposes and 4% of its time).
#include "graph/node_context.h"
#include "graph/op_kind.h"
#include "graph/schemas/movement.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// Whether node `n` returns its first input unchanged.
bool is_noop(const Graph& graph, const Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] < 0) return false;
  const Value& in = graph.value(n.inputs[0]);
  const Value& out = graph.value(n.outputs[0]);
  if (!(in.type == out.type) || !in.type.shape.is_static()) return false;
  switch (n.op) {
    case OpKind::kIdentity:
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kExpand:
    case OpKind::kCast:
      return true;
    case OpKind::kPad: {
      // The pads: an attribute before opset 11, then a constant int64 input.
      std::vector<int64_t> pads;
      if (auto it = n.attrs.find("pads"); it != n.attrs.end()) {
        pads = it->second.as_ints();
      } else {
        if (n.inputs.size() < 2 || n.inputs[1] < 0) return false;
        const Value& p = graph.value(n.inputs[1]);
        if (!p.data.has_value() || p.data->dtype() != DType::kInt64) return false;
        pads.assign(p.data->data<int64_t>(), p.data->data<int64_t>() + p.data->numel());
      }
      for (int64_t v : pads)
        if (v != 0) return false;
      return true;
    }
    case OpKind::kSlice: {
      // The same shape keeps every element; in order unless a step is negative.
      if (n.inputs.size() < 5 || n.inputs[4] < 0) return true;
      const Value& steps = graph.value(n.inputs[4]);
      if (!steps.data.has_value() || steps.data->dtype() != DType::kInt64) return false;
      for (int64_t i = 0; i < steps.data->numel(); ++i)
        if (steps.data->data<int64_t>()[i] <= 0) return false;
      return true;
    }
    case OpKind::kTranspose: {
      auto it = n.attrs.find("perm");
      if (it == n.attrs.end()) return in.type.shape.rank() <= 1;
      const std::vector<int64_t>& perm = it->second.as_ints();
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] != static_cast<int64_t>(i)) return false;
      return true;
    }
    default:
      return false;
  }
}

// Transpose `id` over another Transpose: reads that one's input with the composed permutation.
// Returns whether it changed the node.
bool compose_transposes(Graph& graph, int id) {
  const Node& outer = graph.node(id);
  if (outer.op != OpKind::kTranspose || outer.inputs.empty() || outer.inputs[0] < 0) return false;
  const int producer = graph.value(outer.inputs[0]).producer;
  if (producer < 0 || graph.node(producer).op != OpKind::kTranspose) return false;
  const Node& inner = graph.node(producer);
  if (!graph.value(inner.inputs[0]).type.shape.is_static()) return false;
  const std::vector<int64_t> p1 = transpose_perm(NodeContext(graph, inner));
  const std::vector<int64_t> p2 = transpose_perm(NodeContext(graph, outer));
  std::vector<int64_t> composed(p2.size());
  for (size_t i = 0; i < p2.size(); ++i) composed[i] = p1[static_cast<size_t>(p2[i])];
  const int source = inner.inputs[0];
  set_input(graph, id, 0, source);
  graph.node(id).attrs["perm"] = composed;
  graph.infer_node(id);
  return true;
}

// A Transpose that moves only dims of size 1 (the others keep their order) leaves every element
// where it was: it becomes a Reshape to its output shape, which backends run as a view. GPT-2's
// decoder, one token at a time, moves Q, K, V and the attention's output between [B, 1, H, D] and
// [B, H, 1, D] this way: four copies a layer. Returns whether it rewrote node `id`.
bool transpose_as_reshape(Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.removed || n.op != OpKind::kTranspose || n.inputs.size() != 1 || n.inputs[0] < 0 ||
      n.outputs.size() != 1)
    return false;
  const int in = n.inputs[0];
  const int out = n.outputs[0];
  const Shape& x = graph.value(in).type.shape;
  const Shape& y = graph.value(out).type.shape;
  if (!x.is_static() || !y.is_static() || x.rank() < 2) return false;
  const std::vector<int64_t> perm = transpose_perm(NodeContext(graph, n));
  int64_t last = -1;
  bool moved = false;
  for (size_t i = 0; i < perm.size(); ++i) {
    moved = moved || perm[i] != static_cast<int64_t>(i);
    if (x.dims()[static_cast<size_t>(perm[i])] == 1) continue;
    if (perm[i] < last) return false;
    last = perm[i];
  }
  if (!moved) return false;  // the identity: is_noop's
  const std::string name = n.name;
  const std::vector<int64_t> dims = y.dims();
  const int shape =
      graph
          .add_constant(graph.unique_name(name + "_shape"),
                        Tensor::from_vector(Shape{static_cast<int64_t>(dims.size())}, dims))
          ->id;
  Node& reshape = graph.add_node(OpKind::kReshape, {in, shape}, 1, {}, graph.unique_name(name));
  const int reshaped = reshape.outputs[0];
  graph.infer_node(reshape.id);
  if (!can_replace_uses(graph, out, reshaped)) {
    remove_node(graph, reshape.id);
    release_if_unused(graph, shape);
    return false;
  }
  replace_uses(graph, out, reshaped);
  remove_node(graph, id);
  return true;
}

class IdentityPass : public Pass {
 public:
  const char* name() const override { return "identity"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      changed = compose_transposes(graph, id) || changed;
      if (transpose_as_reshape(graph, id)) {
        changed = true;
        continue;
      }
      const Node& n = graph.node(id);
      if (!is_noop(graph, n)) continue;
      int in = n.inputs[0];
      int out = n.outputs[0];
      // A graph output fed straight by a graph input (or a constant) keeps its node, so both
      // names stay.
      if (!can_replace_uses(graph, out, in)) continue;
      replace_uses(graph, out, in);
      remove_node(graph, id);
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_identity_pass() {
  return std::make_unique<IdentityPass>();
}

}  // namespace lumen
