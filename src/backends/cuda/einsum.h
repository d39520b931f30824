// Launcher of the CUDA kernel of Einsum (einsum.cu): any equation (traces, diagonals, broadcast
// '...', one operand or many) as a direct loop over the output, each output element the sum over
// every summed label's range of its operands' product. Plain C++ types, so the kernel class
// (einsum_op.cc) needs no CUDA C++.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/any_launch.h"

namespace lumen::cuda {

inline constexpr int kEinsumMaxOperands = 8;
inline constexpr int kEinsumMaxLabels = 16;

// The loop: output labels (in output order), then summed labels, each with every operand's
// element stride along it (0 where the operand lacks the label or broadcasts it; a label repeated
// in one operand has the sum of its axes' strides, which walks the diagonal).
struct EinsumDesc {
  int operands = 0, out_rank = 0, sum_rank = 0;
  int64_t out_numel = 0, sum_count = 1;
  int64_t out_dims[kEinsumMaxLabels] = {};
  int64_t sum_dims[kEinsumMaxLabels] = {};
  int64_t out_strides[kEinsumMaxOperands][kEinsumMaxLabels] = {};
  int64_t sum_strides[kEinsumMaxOperands][kEinsumMaxLabels] = {};
};

struct EinsumOperands {
  const void* data[kEinsumMaxOperands] = {};
};

// y (contiguous, d.out_numel elements) = the einsum of `x`, every tensor of element type `t`
// (floats accumulate in float, or double for float64; integers in int64, wrapping as the type
// does). A warp shares each output element where the summed space is long.
void launch_einsum(Elem t, const EinsumDesc& d, const EinsumOperands& x, void* y,
                   cudaStream_t stream);

}  // namespace lumen::cuda
