// CUDA kernel of ONNX Attention (schema: graph/schemas/attention.h): present_key and
// present_value by a copy kernel each, then the fused attention kernel of attention_op.cu, which
// reads past and new keys in place. Takes 3-D and 4-D inputs, grouped- and multi-query heads,
// causal and sliding-window masks, boolean and additive masks, past/present caches, softcap and
// nonpad_kv_seqlen, in float32, float16 or bfloat16 with head sizes up to 128; nodes asking for
// qk_matmul_output run on the CPU.
#include <memory>
#include <string>

#include "backends/cuda/attention_op.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "graph/schemas/attention.h"

namespace lumen::cuda {
namespace {

AttnStrides strides_of(const AttentionStrides& s) {
  return {s.batch, s.head, s.row};
}

std::string check_attention_op(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(kAttnQ);
  if (!is_gpu_float(t))
    return std::string("Q is ") + dtype_name(t) +
           "; the CUDA kernel takes "
           "float32, float16 or bfloat16";
  for (int i : {kAttnK, kAttnV, kAttnPastKey, kAttnPastValue})
    if (ctx.has_input(i) && ctx.input_dtype(i) != t)
      return "input " + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) + " and Q " +
             dtype_name(t) + "; the CUDA kernel takes one float type";
  if (ctx.has_input(kAttnMask) && ctx.input_dtype(kAttnMask) != t &&
      ctx.input_dtype(kAttnMask) != DType::kBool)
    return std::string("attn_mask is ") + dtype_name(ctx.input_dtype(kAttnMask)) +
           "; the CUDA kernel takes bool or Q's type";
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && !ctx.input_shape(i).is_static())
      return "input " + std::to_string(i) + "'s shape is known only at run time";
  if (ctx.num_outputs() > kAttnQk) return "qk_matmul_output (the CUDA kernel keeps no scores)";
  const AttentionGeometry g = attention_geometry(ctx);
  if (g.head_size > kAttentionOpMaxDepth || g.v_head_size > kAttentionOpMaxDepth)
    return "head size above " + std::to_string(kAttentionOpMaxDepth);
  return "";
}

class AttentionOpKernel final : public Kernel {
 public:
  explicit AttentionOpKernel(const NodeContext& ctx)
      : where_(ctx.where()), g_(attention_geometry(ctx)), storage_(storage_of(ctx.input_dtype(0))) {
    d_.batch = g_.batch;
    d_.kv_heads = g_.kv_heads;
    d_.group = g_.q_heads / g_.kv_heads;
    d_.q_len = g_.q_len;
    d_.past_len = g_.past_len;
    d_.total_len = g_.total_len;
    d_.depth = g_.head_size;
    d_.depth_v = g_.v_head_size;
    d_.q = strides_of(g_.q);
    d_.k = strides_of(g_.k);
    d_.v = strides_of(g_.v);
    d_.y = strides_of(g_.y);
    d_.past_k = strides_of(g_.past_k);
    d_.past_v = strides_of(g_.past_v);
    d_.scale = g_.scale;
    d_.softcap = g_.softcap;
    d_.causal = g_.causal;
    d_.has_past = g_.has_past;
    d_.has_nonpad = g_.has_nonpad;
    d_.left_window = g_.left_window;
    d_.right_window = g_.right_window;
    d_.mask_kind = g_.mask == AttentionMaskKind::kBool       ? 1
                   : g_.mask == AttentionMaskKind::kAdditive ? 2
                                                             : 0;
    d_.mask_b = g_.mask_batch;
    d_.mask_h = g_.mask_head;
    d_.mask_r = g_.mask_row;
    d_.mask_len = g_.mask_len;
  }

  void run(KernelContext& ctx) const override {
    const auto in = [&](int i) -> const void* {
      return static_cast<int>(ctx.inputs.size()) > i && ctx.inputs[i].defined()
                 ? ctx.inputs[i].raw_data()
                 : nullptr;
    };
    cudaStream_t stream = stream_of(ctx);
    if (g_.has_present_key)
      launch_attention_present(storage_, d_, g_.head_size, in(kAttnPastKey), d_.past_k, in(kAttnK),
                               d_.k, ctx.outputs[kAttnPresentKey].raw_data(), stream);
    if (g_.has_present_value)
      launch_attention_present(storage_, d_, g_.v_head_size, in(kAttnPastValue), d_.past_v,
                               in(kAttnV), d_.v, ctx.outputs[kAttnPresentValue].raw_data(), stream);
    launch_attention_op(storage_, d_, in(kAttnQ), in(kAttnK), in(kAttnV), in(kAttnMask),
                        in(kAttnPastKey), in(kAttnPastValue),
                        static_cast<const int64_t*>(in(kAttnNonpad)),
                        ctx.outputs[kAttnY].raw_data(), stream);
    check_launch(where_);
  }

 private:
  std::string where_;
  AttentionGeometry g_;
  Storage storage_;
  AttentionOpDesc d_;
};

std::unique_ptr<Kernel> make_attention_op(const NodeContext& ctx) {
  return std::make_unique<AttentionOpKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(Attention, &make_attention_op, &check_attention_op);

}  // namespace lumen::cuda
