// CUDA kernels of the element-wise ops on any numeric or bool type (any_elementwise.cu):
// comparisons, logical and bitwise ops (BitShift too), Where, Mod, PRelu, the unary math ops ops.cc
// has no float-storage kernel for, Cast and CastLike between all types, and Clip with bounds given
// at run time. Also the shared helpers of any_ops.h.
#include <algorithm>

#include "backends/backend.h"
#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_check.h"

namespace lumen::cuda {

std::optional<Elem> elem_of(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return Elem::kF32;
    case DType::kFloat16:
      return Elem::kF16;
    case DType::kBFloat16:
      return Elem::kBF16;
    case DType::kFloat64:
      return Elem::kF64;
    case DType::kInt8:
      return Elem::kI8;
    case DType::kUInt8:
      return Elem::kU8;
    case DType::kInt16:
      return Elem::kI16;
    case DType::kUInt16:
      return Elem::kU16;
    case DType::kInt32:
      return Elem::kI32;
    case DType::kUInt32:
      return Elem::kU32;
    case DType::kInt64:
      return Elem::kI64;
    case DType::kUInt64:
      return Elem::kU64;
    case DType::kBool:
      return Elem::kBool;
    default:
      return std::nullopt;
  }
}

namespace {

bool is_float_elem(Elem e) {
  return e == Elem::kF32 || e == Elem::kF16 || e == Elem::kBF16 || e == Elem::kF64;
}

bool is_small_static(const TensorType& t) {
  return t.shape.is_static() && t.shape.numel() <= 64;
}

}  // namespace

bool is_shape_arithmetic(const NodeContext& ctx) {
  auto shape_like = [](const TensorType& t) {
    return (t.dtype == DType::kInt64 || t.dtype == DType::kBool) && is_small_static(t);
  };
  bool int64_input = false;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (!shape_like(ctx.input(i))) return false;
    int64_input |= ctx.input_dtype(i) == DType::kInt64;
  }
  for (int i = 0; i < ctx.num_outputs(); ++i)
    if (!shape_like(ctx.output(i))) return false;
  return int64_input;
}

std::string check_gpu_data(const NodeContext& ctx, int i) {
  if (!elem_of(ctx.input_dtype(i)))
    return std::string("input ") + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
           ", which the CUDA kernels do not take";
  if (is_shape_arithmetic(ctx)) return "integer data (shape arithmetic) stays on the host";
  return "";
}

std::string check_static_shapes(const NodeContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (!ctx.input_shape(i).is_static())
      return "input " + std::to_string(i) + "'s shape is known only at run time";
    if (ctx.input_shape(i).rank() > kMaxRank) return "rank above 8";
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.output(i).shape.is_static()) return "the output shape is known only at run time";
    if (ctx.output(i).shape.rank() > kMaxRank) return "rank above 8";
  }
  return "";
}

std::string check_cpu_takes_integers(const NodeContext& ctx) {
  bool integer = false;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    integer |=
        ctx.has_input(i) && !is_float_elem(elem_of(ctx.input_dtype(i)).value_or(Elem::kBool));
  if (!integer) return "";
  Backend* cpu = find_backend("cpu");
  std::string why;
  if (cpu != nullptr && !cpu->supports(ctx.graph(), ctx.node(), &why))
    return "the host refuses it too (" + why + ")";
  return "";
}

std::string check_constant_without_zero(const NodeContext& ctx, int i) {
  const Tensor* v = ctx.input_value(i);
  if (v == nullptr) return "an integer divisor known only at run time is checked on the host";
  for (int64_t k = 0; k < v->numel(); ++k)
    if (v->item_as_double(k) == 0) return "an integer divisor holds 0: the host reports it";
  return "";
}

std::string check_known_indices(const NodeContext& ctx, int i, const std::vector<int64_t>& bounds,
                                bool negative) {
  const Tensor* v = ctx.input_value(i);
  if (v == nullptr) return "";
  if (bounds.empty()) return "no index bounds";
  for (int64_t k = 0; k < v->numel(); ++k) {
    const double x = v->item_as_double(k);
    const double b = static_cast<double>(bounds[static_cast<size_t>(k) % bounds.size()]);
    if (x >= b || x < (negative ? -b : 0.0)) return "an index is out of range: the host reports it";
  }
  return "";
}

void ClosureKernel::run(KernelContext& ctx) const {
  fn_(ctx, stream_of(ctx));
  check_launch(where_);
}

std::unique_ptr<Kernel> closure(const NodeContext& ctx, ClosureKernel::Fn fn) {
  return std::make_unique<ClosureKernel>(ctx.where(), std::move(fn));
}

BroadcastDesc broadcast_desc(const Shape& a, const Shape& b, const Shape& out) {
  BroadcastDesc d;
  d.rank = out.rank();
  for (int k = 0; k < out.rank(); ++k) d.dims[k] = out[k];
  broadcast_strides(a, out, d.a_strides);
  broadcast_strides(b, out, d.b_strides);
  return d;
}

namespace {

// Two inputs of one generic type, static shapes, not shape arithmetic.
std::string check_two_inputs(const NodeContext& ctx) {
  if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1)) return "takes two inputs";
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  if (ctx.input_dtype(1) != ctx.input_dtype(0)) return "the inputs' types differ";
  return check_static_shapes(ctx);
}

AnyBinaryOp any_binary_op(const NodeContext& ctx) {
  switch (ctx.op()) {
    case OpKind::kSub:
      return AnyBinaryOp::kSub;
    case OpKind::kMul:
      return AnyBinaryOp::kMul;
    case OpKind::kDiv:
      return AnyBinaryOp::kDiv;
    case OpKind::kPow:
      return AnyBinaryOp::kPow;
    case OpKind::kMin:
      return AnyBinaryOp::kMin;
    case OpKind::kMax:
      return AnyBinaryOp::kMax;
    case OpKind::kMod:
      return ctx.attr_int("fmod", 0) != 0 ? AnyBinaryOp::kFMod : AnyBinaryOp::kMod;
    case OpKind::kAnd:
      return AnyBinaryOp::kAnd;
    case OpKind::kOr:
      return AnyBinaryOp::kOr;
    case OpKind::kXor:
      return AnyBinaryOp::kXor;
    case OpKind::kBitwiseAnd:
      return AnyBinaryOp::kBitAnd;
    case OpKind::kBitwiseOr:
      return AnyBinaryOp::kBitOr;
    case OpKind::kBitwiseXor:
      return AnyBinaryOp::kBitXor;
    case OpKind::kPRelu:
      return AnyBinaryOp::kPRelu;
    case OpKind::kBitShift:
      return ctx.attr_string("direction", "") == "LEFT" ? AnyBinaryOp::kShiftLeft
                                                        : AnyBinaryOp::kShiftRight;
    default:
      return AnyBinaryOp::kAdd;
  }
}

}  // namespace

// Pow whose exponent's type differs from the base's.
bool is_mixed_pow(const NodeContext& ctx) {
  return ctx.op() == OpKind::kPow && ctx.num_inputs() == 2 && ctx.has_input(1) &&
         ctx.input_dtype(1) != ctx.input_dtype(0);
}

std::string check_any_binary(const NodeContext& ctx) {
  // The host computes integer powers exactly (CUDA's pow goes through floating point) and checks
  // integer divisors for zero at run time.
  if (ctx.op() == OpKind::kPow && ctx.num_inputs() == 2 && ctx.has_input(0) && ctx.has_input(1)) {
    const Elem base = elem_of(ctx.input_dtype(0)).value_or(Elem::kBool);
    const Elem exp = elem_of(ctx.input_dtype(1)).value_or(Elem::kBool);
    if (base == Elem::kF64) return "float64 powers round as the host's libm does, on the host";
    if (!is_float_elem(base) && !is_float_elem(exp))
      return "integer powers of integers wrap exactly on the host";
  }
  if ((ctx.op() == OpKind::kDiv || ctx.op() == OpKind::kMod) && ctx.has_input(0) &&
      ctx.has_input(1) && !is_float_elem(elem_of(ctx.input_dtype(0)).value_or(Elem::kBool))) {
    std::string why = check_constant_without_zero(ctx, 1);
    if (!why.empty()) return why;
  }
  {
    std::string why = check_cpu_takes_integers(ctx);
    if (!why.empty()) return why;
  }
  if (is_mixed_pow(ctx)) {
    std::string why = check_gpu_data(ctx, 0);
    if (!why.empty()) return why;
    const DType e = ctx.input_dtype(1);
    if (e != DType::kFloat32 && e != DType::kFloat64 && e != DType::kInt32 && e != DType::kInt64)
      return std::string("exponents of type ") + dtype_name(e) + " stay on the host";
    if (ctx.input_dtype(0) == DType::kBool) return "no bool arithmetic";
    return check_static_shapes(ctx);
  }
  std::string why = check_two_inputs(ctx);
  if (!why.empty()) return why;
  const Elem e = *elem_of(ctx.input_dtype(0));
  const bool is_bool = e == Elem::kBool;
  switch (ctx.op()) {
    case OpKind::kAnd:
    case OpKind::kOr:
    case OpKind::kXor:
      return is_bool ? "" : "logical ops take bool";
    case OpKind::kBitwiseAnd:
    case OpKind::kBitwiseOr:
    case OpKind::kBitwiseXor:
    case OpKind::kBitShift:
      return !is_bool && !is_float_elem(e) ? "" : "bitwise ops take integers";
    case OpKind::kMod:  // floats with fmod=0 take the divisor's sign, as the CPU's
      return is_bool ? "no bool arithmetic" : "";
    default:
      return is_bool ? "no bool arithmetic" : "";
  }
}

std::unique_ptr<Kernel> make_any_binary(const NodeContext& ctx) {
  const AnyBinaryOp op = any_binary_op(ctx);
  const BroadcastDesc d =
      broadcast_desc(ctx.input_shape(0), ctx.input_shape(1), ctx.output(0).shape);
  const Elem e = *elem_of(ctx.input_dtype(0));
  const int64_t n = ctx.output(0).shape.numel();
  if (is_mixed_pow(ctx)) {
    const Elem exp_t = *elem_of(ctx.input_dtype(1));
    return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
      launch_pow_mixed(e, exp_t, in(k, 0), in(k, 1), out(k), n, d, s);
    });
  }
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_any_binary(e, op, in(k, 0), in(k, 1), out(k), n, d, s);
  });
}

std::string check_variadic(const NodeContext& ctx) {
  if (ctx.num_inputs() < 1) return "takes at least one input";
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return "an input is omitted";
    std::string why = check_gpu_data(ctx, i);
    if (!why.empty()) return why;
    if (ctx.input_dtype(i) != ctx.input_dtype(0)) return "the inputs' types differ";
  }
  if (ctx.input_dtype(0) == DType::kBool) return "no bool arithmetic";
  if (ctx.op() == OpKind::kMean && !is_float_elem(*elem_of(ctx.input_dtype(0))))
    return "Mean takes floats";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_variadic(const NodeContext& ctx) {
  const AnyBinaryOp op = ctx.op() == OpKind::kMax   ? AnyBinaryOp::kMax
                         : ctx.op() == OpKind::kMin ? AnyBinaryOp::kMin
                                                    : AnyBinaryOp::kAdd;
  const Shape& y = ctx.output(0).shape;
  const int count = ctx.num_inputs();
  // Step j folds input j into y (step 1 also reads input 0); one input is a broadcast copy.
  std::vector<BroadcastDesc> steps;
  if (count == 1) steps.push_back(broadcast_desc(ctx.input_shape(0), ctx.input_shape(0), y));
  for (int j = 1; j < count; ++j)
    steps.push_back(broadcast_desc(j == 1 ? ctx.input_shape(0) : y, ctx.input_shape(j), y));
  const Elem e = *elem_of(ctx.input_dtype(0));
  const int64_t n = y.numel();
  const bool mean = ctx.op() == OpKind::kMean;
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    for (size_t j = 0; j < steps.size(); ++j) {
      const void* a = j == 0 ? in(k, 0) : out(k);
      const void* b = count == 1 ? in(k, 0) : in(k, static_cast<int>(j) + 1);
      launch_any_binary(e, count == 1 ? AnyBinaryOp::kMax : op, a, b, out(k), n, steps[j], s);
    }
    if (mean) {
      UnaryParams p;
      p.alpha = 1.0f / static_cast<float>(count);
      launch_any_unary(e, AnyUnaryOp::kScale, p, out(k), out(k), n, s);
    }
  });
}

namespace {

std::string check_compare(const NodeContext& ctx) {
  std::string why = check_two_inputs(ctx);
  if (!why.empty()) return why;
  if (ctx.input_dtype(0) == DType::kBool && ctx.op() != OpKind::kEqual) return "orders no bools";
  return "";
}

std::unique_ptr<Kernel> make_compare(const NodeContext& ctx) {
  CompareOp op = CompareOp::kEqual;
  switch (ctx.op()) {
    case OpKind::kLess:
      op = CompareOp::kLess;
      break;
    case OpKind::kLessOrEqual:
      op = CompareOp::kLessEqual;
      break;
    case OpKind::kGreater:
      op = CompareOp::kGreater;
      break;
    case OpKind::kGreaterOrEqual:
      op = CompareOp::kGreaterEqual;
      break;
    default:
      break;
  }
  const BroadcastDesc d =
      broadcast_desc(ctx.input_shape(0), ctx.input_shape(1), ctx.output(0).shape);
  const Elem e = *elem_of(ctx.input_dtype(0));
  const int64_t n = ctx.output(0).shape.numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_compare(e, op, in(k, 0), in(k, 1), static_cast<bool*>(out(k)), n, d, s);
  });
}

std::optional<AnyUnaryOp> any_unary_op(OpKind op) {
  switch (op) {
    case OpKind::kNot:
      return AnyUnaryOp::kNot;
    case OpKind::kBitwiseNot:
      return AnyUnaryOp::kBitNot;
    case OpKind::kNeg:
      return AnyUnaryOp::kNeg;
    case OpKind::kAbs:
      return AnyUnaryOp::kAbs;
    case OpKind::kSign:
      return AnyUnaryOp::kSign;
    case OpKind::kRound:
      return AnyUnaryOp::kRound;
    case OpKind::kTan:
      return AnyUnaryOp::kTan;
    case OpKind::kAsin:
      return AnyUnaryOp::kAsin;
    case OpKind::kAcos:
      return AnyUnaryOp::kAcos;
    case OpKind::kAtan:
      return AnyUnaryOp::kAtan;
    case OpKind::kSinh:
      return AnyUnaryOp::kSinh;
    case OpKind::kCosh:
      return AnyUnaryOp::kCosh;
    case OpKind::kAsinh:
      return AnyUnaryOp::kAsinh;
    case OpKind::kAcosh:
      return AnyUnaryOp::kAcosh;
    case OpKind::kAtanh:
      return AnyUnaryOp::kAtanh;
    case OpKind::kSelu:
      return AnyUnaryOp::kSelu;
    case OpKind::kCelu:
      return AnyUnaryOp::kCelu;
    case OpKind::kSoftsign:
      return AnyUnaryOp::kSoftsign;
    case OpKind::kMish:
      return AnyUnaryOp::kMish;
    case OpKind::kThresholdedRelu:
      return AnyUnaryOp::kThresholdedRelu;
    case OpKind::kShrink:
      return AnyUnaryOp::kShrink;
    case OpKind::kIsNaN:
      return AnyUnaryOp::kIsNaN;
    case OpKind::kIsInf:
      return AnyUnaryOp::kIsInf;
    case OpKind::kErf:
      return AnyUnaryOp::kErf;
    case OpKind::kExp:
      return AnyUnaryOp::kExp;
    case OpKind::kLog:
      return AnyUnaryOp::kLog;
    case OpKind::kSqrt:
      return AnyUnaryOp::kSqrt;
    case OpKind::kReciprocal:
      return AnyUnaryOp::kReciprocal;
    case OpKind::kFloor:
      return AnyUnaryOp::kFloor;
    case OpKind::kCeil:
      return AnyUnaryOp::kCeil;
    case OpKind::kSin:
      return AnyUnaryOp::kSin;
    case OpKind::kCos:
      return AnyUnaryOp::kCos;
    case OpKind::kRelu:
      return AnyUnaryOp::kRelu;
    case OpKind::kSigmoid:
      return AnyUnaryOp::kSigmoid;
    case OpKind::kTanh:
      return AnyUnaryOp::kTanh;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string check_any_unary(const NodeContext& ctx) {
  const std::optional<AnyUnaryOp> op = any_unary_op(ctx.op());
  if (!op) return "no generic CUDA kernel";
  if (!ctx.has_input(0)) return "takes one input";
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  why = check_cpu_takes_integers(ctx);
  if (!why.empty()) return why;
  why = check_static_shapes(ctx);
  if (!why.empty()) return why;
  const Elem e = *elem_of(ctx.input_dtype(0));
  switch (*op) {
    case AnyUnaryOp::kNot:
      return e == Elem::kBool ? "" : "Not takes bool";
    case AnyUnaryOp::kBitNot:
      return e != Elem::kBool && !is_float_elem(e) ? "" : "BitwiseNot takes integers";
    case AnyUnaryOp::kNeg:
    case AnyUnaryOp::kAbs:
    case AnyUnaryOp::kSign:
    case AnyUnaryOp::kRelu:
    case AnyUnaryOp::kRound:
    case AnyUnaryOp::kFloor:
    case AnyUnaryOp::kCeil:
    case AnyUnaryOp::kShrink:
      return e != Elem::kBool ? "" : "takes numbers";
    default:
      return is_float_elem(e) ? "" : "takes floats";
  }
}

std::unique_ptr<Kernel> make_any_unary(const NodeContext& ctx) {
  const AnyUnaryOp op = *any_unary_op(ctx.op());
  UnaryParams p;
  if (op == AnyUnaryOp::kSelu) {
    p.alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
    p.gamma = ctx.attr_float("gamma", 1.05070102214813232421875f);
  }
  if (op == AnyUnaryOp::kCelu || op == AnyUnaryOp::kThresholdedRelu)
    p.alpha = ctx.attr_float("alpha", 1.0f);
  if (op == AnyUnaryOp::kShrink) {
    p.alpha = ctx.attr_float("bias", 0.0f);
    p.beta = ctx.attr_float("lambd", 0.5f);
  }
  if (op == AnyUnaryOp::kIsInf) {
    p.detect_positive = ctx.attr_int("detect_positive", 1) != 0;
    p.detect_negative = ctx.attr_int("detect_negative", 1) != 0;
  }
  const Elem e = *elem_of(ctx.input_dtype(0));
  const int64_t n = ctx.input_shape(0).numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_any_unary(e, op, p, in(k, 0), out(k), n, s);
  });
}

namespace {

std::string check_where(const NodeContext& ctx) {
  if (ctx.num_inputs() != 3) return "takes three inputs";
  if (ctx.input_dtype(0) != DType::kBool) return "the condition must be bool";
  std::string why = check_gpu_data(ctx, 1);
  if (!why.empty()) return why;
  if (ctx.input_dtype(2) != ctx.input_dtype(1)) return "the inputs' types differ";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_where(const NodeContext& ctx) {
  const Shape& y = ctx.output(0).shape;
  WhereDesc d;
  d.rank = y.rank();
  for (int k = 0; k < y.rank(); ++k) d.dims[k] = y[k];
  broadcast_strides(ctx.input_shape(0), y, d.c_strides);
  broadcast_strides(ctx.input_shape(1), y, d.a_strides);
  broadcast_strides(ctx.input_shape(2), y, d.b_strides);
  const Elem e = *elem_of(ctx.input_dtype(1));
  const int64_t n = y.numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_where(e, static_cast<const bool*>(in(k, 0)), in(k, 1), in(k, 2), out(k), n, d, s);
  });
}

// Cast and CastLike: any generic type to any other (input 1 of CastLike only gives the type).
std::string check_cast(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  if (!elem_of(ctx.output(0).dtype))
    return std::string("casts to ") + dtype_name(ctx.output(0).dtype) + " stay on the host";
  // float64 -> 16-bit floats must round once, from the double; the kernels go through float32.
  const DType to = ctx.output(0).dtype;
  if (ctx.input_dtype(0) == DType::kFloat64 && (to == DType::kFloat16 || to == DType::kBFloat16))
    return "float64 to 16-bit floats rounds once on the host";
  if (!ctx.input_shape(0).is_static() || !ctx.output(0).shape.is_static())
    return "the shape is known only at run time";
  return "";
}

std::unique_ptr<Kernel> make_cast(const NodeContext& ctx) {
  const Elem from = *elem_of(ctx.input_dtype(0)), to = *elem_of(ctx.output(0).dtype);
  const int64_t n = ctx.output(0).shape.numel();
  const size_t bytes = static_cast<size_t>(n) * dtype_size(ctx.output(0).dtype);
  const std::string where = ctx.where();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    if (from == to) {
      if (bytes > 0)
        check(cudaMemcpyAsync(out(k), in(k, 0), bytes, cudaMemcpyDeviceToDevice, s), where);
      return;
    }
    launch_any_cast(from, in(k, 0), to, out(k), n, s);
  });
}

// Clip: the float storage kernel with build-time bounds, else bounds read on the device.
std::string check_clip(const NodeContext& ctx) {
  std::string why = check_gpu_data(ctx, 0);
  if (!why.empty()) return why;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (ctx.input_dtype(i) != ctx.input_dtype(0))
      return "the bounds' type differs from the input's";
    if (ctx.input_shape(i).is_static() && ctx.input_shape(i).numel() != 1)
      return "the bounds must be scalars";
  }
  if (ctx.input_dtype(0) == DType::kBool) return "takes numbers";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_clip(const NodeContext& ctx) {
  const int64_t n = ctx.output(0).shape.numel();
  const bool has_lo = ctx.num_inputs() > 1 && ctx.has_input(1);
  const bool has_hi = ctx.num_inputs() > 2 && ctx.has_input(2);
  const bool known =
      (!has_lo || ctx.input_value(1) != nullptr) && (!has_hi || ctx.input_value(2) != nullptr);
  if (is_gpu_float(ctx.input_dtype(0)) && known) {
    const float lo =
        has_lo ? static_cast<float>(ctx.input_value(1)->item_as_double(0)) : -3.402823466e38f;
    const float hi =
        has_hi ? static_cast<float>(ctx.input_value(2)->item_as_double(0)) : 3.402823466e38f;
    const Storage st = storage_of(ctx.input_dtype(0));
    return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
      launch_unary(st, UnaryOp::kClip, lo, hi, in(k, 0), out(k), n, s);
    });
  }
  const Elem e = *elem_of(ctx.input_dtype(0));
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_clip(e, in(k, 0), has_lo ? in(k, 1) : nullptr, has_hi ? in(k, 2) : nullptr, out(k), n,
                s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(Less, &make_compare, &check_compare);
LUMEN_REGISTER_CUDA_KERNEL(LessOrEqual, &make_compare, &check_compare);
LUMEN_REGISTER_CUDA_KERNEL(Greater, &make_compare, &check_compare);
LUMEN_REGISTER_CUDA_KERNEL(GreaterOrEqual, &make_compare, &check_compare);
LUMEN_REGISTER_CUDA_KERNEL(Equal, &make_compare, &check_compare);
LUMEN_REGISTER_CUDA_KERNEL(And, &make_any_binary, &check_any_binary);
LUMEN_REGISTER_CUDA_KERNEL(Or, &make_any_binary, &check_any_binary);
LUMEN_REGISTER_CUDA_KERNEL(Xor, &make_any_binary, &check_any_binary);
LUMEN_REGISTER_CUDA_KERNEL(BitwiseAnd, &make_any_binary, &check_any_binary);
LUMEN_REGISTER_CUDA_KERNEL(BitwiseOr, &make_any_binary, &check_any_binary);
LUMEN_REGISTER_CUDA_KERNEL(BitwiseXor, &make_any_binary, &check_any_binary);
LUMEN_REGISTER_CUDA_KERNEL(Mod, &make_any_binary, &check_any_binary);
LUMEN_REGISTER_CUDA_KERNEL(BitShift, &make_any_binary, &check_any_binary);
LUMEN_REGISTER_CUDA_KERNEL(PRelu, &make_any_binary, &check_any_binary);
LUMEN_REGISTER_CUDA_KERNEL(Not, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(BitwiseNot, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Sign, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Round, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Tan, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Asin, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Acos, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Atan, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Sinh, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Cosh, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Asinh, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Acosh, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Atanh, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Selu, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Celu, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Softsign, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Mish, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(ThresholdedRelu, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Shrink, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(IsNaN, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(IsInf, &make_any_unary, &check_any_unary);
LUMEN_REGISTER_CUDA_KERNEL(Where, &make_where, &check_where);
LUMEN_REGISTER_CUDA_KERNEL(Sum, &make_variadic, &check_variadic);
LUMEN_REGISTER_CUDA_KERNEL(Mean, &make_variadic, &check_variadic);
LUMEN_REGISTER_CUDA_KERNEL(Cast, &make_cast, &check_cast);
LUMEN_REGISTER_CUDA_KERNEL(CastLike, &make_cast, &check_cast);
LUMEN_REGISTER_CUDA_KERNEL(Clip, &make_clip, &check_clip);

}  // namespace lumen::cuda
