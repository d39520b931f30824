// The CUDA kernel class of Einsum: resolves the equation against the operands' shapes once
// (einsum_spec, as the schema and the CPU kernel read it) into einsum.cu's loop descriptor.
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/einsum.h"
#include "graph/schemas/nn_extra_einsum.h"

namespace lumen::cuda {
namespace {

std::string check_einsum(const NodeContext& ctx) {
  const int n = ctx.num_inputs();
  if (n < 1 || n > kEinsumMaxOperands)
    return "at most " + std::to_string(kEinsumMaxOperands) + " operands";
  for (int i = 0; i < n; ++i) {
    std::string why = check_gpu_data(ctx, i);
    if (!why.empty()) return why;
    if (ctx.input_dtype(i) == DType::kBool) return "bool operands";
    if (ctx.input_dtype(i) != ctx.input_dtype(0)) return "operands of different types";
  }
  std::string why = check_static_shapes(ctx);
  if (!why.empty()) return why;
  if (einsum_spec(ctx).label_sizes.size() > static_cast<size_t>(kEinsumMaxLabels))
    return "more than " + std::to_string(kEinsumMaxLabels) + " labels";
  return check_cpu_takes_integers(ctx);
}

std::unique_ptr<Kernel> make_einsum(const NodeContext& ctx) {
  const EinsumSpec spec = einsum_spec(ctx);
  const int num_labels = static_cast<int>(spec.label_sizes.size());
  const int num_ops = static_cast<int>(spec.operands.size());
  std::vector<std::vector<int64_t>> label_strides(num_ops, std::vector<int64_t>(num_labels, 0));
  for (int i = 0; i < num_ops; ++i) {
    const Shape& s = ctx.input_shape(i);
    const std::vector<int64_t> strides = s.strides();
    for (int a = 0; a < s.rank(); ++a) {
      const int l = spec.operands[i][a];
      if (s[a] == spec.label_sizes[l]) label_strides[i][l] += strides[a];  // else broadcast: 0
    }
  }
  std::vector<bool> in_out(num_labels, false);
  for (int l : spec.output) in_out[l] = true;
  EinsumDesc d;
  d.operands = num_ops;
  d.out_numel = spec.output_shape.numel();
  for (int l : spec.output) {
    for (int i = 0; i < num_ops; ++i) d.out_strides[i][d.out_rank] = label_strides[i][l];
    d.out_dims[d.out_rank++] = spec.label_sizes[l];
  }
  for (int l = 0; l < num_labels; ++l) {
    if (in_out[l]) continue;
    for (int i = 0; i < num_ops; ++i) d.sum_strides[i][d.sum_rank] = label_strides[i][l];
    d.sum_dims[d.sum_rank++] = spec.label_sizes[l];
    d.sum_count *= spec.label_sizes[l];
  }
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    EinsumOperands x;
    for (int i = 0; i < num_ops; ++i) x.data[i] = in(k, i);
    launch_einsum(e, d, x, out(k), s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(Einsum, &make_einsum, &check_einsum);

}  // namespace lumen::cuda
