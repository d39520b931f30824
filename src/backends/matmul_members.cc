#include "backends/matmul_members.h"

#include <string>

namespace lumen {

std::vector<MatMulMember> matmul_members(const NodeContext& ctx) {
  std::vector<MatMulMember> members;
  for (int i = 1; i <= ctx.num_outputs(); ++i) {
    const Tensor* weight = ctx.input_value(i);
    if (weight == nullptr)
      throw InvalidModel(ctx.where() + ": weight " + std::to_string(i) + " is not a constant");
    MatMulMember m;
    m.graph = std::make_unique<Graph>();
    Value* a = m.graph->add_input("a", ctx.input_shape(0), ctx.input_dtype(0));
    Value* b = m.graph->add_constant("b", *weight);
    Value* y = m.graph->add_op("MatMul", {a, b}, {}, ctx.node().name + "/" + std::to_string(i));
    m.graph->mark_output(y);
    m.node = y->producer;
    members.push_back(std::move(m));
  }
  return members;
}

std::vector<std::unique_ptr<Kernel>> member_kernels(const NodeContext& ctx,
                                                    const std::vector<MatMulMember>& members,
                                                    MatMulFactory make) {
  if (make == nullptr) ctx.fail_unsupported("no MatMul kernel for its members");
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (const MatMulMember& m : members) kernels.push_back(make(m.context(ctx.precision())));
  return kernels;
}

void run_members(const std::vector<std::unique_ptr<Kernel>>& kernels, KernelContext& ctx,
                 const Tensor& a) {
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Tensor inputs[2] = {a, ctx.inputs[i + 1]};
    KernelContext member{
        inputs, ctx.outputs.subspan(i, 1), ctx.stream, ctx.ready,
        ctx.output_types.empty() ? ctx.output_types : ctx.output_types.subspan(i, 1)};
    kernels[i]->run(member);
  }
}

bool members_run_any_shape(const std::vector<std::unique_ptr<Kernel>>& kernels) {
  for (const auto& k : kernels)
    if (!k->runs_any_shape()) return false;
  return true;
}

}  // namespace lumen
