// GroupedMatMul on the CPU: its members' MatMul kernels, one after another (each a parallel
// product already; the group exists for CUDA's single launch, and runs here where the router or a
// host fallback puts it). With the RMS-norm prologue, A is normalized into a temporary first.
#include <cmath>
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "backends/matmul_members.h"

namespace lumen::cpu {
namespace {

class GroupedMatMulKernel final : public Kernel {
 public:
  explicit GroupedMatMulKernel(const NodeContext& ctx)
      : members_(matmul_members(ctx)),
        norm_(ctx.has_attr("rms_norm_epsilon")),
        epsilon_(ctx.attr_float("rms_norm_epsilon", 0.0f)) {
    const KernelEntry* matmul = find_kernel(OpKind::kMatMul);
    kernels_ = member_kernels(ctx, members_, matmul == nullptr ? nullptr : matmul->make);
  }

  void run(KernelContext& ctx) const override {
    Tensor a = ctx.inputs[0];
    if (norm_) a = normalized(a, ctx.inputs[kernels_.size() + 1]);
    run_members(kernels_, ctx, a);
  }

  bool reads_input(int k) const override {
    if (k == 0 || k > static_cast<int>(kernels_.size())) return true;
    return kernels_[static_cast<size_t>(k - 1)]->reads_input(1);
  }

  bool runs_any_shape() const override { return members_run_any_shape(kernels_); }

  std::string describe() const override {
    std::string text;
    for (size_t i = 0; i < kernels_.size(); ++i) {
      const std::string d = kernels_[i]->describe();
      if (!d.empty()) text += (text.empty() ? "" : "; ") + std::to_string(i) + ": " + d;
    }
    return text;
  }

 private:
  // x / sqrt(mean(x^2) + epsilon) * gamma over each row of a's last dim.
  Tensor normalized(const Tensor& a, const Tensor& gamma) const {
    Tensor out = Tensor::empty(a.shape());
    const int64_t k = a.shape()[-1];
    const int64_t rows = k == 0 ? 0 : a.numel() / k;
    const float* x = a.data<float>();
    const float* g = gamma.data<float>();
    float* y = out.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * k;
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += static_cast<double>(xr[i]) * xr[i];
      const auto inv = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(k) + epsilon_));
      for (int64_t i = 0; i < k; ++i) y[r * k + i] = xr[i] * inv * g[i];
    }
    return out;
  }

  std::vector<MatMulMember> members_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  bool norm_;
  float epsilon_;
};

std::unique_ptr<Kernel> make_grouped_matmul(const NodeContext& ctx) {
  return std::make_unique<GroupedMatMulKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(GroupedMatMul, &make_grouped_matmul, &require_float32);

}  // namespace lumen::cpu
