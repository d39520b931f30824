// CUDA kernels of RMSNormalization, GroupNormalization, RotaryEmbedding, Swish, SwiGLU and
// MeanVarianceNormalization: each reads its geometry once at compile time and launches
// norm_extra.cu's kernels at run time.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/norm_extra.h"
#include "graph/schemas/rotary_geometry.h"

namespace lumen::cuda {
namespace {

// A kernel whose run is a closure built at compile time.
class NormExtraKernel final : public Kernel {
 public:
  using Fn = std::function<void(const KernelContext&, cudaStream_t)>;
  NormExtraKernel(std::string where, Fn fn) : where_(std::move(where)), fn_(std::move(fn)) {}
  void run(KernelContext& ctx) const override {
    fn_(ctx, stream_of(ctx));
    check_launch(where_);
  }

 private:
  std::string where_;
  Fn fn_;
};

std::unique_ptr<Kernel> launch(const NodeContext& ctx, NormExtraKernel::Fn fn) {
  return std::make_unique<NormExtraKernel>(ctx.where(), std::move(fn));
}

// ---- RMSNormalization ----

std::string check_rms_norm(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  const Shape& x = ctx.input_shape(0);
  const int axis = normalize_axis(ctx.attr_int("axis", -1), x.rank());
  int64_t n = 1;
  for (int d = axis; d < x.rank(); ++d) n *= x[d];
  if (ctx.input_shape(1).numel() != n) return "scale must cover the normalised dims exactly";
  return "";
}

std::unique_ptr<Kernel> make_rms_norm(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int axis = normalize_axis(ctx.attr_int("axis", -1), x.rank());
  int64_t rows = 1, n = 1;
  for (int d = 0; d < axis; ++d) rows *= x[d];
  for (int d = axis; d < x.rank(); ++d) n *= x[d];
  const float eps = ctx.attr_float("epsilon", 1e-5f);
  const Storage st = storage_of(ctx.input_dtype(0));
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_rms_norm(st, in(k, 0), in(k, 1), out(k), rows, n, eps, s);
  });
}

// ---- GroupNormalization ----

std::unique_ptr<Kernel> make_group_norm(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int64_t spatial = 1;
  for (int d = 2; d < x.rank(); ++d) spatial *= x[d];
  const GroupNormDesc d = group_norm_desc(x[0], x[1], ctx.attr_int("num_groups"), spatial,
                                          ctx.attr_float("epsilon", 1e-5f));
  const Storage st = storage_of(ctx.input_dtype(0));
  // The pieces' statistics live in the backend's workspace between the two launches.
  CudaBackend* be = &require_cuda_backend();
  be->workspace().reserve(group_norm_workspace_bytes(d));
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_group_norm(st, d, in(k, 0), in(k, 1), in(k, 2), out(k), be->workspace().ptr(), s);
  });
}

// ---- RotaryEmbedding ----

std::string check_rotary(const NodeContext& ctx) {
  for (int i = 0; i < 3; ++i) {
    const DType t = ctx.input_dtype(i);
    if (!is_gpu_float(t) || t != ctx.input_dtype(0))
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(t) +
             "; the CUDA kernel takes one of float32, float16 or bfloat16 for X and the caches";
  }
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && !ctx.input_shape(i).is_static())
      return "input " + std::to_string(i) + "'s shape is known only at run time";
  return "";
}

std::unique_ptr<Kernel> make_rotary(const NodeContext& ctx) {
  const RotaryGeometry g = rotary_geometry(ctx);
  RotaryDesc d;
  d.batch = g.batch;
  d.heads = g.heads;
  d.seq = g.seq;
  d.head_size = g.head_size;
  d.rotary_dim = g.rotary_dim;
  d.max_position = g.max_position;
  d.interleaved = g.interleaved;
  d.three_d = g.three_d;
  const bool positions = g.with_positions;
  const Storage st = storage_of(ctx.input_dtype(0));
  // Position ids outside the caches are raised after the run (index_errors.h), as the CPU does.
  const IndexCheck checked = positions ? index_check(ctx) : IndexCheck{};
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    const int64_t* pos = positions ? static_cast<const int64_t*>(in(k, 3)) : nullptr;
    launch_rotary_embedding(st, d, in(k, 0), in(k, 1), in(k, 2), pos, out(k), checked, s);
  });
}

// ---- Swish, SwiGLU ----

std::unique_ptr<Kernel> make_swish(const NodeContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 1.0f);
  const bool gated = ctx.op() == OpKind::kSwiGLU;
  const int64_t n = ctx.output(0).shape.numel();
  const Storage st = storage_of(ctx.input_dtype(0));
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_swish(st, alpha, in(k, 0), gated ? in(k, 1) : nullptr, out(k), n, s);
  });
}

// ---- MeanVarianceNormalization ----

std::unique_ptr<Kernel> make_mvn(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  std::vector<bool> reduced(x.rank(), false);
  for (int64_t a : ctx.attr_ints("axes", {0, 2, 3})) reduced[normalize_axis(a, x.rank())] = true;
  const ReduceDesc d = reduce_desc(x, reduced);
  const Storage st = storage_of(ctx.input_dtype(0));
  return launch(
      ctx, [=](const KernelContext& k, cudaStream_t s) { launch_mvn(st, d, in(k, 0), out(k), s); });
}

std::string check_mvn(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() > kMaxRank) return "rank above 8";
  return "";
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(RMSNormalization, &make_rms_norm, &check_rms_norm);
LUMEN_REGISTER_CUDA_KERNEL(GroupNormalization, &make_group_norm, &require_float_static);
LUMEN_REGISTER_CUDA_KERNEL(RotaryEmbedding, &make_rotary, &check_rotary);
LUMEN_REGISTER_CUDA_KERNEL(Swish, &make_swish, &require_float_static);
LUMEN_REGISTER_CUDA_KERNEL(SwiGLU, &make_swish, &require_float_static);
LUMEN_REGISTER_CUDA_KERNEL(MeanVarianceNormalization, &make_mvn, &check_mvn);

}  // namespace lumen::cuda
