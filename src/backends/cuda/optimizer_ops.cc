// CUDA kernel class of the optimizer ops of ai.onnx.preview.training (Adagrad, Adam, Momentum):
// one launch of optimizer.cu's kernel per optimized tensor, R and T read on the device.
#include <memory>
#include <string>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/optimizer.h"
#include "graph/schemas/optimizer_layout.h"

namespace lumen::cuda {
namespace {

bool float_or_double(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64;
}

std::string check_optimizer(const NodeContext& ctx) {
  const OptimizerLayout layout = optimizer_layout(ctx.op());
  const int n = layout.tensors(ctx.num_inputs());
  if (n == 0) return "inputs do not form whole groups";
  if (!float_or_double(ctx.input_dtype(0))) return "R must be float32 or float64";
  if (ctx.input_dtype(1) != DType::kInt64) return "T must be int64";
  const DType t = ctx.input_dtype(2);
  if (!float_or_double(t)) return "the optimized tensors must be float32 or float64";
  for (int i = 2; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i) || ctx.input_dtype(i) != t)
      return "the optimized tensors differ in dtype";
  return check_static_shapes(ctx);
}

OptimizerDesc desc_of(const NodeContext& ctx) {
  OptimizerDesc d;
  d.norm = ctx.attr_float("norm_coefficient", 0.0f);
  if (ctx.op() == OpKind::kAdagrad) {
    d.rule = OptimizerRule::kAdagrad;
    d.decay = ctx.attr_float("decay_factor", 0.0f);
    d.epsilon = ctx.attr_float("epsilon", 1e-6f);
  } else if (ctx.op() == OpKind::kAdam) {
    d.rule = OptimizerRule::kAdam;
    d.alpha = ctx.attr_float("alpha", 0.9f);
    d.beta = ctx.attr_float("beta", 0.999f);
    d.epsilon = ctx.attr_float("epsilon", 1e-6f);
    d.norm_post = ctx.attr_float("norm_coefficient_post", 0.0f);
  } else {
    d.rule = OptimizerRule::kMomentum;
    d.alpha = ctx.attr_float("alpha", 0.0f);
    d.beta = ctx.attr_float("beta", 0.0f);
    d.nesterov = ctx.attr_string("mode", "standard") == "nesterov";
  }
  return d;
}

class OptimizerKernel final : public Kernel {
 public:
  explicit OptimizerKernel(const NodeContext& ctx)
      : where_(ctx.where()),
        desc_(desc_of(ctx)),
        layout_(optimizer_layout(ctx.op())),
        n_(layout_.tensors(ctx.num_inputs())),
        r_double_(ctx.input_dtype(0) == DType::kFloat64),
        f64_(ctx.input_dtype(2) == DType::kFloat64) {}

  void run(KernelContext& ctx) const override {
    const cudaStream_t s = stream_of(ctx);
    const int outputs = static_cast<int>(ctx.outputs.size());
    for (int i = 0; i < n_; ++i) {
      OptimizerTensors ts;
      for (int role = 0; role < layout_.roles_in; ++role)
        ts.in[role] = in(ctx, OptimizerLayout::input_index(role, i, n_));
      for (int role = 0; role < layout_.roles_out; ++role) {
        const int o = OptimizerLayout::output_index(role, i, n_);
        if (o < outputs && ctx.outputs[o].defined()) ts.out[role] = out(ctx, o);
      }
      ts.count = ctx.inputs[OptimizerLayout::input_index(0, i, n_)].numel();
      launch_optimizer(desc_, in(ctx, 0), r_double_, static_cast<const int64_t*>(in(ctx, 1)), ts,
                       f64_, s);
      check_launch(where_);
    }
  }

 private:
  std::string where_;
  OptimizerDesc desc_;
  OptimizerLayout layout_;
  int n_;
  bool r_double_, f64_;
};

std::unique_ptr<Kernel> make_optimizer(const NodeContext& ctx) {
  return std::make_unique<OptimizerKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(Adagrad, &make_optimizer, &check_optimizer);
LUMEN_REGISTER_CUDA_KERNEL(Adam, &make_optimizer, &check_optimizer);
LUMEN_REGISTER_CUDA_KERNEL(Momentum, &make_optimizer, &check_optimizer);

}  // namespace lumen::cuda
