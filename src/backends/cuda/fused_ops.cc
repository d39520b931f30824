// CUDA kernels of the optimizer's fused element-wise and attention nodes (FusedElementwise,
// FusedAttention): the node's program or geometry is read once at compile time into the
// descriptor its launch takes.
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"
#include "graph/fused_elementwise.h"

namespace lumen::cuda {
namespace {

std::string check_static_float(const NodeContext& ctx) {
  std::string why = require_float32(ctx);
  if (!why.empty()) return why;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && !ctx.input_shape(i).is_static()) return "dynamic input shapes";
  if (!ctx.output(0).shape.is_static()) return "the output shape is known only at run time";
  return "";
}

// ---- FusedElementwise ----

std::string check_fused_elementwise(const NodeContext& ctx) {
  std::string why = check_static_float(ctx);
  if (!why.empty()) return why;
  if (ctx.num_inputs() > kEwMaxInputs)
    return std::to_string(ctx.num_inputs()) + " inputs (the CUDA kernel takes " +
           std::to_string(kEwMaxInputs) + ")";
  if (ctx.output(0).shape.rank() > kMaxRank) return "rank above 8";
  const size_t code = ctx.attr_ints("code").size() / kEwFields;
  if (code > static_cast<size_t>(kEwMaxCode))
    return std::to_string(code) + " instructions (the CUDA kernel takes " +
           std::to_string(kEwMaxCode) + ")";
  if (ctx.attr_floats("consts", {}).size() > static_cast<size_t>(kEwMaxConsts))
    return "more than " + std::to_string(kEwMaxConsts) + " immediates";
  return "";
}

class FusedElementwiseKernel final : public Kernel {
 public:
  explicit FusedElementwiseKernel(const NodeContext& ctx) : where_(ctx.where()) {
    std::vector<float> consts = ctx.attr_floats("consts", {});
    std::string error;
    std::vector<EwInstr> program =
        decode_ew_program(ctx.attr_ints("code"), consts.size(), ctx.num_inputs(), &error);
    if (program.empty()) ctx.fail_model(error);
    const Shape& y = ctx.output(0).shape;
    n_ = y.numel();
    d_.num_inputs = ctx.num_inputs();
    d_.num_code = static_cast<int>(program.size());
    d_.rank = y.rank();
    for (int j = 0; j < y.rank(); ++j) d_.dims[j] = y[j];
    for (int k = 0; k < d_.num_inputs; ++k) {
      const Shape& s = ctx.input_shape(k);
      if (s == y) {
        d_.mode[k] = 0;
      } else if (s.numel() == 1) {
        d_.mode[k] = 1;
      } else {
        d_.mode[k] = 2;
        broadcast_strides(s, y, d_.strides[k]);
      }
    }
    for (size_t c = 0; c < program.size(); ++c) {
      const EwInstr& in = program[c];
      d_.code[c] = {static_cast<int8_t>(in.op), static_cast<int8_t>(in.dst),
                    static_cast<int8_t>(in.a), static_cast<int8_t>(in.b)};
    }
    for (size_t i = 0; i < consts.size(); ++i) d_.consts[i] = consts[i];
  }

  void run(KernelContext& ctx) const override {
    const float* inputs[kEwMaxInputs] = {};
    for (int k = 0; k < d_.num_inputs; ++k)
      inputs[k] = static_cast<const float*>(ctx.inputs[k].raw_data());
    launch_fused_elementwise(d_, inputs, static_cast<float*>(ctx.outputs[0].raw_data()), n_,
                             stream_of(ctx));
    check_launch(where_);
  }

  // Each thread reads an input read in place at its own index before writing that index.
  int in_place_input() const override {
    for (int k = 0; k < d_.num_inputs; ++k)
      if (d_.mode[k] == 0) return k;
    return -1;
  }

 private:
  std::string where_;
  EwDesc d_;
  int64_t n_ = 0;
};

std::unique_ptr<Kernel> make_fused_elementwise(const NodeContext& ctx) {
  return std::make_unique<FusedElementwiseKernel>(ctx);
}

// ---- FusedAttention ----

std::string check_attention(const NodeContext& ctx) {
  std::string why = check_static_float(ctx);
  if (!why.empty()) return why;
  const Shape& q = ctx.input_shape(0);
  const Shape& v = ctx.input_shape(2);
  const bool kt = ctx.attr_int("k_transposed", 0) == 1;
  const Shape& k = ctx.input_shape(1);
  if (q.rank() - 2 > kMaxRank) return "more than 8 leading dims";
  if (q[-1] > kAttentionMaxDepth || v[-1] > kAttentionMaxDepth)
    return "head size above " + std::to_string(kAttentionMaxDepth);
  if ((kt ? k[-1] : k[-2]) == 0) return "no keys";
  return "";
}

class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const Shape& q = ctx.input_shape(0);
    const Shape& k = ctx.input_shape(1);
    const Shape& v = ctx.input_shape(2);
    const int rank = q.rank();
    d_.k_transposed = ctx.attr_int("k_transposed", 0) == 1;
    d_.scale = ctx.attr_float("scale", 1.0f);
    d_.sq = q[-2];
    d_.depth = q[-1];
    d_.sk = d_.k_transposed ? k[-1] : k[-2];
    d_.depth_v = v[-1];
    d_.batch = 1;
    d_.lead_rank = rank - 2;
    for (int j = 0; j < rank - 2; ++j) {
      d_.lead_dims[j] = q[j];
      d_.batch *= q[j];
    }
    has_mask_ = ctx.num_inputs() > 3 && ctx.has_input(3);
    if (has_mask_) {
      std::vector<int64_t> scores(q.dims().begin(), q.dims().end() - 1);
      scores.push_back(d_.sk);
      int64_t strides[kMaxRank + 2] = {};
      broadcast_strides(ctx.input_shape(3), Shape(scores), strides);
      for (int j = 0; j < rank - 2; ++j) d_.mask_lead_strides[j] = strides[j];
      d_.mask_q_stride = strides[rank - 2];
      d_.mask_k_stride = strides[rank - 1];
    }
  }

  void run(KernelContext& ctx) const override {
    auto in = [&](int i) { return static_cast<const float*>(ctx.inputs[i].raw_data()); };
    launch_attention(d_, in(0), in(1), in(2), has_mask_ ? in(3) : nullptr,
                     static_cast<float*>(ctx.outputs[0].raw_data()), stream_of(ctx));
    check_launch(where_);
  }

 private:
  std::string where_;
  AttentionDesc d_;
  bool has_mask_ = false;
};

std::unique_ptr<Kernel> make_attention(const NodeContext& ctx) {
  return std::make_unique<AttentionKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(FusedElementwise, &make_fused_elementwise, &check_fused_elementwise);
LUMEN_REGISTER_CUDA_KERNEL(FusedAttention, &make_attention, &check_attention);

}  // namespace lumen::cuda
