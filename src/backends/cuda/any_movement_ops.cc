// CUDA kernels of data-movement ops on any type (any_movement.cu, and kernels.cu's strided
// copy): Expand, Tile, Trilu, OneHot, DepthToSpace, SpaceToDepth, ScatterElements and ScatterND
// (reduction none), GatherElements, GatherND, Pad (every mode), CenterCropPad (as a Pad), Range and
// EyeLike.
#include <algorithm>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_check.h"
#include "graph/schemas/movement.h"

namespace lumen::cuda {
namespace {

// Data (input 0) of a generic type, every other input known at build time, static shapes.
std::string check_data_and_consts(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_value(i) == nullptr)
      return "input " + std::to_string(i) + " must be known at build time";
  return check_static_shapes(ctx);
}

// Data of a generic type and static shapes (the other inputs only decide the output's shape).
std::string check_data_static(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  return why.empty() ? check_static_shapes(ctx) : why;
}

// A strided copy: y[index] = x[sum of index[k] * strides[k]] (launch_permute).
std::unique_ptr<Kernel> strided_copy(const NodeContext& ctx, std::vector<int64_t> dims,
                                     std::vector<int64_t> strides) {
  const int es = element_bytes(ctx.input_dtype(0));
  const int rank = static_cast<int>(dims.size());
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_permute(in(k, 0), out(k), es, rank, dims.data(), strides.data(), n, s);
  });
}

std::unique_ptr<Kernel> make_expand(const NodeContext& ctx) {
  const Shape& y = ctx.output(0).shape;
  std::vector<int64_t> dims(y.rank()), strides(y.rank());
  broadcast_strides(ctx.input_shape(0), y, strides.data());
  for (int k = 0; k < y.rank(); ++k) dims[k] = y[k];
  return strided_copy(ctx, dims, strides);
}

std::unique_ptr<Kernel> make_tile(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& y = ctx.output(0).shape;
  TileDesc d;
  d.rank = y.rank();
  int64_t stride = 1;
  for (int k = y.rank() - 1; k >= 0; --k) {
    d.dims[k] = y[k];
    d.x_dims[k] = std::max<int64_t>(x[k], 1);
    d.x_strides[k] = stride;
    stride *= x[k];
  }
  const int es = element_bytes(ctx.input_dtype(0));
  const int64_t n = y.numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_tile(in(k, 0), out(k), es, d, n, s);
  });
}

std::string check_trilu(const NodeContext& ctx) {
  std::string why = check_data_and_consts(ctx);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() < 2) return "needs rank 2 or more";
  return "";
}

std::unique_ptr<Kernel> make_trilu(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int64_t rows = x[x.rank() - 2], cols = x[x.rank() - 1];
  const int64_t batch = rows * cols > 0 ? x.numel() / (rows * cols) : 0;
  const int64_t diag = ctx.has_input(1) ? ctx.input_ints(1, "k").at(0) : 0;
  const bool upper = ctx.attr_int("upper", 1) != 0;
  const int es = element_bytes(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_trilu(in(k, 0), out(k), es, batch, rows, cols, diag, upper, s);
  });
}

std::string check_one_hot(const NodeContext& ctx) {
  if (!elem_of(ctx.input_dtype(0)) || ctx.input_dtype(0) == DType::kBool)
    return "the indices must be numbers";
  if (!elem_of(ctx.input_dtype(2))) return "the values' type is not a CUDA kernel's";
  if (ctx.input_value(1) == nullptr) return "the depth must be known at build time";
  if (is_shape_arithmetic(ctx)) return "integer data (shape arithmetic) stays on the host";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_one_hot(const NodeContext& ctx) {
  const Shape& y = ctx.output(0).shape;
  const int axis =
      static_cast<int>(ctx.attr_int("axis", -1) < 0 ? ctx.attr_int("axis", -1) + y.rank()
                                                    : ctx.attr_int("axis", -1));
  if (axis < 0 || axis >= y.rank()) ctx.fail_model("axis out of range");
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; ++k) outer *= y[k];
  for (int k = axis + 1; k < y.rank(); ++k) inner *= y[k];
  const int64_t depth = y[axis];
  const Elem it = *elem_of(ctx.input_dtype(0)), vt = *elem_of(ctx.input_dtype(2));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_one_hot(it, in(k, 0), vt, in(k, 2), out(k), outer, depth, inner, s);
  });
}

std::string check_space_depth(const NodeContext& ctx) {
  std::string why = check_data_and_consts(ctx);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() != 4) return "takes 4-D input";
  return "";
}

// DepthToSpace and SpaceToDepth as one 6-D strided copy (a reshape, a transpose, a reshape).
std::unique_ptr<Kernel> make_space_depth(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int64_t b = ctx.attr_int("blocksize");
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  std::vector<int64_t> shape6, perm;
  if (ctx.op() == OpKind::kDepthToSpace) {
    if (ctx.attr_string("mode", "DCR") == "CRD") {
      shape6 = {n, c / (b * b), b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      shape6 = {n, b, b, c / (b * b), h, w};
      perm = {0, 3, 4, 1, 5, 2};
    }
  } else {
    shape6 = {n, c, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
  }
  std::vector<int64_t> in_strides(6, 1);
  for (int k = 4; k >= 0; --k) in_strides[k] = in_strides[k + 1] * shape6[k + 1];
  std::vector<int64_t> dims(6), strides(6);
  for (int k = 0; k < 6; ++k) {
    dims[k] = shape6[perm[k]];
    strides[k] = in_strides[perm[k]];
  }
  return strided_copy(ctx, dims, strides);
}

// Scatter: y starts as a copy of data, then each update is written (or combined by the
// reduction).
// The reduction of a scatter: none (nullopt), add, mul, max or min.
std::optional<AnyBinaryOp> scatter_reduction(const NodeContext& ctx) {
  const std::string r = ctx.attr_string("reduction", "none");
  if (r == "add") return AnyBinaryOp::kAdd;
  if (r == "mul") return AnyBinaryOp::kMul;
  if (r == "max") return AnyBinaryOp::kMax;
  if (r == "min") return AnyBinaryOp::kMin;
  return std::nullopt;
}

// What each index may address: the data's dim along `axis` (the Elements ops), or the dims
// an index tuple walks (the ND ops: the last dim of the indices, after batch_dims).
std::vector<int64_t> index_bounds(const NodeContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  if (ctx.op() == OpKind::kScatterND || ctx.op() == OpKind::kGatherND) {
    const Shape& idx = ctx.input_shape(1);
    const int64_t batch = ctx.op() == OpKind::kGatherND ? ctx.attr_int("batch_dims", 0) : 0;
    const int64_t q = idx.rank() > 0 ? idx[idx.rank() - 1] : 0;
    std::vector<int64_t> bounds;
    for (int64_t k = 0; k < q && batch + k < data.rank(); ++k)
      bounds.push_back(data[static_cast<int>(batch + k)]);
    return bounds;
  }
  int64_t axis = ctx.attr_int("axis", 0);
  if (axis < 0) axis += data.rank();
  if (axis < 0 || axis >= data.rank()) return {};
  return {data[static_cast<int>(axis)]};
}

std::string check_scatter(const NodeContext& ctx) {
  const std::string r = ctx.attr_string("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return "unknown reduction '" + r + "'";
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  if (r != "none" && ctx.input_dtype(0) == DType::kBool) return "no bool reductions";
  const DType idx = ctx.input_dtype(1);
  if (idx != DType::kInt64 && (ctx.op() == OpKind::kScatterND || idx != DType::kInt32))
    return "the indices must be int64 (or int32 for ScatterElements)";
  if (ctx.input_dtype(2) != ctx.input_dtype(0)) return "the updates' type differs from the data's";
  why = check_known_indices(ctx, 1, index_bounds(ctx), true);
  if (!why.empty()) return why;
  return check_static_shapes(ctx);
}

// ScatterElements' and GatherElements' shapes and axis (data is input 0, indices input 1).
ScatterElementsDesc elements_desc(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  if (idx.rank() != x.rank()) ctx.fail_shape("indices must have the data's rank");
  ScatterElementsDesc d;
  d.rank = x.rank();
  const int64_t axis = ctx.attr_int("axis", 0);
  if (axis < -x.rank() || axis >= x.rank()) ctx.fail_model("axis out of range");
  d.axis = static_cast<int>(axis < 0 ? axis + x.rank() : axis);
  for (int k = 0; k < x.rank(); ++k) {
    d.dims[k] = x[k];
    d.idx_dims[k] = idx[k];
  }
  return d;
}

std::unique_ptr<Kernel> make_scatter_elements(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const ScatterElementsDesc d = elements_desc(ctx);
  const bool i64 = ctx.input_dtype(1) == DType::kInt64;
  const int es = element_bytes(ctx.input_dtype(0));
  const size_t bytes = static_cast<size_t>(x.numel()) * es;
  const int64_t n = ctx.input_shape(1).numel();
  const std::string where = ctx.where();
  const std::optional<AnyBinaryOp> reduce = scatter_reduction(ctx);
  const Elem e = *elem_of(ctx.input_dtype(0));
  const IndexCheck checked = index_check(ctx);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    if (bytes > 0)
      check(cudaMemcpyAsync(out(k), in(k, 0), bytes, cudaMemcpyDeviceToDevice, s), where);
    if (reduce)
      launch_scatter_elements_reduce(e, *reduce, in(k, 1), i64, in(k, 2), out(k), d, n, checked, s);
    else
      launch_scatter_elements(in(k, 1), i64, in(k, 2), out(k), es, d, n, checked, s);
  });
}

std::unique_ptr<Kernel> make_scatter_nd(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  if (idx.rank() < 1 || idx[idx.rank() - 1] > x.rank())
    ctx.fail_shape("the indices' last dim exceeds the data's rank");
  ScatterNDDesc d;
  d.k = static_cast<int>(idx[idx.rank() - 1]);
  std::vector<int64_t> strides(x.rank(), 1);
  for (int k = x.rank() - 2; k >= 0; --k) strides[k] = strides[k + 1] * x[k + 1];
  for (int k = 0; k < d.k; ++k) {
    d.dims[k] = x[k];
    d.strides[k] = strides[k];
  }
  d.slice = 1;
  for (int k = d.k; k < x.rank(); ++k) d.slice *= x[k];
  d.num_updates = d.k > 0 ? idx.numel() / d.k : idx.numel();
  const int es = element_bytes(ctx.input_dtype(0));
  const size_t bytes = static_cast<size_t>(x.numel()) * es;
  const std::string where = ctx.where();
  const std::optional<AnyBinaryOp> reduce = scatter_reduction(ctx);
  const Elem e = *elem_of(ctx.input_dtype(0));
  const IndexCheck checked = index_check(ctx);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    if (bytes > 0)
      check(cudaMemcpyAsync(out(k), in(k, 0), bytes, cudaMemcpyDeviceToDevice, s), where);
    const auto* indices = static_cast<const int64_t*>(in(k, 1));
    if (reduce)
      launch_scatter_nd_reduce(e, *reduce, indices, in(k, 2), out(k), d, checked, s);
    else
      launch_scatter_nd(indices, in(k, 2), out(k), es, d, checked, s);
  });
}

std::string check_gather_elements(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  const DType idx = ctx.input_dtype(1);
  if (idx != DType::kInt64 && idx != DType::kInt32) return "the indices must be int64 or int32";
  why = check_known_indices(ctx, 1, index_bounds(ctx), true);
  if (!why.empty()) return why;
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_gather_elements(const NodeContext& ctx) {
  const ScatterElementsDesc d = elements_desc(ctx);
  const bool i64 = ctx.input_dtype(1) == DType::kInt64;
  const int es = element_bytes(ctx.input_dtype(0));
  const int64_t n = ctx.input_shape(1).numel();
  const IndexCheck checked = index_check(ctx);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_gather_elements(in(k, 0), in(k, 1), i64, out(k), es, d, n, checked, s);
  });
}

std::string check_gather_nd(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  if (ctx.input_dtype(1) != DType::kInt64) return "the indices must be int64";
  why = check_known_indices(ctx, 1, index_bounds(ctx), true);
  if (!why.empty()) return why;
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_gather_nd(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& idx = ctx.input_shape(1);
  const int b = static_cast<int>(ctx.attr_int("batch_dims", 0));
  if (idx.rank() < 1 || b < 0 || b >= idx.rank() || b > x.rank())
    ctx.fail_shape("batch_dims does not fit the indices");
  GatherNDDesc d;
  d.k = static_cast<int>(idx[idx.rank() - 1]);
  if (b + d.k > x.rank()) ctx.fail_shape("the index tuples are longer than the data's rank");
  std::vector<int64_t> strides(x.rank(), 1);
  for (int k = x.rank() - 2; k >= 0; --k) strides[k] = strides[k + 1] * x[k + 1];
  for (int k = 0; k < d.k; ++k) {
    d.dims[k] = x[b + k];
    d.strides[k] = strides[b + k];
  }
  for (int k = 0; k < b; ++k) d.batch *= idx[k];
  d.num = 1;
  for (int k = b; k < idx.rank() - 1; ++k) d.num *= idx[k];
  for (int k = b + d.k; k < x.rank(); ++k) d.slice *= x[k];
  d.batch_stride = b < x.rank() ? strides[b] * x[b] : 1;
  const int es = element_bytes(ctx.input_dtype(0));
  const IndexCheck checked = index_check(ctx);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_gather_nd(in(k, 0), static_cast<const int64_t*>(in(k, 1)), out(k), es, d, checked, s);
  });
}

std::string check_pad(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  for (int i : {1, 3})
    if (ctx.num_inputs() > i && ctx.has_input(i) && ctx.input_value(i) == nullptr)
      return "input " + std::to_string(i) + " must be known at build time";
  if (ctx.num_inputs() > 2 && ctx.has_input(2) && ctx.input_dtype(2) != ctx.input_dtype(0))
    return "the constant's type differs from the data's";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_pad(const NodeContext& ctx) {
  const PadSpec spec = pad_spec(ctx);
  const Shape& x = ctx.input_shape(0);
  PadDesc d;
  d.rank = x.rank();
  for (int k = 0; k < x.rank(); ++k) {
    d.dims[k] = spec.output[k];
    d.x_dims[k] = x[k];
    d.pad_begin[k] = spec.begin[k];
    d.win_lo[k] = std::max<int64_t>(0, -spec.begin[k]);
    d.win_n[k] = x[k] - d.win_lo[k] - std::max<int64_t>(0, -spec.end[k]);
  }
  d.mode = spec.mode == PadMode::kEdge      ? PadKind::kEdge
           : spec.mode == PadMode::kReflect ? PadKind::kReflect
           : spec.mode == PadMode::kWrap    ? PadKind::kWrap
                                            : PadKind::kConstant;
  const bool has_value = ctx.num_inputs() > 2 && ctx.has_input(2);
  const Elem e = *elem_of(ctx.input_dtype(0));
  const int64_t n = spec.output.numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_pad(e, in(k, 0), has_value ? in(k, 2) : nullptr, out(k), d, n, s);
  });
}

// CenterCropPad is a constant (zero) Pad whose begin along each axis is (out - in) / 2 rounded
// toward zero: a crop starts at floor((in - out) / 2), a pad puts floor((out - in) / 2) zeros
// first.
std::string check_center_crop_pad(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  return why.empty() ? check_static_shapes(ctx) : why;
}

std::unique_ptr<Kernel> make_center_crop_pad(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& y = ctx.output(0).shape;
  PadDesc d;
  d.rank = x.rank();
  for (int k = 0; k < x.rank(); ++k) {
    const int64_t begin = -((x[k] - y[k]) / 2), end = y[k] - x[k] - begin;
    d.dims[k] = y[k];
    d.x_dims[k] = x[k];
    d.pad_begin[k] = begin;
    d.win_lo[k] = std::max<int64_t>(0, -begin);
    d.win_n[k] = x[k] - d.win_lo[k] - std::max<int64_t>(0, -end);
  }
  const Elem e = *elem_of(ctx.input_dtype(0));
  const int64_t n = y.numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_pad(e, in(k, 0), nullptr, out(k), d, n, s);
  });
}

std::string check_range(const NodeContext& ctx) {
  const std::optional<Elem> e = elem_of(ctx.output(0).dtype);
  if (!e || *e == Elem::kBool) return "takes numbers";
  if (is_shape_arithmetic(ctx)) return "integer data (shape arithmetic) stays on the host";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_range(const NodeContext& ctx) {
  const Elem e = *elem_of(ctx.output(0).dtype);
  const int64_t n = ctx.output(0).shape.numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_range(e, in(k, 0), in(k, 2), out(k), n, s);
  });
}

std::string check_eye_like(const NodeContext& ctx) {
  if (!elem_of(ctx.output(0).dtype)) return "the output type is not a CUDA kernel's";
  if (ctx.output(0).shape.rank() != 2) return "takes 2-D input";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_eye_like(const NodeContext& ctx) {
  const Shape& y = ctx.output(0).shape;
  const Elem e = *elem_of(ctx.output(0).dtype);
  const int64_t rows = y[0], cols = y[1], diag = ctx.attr_int("k", 0);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_eye(e, out(k), rows, cols, diag, s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(GatherElements, &make_gather_elements, &check_gather_elements);
LUMEN_REGISTER_CUDA_KERNEL(GatherND, &make_gather_nd, &check_gather_nd);
LUMEN_REGISTER_CUDA_KERNEL(Pad, &make_pad, &check_pad);
LUMEN_REGISTER_CUDA_KERNEL(CenterCropPad, &make_center_crop_pad, &check_center_crop_pad);
LUMEN_REGISTER_CUDA_KERNEL(Range, &make_range, &check_range);
LUMEN_REGISTER_CUDA_KERNEL(EyeLike, &make_eye_like, &check_eye_like);
LUMEN_REGISTER_CUDA_KERNEL(Expand, &make_expand, &check_data_static);
LUMEN_REGISTER_CUDA_KERNEL(Tile, &make_tile, &check_data_static);
LUMEN_REGISTER_CUDA_KERNEL(Trilu, &make_trilu, &check_trilu);
LUMEN_REGISTER_CUDA_KERNEL(OneHot, &make_one_hot, &check_one_hot);
LUMEN_REGISTER_CUDA_KERNEL(DepthToSpace, &make_space_depth, &check_space_depth);
LUMEN_REGISTER_CUDA_KERNEL(SpaceToDepth, &make_space_depth, &check_space_depth);
LUMEN_REGISTER_CUDA_KERNEL(ScatterElements, &make_scatter_elements, &check_scatter);
LUMEN_REGISTER_CUDA_KERNEL(ScatterND, &make_scatter_nd, &check_scatter);

}  // namespace lumen::cuda
