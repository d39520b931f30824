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

}  // namespace lumen
