// CPU kernels of the optimizer ops of ai.onnx.preview.training: Adagrad, Adam and Momentum
// (standard and Nesterov), on float32 or float64 tensors. R and T are read when the kernel runs;
// every element is updated in double and stored in the tensors' dtype.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/optimizer_layout.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 15;

// The per-run scalars of one update.
struct Step {
  double r = 0.0;  // the learning rate R
  int64_t t = 0;   // the update count T
};

// One element's values: up to 4 inputs per tensor (X, G, then V and/or H) and up to 3 outputs
// (X_new, then the new V and/or H).
struct Values {
  double in[4];
  double out[3];
};

// g' = norm * x + g; h' = h + g'^2; x' = x - r / (1 + T * decay) * g' / (sqrt(h') + epsilon).
struct AdagradRule {
  static constexpr int kRolesIn = 3, kRolesOut = 2;  // X, G, H -> X, H
  // Reads the node's attributes (ONNX's defaults where absent).
  explicit AdagradRule(const NodeContext& ctx)
      : norm(ctx.attr_float("norm_coefficient", 0.0f)),
        decay(ctx.attr_float("decay_factor", 0.0f)),
        epsilon(ctx.attr_float("epsilon", 1e-6f)) {}
  // The learning rate of this step.
  double rate(const Step& step) const {
    return step.r / (1.0 + static_cast<double>(step.t) * decay);
  }
  void apply(const Step& /*step*/, double rate, Values& v) const {
    const double g = norm * v.in[0] + v.in[1];
    const double h = v.in[2] + g * g;
    v.out[0] = v.in[0] - rate * g / (std::sqrt(h) + epsilon);
    v.out[1] = h;
  }
  double norm, decay, epsilon;
};

// g' = norm * x + g; v' = alpha v + (1 - alpha) g'; h' = beta h + (1 - beta) g'^2;
// x' = (1 - norm_post) (x - r' v' / (sqrt(h') + epsilon)), where r' = T > 0 ?
// r sqrt(1 - beta^T) / (1 - alpha^T) : r.
struct AdamRule {
  static constexpr int kRolesIn = 4, kRolesOut = 3;  // X, G, V, H -> X, V, H
  explicit AdamRule(const NodeContext& ctx)
      : norm(ctx.attr_float("norm_coefficient", 0.0f)),
        alpha(ctx.attr_float("alpha", 0.9f)),
        beta(ctx.attr_float("beta", 0.999f)),
        epsilon(ctx.attr_float("epsilon", 1e-6f)),
        norm_post(ctx.attr_float("norm_coefficient_post", 0.0f)) {}
  double rate(const Step& step) const {
    if (step.t <= 0) return step.r;
    const double t = static_cast<double>(step.t);
    return step.r * std::sqrt(1.0 - std::pow(beta, t)) / (1.0 - std::pow(alpha, t));
  }
  void apply(const Step& /*step*/, double rate, Values& v) const {
    const double g = norm * v.in[0] + v.in[1];
    const double m = alpha * v.in[2] + (1.0 - alpha) * g;
    const double h = beta * v.in[3] + (1.0 - beta) * g * g;
    v.out[0] = (1.0 - norm_post) * (v.in[0] - rate * m / (std::sqrt(h) + epsilon));
    v.out[1] = m;
    v.out[2] = h;
  }
  double norm, alpha, beta, epsilon, norm_post;
};

// g' = norm * x + g; v' = alpha v + (T > 0 ? beta : 1) g'; x' = x - r v' (standard) or
// x - r (g' + alpha v') (Nesterov).
struct MomentumRule {
  static constexpr int kRolesIn = 3, kRolesOut = 2;  // X, G, V -> X, V
  explicit MomentumRule(const NodeContext& ctx)
      : norm(ctx.attr_float("norm_coefficient", 0.0f)),
        alpha(ctx.attr_float("alpha", 0.0f)),
        beta(ctx.attr_float("beta", 0.0f)),
        nesterov(ctx.attr_string("mode", "standard") == "nesterov") {}
  double rate(const Step& step) const { return step.r; }
  void apply(const Step& step, double rate, Values& v) const {
    const double g = norm * v.in[0] + v.in[1];
    const double m = alpha * v.in[2] + (step.t > 0 ? beta : 1.0) * g;
    v.out[0] = v.in[0] - rate * (nesterov ? g + alpha * m : m);
    v.out[1] = m;
  }
  double norm, alpha, beta;
  bool nesterov;
};

// Applies `Rule` element by element to each of the node's optimized tensors; outputs the node
// leaves out are not written.
template <typename Rule>
class OptimizerKernel final : public Kernel {
 public:
  explicit OptimizerKernel(const NodeContext& ctx)
      : rule_(ctx), n_(optimizer_layout(ctx.op()).tensors(ctx.num_inputs())) {}

  void run(KernelContext& ctx) const override {
    Step step;
    const Tensor& r = ctx.inputs[0];
    step.r = r.dtype() == DType::kFloat64 ? r.data<double>()[0] : r.data<float>()[0];
    step.t = ctx.inputs[1].data<int64_t>()[0];
    if (ctx.inputs[2].dtype() == DType::kFloat64)
      update<double>(ctx, step);
    else
      update<float>(ctx, step);
  }

 private:
  template <typename T>
  void update(KernelContext& ctx, const Step& step) const {
    const int outputs = static_cast<int>(ctx.outputs.size());
    const double rate = rule_.rate(step);
    constexpr int roles_in = Rule::kRolesIn, roles_out = Rule::kRolesOut;
    for (int i = 0; i < n_; ++i) {
      const T* in[roles_in] = {};
      T* out[roles_out] = {};
      for (int role = 0; role < roles_in; ++role)
        in[role] = ctx.inputs[OptimizerLayout::input_index(role, i, n_)].data<T>();
      for (int role = 0; role < roles_out; ++role) {
        const int o = OptimizerLayout::output_index(role, i, n_);
        if (o < outputs && ctx.outputs[o].defined()) out[role] = ctx.outputs[o].data<T>();
      }
      const int64_t count = ctx.inputs[OptimizerLayout::input_index(0, i, n_)].numel();
#pragma omp parallel for schedule(static) if (count > kParallelWork)
      for (int64_t e = 0; e < count; ++e) {
        Values v;
        for (int role = 0; role < roles_in; ++role) v.in[role] = static_cast<double>(in[role][e]);
        rule_.apply(step, rate, v);
        for (int role = 0; role < roles_out; ++role)
          if (out[role] != nullptr) out[role][e] = static_cast<T>(v.out[role]);
      }
    }
  }

  Rule rule_;
  int n_;
};

template <typename Rule>
std::unique_ptr<Kernel> make_optimizer(const NodeContext& ctx) {
  return std::make_unique<OptimizerKernel<Rule>>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Adagrad, &make_optimizer<AdagradRule>);
LUMEN_REGISTER_CPU_KERNEL(Adam, &make_optimizer<AdamRule>);
LUMEN_REGISTER_CPU_KERNEL(Momentum, &make_optimizer<MomentumRule>);

}  // namespace lumen::cpu
