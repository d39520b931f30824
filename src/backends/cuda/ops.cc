// CUDA kernels of the element-wise, normalisation, pooling, softmax and data-movement ops: each
// reads its attributes once at compile time and launches one of kernels.cu's kernels at run time.
#include <algorithm>
#include <cmath>
#include <functional>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"
#include "graph/schemas/conv_geometry.h"
#include "graph/schemas/movement.h"

namespace lumen::cuda {
namespace {

// A kernel whose run is a closure built at compile time. With `any_shape`, the closure takes
// every size from the run's tensors (and output types), so one kernel serves a shape family.
class LaunchKernel final : public Kernel {
 public:
  using Fn = std::function<void(const KernelContext&, cudaStream_t)>;
  LaunchKernel(std::string where, Fn fn, bool views = false, bool any_shape = false)
      : where_(std::move(where)), fn_(std::move(fn)), views_(views), any_shape_(any_shape) {}
  void run(KernelContext& ctx) const override {
    fn_(ctx, stream_of(ctx));
    if (!views_) check_launch(where_);
  }
  bool makes_outputs() const override { return views_; }
  bool runs_any_shape() const override { return any_shape_; }

 private:
  std::string where_;
  Fn fn_;
  bool views_;
  bool any_shape_;
};

std::unique_ptr<Kernel> launch(const NodeContext& ctx, LaunchKernel::Fn fn) {
  return std::make_unique<LaunchKernel>(ctx.where(), std::move(fn));
}

// A launch whose closure reads its sizes at run time.
std::unique_ptr<Kernel> launch_any_shape(const NodeContext& ctx, LaunchKernel::Fn fn) {
  return std::make_unique<LaunchKernel>(ctx.where(), std::move(fn), false, true);
}

std::string check_float_consts(const NodeContext& ctx) {
  if (!ctx.has_input(0) || !is_gpu_float(ctx.input_dtype(0)))
    return "the CUDA kernel takes float32 or float16";
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_value(i) == nullptr)
      return "input " + std::to_string(i) + " must be known at build time";
  return "";
}

std::string check_static_output(const NodeContext& ctx) {
  for (int i = 0; i < ctx.num_outputs(); ++i)
    if (!ctx.output(i).shape.is_static()) return "the output shape is known only at run time";
  return "";
}

// Data movement of any generic type but integer shape arithmetic (which stays on the host).
std::string check_float_data(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  return why.empty() ? check_static_output(ctx) : why;
}

UnaryOp unary_op(OpKind op) {
  switch (op) {
    case OpKind::kRelu:
      return UnaryOp::kRelu;
    case OpKind::kLeakyRelu:
      return UnaryOp::kLeakyRelu;
    case OpKind::kSigmoid:
      return UnaryOp::kSigmoid;
    case OpKind::kTanh:
      return UnaryOp::kTanh;
    case OpKind::kGelu:
      return UnaryOp::kGelu;
    case OpKind::kErf:
      return UnaryOp::kErf;
    case OpKind::kExp:
      return UnaryOp::kExp;
    case OpKind::kLog:
      return UnaryOp::kLog;
    case OpKind::kSqrt:
      return UnaryOp::kSqrt;
    case OpKind::kNeg:
      return UnaryOp::kNeg;
    case OpKind::kAbs:
      return UnaryOp::kAbs;
    case OpKind::kReciprocal:
      return UnaryOp::kReciprocal;
    case OpKind::kHardSigmoid:
      return UnaryOp::kHardSigmoid;
    case OpKind::kHardSwish:
      return UnaryOp::kHardSwish;
    case OpKind::kFloor:
      return UnaryOp::kFloor;
    case OpKind::kCeil:
      return UnaryOp::kCeil;
    case OpKind::kSin:
      return UnaryOp::kSin;
    case OpKind::kCos:
      return UnaryOp::kCos;
    case OpKind::kSoftplus:
      return UnaryOp::kSoftplus;
    case OpKind::kElu:
      return UnaryOp::kElu;
    default:
      return UnaryOp::kIdentity;
  }
}

// The float storage kernel, or the generic one for float64 and integers.
std::string check_unary(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (why.empty()) return why;
  std::string generic = check_any_unary(ctx);
  if (generic == "no generic CUDA kernel") return why;
  return generic;
}

std::unique_ptr<Kernel> make_unary(const NodeContext& ctx) {
  if (!is_gpu_float(ctx.input_dtype(0))) return make_any_unary(ctx);
  UnaryOp op = unary_op(ctx.op());
  if (op == UnaryOp::kGelu && ctx.attr_string("approximate", "none") == "tanh")
    op = UnaryOp::kGeluTanh;
  float alpha = 0.f, beta = 0.f;
  if (ctx.op() == OpKind::kLeakyRelu) alpha = ctx.attr_float("alpha", 0.01f);
  if (ctx.op() == OpKind::kElu) alpha = ctx.attr_float("alpha", 1.0f);
  if (ctx.op() == OpKind::kHardSigmoid) {
    alpha = ctx.attr_float("alpha", 0.2f);
    beta = ctx.attr_float("beta", 0.5f);
  }
  const Storage st = storage_of(ctx.input_dtype(0));
  return launch_any_shape(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_unary(st, op, alpha, beta, in(k, 0), out(k), k.outputs[0].numel(), s);
  });
}

BinaryOp binary_op(OpKind op) {
  switch (op) {
    case OpKind::kSub:
      return BinaryOp::kSub;
    case OpKind::kMul:
      return BinaryOp::kMul;
    case OpKind::kDiv:
      return BinaryOp::kDiv;
    case OpKind::kPow:
      return BinaryOp::kPow;
    case OpKind::kMin:
      return BinaryOp::kMin;
    case OpKind::kMax:
      return BinaryOp::kMax;
    default:
      return BinaryOp::kAdd;
  }
}

std::string check_binary(const NodeContext& ctx) {
  if (ctx.num_inputs() != 2) return check_variadic(ctx);
  std::string why = require_float_static(ctx);
  if (!why.empty()) return check_any_binary(ctx);
  if (ctx.num_inputs() != 2) return "takes two inputs";
  if (ctx.output(0).shape.rank() > kMaxRank) return "rank above 8";
  return "";
}

std::unique_ptr<Kernel> make_binary(const NodeContext& ctx) {
  if (ctx.num_inputs() != 2) return make_variadic(ctx);
  if (!is_gpu_float(ctx.input_dtype(0)) || ctx.input_dtype(1) != ctx.input_dtype(0))
    return make_any_binary(ctx);
  BinaryOp op = binary_op(ctx.op());
  const Storage st = storage_of(ctx.input_dtype(0));
  // The broadcast is worked out per run from the tensors' shapes (a few host operations).
  return launch_any_shape(ctx, [=](const KernelContext& k, cudaStream_t s) {
    const Shape& y = k.outputs[0].shape();
    BroadcastDesc d;
    d.rank = y.rank();
    for (int j = 0; j < y.rank(); ++j) d.dims[j] = y[j];
    broadcast_strides(k.inputs[0].shape(), y, d.a_strides);
    broadcast_strides(k.inputs[1].shape(), y, d.b_strides);
    launch_binary(st, op, in(k, 0), in(k, 1), out(k), y.numel(), d, s);
  });
}

// Inference BatchNormalization: scale and shift per channel, folded at compile time.
std::unique_ptr<Kernel> make_batch_norm(const NodeContext& ctx) {
  if (ctx.num_outputs() > 1) ctx.fail_unsupported("CUDA: training-mode outputs");
  const Shape& x = ctx.input_shape(0);
  float eps = ctx.attr_float("epsilon", 1e-5f);
  int64_t c = x.rank() > 1 ? x[1] : 1;
  Tensor scale = Tensor::empty(Shape{c}), shift = Tensor::empty(Shape{c});
  for (int64_t i = 0; i < c; ++i) {
    double g = ctx.input_value(1)->item_as_double(i), b = ctx.input_value(2)->item_as_double(i);
    double m = ctx.input_value(3)->item_as_double(i), v = ctx.input_value(4)->item_as_double(i);
    double a = g / std::sqrt(v + eps);
    scale.data<float>()[i] = static_cast<float>(a);
    shift.data<float>()[i] = static_cast<float>(b - m * a);
  }
  Tensor dscale = scale.to(Device::cuda()), dshift = shift.to(Device::cuda());
  int64_t outer = x.rank() > 0 ? x[0] : 1;
  int64_t inner = c ? x.numel() / (outer * c) : 0;
  const Storage st = storage_of(ctx.input_dtype(0));
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_channel_affine(st, in(k, 0), static_cast<const float*>(dscale.raw_data()),
                          static_cast<const float*>(dshift.raw_data()), out(k), outer, c, inner, s);
  });
}

std::string check_pool(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() != 4) return "2-D pooling only";
  if (ctx.attr_int("channels_last", 0) != 0) return "the channels-last form is the CPU's";
  if (ctx.num_outputs() > 1) return "no Indices output";
  return "";
}

std::unique_ptr<Kernel> make_pool(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& y = ctx.output(0).shape;
  bool global = ctx.op() == OpKind::kGlobalAveragePool || ctx.op() == OpKind::kGlobalMaxPool;
  bool max = ctx.op() == OpKind::kMaxPool || ctx.op() == OpKind::kGlobalMaxPool;
  const Storage st = storage_of(ctx.input_dtype(0));
  if (global) {
    int64_t rows = x[0] * x[1], n = x[2] * x[3];
    return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
      launch_row_reduce(st, in(k, 0), out(k), rows, n, max, s);
    });
  }
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  ConvGeometry g = window_geometry(ctx, x, kernel, ctx.attr_int("ceil_mode", 0) != 0);
  Pool2dDesc d;
  d.planes = x[0] * x[1];
  d.in_h = x[2];
  d.in_w = x[3];
  d.out_h = y[2];
  d.out_w = y[3];
  d.k_h = g.kernel[0];
  d.k_w = g.kernel[1];
  d.s_h = g.strides[0];
  d.s_w = g.strides[1];
  d.d_h = g.dilations[0];
  d.d_w = g.dilations[1];
  d.pad_t = g.pad_begin[0];
  d.pad_l = g.pad_begin[1];
  d.pad_b = g.pad_end[0];
  d.pad_r = g.pad_end[1];
  d.max = max;
  d.count_include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_pool2d(st, d, in(k, 0), out(k), s);
  });
}

int normalize_axis(const NodeContext& ctx, int64_t axis, int rank) {
  if (axis < -rank || axis >= std::max(rank, 1)) ctx.fail_model("axis out of range");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::unique_ptr<Kernel> make_softmax(const NodeContext& ctx) {
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", -1), ctx.input_shape(0).rank());
  bool log = ctx.op() == OpKind::kLogSoftmax;
  const Storage st = storage_of(ctx.input_dtype(0));
  return launch_any_shape(ctx, [=](const KernelContext& k, cudaStream_t s) {
    const Shape& x = k.inputs[0].shape();
    int64_t outer = 1, n = x.rank() ? x[axis] : 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= x[d];
    for (int d = axis + 1; d < x.rank(); ++d) inner *= x[d];
    launch_softmax(st, in(k, 0), out(k), outer, n, inner, log, s);
  });
}

std::string check_layer_norm(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  const Shape& x = ctx.input_shape(0);
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += x.rank();
  int64_t n = 1;
  for (int d = static_cast<int>(axis); d < x.rank(); ++d) n *= x[d];
  if (ctx.input_shape(1).numel() != n || (ctx.has_input(2) && ctx.input_shape(2).numel() != n))
    return "scale and bias must cover the normalised dims exactly";
  return ctx.num_outputs() > 1 ? check_layer_norm_stats(ctx) : "";
}

std::unique_ptr<Kernel> make_layer_norm(const NodeContext& ctx) {
  if (ctx.num_outputs() > 1) return make_layer_norm_stats(ctx);
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", -1), ctx.input_shape(0).rank());
  float eps = ctx.attr_float("epsilon", 1e-5f);
  bool bias = ctx.has_input(2);
  const Storage st = storage_of(ctx.input_dtype(0));
  return launch_any_shape(ctx, [=](const KernelContext& k, cudaStream_t s) {
    const Shape& x = k.inputs[0].shape();
    int64_t rows = 1, n = 1;
    for (int d = 0; d < axis; ++d) rows *= x[d];
    for (int d = axis; d < x.rank(); ++d) n *= x[d];
    launch_layer_norm(st, in(k, 0), in(k, 1), bias ? in(k, 2) : nullptr, out(k), rows, n, eps, s);
  });
}

std::string check_static_rank(const NodeContext& ctx) {
  std::string why = check_static_output(ctx);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() > kMaxRank) return "rank above 8";
  return "";
}

std::string check_float_rank(const NodeContext& ctx) {
  std::string why = check_float_data(ctx);
  return why.empty() ? check_static_rank(ctx) : why;
}

std::unique_ptr<Kernel> make_transpose(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int rank = x.rank();
  std::vector<int64_t> perm = ctx.attr_ints("perm", {});
  if (perm.empty())
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  std::vector<int64_t> in_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * x[d + 1];
  std::vector<int64_t> dims(rank), strides(rank);
  for (int d = 0; d < rank; ++d) {
    dims[d] = x[perm[d]];
    strides[d] = in_strides[perm[d]];
  }
  int es = static_cast<int>(dtype_size(ctx.input_dtype(0)));
  int64_t n = x.numel();
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_permute(k.inputs[0].raw_data(), k.outputs[0].raw_data(), es, rank, dims.data(),
                   strides.data(), n, s);
  });
}

// Slice: one strided copy, every start, end, axis and step known at compile time; a view where the
// slice is one contiguous run of the input.
std::string check_slice(const NodeContext& ctx) {
  std::string why = check_float_rank(ctx);
  if (!why.empty()) return why;
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_value(i) == nullptr)
      return "input " + std::to_string(i) + " must be known at build time";
  return "";
}

// The alignment in bytes cuBLASLt assumes of operands: a block of a tensor starting a multiple of
// it past the tensor's start may be handed on as a view.
constexpr size_t kViewAlignment = 256;

// The `shape.numel()` elements of x from element `at`, as a view shaped `shape`.
Tensor run_view(const Tensor& x, int64_t at, const Shape& shape) {
  return x.reshape(Shape{x.numel()}).narrow(at, shape.numel()).reshape(shape);
}

// Whether the slice `spec` of `x` is one contiguous run of x's elements: every step 1, and some
// axis with every axis after it whole and every axis before it of extent 1 in the output.
bool contiguous_slice(const Shape& x, const SliceSpec& spec) {
  const int rank = x.rank();
  for (int d = 0; d < rank; ++d)
    if (spec.steps[d] != 1) return false;
  int a = rank - 1;  // the first axis from which on every axis is whole
  while (a >= 0 && spec.output[a] == x[a]) --a;
  for (int d = 0; d < a; ++d)
    if (spec.output[d] != 1) return false;
  return true;
}

std::unique_ptr<Kernel> make_slice(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const SliceSpec spec = slice_spec(ctx);
  const int rank = x.rank();
  std::vector<int64_t> in_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * x[d + 1];
  std::vector<int64_t> dims(rank), strides(rank);
  int64_t offset = 0;
  for (int d = 0; d < rank; ++d) {
    dims[d] = spec.output[d];
    strides[d] = spec.steps[d] * in_strides[d];
    if (spec.output.numel() > 0) offset += spec.starts[d] * in_strides[d];
  }
  const int es = static_cast<int>(dtype_size(ctx.input_dtype(0)));
  const int64_t n = spec.output.numel();
  // One contiguous run (the first columns of a single row: a wide-and-deep model's dense
  // features) is a view of the input, no launch, where it starts 256 bytes past another (the
  // alignment cuBLASLt assumes of operands), as Split's blocks.
  if (n > 0 && contiguous_slice(x, spec) &&
      static_cast<size_t>(offset * es) % kViewAlignment == 0) {
    const Shape out = spec.output;
    return std::make_unique<LaunchKernel>(
        ctx.where(),
        [=](const KernelContext& k, cudaStream_t) {
          k.outputs[0] = run_view(k.inputs[0], offset, out);
        },
        true);
  }
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_permute(static_cast<const char*>(k.inputs[0].raw_data()) + offset * es,
                   k.outputs[0].raw_data(), es, rank, dims.data(), strides.data(), n, s);
  });
}

// Split: each output is a block of columns of the input's rows; all of them one launch of strided
// row copies (launch_copy_rows). Where the rows are one (a decoding step's Q/K/V split of its
// single token), each output is a contiguous block of the input: a view, no copy and no launch,
// where every block starts 256 bytes past another (the alignment cuBLASLt assumes of operands).
std::unique_ptr<Kernel> make_split(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= x[d];
  std::vector<Shape> shapes;
  bool aligned = true;
  size_t at = 0;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    shapes.push_back(ctx.output(i).shape);
    aligned = aligned && at % kViewAlignment == 0;
    at += static_cast<size_t>(shapes.back().numel()) * dtype_size(ctx.input_dtype(0));
  }
  if (outer == 1 && aligned) {
    return std::make_unique<LaunchKernel>(
        ctx.where(),
        [=](const KernelContext& k, cudaStream_t) {
          int64_t at = 0;
          for (size_t i = 0; i < shapes.size(); ++i) {
            k.outputs[i] = run_view(k.inputs[0], at, shapes[i]);
            at += shapes[i].numel();
          }
        },
        true);
  }
  const size_t es = dtype_size(ctx.input_dtype(0));
  const size_t in_row = x.numel() / std::max<int64_t>(outer, 1) * es;
  std::vector<size_t> widths;
  widths.reserve(static_cast<size_t>(ctx.num_outputs()));
  for (int i = 0; i < ctx.num_outputs(); ++i)
    widths.push_back(ctx.output(i).shape.numel() / std::max<int64_t>(outer, 1) * es);
  const auto rows = static_cast<size_t>(outer);
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    std::vector<RowCopyDesc> copies;
    size_t col = 0;
    for (size_t i = 0; i < widths.size(); ++i) {
      if (widths[i] > 0 && rows > 0)
        copies.push_back({k.outputs[i].raw_data(), widths[i],
                          static_cast<const char*>(k.inputs[0].raw_data()) + col, in_row, widths[i],
                          rows});
      col += widths[i];
    }
    if (!copies.empty()) launch_copy_rows(copies.data(), copies.size(), s);
  });
}

// Concat: each input is a block of rows copied into its columns of the output; all of them one
// launch of strided row copies.
std::unique_ptr<Kernel> make_concat(const NodeContext& ctx) {
  const Shape& y = ctx.output(0).shape;
  int axis = normalize_axis(ctx, ctx.attr_int("axis"), y.rank());
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= y[d];
  size_t es = dtype_size(ctx.output(0).dtype);
  size_t out_row = y.numel() / std::max<int64_t>(outer, 1) * es;
  std::vector<size_t> widths;
  widths.reserve(static_cast<size_t>(ctx.num_inputs()));
  for (int i = 0; i < ctx.num_inputs(); ++i)
    widths.push_back(ctx.input_shape(i).numel() / std::max<int64_t>(outer, 1) * es);
  const auto rows = static_cast<size_t>(outer);
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    std::vector<RowCopyDesc> copies;
    size_t col = 0;
    for (size_t i = 0; i < widths.size(); ++i) {
      if (widths[i] > 0 && rows > 0)
        copies.push_back({static_cast<char*>(k.outputs[0].raw_data()) + col, out_row,
                          k.inputs[i].raw_data(), widths[i], widths[i], rows});
      col += widths[i];
    }
    if (!copies.empty()) launch_copy_rows(copies.data(), copies.size(), s);
  });
}

std::string check_gather(const NodeContext& ctx) {
  std::string why = check_static_output(ctx);
  if (!why.empty()) return why;
  DType idx = ctx.input_dtype(1);
  if (idx != DType::kInt64 && idx != DType::kInt32) return "indices must be int64 or int32";
  why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  return "";
}

std::unique_ptr<Kernel> make_gather(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x[d];
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x[d];
  int64_t axis_n = x[axis], num = ctx.input_shape(1).numel();
  bool i64 = ctx.input_dtype(1) == DType::kInt64;
  int es = static_cast<int>(dtype_size(ctx.input_dtype(0)));
  const Tensor* known = ctx.input_value(1);
  if (outer == 1 && num == 1 && known != nullptr) {
    // One known index along the outermost dimension (a transformer's Q/K/V split): the output is
    // a contiguous block of the input, so a view of it, with no copy and no launch.
    int64_t index = static_cast<int64_t>(known->item_as_double(0));
    if (index < 0) index += axis_n;
    if (index < 0 || index >= axis_n)
      ctx.fail_model("index " + std::to_string(index) + " is out of range for " +
                     std::to_string(axis_n));
    Shape shape = ctx.output(0).shape;
    return std::make_unique<LaunchKernel>(
        ctx.where(),
        [=](const KernelContext& k, cudaStream_t) {
          k.outputs[0] = k.inputs[0].reshape(Shape{axis_n, inner}).narrow(index, 1).reshape(shape);
        },
        true);
  }
  // Indices known only at run time (a decoder's token ids) are checked as the kernel reads them.
  const IndexCheck checked = index_check(ctx);
  return launch(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_gather(k.inputs[0].raw_data(), k.inputs[1].raw_data(), i64, k.outputs[0].raw_data(), es,
                  outer, axis_n, inner, num, checked, s);
  });
}

// Reshape, Flatten, Squeeze, Unsqueeze, Identity: a view of the input with the inferred shape.
// The shape comes from the plan's output type where the executor gives it (one kernel then
// serves every size of a shape family), else from the node's.
std::unique_ptr<Kernel> make_view(const NodeContext& ctx) {
  Shape shape = ctx.output(0).shape;
  return std::make_unique<LaunchKernel>(
      ctx.where(),
      [shape](const KernelContext& k, cudaStream_t) {
        k.outputs[0] =
            k.inputs[0].reshape(k.output_types.empty() ? shape : k.output_types[0].shape);
      },
      true, true);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(Relu, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(LeakyRelu, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Sigmoid, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Tanh, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Gelu, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Erf, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Exp, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Log, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Sqrt, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Neg, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Abs, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Reciprocal, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(HardSigmoid, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(HardSwish, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Floor, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Ceil, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Sin, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Cos, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Softplus, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Elu, &make_unary, &check_unary);
LUMEN_REGISTER_CUDA_KERNEL(Add, &make_binary, &check_binary);
LUMEN_REGISTER_CUDA_KERNEL(Sub, &make_binary, &check_binary);
LUMEN_REGISTER_CUDA_KERNEL(Mul, &make_binary, &check_binary);
LUMEN_REGISTER_CUDA_KERNEL(Div, &make_binary, &check_binary);
LUMEN_REGISTER_CUDA_KERNEL(Pow, &make_binary, &check_binary);
LUMEN_REGISTER_CUDA_KERNEL(Min, &make_binary, &check_binary);
LUMEN_REGISTER_CUDA_KERNEL(Max, &make_binary, &check_binary);
LUMEN_REGISTER_CUDA_KERNEL(BatchNormalization, &make_batch_norm, &check_float_consts);
LUMEN_REGISTER_CUDA_KERNEL(MaxPool, &make_pool, &check_pool);
LUMEN_REGISTER_CUDA_KERNEL(AveragePool, &make_pool, &check_pool);
LUMEN_REGISTER_CUDA_KERNEL(GlobalAveragePool, &make_pool, &check_pool);
LUMEN_REGISTER_CUDA_KERNEL(GlobalMaxPool, &make_pool, &check_pool);
LUMEN_REGISTER_CUDA_KERNEL(Softmax, &make_softmax, &require_float_static);
LUMEN_REGISTER_CUDA_KERNEL(LogSoftmax, &make_softmax, &require_float_static);
LUMEN_REGISTER_CUDA_KERNEL(LayerNormalization, &make_layer_norm, &check_layer_norm);
LUMEN_REGISTER_CUDA_KERNEL(Transpose, &make_transpose, &check_float_rank);
LUMEN_REGISTER_CUDA_KERNEL(Concat, &make_concat, &check_float_data);
LUMEN_REGISTER_CUDA_KERNEL(Slice, &make_slice, &check_slice);
LUMEN_REGISTER_CUDA_KERNEL(Split, &make_split, &check_float_data);
LUMEN_REGISTER_CUDA_KERNEL(Gather, &make_gather, &check_gather);
LUMEN_REGISTER_CUDA_KERNEL(Reshape, &make_view, &check_float_data);
LUMEN_REGISTER_CUDA_KERNEL(Flatten, &make_view, &check_float_data);
LUMEN_REGISTER_CUDA_KERNEL(Squeeze, &make_view, &check_float_data);
LUMEN_REGISTER_CUDA_KERNEL(Unsqueeze, &make_view, &check_float_data);
LUMEN_REGISTER_CUDA_KERNEL(Identity, &make_view, &check_float_data);

}  // namespace lumen::cuda
