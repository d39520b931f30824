// CUDA kernels of the reductions (any_reduce.cu): every Reduce* over any set of axes and on any
// numeric type, ArgMax/ArgMin, TopK, CumSum, Hardmax, InstanceNormalization, the loss ops
// (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and LayerNormalization's Mean and InvStdDev
// outputs.
#include <algorithm>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_check.h"

namespace lumen::cuda {
namespace {

int axis_of(const NodeContext& ctx, int64_t axis, int rank) {
  if (axis < -rank || axis >= std::max(rank, 1)) ctx.fail_model("axis out of range");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

ReduceKind reduce_kind(OpKind op) {
  switch (op) {
    case OpKind::kReduceMean:
      return ReduceKind::kMean;
    case OpKind::kReduceMax:
      return ReduceKind::kMax;
    case OpKind::kReduceMin:
      return ReduceKind::kMin;
    case OpKind::kReduceProd:
      return ReduceKind::kProd;
    case OpKind::kReduceSumSquare:
      return ReduceKind::kSumSquare;
    case OpKind::kReduceL1:
      return ReduceKind::kL1;
    case OpKind::kReduceL2:
      return ReduceKind::kL2;
    case OpKind::kReduceLogSum:
      return ReduceKind::kLogSum;
    case OpKind::kReduceLogSumExp:
      return ReduceKind::kLogSumExp;
    default:
      return ReduceKind::kSum;
  }
}

// Which dims a Reduce node reduces (axes from the attribute or, from opset 18, input 1; none
// with noop_with_empty_axes and no axes, where the op applies element-wise).
std::vector<bool> reduced_dims(const NodeContext& ctx) {
  const int rank = ctx.input_shape(0).rank();
  std::vector<int64_t> axes =
      ctx.has_input(1) ? ctx.input_ints(1, "axes") : ctx.attr_ints("axes", {});
  const bool noop = axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(rank, axes.empty() && !noop);
  for (int64_t a : axes) reduced[axis_of(ctx, a, rank)] = true;
  return reduced;
}

std::string check_reduce(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  why = check_cpu_takes_integers(ctx);
  if (!why.empty()) return why;
  if (ctx.has_input(1) && ctx.input_value(1) == nullptr) return "axes must be known at build time";
  why = check_static_shapes(ctx);
  if (!why.empty()) return why;
  const std::optional<Elem> e = elem_of(ctx.input_dtype(0));
  const bool is_float = is_gpu_float(ctx.input_dtype(0)) || *e == Elem::kF64;
  if (*e == Elem::kBool) return "takes numbers";
  const ReduceKind k = reduce_kind(ctx.op());
  if (!is_float && (k == ReduceKind::kL2 || k == ReduceKind::kLogSum ||
                    k == ReduceKind::kLogSumExp || k == ReduceKind::kMean))
    return "takes floats";
  return "";
}

}  // namespace

ReduceDesc reduce_desc(const Shape& x, const std::vector<bool>& reduced) {
  ReduceDesc d;
  std::vector<int64_t> strides(x.rank(), 1);
  for (int k = x.rank() - 2; k >= 0; --k) strides[k] = strides[k + 1] * x[k + 1];
  for (int k = 0; k < x.rank(); ++k) {
    if (reduced[k]) {
      d.red_dims[d.red_rank] = x[k];
      d.red_strides[d.red_rank++] = strides[k];
      d.red_n *= x[k];
    } else {
      d.out_dims[d.out_rank] = x[k];
      d.out_strides[d.out_rank++] = strides[k];
      d.out_n *= x[k];
    }
  }
  return d;
}

namespace {

std::unique_ptr<Kernel> make_reduce(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const std::vector<bool> reduced = reduced_dims(ctx);
  const ReduceKind op = reduce_kind(ctx.op());
  const ReduceDesc d = reduce_desc(x, reduced);
  bool trailing = true;  // the reduced dims are the last ones
  for (int k = 1; k < x.rank(); ++k) trailing = trailing && (reduced[k] || !reduced[k - 1]);
  const Elem e = *elem_of(ctx.input_dtype(0));
  if (trailing && d.red_n > 0 && d.out_n > 0 && is_gpu_float(ctx.input_dtype(0)) &&
      (op == ReduceKind::kMean || op == ReduceKind::kMax)) {
    // The row kernel of kernels.cu (a warp per row) for the common trailing mean and max.
    const Storage st = storage_of(ctx.input_dtype(0));
    const int64_t rows = d.out_n, n = d.red_n;
    const bool max = op == ReduceKind::kMax;
    return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
      launch_row_reduce(st, in(k, 0), out(k), rows, n, max, s);
    });
  }
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_reduce(e, op, in(k, 0), out(k), d, s);
  });
}

std::string check_arg_reduce(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  if (ctx.input_dtype(0) == DType::kBool) return "takes numbers";
  if (ctx.input_shape(0).rank() > 0 && ctx.input_shape(0).is_static() &&
      ctx.input_shape(0)[axis_of(ctx, ctx.attr_int("axis", 0), ctx.input_shape(0).rank())] == 0)
    return "an empty axis has no arg-extremum";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_arg_reduce(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const AxisView v = axis_view(x, axis_of(ctx, ctx.attr_int("axis", 0), x.rank()));
  const bool min = ctx.op() == OpKind::kArgMin;
  const bool last = ctx.attr_int("select_last_index", 0) != 0;
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_arg_reduce(e, min, last, in(k, 0), static_cast<int64_t*>(out(k)), v.outer, v.n, v.inner,
                      s);
  });
}

std::string check_top_k(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  if (ctx.input_dtype(0) == DType::kBool) return "takes numbers";
  if (ctx.input_value(1) == nullptr) return "K must be known at build time";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_top_k(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const AxisView v = axis_view(x, axis_of(ctx, ctx.attr_int("axis", -1), x.rank()));
  const int64_t k = ctx.input_ints(1, "K").at(0);
  if (k < 0 || k > v.n) ctx.fail_shape("K is out of range for the axis");
  const bool largest = ctx.attr_int("largest", 1) != 0;
  const Elem e = *elem_of(ctx.input_dtype(0));
  const bool want_indices = ctx.num_outputs() > 1;
  return closure(ctx, [=](const KernelContext& kc, cudaStream_t s) {
    int64_t* indices =
        want_indices && kc.outputs[1].defined() ? static_cast<int64_t*>(out(kc, 1)) : nullptr;
    launch_top_k(e, in(kc, 0), out(kc, 0), indices, v.outer, v.n, v.inner, k, largest, s);
  });
}

std::string check_cumsum(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  if (ctx.input_dtype(0) == DType::kBool) return "takes numbers";
  if (ctx.input_value(1) == nullptr) return "the axis must be known at build time";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_cumsum(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int axis = axis_of(ctx, ctx.input_ints(1, "axis").at(0), x.rank());
  const AxisView v = axis_view(x, axis);
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_cumsum(e, in(k, 0), out(k), v.outer, v.n, v.inner, exclusive, reverse, s);
  });
}

std::string check_hardmax(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  const Elem e = *elem_of(ctx.input_dtype(0));
  if (!is_gpu_float(ctx.input_dtype(0)) && e != Elem::kF64) return "takes floats";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_hardmax(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const AxisView v = axis_view(x, axis_of(ctx, ctx.attr_int("axis", -1), x.rank()));
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_hardmax(e, in(k, 0), out(k), v.outer, v.n, v.inner, s);
  });
}

std::string check_instance_norm(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() < 3) return "takes (N, C, ...) input";
  const int64_t c = ctx.input_shape(0)[1];
  if (ctx.input_shape(1).numel() != c || ctx.input_shape(2).numel() != c)
    return "scale and bias must have C elements";
  return "";
}

std::unique_ptr<Kernel> make_instance_norm(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int64_t channels = x[1], rows = x[0] * x[1];
  const int64_t n = rows > 0 ? x.numel() / rows : 0;
  const float eps = ctx.attr_float("epsilon", 1e-5f);
  const Storage st = storage_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_instance_norm(st, in(k, 0), in(k, 1), in(k, 2), out(k), rows, channels, n, eps, s);
  });
}

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: float scores (and weights, and
// outputs) of one storage, int64 or int32 targets.
std::string check_loss(const NodeContext& ctx) {
  const DType x = ctx.input_dtype(0);
  if (!is_gpu_float(x)) return std::string("scores of ") + dtype_name(x) + " stay on the host";
  const DType t = ctx.input_dtype(1);
  if (t != DType::kInt64 && t != DType::kInt32) return "targets must be int64 or int32";
  if (ctx.num_inputs() > 2 && ctx.has_input(2) && ctx.input_dtype(2) != x)
    return "the weights' type differs from the scores'";
  for (int i = 0; i < ctx.num_outputs(); ++i)
    if (ctx.output(i).dtype != x) return "the outputs' type differs from the scores'";
  if (ctx.input_shape(0).rank() < 2) return "scores need rank 2 or more";
  std::string why = check_known_indices(ctx, 1, {ctx.input_shape(0)[1]}, false);
  if (!why.empty()) return why;
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_loss(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  LossDesc d;
  d.n = x[0];
  d.c = x[1];
  for (int k = 2; k < x.rank(); ++k) d.inner *= x[k];
  d.softmax = ctx.op() == OpKind::kSoftmaxCrossEntropyLoss;
  d.target_int64 = ctx.input_dtype(1) == DType::kInt64;
  d.has_ignore = ctx.has_attr("ignore_index");
  d.ignore = d.has_ignore ? ctx.attr_int("ignore_index") : 0;
  const std::string r = ctx.attr_string("reduction", "mean");
  d.reduction = r == "none" ? 0 : r == "sum" ? 1 : 2;
  const bool weighted = ctx.num_inputs() > 2 && ctx.has_input(2);
  const int outputs = ctx.num_outputs();
  const Storage st = storage_of(ctx.input_dtype(0));
  const IndexCheck checked = index_check(ctx);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    void* log_prob = outputs > 1 && k.outputs[1].defined() ? out(k, 1) : nullptr;
    launch_loss(st, d, in(k, 0), in(k, 1), weighted ? in(k, 2) : nullptr, out(k), log_prob, checked,
                s);
  });
}

}  // namespace

std::string check_layer_norm_stats(const NodeContext& ctx) {
  for (int i = 2; i < ctx.num_outputs(); ++i)
    if (ctx.output(i).dtype != ctx.output(1).dtype) return "Mean and InvStdDev types differ";
  if (!is_gpu_float(ctx.output(1).dtype))
    return std::string("Mean and InvStdDev are ") + dtype_name(ctx.output(1).dtype);
  return "";
}

std::unique_ptr<Kernel> make_layer_norm_stats(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int axis = axis_of(ctx, ctx.attr_int("axis", -1), x.rank());
  int64_t rows = 1, n = 1;
  for (int d = 0; d < x.rank(); ++d) (d < axis ? rows : n) *= x[d];
  const float eps = ctx.attr_float("epsilon", 1e-5f);
  const bool bias = ctx.has_input(2);
  const int outputs = ctx.num_outputs();
  const Storage st = storage_of(ctx.input_dtype(0));
  const Storage stat_st = storage_of(ctx.output(1).dtype);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    void* mean = outputs > 1 && k.outputs[1].defined() ? out(k, 1) : nullptr;
    void* inv = outputs > 2 && k.outputs[2].defined() ? out(k, 2) : nullptr;
    launch_layer_norm_stats(st, in(k, 0), in(k, 1), bias ? in(k, 2) : nullptr, out(k), stat_st,
                            mean, inv, rows, n, eps, s);
  });
}

LUMEN_REGISTER_CUDA_KERNEL(ReduceSum, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ReduceMean, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ReduceMax, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ReduceMin, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ReduceProd, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ReduceSumSquare, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ReduceL1, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ReduceL2, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ReduceLogSum, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ReduceLogSumExp, &make_reduce, &check_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ArgMax, &make_arg_reduce, &check_arg_reduce);
LUMEN_REGISTER_CUDA_KERNEL(ArgMin, &make_arg_reduce, &check_arg_reduce);
LUMEN_REGISTER_CUDA_KERNEL(CumSum, &make_cumsum, &check_cumsum);
LUMEN_REGISTER_CUDA_KERNEL(TopK, &make_top_k, &check_top_k);
LUMEN_REGISTER_CUDA_KERNEL(Hardmax, &make_hardmax, &check_hardmax);
LUMEN_REGISTER_CUDA_KERNEL(InstanceNormalization, &make_instance_norm, &check_instance_norm);
LUMEN_REGISTER_CUDA_KERNEL(NegativeLogLikelihoodLoss, &make_loss, &check_loss);
LUMEN_REGISTER_CUDA_KERNEL(SoftmaxCrossEntropyLoss, &make_loss, &check_loss);

AxisView axis_view(const Shape& x, int axis) {
  AxisView v;
  for (int k = 0; k < x.rank(); ++k) {
    if (k < axis) v.outer *= x[k];
    if (k == axis) v.n = x[k];
    if (k > axis) v.inner *= x[k];
  }
  return v;
}

}  // namespace lumen::cuda
