// Shared pieces of the CUDA backend's dtype-generic kernel classes (any_*_ops.cc): the element
// type of a tensor, the rule that keeps integer shape arithmetic on the host, a kernel that runs
// a closure, and the factories ops.cc hands its non-float cases to.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/any_launch.h"
#include "backends/cuda/cuda_backend.h"

namespace lumen::cuda {

// The generic kernels' element type of `dtype`; nullopt for types they do not take (float8,
// 4- and 2-bit types, strings).
std::optional<Elem> elem_of(DType dtype);

// Whether the node is integer shape arithmetic, which stays on the host where its results are
// read: every tensor int64 or bool, static, with at most 64 elements, and an int64 input.
bool is_shape_arithmetic(const NodeContext& ctx);

// A kernel's input i and output i as raw device pointers.
inline const void* in(const KernelContext& k, int i) {
  return k.inputs[i].raw_data();
}
inline void* out(const KernelContext& k, int i = 0) {
  return k.outputs[i].raw_data();
}
// The bytes of one element of `dtype`, as the kernels' launchers take it.
inline int element_bytes(DType dtype) {
  return static_cast<int>(dtype_size(dtype));
}

// "" when input `i` can be a generic kernel's data on the GPU (a type of Elem, not shape
// arithmetic), else why not.
std::string check_gpu_data(const NodeContext& ctx, int i);

// "" when every input and output shape is static with rank <= kMaxRank, else why not.
std::string check_static_shapes(const NodeContext& ctx);

// "" when no input is integer or bool, or when the CPU backend takes the node too: integer nodes
// go to CUDA only where the host accepts them, so both backends accept the same types.
std::string check_cpu_takes_integers(const NodeContext& ctx);

// "" when input i is a constant with no zero element (an integer divisor CUDA may take: the host
// checks the others at run time).
std::string check_constant_without_zero(const NodeContext& ctx, int i);

// "" when input `i` (indices or targets) is known only at run time (the kernel checks each index
// and reports a bad one: index_errors.h), or is a constant whose element k lies in [-b, b) (or
// [0, b) without `negative`), b = bounds[k % bounds.size()]; a constant out of range stays on the
// host, which reports it.
std::string check_known_indices(const NodeContext& ctx, int i, const std::vector<int64_t>& bounds,
                                bool negative);

// The reduction over the dims of x marked in `reduced`: the kept dims (in order) and the reduced
// ones, each with its element stride in x.
ReduceDesc reduce_desc(const Shape& x, const std::vector<bool>& reduced);

// The [outer, n, inner] view of a tensor of shape x along `axis`.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisView axis_view(const Shape& x, int axis);

// A kernel whose run is a closure built at compile time.
class ClosureKernel final : public Kernel {
 public:
  using Fn = std::function<void(const KernelContext&, cudaStream_t)>;
  ClosureKernel(std::string where, Fn fn) : where_(std::move(where)), fn_(std::move(fn)) {}
  void run(KernelContext& ctx) const override;

 private:
  std::string where_;
  Fn fn_;
};
std::unique_ptr<Kernel> closure(const NodeContext& ctx, ClosureKernel::Fn fn);

// A broadcast descriptor of the output over inputs a and b (NumPy's rules).
BroadcastDesc broadcast_desc(const Shape& a, const Shape& b, const Shape& out);

// Add, Sub, Mul, Div, Pow, Min, Max on any numeric type (ops.cc keeps the float storage path).
std::string check_any_binary(const NodeContext& ctx);
std::unique_ptr<Kernel> make_any_binary(const NodeContext& ctx);

// Sum, Mean, Max and Min of any number of inputs (broadcast); ops.cc hands Max and Min over when
// they have other than two.
std::string check_variadic(const NodeContext& ctx);
std::unique_ptr<Kernel> make_variadic(const NodeContext& ctx);

// ops.cc's unary ops (Neg, Abs, Relu, Exp, ...) on float64 and integer types.
std::string check_any_unary(const NodeContext& ctx);
std::unique_ptr<Kernel> make_any_unary(const NodeContext& ctx);

// LayerNormalization with its Mean and InvStdDev outputs (any float storage, float32 per
// stash_type 1 unless a half-precision compile narrowed them); ops.cc keeps the one-output path.
std::string check_layer_norm_stats(const NodeContext& ctx);
std::unique_ptr<Kernel> make_layer_norm_stats(const NodeContext& ctx);

}  // namespace lumen::cuda
