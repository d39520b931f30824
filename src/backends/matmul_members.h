// GroupedMatMul's members, each as a graph of one MatMul, for backends that run a group as the
// kernels of its members (built by their own MatMul factories, so each member gets the kernel and
// the packed or device copy of its weight that a lone MatMul of that weight gets).
#pragma once

#include <memory>
#include <vector>

#include "backends/kernel.h"
#include "graph/node_context.h"
#include "lumen/graph.h"

namespace lumen {

struct MatMulMember {
  std::unique_ptr<Graph> graph;  // input A (input 0's type) and constant B_i: one MatMul node
  int node = -1;
  // The node's context, for a backend's MatMul factory (valid while `graph` lives).
  NodeContext context(Precision precision) const {
    return NodeContext(*graph, graph->node(node), precision);
  }
};

// One member per weight of GroupedMatMul `ctx` (InvalidModel where a weight is not constant).
std::vector<MatMulMember> matmul_members(const NodeContext& ctx);

// Each member's kernel from a backend's MatMul factory (`make`, null: UnsupportedOp naming ctx).
using MatMulFactory = std::unique_ptr<Kernel> (*)(const NodeContext& ctx);
std::vector<std::unique_ptr<Kernel>> member_kernels(const NodeContext& ctx,
                                                    const std::vector<MatMulMember>& members,
                                                    MatMulFactory make);

// Runs member i's kernel on A = `a` and the group's weight i (ctx.inputs[i + 1]) into output i,
// for every member in turn.
void run_members(const std::vector<std::unique_ptr<Kernel>>& kernels, KernelContext& ctx,
                 const Tensor& a);

// Whether every member's kernel runs at any shape.
bool members_run_any_shape(const std::vector<std::unique_ptr<Kernel>>& kernels);

}  // namespace lumen
