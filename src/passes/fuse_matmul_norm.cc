// Norm fusion: LayerNormalization(y) over y's last axis, where y is a FusedMatMul's output or that
// output through Reshapes only they read (a post-LN transformer's [S N, E] projection seen as
// [S, N, E]), becomes the FusedMatMul's norm epilogue: its scale and bias as inputs 4 and 5, its
// epsilon as `norm_epsilon`. The Reshapes stay; they now reshape normalized rows, which is the
// same as normalizing reshaped ones since the last axis is kept. LayerNormalization's Mean and
// InvStdDev outputs must be unused. On CUDA the epilogue saves a launch per norm: the kernel that
// sums the product's K slices normalizes each row as it writes it (sliced_matmul.h).
#include <string>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// Whether value `v` is a float32 [n], or absent (-1) where `optional`.
bool norm_parameter(const Graph& graph, int v, int64_t n, bool optional) {
  if (v < 0) return optional;
  const Value& p = graph.value(v);
  return p.type.dtype == DType::kFloat32 && p.type.shape.rank() == 1 && p.type.shape[0] == n;
}

// Whether node `ln`'s outputs past the first (Mean, InvStdDev) are absent or unused.
bool statistics_unused(const Graph& graph, const Node& ln) {
  for (size_t k = 1; k < ln.outputs.size(); ++k) {
    if (ln.outputs[k] < 0) continue;
    const Value& v = graph.value(ln.outputs[k]);
    if (v.is_output || !v.consumers.empty()) return false;
  }
  return true;
}

class FuseMatMulNormPass : public Pass {
 public:
  const char* name() const override { return "fuse-matmul-norm"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && fuse(graph, id)) changed = true;
    return changed;
  }

 private:
  static bool fuse(Graph& graph, int ln_id) {
    const Node& ln = graph.node(ln_id);
    if (ln.op != OpKind::kLayerNormalization || ln.inputs.empty() || ln.inputs[0] < 0 ||
        ln.outputs.empty() || !statistics_unused(graph, ln))
      return false;
    const int x = ln.inputs[0];
    const Value& xv = graph.value(x);
    const Shape& xs = xv.type.shape;
    if (xv.type.dtype != DType::kFloat32 || !xs.is_static() || xs.rank() < 1) return false;
    auto axis = ln.attrs.find("axis");
    const int64_t a = axis == ln.attrs.end() ? -1 : axis->second.as_int();
    if (a != -1 && a != xs.rank() - 1) return false;
    const int64_t n = xs[-1];
    const int scale = ln.inputs.size() > 1 ? ln.inputs[1] : -1;
    const int bias = ln.inputs.size() > 2 ? ln.inputs[2] : -1;
    if (!norm_parameter(graph, scale, n, false) || !norm_parameter(graph, bias, n, true))
      return false;
    // The product: x itself, or what the Reshapes into x reshape, read by them (or the norm) alone.
    const int made = before_reshapes(graph, x);
    const Value& mv = graph.value(made);
    if (mv.producer < 0 || mv.is_output || mv.consumers.size() != 1 || mv.type.shape.rank() < 1 ||
        mv.type.shape[-1] != n)
      return false;
    const int mm_id = mv.producer;
    const Node& mm = graph.node(mm_id);
    if (mm.op != OpKind::kFusedMatMul || fused_matmul_has_norm(mm) || mm.outputs.size() != 1)
      return false;
    const int out = ln.outputs[0];
    if (!can_replace_uses(graph, out, x)) return false;
    auto eps = ln.attrs.find("epsilon");
    const float epsilon = eps == ln.attrs.end() ? 1e-5f : eps->second.as_float();
    Node& fused = graph.node(mm_id);
    fused.inputs.resize(bias < 0 ? 5 : 6, -1);  // a FusedMatMul without a norm has at most 4
    fused.attrs["norm_epsilon"] = epsilon;
    set_input(graph, mm_id, 4, scale);
    if (bias >= 0) set_input(graph, mm_id, 5, bias);
    replace_uses(graph, out, x);
    remove_node(graph, ln_id);
    graph.infer_node(mm_id);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_matmul_norm_pass() {
  return std::make_unique<FuseMatMulNormPass>();
}

}  // namespace lumen
