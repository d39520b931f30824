// GroupedMatMul's members, each as a graph of one MatMul, for backends that run a group as the
// kernels of its members (built by their own MatMul factories, so each member gets the kernel and
// the packed or device copy of its weight that a lone MatMul of that weight gets).
#pragma once

#include <memory>
#include <vector>

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

}  // namespace lumen
