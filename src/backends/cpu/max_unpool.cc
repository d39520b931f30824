// CPU MaxUnpool (opset 11) for float32: a zero output with every X[i] written at the position
// I[i] names (MaxPool's Indices: flat, row-major, over the default output shape of
// max_unpool_default_shape). A larger output_shape keeps each value at its coordinates, leaving
// trailing zeros. Indices outside the default shape throw InvalidArgument naming the node.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/sampling.h"

namespace lumen::cpu {
namespace {

class MaxUnpoolKernel final : public Kernel {
 public:
  explicit MaxUnpoolKernel(const NodeContext& ctx)
      : where_(ctx.where()), dims_(max_unpool_default_shape(ctx)) {
    out_dims_ = ctx.output(0).shape.dims();
    reshaped_ = dims_ != out_dims_;
    total_ = 1;
    for (int64_t d : dims_) total_ *= d;
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    const int64_t* idx = ctx.inputs[1].data<int64_t>();
    Tensor& out = ctx.outputs[0];
    float* y = out.data<float>();
    int64_t n = ctx.inputs[0].numel();
    std::fill(y, y + out.numel(), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      int64_t at = idx[i];
      if (at < 0 || at >= total_)
        throw InvalidArgument(where_ + ": index " + std::to_string(at) + " at position " +
                              std::to_string(i) + " of I is outside the " + std::to_string(total_) +
                              " unpooled elements");
      y[reshaped_ ? relocate(at) : at] = x[i];
    }
  }

 private:
  // The flat output position of flat position `at` of the default shape.
  int64_t relocate(int64_t at) const {
    int64_t pos = 0, stride = 1;
    for (int a = static_cast<int>(dims_.size()) - 1; a >= 0; --a) {
      pos += (at % dims_[a]) * stride;
      at /= dims_[a];
      stride *= out_dims_[a];
    }
    return pos;
  }

  std::string where_;
  std::vector<int64_t> dims_, out_dims_;
  bool reshaped_ = false;
  int64_t total_ = 0;
};

std::string check_max_unpool(const NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32)
    return std::string("X is ") + dtype_name(ctx.input_dtype(0)) + "; the CPU kernel takes float32";
  return "";
}

std::unique_ptr<Kernel> make_max_unpool(const NodeContext& ctx) {
  return std::make_unique<MaxUnpoolKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(MaxUnpool, &make_max_unpool, &check_max_unpool);

}  // namespace lumen::cpu
