// How the optimizer ops of ONNX's ai.onnx.preview.training domain (Adagrad, Adam, Momentum)
// lay out their variadic inputs and outputs, shared by their schema and their kernels.
//
// Inputs: R (learning rate, scalar), T (update count, int64 scalar), then the optimized tensors
// by role: X_1..X_n, G_1..G_n, then one block of n per state tensor (Adagrad: H; Adam: V, H;
// Momentum: V). Outputs: the new X_1..X_n, then the new state tensors in the same role order.
#pragma once

#include "graph/op_kind.h"

namespace lumen {

struct OptimizerLayout {
  int roles_in = 0;   // tensors each optimized variable brings: X, G and its states
  int roles_out = 0;  // tensors each optimized variable gets back: X_new and its new states

  // The number of optimized tensors n of a node with `num_inputs` inputs; 0 when the count does
  // not fit (fewer than one group, or a partial group).
  int tensors(int num_inputs) const {
    const int rest = num_inputs - 2;
    return rest >= roles_in && rest % roles_in == 0 ? rest / roles_in : 0;
  }
  // Input index of role `role` (0 = X, 1 = G, 2.. = states) of tensor i of n.
  static int input_index(int role, int i, int n) { return 2 + role * n + i; }
  // Output index of out-role `role` (0 = X_new, 1.. = new states) of tensor i of n; out-role r
  // (r >= 1) is the new value of input role r + 1.
  static int output_index(int role, int i, int n) { return role * n + i; }
};

// The layout of op kind Adagrad (X, G, H), Adam (X, G, V, H) or Momentum (X, G, V).
inline OptimizerLayout optimizer_layout(OpKind op) {
  if (op == OpKind::kAdam) return {4, 3};
  return {3, 2};
}

}  // namespace lumen
