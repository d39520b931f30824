// CUDA kernel classes of LinearAttention and CausalConvWithState (opset 27): the node's geometry
// is read once at compile time (graph/schemas/linear_attention.h) into the launch's descriptor.
// Every float input has one storage (float32, float16 or bfloat16); a LinearAttention whose
// past_state has another dtype than its activations runs on the CPU.
#include <memory>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/linear_attention.h"
#include "graph/schemas/linear_attention.h"

namespace lumen::cuda {
namespace {

// Input i, or nullptr where it is omitted.
const void* optional_input(const KernelContext& ctx, int i) {
  return i < static_cast<int>(ctx.inputs.size()) && ctx.inputs[i].defined()
             ? ctx.inputs[i].raw_data()
             : nullptr;
}

// Output i, or nullptr where the node does not make it.
void* optional_output(const KernelContext& ctx, int i) {
  return i < static_cast<int>(ctx.outputs.size()) && ctx.outputs[i].defined()
             ? ctx.outputs[i].raw_data()
             : nullptr;
}

// The launch descriptor of a node's resolved geometry.
LinearAttentionDesc desc_of(const LinearAttentionSpec& spec) {
  LinearAttentionDesc d;
  d.batch = spec.batch;
  d.seq = spec.seq;
  d.q_heads = spec.q_heads;
  d.kv_heads = spec.kv_heads;
  d.dk = spec.dk;
  d.dv = spec.dv;
  d.gated = spec.gated;
  d.delta = spec.delta;
  d.per_key_decay = spec.per_key_decay;
  d.beta_per_head = spec.beta_per_head;
  d.scale = spec.scale;
  return d;
}

std::string check_linear_attention(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  const LinearAttentionDesc d = desc_of(linear_attention_spec(ctx));
  if (d.dk > kLinearAttentionMaxDk)
    return "head size d_k " + std::to_string(d.dk) + " above " +
           std::to_string(kLinearAttentionMaxDk);
  if (linear_attention_smem_bytes(d) > kLinearAttentionMaxSmem)
    return "q_num_heads / kv_num_heads x d_k too large for the kernel's shared memory";
  return "";
}

class LinearAttentionKernel final : public Kernel {
 public:
  explicit LinearAttentionKernel(const NodeContext& ctx)
      : where_(ctx.where()),
        d_(desc_of(linear_attention_spec(ctx))),
        storage_(storage_of(ctx.input_dtype(0))) {}

  void run(KernelContext& ctx) const override {
    launch_linear_attention(storage_, d_, ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(),
                            ctx.inputs[2].raw_data(), optional_input(ctx, 3),
                            optional_input(ctx, 4), optional_input(ctx, 5),
                            ctx.outputs[0].raw_data(), optional_output(ctx, 1), stream_of(ctx));
    check_launch(where_);
  }

 private:
  std::string where_;
  LinearAttentionDesc d_;
  Storage storage_ = Storage::kFloat32;
};

class CausalConvKernel final : public Kernel {
 public:
  explicit CausalConvKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const CausalConvSpec spec = causal_conv_spec(ctx);
    d_.batch = spec.batch;
    d_.channels = spec.channels;
    d_.length = spec.length;
    d_.kernel = spec.kernel;
    d_.silu = spec.silu;
    storage_ = storage_of(spec.dtype);
  }

  void run(KernelContext& ctx) const override {
    launch_causal_conv(storage_, d_, ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(),
                       optional_input(ctx, 2), optional_input(ctx, 3), ctx.outputs[0].raw_data(),
                       optional_output(ctx, 1), stream_of(ctx));
    check_launch(where_);
  }

 private:
  std::string where_;
  CausalConvDesc d_;
  Storage storage_ = Storage::kFloat32;
};

std::unique_ptr<Kernel> make_linear_attention(const NodeContext& ctx) {
  return std::make_unique<LinearAttentionKernel>(ctx);
}

std::unique_ptr<Kernel> make_causal_conv(const NodeContext& ctx) {
  return std::make_unique<CausalConvKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(LinearAttention, &make_linear_attention, &check_linear_attention);
LUMEN_REGISTER_CUDA_KERNEL(CausalConvWithState, &make_causal_conv, &require_float_static);

}  // namespace lumen::cuda
