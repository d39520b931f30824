// Element-wise kernels: the unary functions and activations, the broadcasting binary ops, the
// optimizer's fused element-wise programs, views (Reshape and the like), and the strided copies
// (Transpose, Expand, Concat).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/vulkan/vulkan_context.h"
#include "core/half.h"
#include "graph/fused_elementwise.h"
#include "graph/op_kind.h"
#include "graph/schemas/movement.h"

namespace lumen::vulkan {
namespace {

// The codes of shaders/common.glsl's apply_unary; -1 where the op has none.
int unary_code(OpKind op) {
  switch (op) {
    case OpKind::kIdentity:
      return 0;
    case OpKind::kRelu:
      return 1;
    case OpKind::kLeakyRelu:
      return 2;
    case OpKind::kClip:
      return 3;
    case OpKind::kSigmoid:
      return 4;
    case OpKind::kTanh:
      return 5;
    case OpKind::kHardSigmoid:
      return 6;
    case OpKind::kHardSwish:
      return 7;
    case OpKind::kGelu:
      return 9;
    case OpKind::kExp:
      return 11;
    case OpKind::kLog:
      return 12;
    case OpKind::kSqrt:
      return 13;
    case OpKind::kNeg:
      return 14;
    case OpKind::kAbs:
      return 15;
    case OpKind::kReciprocal:
      return 16;
    case OpKind::kFloor:
      return 17;
    case OpKind::kCeil:
      return 18;
    case OpKind::kSoftplus:
      return 19;
    case OpKind::kElu:
      return 20;
    case OpKind::kErf:
      return 21;
    case OpKind::kSoftsign:
      return 22;
    case OpKind::kSelu:
      return 23;
    default:
      return -1;
  }
}

// A known scalar float input (Clip's min and max), else `fallback`.
bool scalar_input(const NodeContext& ctx, int i, float fallback, float* out) {
  *out = fallback;
  if (!ctx.has_input(i)) return true;
  const Tensor* t = ctx.input_value(i);
  if (t == nullptr || t->numel() != 1) return false;
  if (t->dtype() == DType::kFloat32) {
    *out = t->data<float>()[0];
  } else if (t->dtype() == DType::kFloat16) {  // a Precision::kFloat16 compile's constant
    *out = half_to_float(*static_cast<const uint16_t*>(t->raw_data()));
  } else {
    return false;
  }
  return true;
}

std::string check_unary(const NodeContext& ctx) {
  if (ctx.op() == OpKind::kClip) {
    float v = 0;
    if (!scalar_input(ctx, 1, 0, &v) || !scalar_input(ctx, 2, 0, &v))
      return "min and max must be float scalars known at build time";
    return require_float(ctx, 1);
  }
  return require_float(ctx);
}

struct UnaryPush {
  uint64_t x, y;
  uint32_t n;
  float alpha, beta;
};

std::unique_ptr<Kernel> make_unary(const NodeContext& ctx) {
  int code = unary_code(ctx.op());
  if (ctx.op() == OpKind::kGelu && ctx.attr_string("approximate", "none") == "tanh") code = 10;
  float alpha = 0.f, beta = 0.f;
  switch (ctx.op()) {
    case OpKind::kLeakyRelu:
      alpha = ctx.attr_float("alpha", 0.01f);
      break;
    case OpKind::kElu:
      alpha = ctx.attr_float("alpha", 1.0f);
      break;
    case OpKind::kHardSigmoid:
      alpha = ctx.attr_float("alpha", 0.2f);
      beta = ctx.attr_float("beta", 0.5f);
      break;
    case OpKind::kSelu:
      alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
      beta = ctx.attr_float("gamma", 1.05070102214813232421875f);
      break;
    case OpKind::kClip:
      scalar_input(ctx, 1, -std::numeric_limits<float>::infinity(), &alpha);
      scalar_input(ctx, 2, std::numeric_limits<float>::infinity(), &beta);
      break;
    default:
      break;
  }
  const int32_t constants[] = {code};
  const Pipeline& pipe = pipeline(shader_for("unary", ctx.output(0).dtype), constants);
  return make_fn_kernel([&pipe, alpha, beta](KernelContext& k) {
    const int64_t n = k.outputs[0].numel();
    if (n == 0) return;
    UnaryPush push{address(k.inputs[0]), address(k.outputs[0]), static_cast<uint32_t>(n), alpha,
                   beta};
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(n, 256));
  });
}

// Cast between float32 and float16 (the casts a Precision::kFloat16 compile adds at its edges),
// through shaders/cast.comp.
std::string check_cast(const NodeContext& ctx) {
  const DType from = ctx.input_dtype(0), to = ctx.output(0).dtype;
  if (!float_storage(from) || !float_storage(to) || !float_storage(DType::kFloat16))
    return std::string("Cast from ") + dtype_name(from) + " to " + dtype_name(to) +
           " (only float32 and float16, where the device stores float16)";
  if (ctx.input(0).shape.is_static() && ctx.input(0).shape.numel() >= (int64_t{1} << 31))
    return "2^31 elements or more";
  return "";
}

std::unique_ptr<Kernel> make_cast(const NodeContext& ctx) {
  const DType from = ctx.input_dtype(0), to = ctx.output(0).dtype;
  const int32_t constants[] = {from == DType::kFloat16 ? 1 : 0, to == DType::kFloat16 ? 1 : 0};
  const Pipeline& pipe = pipeline("cast", constants);
  return make_fn_kernel([&pipe](KernelContext& k) {
    const int64_t n = k.outputs[0].numel();
    if (n == 0) return;
    UnaryPush push{address(k.inputs[0]), address(k.outputs[0]), static_cast<uint32_t>(n), 0.f, 0.f};
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(n, 256));
  });
}

// Element strides (rank of `out`) reading `in` broadcast to `out`: 0 where broadcast.
void broadcast_strides(const Shape& in, const Shape& out, uint32_t* strides) {
  const int offset = out.rank() - in.rank();
  int64_t stride = 1;
  for (int k = out.rank() - 1; k >= 0; --k) {
    const int j = k - offset;
    strides[k] = j < 0 || in[j] == 1 ? 0 : static_cast<uint32_t>(stride);
    if (j >= 0) stride *= in[j];
  }
}

int binary_code(OpKind op) {
  switch (op) {
    case OpKind::kAdd:
      return 0;
    case OpKind::kSub:
      return 1;
    case OpKind::kMul:
      return 2;
    case OpKind::kDiv:
      return 3;
    case OpKind::kPow:
      return 4;
    case OpKind::kMax:
      return 5;
    case OpKind::kMin:
      return 6;
    default:
      return -1;
  }
}

struct BinaryPush {
  uint64_t a, b, y;
  uint32_t n, rank;
  uint32_t dims[kMaxRank], sa[kMaxRank], sb[kMaxRank];
};

std::string check_binary(const NodeContext& ctx) {
  if ((ctx.op() == OpKind::kMax || ctx.op() == OpKind::kMin) && ctx.num_inputs() != 2)
    return "Max and Min take two inputs here";
  return require_float(ctx);
}

std::unique_ptr<Kernel> make_binary(const NodeContext& ctx) {
  const int32_t constants[] = {binary_code(ctx.op())};
  const Pipeline& pipe = pipeline(shader_for("binary", ctx.output(0).dtype), constants);
  return make_fn_kernel([&pipe](KernelContext& k) {
    const Tensor& y = k.outputs[0];
    const int64_t n = y.numel();
    if (n == 0) return;
    BinaryPush push{};
    push.a = address(k.inputs[0]);
    push.b = address(k.inputs[1]);
    push.y = address(y);
    push.n = static_cast<uint32_t>(n);
    push.rank = static_cast<uint32_t>(y.shape().rank());
    for (int d = 0; d < y.shape().rank(); ++d) push.dims[d] = static_cast<uint32_t>(y.shape()[d]);
    broadcast_strides(k.inputs[0].shape(), y.shape(), push.sa);
    broadcast_strides(k.inputs[1].shape(), y.shape(), push.sb);
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(n, 256));
  });
}

// FusedElementwise: the program as shaders/fused_elementwise.comp's table, on the device once.
constexpr int kMaxFusedInputs = 8;

struct FusedPush {
  uint64_t x[kMaxFusedInputs] = {};
  uint64_t y = 0, table = 0;
  uint32_t n = 0;
  int32_t inputs = 0, instructions = 0, consts = 0;
};
static_assert(sizeof(FusedPush) <= kPushBytes);

// An instruction's code in the shader: apply_binary's op, or 100 + apply_unary's.
int fused_code(EwOp op) {
  switch (op) {
    case EwOp::kAdd:
      return 0;
    case EwOp::kSub:
      return 1;
    case EwOp::kMul:
      return 2;
    case EwOp::kDiv:
      return 3;
    case EwOp::kPow:
      return 4;
    case EwOp::kMax:
      return 5;
    case EwOp::kMin:
      return 6;
    case EwOp::kRelu:
      return 101;
    case EwOp::kLeakyRelu:
      return 102;
    case EwOp::kClip:
      return 103;
    case EwOp::kSigmoid:
      return 104;
    case EwOp::kTanh:
      return 105;
    case EwOp::kHardSigmoid:
      return 106;
    case EwOp::kHardSwish:
      return 107;
    case EwOp::kSwish:
      return 108;
    case EwOp::kGeluErf:
      return 109;
    case EwOp::kGeluTanh:
      return 110;
    case EwOp::kExp:
      return 111;
    case EwOp::kLog:
      return 112;
    case EwOp::kSqrt:
      return 113;
    case EwOp::kNeg:
      return 114;
    case EwOp::kAbs:
      return 115;
    case EwOp::kReciprocal:
      return 116;
    case EwOp::kSoftplus:
      return 119;
    case EwOp::kErf:
      return 121;
    default:
      return -1;
  }
}

std::string check_fused_elementwise(const NodeContext& ctx) {
  std::string why = require_float(ctx);
  if (!why.empty()) return why;
  if (ctx.num_inputs() > kMaxFusedInputs) return "more than 8 inputs";
  if (!ctx.output(0).shape.is_static()) return "shapes known only at run time";
  if (!ctx.attr_ints("perms", {}).empty()) return "inputs read through a transpose ('perms')";
  std::string error;
  const std::vector<EwInstr> program = decode_ew_program(
      ctx.attr_ints("code"), ctx.attr_floats("consts", {}).size(), ctx.num_inputs(), &error);
  if (program.empty()) return error;
  for (const EwInstr& in : program)
    if (fused_code(in.op) < 0) return std::string("no shader op for ") + ew_op_name(in.op);
  return "";
}

std::unique_ptr<Kernel> make_fused_elementwise(const NodeContext& ctx) {
  const std::vector<float> consts = ctx.attr_floats("consts", {});
  std::string error;
  const std::vector<EwInstr> program =
      decode_ew_program(ctx.attr_ints("code"), consts.size(), ctx.num_inputs(), &error);
  if (program.empty()) ctx.fail_model(error);
  const Shape& y = ctx.output(0).shape;
  const int lead = kMaxRank - y.rank();
  std::vector<int32_t> table(6 + 6 * kMaxFusedInputs, 0);
  for (int d = 0; d < kMaxRank; ++d) table[d] = d < lead ? 1 : static_cast<int32_t>(y[d - lead]);
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    uint32_t strides[kMaxRank] = {};
    broadcast_strides(ctx.input_shape(k), y, strides);
    for (int d = 0; d < y.rank(); ++d)
      table[6 + 6 * k + lead + d] = static_cast<int32_t>(strides[d]);
  }
  for (const EwInstr& in : program)
    table.insert(table.end(), {fused_code(in.op), in.dst, in.a, in.b});
  for (float c : consts) {
    int32_t bits = 0;
    std::memcpy(&bits, &c, sizeof(bits));
    table.push_back(bits);
  }
  const Tensor device_table =
      Tensor::from_vector<int32_t>(Shape{static_cast<int64_t>(table.size())}, table)
          .to(Device::vulkan(0));
  FusedPush base;
  base.table = address(device_table);
  base.n = static_cast<uint32_t>(y.numel());
  base.inputs = ctx.num_inputs();
  base.instructions = static_cast<int32_t>(program.size());
  base.consts = static_cast<int32_t>(consts.size());
  const Pipeline& pipe = pipeline(shader_for("fused_elementwise", ctx.output(0).dtype));
  return make_fn_kernel([&pipe, base, device_table](KernelContext& k) {
    if (base.n == 0) return;
    FusedPush push = base;
    for (int i = 0; i < base.inputs; ++i) push.x[i] = address(k.inputs[i]);
    push.y = address(k.outputs[0]);
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(base.n, 256));
  });
}

// Reshape, Flatten, Squeeze, Unsqueeze, Identity: a view of the input with the inferred shape.
std::string check_view(const NodeContext& ctx) {
  if (!float_storage(ctx.input_dtype(0))) return "input 0 is not a float type the shaders take";
  if (!ctx.output(0).shape.is_static()) return "the output shape is known only at run time";
  return "";
}

std::unique_ptr<Kernel> make_view(const NodeContext& ctx) {
  Shape shape = ctx.output(0).shape;
  return make_fn_kernel([shape](KernelContext& k) { k.outputs[0] = k.inputs[0].reshape(shape); },
                        true);
}

struct CopyPush {
  uint64_t x, y;
  uint32_t n, rank;
  uint32_t dims[kMaxRank];
  int32_t xs[kMaxRank], ys[kMaxRank];
  int32_t x0, y0;  // the first element's index from x and y (both point at the lowest one)
};

// Contiguous element strides of `shape`.
std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> s(shape.rank(), 1);
  for (int d = shape.rank() - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

// Enqueues y[c . ys] = x[c . xs] over `dims`, elements of `dtype`.
void strided_copy(VulkanStream& stream, DType dtype, uint64_t x, uint64_t y, const Shape& dims,
                  const std::vector<int64_t>& xs, const std::vector<int64_t>& ys) {
  const int64_t n = dims.numel();
  if (n == 0) return;
  CopyPush push{};
  push.x = x;
  push.y = y;
  push.n = static_cast<uint32_t>(n);
  push.rank = static_cast<uint32_t>(dims.rank());
  int64_t x_low = 0, y_low = 0;  // the lowest index read / written, relative to x and y
  for (int d = 0; d < dims.rank(); ++d) {
    push.dims[d] = static_cast<uint32_t>(dims[d]);
    push.xs[d] = static_cast<int32_t>(xs[d]);
    push.ys[d] = static_cast<int32_t>(ys[d]);
    x_low += std::min<int64_t>(0, (dims[d] - 1) * xs[d]);
    y_low += std::min<int64_t>(0, (dims[d] - 1) * ys[d]);
  }
  const auto bytes = static_cast<int64_t>(dtype_size(dtype));
  push.x = x + static_cast<uint64_t>(bytes * x_low);
  push.y = y + static_cast<uint64_t>(bytes * y_low);
  push.x0 = static_cast<int32_t>(-x_low);
  push.y0 = static_cast<int32_t>(-y_low);
  stream.dispatch(pipeline(shader_for("strided_copy", dtype)), &push, sizeof(push),
                  groups_for(n, 256));
}

std::unique_ptr<Kernel> make_transpose(const NodeContext& ctx) {
  const int rank = ctx.input_shape(0).rank();
  std::vector<int64_t> perm = ctx.attr_ints("perm", {});
  if (perm.empty())
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  return make_fn_kernel([perm](KernelContext& k) {
    const Tensor& x = k.inputs[0];
    Tensor& y = k.outputs[0];
    std::vector<int64_t> in_strides = strides_of(x.shape()), xs(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) xs[d] = in_strides[perm[d]];
    strided_copy(stream_of(k), x.dtype(), address(x), address(y), y.shape(), xs,
                 strides_of(y.shape()));
  });
}

std::unique_ptr<Kernel> make_expand(const NodeContext& /*ctx*/) {
  return make_fn_kernel([](KernelContext& k) {
    const Tensor& x = k.inputs[0];
    Tensor& y = k.outputs[0];
    std::vector<uint32_t> xs(y.shape().rank());
    broadcast_strides(x.shape(), y.shape(), xs.data());
    strided_copy(stream_of(k), x.dtype(), address(x), address(y), y.shape(),
                 std::vector<int64_t>(xs.begin(), xs.end()), strides_of(y.shape()));
  });
}

std::string check_expand(const NodeContext& ctx) {
  std::string why = require_float(ctx, 1);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() > kMaxRank || ctx.output(0).shape.rank() > kMaxRank)
    return "rank above 6";
  return "";
}

std::string check_concat(const NodeContext& ctx) {
  return require_float(ctx);
}

std::unique_ptr<Kernel> make_concat(const NodeContext& ctx) {
  int axis = static_cast<int>(ctx.attr_int("axis"));
  if (axis < 0) axis += ctx.output(0).shape.rank();
  return make_fn_kernel([axis](KernelContext& k) {
    Tensor& y = k.outputs[0];
    const std::vector<int64_t> ys = strides_of(y.shape());
    int64_t at = 0;
    for (const Tensor& x : k.inputs) {
      strided_copy(stream_of(k), x.dtype(), address(x),
                   address(y) + at * ys[axis] * dtype_size(x.dtype()), x.shape(),
                   strides_of(x.shape()), ys);
      at += x.shape()[axis];
    }
  });
}

// Slice: one strided copy from the first element kept, every start, end, axis and step known at
// compile time (steps may be negative).
std::string check_slice(const NodeContext& ctx) {
  std::string why = require_float(ctx, 1);
  if (!why.empty()) return why;
  if (!ctx.input_shape(0).is_static() || ctx.input_shape(0).rank() > kMaxRank)
    return "a static input of rank 6 or less";
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_value(i) == nullptr)
      return "input " + std::to_string(i) + " must be known at build time";
  return "";
}

std::unique_ptr<Kernel> make_slice(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const SliceSpec spec = slice_spec(ctx);
  const std::vector<int64_t> in_strides = strides_of(x);
  std::vector<int64_t> xs(x.rank());
  int64_t offset = 0;
  for (int d = 0; d < x.rank(); ++d) {
    xs[d] = spec.steps[d] * in_strides[d];
    if (spec.output.numel() > 0) offset += spec.starts[d] * in_strides[d];
  }
  const Shape out = spec.output;
  return make_fn_kernel([xs, offset, out](KernelContext& k) {
    const Tensor& x = k.inputs[0];
    strided_copy(stream_of(k), x.dtype(), address(x) + offset * dtype_size(x.dtype()),
                 address(k.outputs[0]), out, xs, strides_of(out));
  });
}

// Gather: with indices known at compile time (checked there, so a run cannot meet a bad one) a
// view of the input for one index along the outermost dim (a transformer's Q/K/V split), else one
// copy through shaders/gather.comp; indices that come at run time (token ids into an embedding)
// are checked by the shader, which records an out-of-range one for the host to raise
// (Context::raise_index_error).
struct GatherGeometry {
  int64_t outer = 1, axis_n = 0, inner = 1;
  bool runtime = false;
  std::vector<int32_t> indices;  // non-negative; empty when they come at run time
};

bool gather_geometry(const NodeContext& ctx, GatherGeometry* g, std::string* why) {
  const Shape& x = ctx.input_shape(0);
  int64_t axis = ctx.attr_int("axis", 0);
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis >= x.rank()) {
    *why = "axis out of range";
    return false;
  }
  for (int d = 0; d < axis; ++d) g->outer *= x[d];
  for (int d = static_cast<int>(axis) + 1; d < x.rank(); ++d) g->inner *= x[d];
  g->axis_n = x[static_cast<int>(axis)];
  const Tensor* known = ctx.input_value(1);
  if (known == nullptr) {
    g->runtime = true;
    return true;
  }
  for (int64_t i = 0; i < known->numel(); ++i) {
    int64_t v = static_cast<int64_t>(known->item_as_double(i));
    if (v < 0) v += g->axis_n;
    if (v < 0 || v >= g->axis_n) {
      *why = "index " + std::to_string(v) + " out of range";
      return false;
    }
    g->indices.push_back(static_cast<int32_t>(v));
  }
  return true;
}

std::string check_gather(const NodeContext& ctx) {
  std::string why = require_float(ctx, 1);
  if (!why.empty()) return why;
  if (!ctx.input_shape(0).is_static() || !ctx.output(0).shape.is_static())
    return "shapes known only at run time";
  const DType idx = ctx.input_dtype(1);
  if (idx != DType::kInt64 && idx != DType::kInt32) return "indices must be int64 or int32";
  GatherGeometry g;
  return gather_geometry(ctx, &g, &why) ? "" : why;
}

struct GatherPush {
  uint64_t x, idx, y, record;
  uint32_t outer, num, axis_n, inner;
  int32_t where;
};

std::unique_ptr<Kernel> make_gather(const NodeContext& ctx) {
  GatherGeometry g;
  std::string why;
  if (!gather_geometry(ctx, &g, &why)) ctx.fail_unsupported("Vulkan: " + why);
  const Shape shape = ctx.output(0).shape;
  if (!g.runtime && g.outer == 1 && g.indices.size() == 1) {
    const int64_t index = g.indices[0], axis_n = g.axis_n, inner = g.inner;
    return make_fn_kernel(
        [shape, index, axis_n, inner](KernelContext& k) {
          k.outputs[0] = k.inputs[0].reshape(Shape{axis_n, inner}).narrow(index, 1).reshape(shape);
        },
        true);
  }
  Context& context = require_vulkan_backend().context();
  GatherPush base{};
  base.outer = static_cast<uint32_t>(g.outer);
  base.axis_n = static_cast<uint32_t>(g.axis_n);
  base.inner = static_cast<uint32_t>(g.inner);
  Tensor known;
  int32_t kind = 0;
  if (g.runtime) {
    kind = ctx.input_dtype(1) == DType::kInt64 ? 1 : 2;
    base.record = context.index_record();
    base.where = context.index_check_id(ctx.where());
  } else {
    const auto num = static_cast<int64_t>(g.indices.size());
    known = Tensor::from_vector<int32_t>({num}, g.indices).to(Device::vulkan());
  }
  const int32_t constants[] = {kind};
  const Pipeline& pipe = pipeline(shader_for("gather", ctx.output(0).dtype), constants);
  return make_fn_kernel([&pipe, base, known](KernelContext& k) {
    const int64_t n = k.outputs[0].numel();
    if (n == 0) return;
    GatherPush push = base;
    const Tensor& indices = known.defined() ? known : k.inputs[1];
    push.x = address(k.inputs[0]);
    push.idx = address(indices);
    push.y = address(k.outputs[0]);
    push.num = static_cast<uint32_t>(indices.numel());
    stream_of(k).dispatch(pipe, &push, sizeof(push), groups_for(n, 256));
  });
}

}  // namespace

LUMEN_REGISTER_VULKAN_KERNEL(Gather, &make_gather, &check_gather);
LUMEN_REGISTER_VULKAN_KERNEL(Slice, &make_slice, &check_slice);
LUMEN_REGISTER_VULKAN_KERNEL(Cast, &make_cast, &check_cast);
LUMEN_REGISTER_VULKAN_KERNEL(Relu, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(LeakyRelu, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Clip, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Sigmoid, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Tanh, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(HardSigmoid, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(HardSwish, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Gelu, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Exp, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Log, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Sqrt, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Neg, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Abs, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Reciprocal, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Floor, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Ceil, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Softplus, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Elu, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Erf, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Softsign, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(Selu, &make_unary, &check_unary);
LUMEN_REGISTER_VULKAN_KERNEL(FusedElementwise, &make_fused_elementwise, &check_fused_elementwise);
LUMEN_REGISTER_VULKAN_KERNEL(Add, &make_binary, &check_binary);
LUMEN_REGISTER_VULKAN_KERNEL(Sub, &make_binary, &check_binary);
LUMEN_REGISTER_VULKAN_KERNEL(Mul, &make_binary, &check_binary);
LUMEN_REGISTER_VULKAN_KERNEL(Div, &make_binary, &check_binary);
LUMEN_REGISTER_VULKAN_KERNEL(Pow, &make_binary, &check_binary);
LUMEN_REGISTER_VULKAN_KERNEL(Max, &make_binary, &check_binary);
LUMEN_REGISTER_VULKAN_KERNEL(Min, &make_binary, &check_binary);
LUMEN_REGISTER_VULKAN_KERNEL(Reshape, &make_view, &check_view);
LUMEN_REGISTER_VULKAN_KERNEL(Flatten, &make_view, &check_view);
LUMEN_REGISTER_VULKAN_KERNEL(Squeeze, &make_view, &check_view);
LUMEN_REGISTER_VULKAN_KERNEL(Unsqueeze, &make_view, &check_view);
LUMEN_REGISTER_VULKAN_KERNEL(Identity, &make_view, &check_view);
LUMEN_REGISTER_VULKAN_KERNEL(Transpose, &make_transpose, &require_float);
LUMEN_REGISTER_VULKAN_KERNEL(Expand, &make_expand, &check_expand);
LUMEN_REGISTER_VULKAN_KERNEL(Concat, &make_concat, &check_concat);

}  // namespace lumen::vulkan
