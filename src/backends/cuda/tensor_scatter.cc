// CUDA kernel class of TensorScatter (tensor_scatter.cu's kernel). It may run in place on its
// cache (the planner gives the output the cache's memory when the cache dies there, as a KV cache
// does between decode steps): only the update rows move then.
#include <memory>
#include <string>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/tensor_scatter.h"

namespace lumen::cuda {
namespace {

// ---- TensorScatter ----

std::string check_tensor_scatter(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  if (ctx.has_input(2) && ctx.input_dtype(2) != DType::kInt64) return "write_indices must be int64";
  return check_static_shapes(ctx);
}

class TensorScatterKernel final : public Kernel {
 public:
  explicit TensorScatterKernel(const NodeContext& ctx)
      : where_(ctx.where()),
        bytes_(element_bytes(ctx.input_dtype(0))),
        has_write_(ctx.has_input(2)),
        check_(index_check(ctx)) {
    const Shape& cache = ctx.input_shape(0);
    const int axis = normalize_axis(ctx.attr_int("axis", -2), cache.rank());
    d_.batch = cache[0];
    for (int a = 0; a < axis; ++a) d_.prefix *= cache[a];
    d_.max_seq = cache[axis];
    d_.seq = ctx.input_shape(1)[axis];
    for (int a = axis + 1; a < cache.rank(); ++a) d_.inner *= cache[a];
    d_.circular = ctx.attr_string("mode", "linear") == "circular";
  }

  void run(KernelContext& ctx) const override {
    const cudaStream_t s = stream_of(ctx);
    const void* cache = in(ctx, 0);
    void* y = out(ctx);
    const size_t total = static_cast<size_t>(d_.prefix * d_.max_seq * d_.inner) * bytes_;
    if (y != cache && total > 0)
      check(cudaMemcpyAsync(y, cache, total, cudaMemcpyDeviceToDevice, s), where_);
    const auto* write = has_write_ ? static_cast<const int64_t*>(in(ctx, 2)) : nullptr;
    launch_tensor_scatter(bytes_, d_, in(ctx, 1), write, y, check_, s);
    check_launch(where_);
  }
  int in_place_input() const override { return 0; }

 private:
  std::string where_;
  int bytes_;
  bool has_write_;
  IndexCheck check_;
  TensorScatterDesc d_;
};

std::unique_ptr<Kernel> make_tensor_scatter(const NodeContext& ctx) {
  return std::make_unique<TensorScatterKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(TensorScatter, &make_tensor_scatter, &check_tensor_scatter);

}  // namespace lumen::cuda
