// GroupedMatMul on the CPU: its members' MatMul kernels, one after another (each a parallel
// product already; the group exists for CUDA's single launch, and runs here where the router or a
// host fallback puts it).
#include <string>

#include "backends/cpu/kernel_registry.h"
#include "backends/matmul_members.h"

namespace lumen::cpu {
namespace {

class GroupedMatMulKernel final : public Kernel {
 public:
  explicit GroupedMatMulKernel(const NodeContext& ctx) : members_(matmul_members(ctx)) {
    const KernelEntry* matmul = find_kernel(OpKind::kMatMul);
    if (matmul == nullptr) ctx.fail_unsupported("no CPU MatMul kernel for its members");
    for (const MatMulMember& m : members_)
      kernels_.push_back(matmul->make(m.context(ctx.precision())));
  }

  void run(KernelContext& ctx) const override {
    for (size_t i = 0; i < kernels_.size(); ++i) {
      const Tensor inputs[2] = {ctx.inputs[0], ctx.inputs[i + 1]};
      KernelContext member{
          inputs, ctx.outputs.subspan(i, 1), ctx.stream, ctx.ready,
          ctx.output_types.empty() ? ctx.output_types : ctx.output_types.subspan(i, 1)};
      kernels_[i]->run(member);
    }
  }

  bool reads_input(int k) const override {
    return k == 0 || kernels_[static_cast<size_t>(k - 1)]->reads_input(1);
  }

  bool runs_any_shape() const override {
    for (const auto& k : kernels_)
      if (!k->runs_any_shape()) return false;
    return true;
  }

  std::string describe() const override {
    std::string text;
    for (size_t i = 0; i < kernels_.size(); ++i) {
      const std::string d = kernels_[i]->describe();
      if (!d.empty()) text += (text.empty() ? "" : "; ") + std::to_string(i) + ": " + d;
    }
    return text;
  }

 private:
  std::vector<MatMulMember> members_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
};

std::unique_ptr<Kernel> make_grouped_matmul(const NodeContext& ctx) {
  return std::make_unique<GroupedMatMulKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(GroupedMatMul, &make_grouped_matmul, &require_float32);

}  // namespace lumen::cpu
