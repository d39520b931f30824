// Residual fusion: Add(conv(x), z), with the convolution's output read by this Add alone and the
// convolution without an activation yet, becomes that convolution as a FusedConv with z as its
// fourth input, added as the output is written instead of in a separate pass over both tensors.
// On the CPU (`cpu_only`) the convolution must be in channels-last form: oneDNN adds z there as a
// sum post-op, in place over z when z dies there. Off the CPU any 2-D convolution takes it (the
// CUDA kernel adds z in its epilogue or in cuDNN's fused call). The activation the
// fuse-activation pass may add afterwards applies after the sum, as in ResNet's conv -> add ->
// relu. Where every backend adds a FusedMatMul's fourth input in its epilogue (`matmul_residual`:
// the CPU, through oneDNN's sum post-op or the packed GEMM starting from z, Vulkan and CUDA), a
// FusedMatMul without an activation takes z the same way: the residual Adds of a transformer layer.
// There the product may also be a Gemm FusedMatMul can express or a float32 MatMul without a bias
// (Llama's projections; both converted), and may reach the Add
// through Reshapes that only it reads (a [S, N, E] layer's output projection is computed as
// [S N, E]): z is then reshaped to the product's shape, a view. A MatMulNBits without an
// activation takes z as its input 6 (Lumen's epilogue of graph/matmul_nbits.h), every backend
// that runs it adding z as it writes the output.
#include "graph/matmul_nbits.h"
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// A float32 MatMul whose operands have rank 2 or more: FusedMatMul's domain.
bool plain_matmul(const Graph& graph, const Node& n) {
  if (n.op != OpKind::kMatMul || n.inputs.size() != 2) return false;
  const Value& a = graph.value(n.inputs[0]);
  const Value& b = graph.value(n.inputs[1]);
  return a.type.dtype == DType::kFloat32 && b.type.dtype == DType::kFloat32 &&
         a.type.shape.rank() >= 2 && b.type.shape.rank() >= 2;
}

bool empty_activation(const Node& conv) {
  auto act = conv.attrs.find("activation");
  return act == conv.attrs.end() || act->second.as_string().empty();
}

// The convolution or product whose output `y` is, when it can take a residual input.
int residual_target(const Graph& graph, int y, bool cpu_only, bool matmul_residual) {
  const Value& v = graph.value(y);
  if (v.producer < 0 || v.is_output || v.consumers.size() != 1) return -1;
  const Node& conv = graph.node(v.producer);
  if (matmul_residual && conv.op == OpKind::kGemm && gemm_fits_fused_matmul(graph, conv))
    return v.producer;
  if (matmul_residual && plain_matmul(graph, conv)) return v.producer;
  if (conv.op == OpKind::kMatMulNBits && empty_activation(conv) &&
      (conv.inputs.size() <= kNBitsResidual || conv.inputs[kNBitsResidual] < 0))
    return v.producer;
  auto layout = conv.attrs.find("channels_last");
  const bool channels_last = layout != conv.attrs.end() && layout->second.as_int() == 1;
  if (!cpu_only && conv.op == OpKind::kConv && conv.inputs.size() <= 3 &&
      graph.value(conv.inputs[0]).type.shape.rank() == 4)
    return v.producer;
  if (matmul_residual && conv.op == OpKind::kFusedMatMul && conv.inputs.size() <= 3 &&
      empty_activation(conv))
    return v.producer;
  // A FusedConv may already have a channel scale (input 4) but no residual yet.
  const bool no_residual = conv.inputs.size() <= 3 || conv.inputs[3] < 0;
  if (conv.op != OpKind::kFusedConv || !no_residual || !empty_activation(conv)) return -1;
  return channels_last == cpu_only ? v.producer : -1;
}

class FuseResidualPass : public Pass {
 public:
  FuseResidualPass(bool cpu_only, bool matmul_residual)
      : cpu_only_(cpu_only), matmul_residual_(matmul_residual) {}
  const char* name() const override { return "fuse-residual"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order()) {
      const Node& add = graph.node(id);
      if (add.removed || add.op != OpKind::kAdd || add.inputs.size() != 2) continue;
      for (int k = 0; k < 2; ++k) {
        int y = add.inputs[k], z = add.inputs[1 - k];
        if (y < 0 || z < 0 || y == z) continue;
        int conv_id = residual_target(graph, y, cpu_only_, matmul_residual_);
        int made = y;  // what the target makes: y, or the value Reshapes turn into y
        if (conv_id < 0 && matmul_residual_) {
          made = before_reshapes(graph, y);
          conv_id = made == y ? -1 : residual_target(graph, made, cpu_only_, true);
          const OpKind target = conv_id < 0 ? OpKind::kAdd : graph.node(conv_id).op;
          if (target != OpKind::kFusedMatMul && target != OpKind::kGemm &&
              target != OpKind::kMatMul)
            conv_id = -1;
        }
        if (conv_id < 0 || graph.value(z).type != graph.value(y).type) continue;
        int out = add.outputs[0];
        if (!can_replace_uses(graph, out, y)) continue;
        if (made != y)
          z = add_reshape(graph, z, graph.value(made).type.shape,
                          graph.value(z).name + "/as_product");
        if (graph.node(conv_id).op == OpKind::kGemm) gemm_to_fused_matmul(graph, conv_id);
        Node& conv = graph.node(conv_id);
        // FusedMatMul's and FusedConv's residual is input 3 (bias may be omitted).
        const int slot = conv.op == OpKind::kMatMulNBits ? kNBitsResidual : 3;
        if (conv.op == OpKind::kMatMul) conv.op = OpKind::kFusedMatMul;
        if (conv.op != OpKind::kFusedMatMul && conv.op != OpKind::kMatMulNBits)
          conv.op = OpKind::kFusedConv;
        if (static_cast<int>(conv.inputs.size()) <= slot) conv.inputs.resize(slot + 1, -1);
        set_input(graph, conv_id, slot, z);
        replace_uses(graph, out, y);
        remove_node(graph, id);
        graph.infer_node(conv_id);
        changed = true;
        break;
      }
    }
    return changed;
  }

 private:
  bool cpu_only_;
  bool matmul_residual_;
};

}  // namespace

std::unique_ptr<Pass> make_fuse_residual_pass(bool cpu_only, bool matmul_residual) {
  return std::make_unique<FuseResidualPass>(cpu_only, matmul_residual || cpu_only);
}

}  // namespace lumen
