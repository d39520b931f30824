// CUDA kernel classes of CumProd, LpNormalization, LRN, ReverseSequence, Det and BitCast (a
// device-to-device copy of the bytes, where neither side is a type whose storage is not its raw
// bits).
#include <memory>
#include <string>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/extra_ops.h"
#include "graph/schemas/sampling.h"

namespace lumen::cuda {
namespace {

// ---- CumProd: the types the host takes (float16, float32, float64, 32- and 64-bit integers) ----

std::string check_cum_prod(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt32:
    case DType::kUInt64:
      break;
    default:
      return std::string(dtype_name(ctx.input_dtype(0))) + " data";
  }
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  if (ctx.input_value(1) == nullptr) return "the axis must be known at build time";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_cum_prod(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int axis = normalize_axis(ctx.input_ints(1, "axis").at(0), std::max(x.rank(), 1));
  const AxisView v = axis_view(x, axis);
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_cum_prod(e, in(k, 0), out(k), v.outer, v.n, v.inner, exclusive, reverse, s);
  });
}

// ---- LpNormalization ----

std::string check_lp_norm(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (!is_gpu_float(t) && t != DType::kFloat64) return std::string(dtype_name(t)) + " data";
  const int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) return "p other than 1 or 2";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_lp_norm(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const AxisView v = axis_view(x, normalize_axis(ctx.attr_int("axis", -1), x.rank()));
  const int p = static_cast<int>(ctx.attr_int("p", 2));
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_lp_norm(e, in(k, 0), out(k), v.outer, v.n, v.inner, p, s);
  });
}

// ---- LRN (float32, as on the host) ----

std::string check_lrn(const NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32) return "float32 only";
  if (ctx.input_shape(0).rank() < 2) return "rank below 2";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_lrn(const NodeContext& ctx) {
  const LrnSpec spec = lrn_spec(ctx);
  const Shape& x = ctx.input_shape(0);
  const int64_t batch = x[0], channels = x[1];
  const int64_t plane = batch * channels == 0 ? 0 : x.numel() / (batch * channels);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_lrn(static_cast<const float*>(in(k, 0)), static_cast<float*>(out(k)), batch, channels,
               plane, spec.size, spec.alpha, spec.beta, spec.bias, s);
  });
}

// ---- ReverseSequence: any type of 1 to 8 bytes; sequence_lens int64 on the device ----

std::string check_reverse_sequence(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (t != DType::kBool && !elem_of(t).has_value())
    return std::string(dtype_name(t)) + " data stays on the host";
  if (ctx.input_dtype(1) != DType::kInt64) return "sequence_lens must be int64";
  if (ctx.input_shape(0).rank() < 2) return "rank below 2";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_reverse_sequence(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int64_t inner = 1;
  for (int d = 2; d < x.rank(); ++d) inner *= x[d];
  const int64_t d0 = x[0], d1 = x[1];
  const bool batch_first = ctx.attr_int("batch_axis", 1) == 0;
  const int bytes = static_cast<int>(dtype_size(ctx.input_dtype(0)));
  const IndexCheck check = index_check(ctx);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_reverse_sequence(bytes, in(k, 0), out(k), static_cast<const int64_t*>(in(k, 1)), d0, d1,
                            inner, batch_first, check, s);
  });
}

// ---- BitCast ----

bool raw_bits(DType t) {
  return t != DType::kBool && elem_of(t).has_value();
}

std::string check_bit_cast(const NodeContext& ctx) {
  if (!raw_bits(ctx.input_dtype(0)) || !raw_bits(ctx.output(0).dtype))
    return "bool, 4-bit, 2-bit and float8 data stay on the host (their storage is not their bits)";
  if (is_shape_arithmetic(ctx)) return "integer data (shape arithmetic) stays on the host";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_bit_cast(const NodeContext& ctx) {
  const size_t bytes =
      static_cast<size_t>(ctx.input_shape(0).numel()) * dtype_size(ctx.input_dtype(0));
  const std::string where = ctx.where();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    if (bytes > 0)
      check(cudaMemcpyAsync(out(k), in(k, 0), bytes, cudaMemcpyDeviceToDevice, s), where);
  });
}

// ---- Det (float32, as on the host) ----

std::string check_det(const NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32) return "float32 only";
  const Shape& x = ctx.input_shape(0);
  if (!x.is_static()) return "the input shape is known only at run time";
  if (x.rank() < 2 || x[-1] > kMaxDetSize)
    return "matrices above " + std::to_string(kMaxDetSize) + " x " + std::to_string(kMaxDetSize);
  return "";
}

std::unique_ptr<Kernel> make_det(const NodeContext& ctx) {
  const int64_t m = ctx.input_shape(0)[-1];
  const int64_t count = ctx.output(0).shape.numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_det(static_cast<const float*>(in(k, 0)), static_cast<float*>(out(k)), count, m, s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(CumProd, &make_cum_prod, &check_cum_prod);
LUMEN_REGISTER_CUDA_KERNEL(LpNormalization, &make_lp_norm, &check_lp_norm);
LUMEN_REGISTER_CUDA_KERNEL(LRN, &make_lrn, &check_lrn);
LUMEN_REGISTER_CUDA_KERNEL(ReverseSequence, &make_reverse_sequence, &check_reverse_sequence);
LUMEN_REGISTER_CUDA_KERNEL(BitCast, &make_bit_cast, &check_bit_cast);
LUMEN_REGISTER_CUDA_KERNEL(Det, &make_det, &check_det);

}  // namespace lumen::cuda
