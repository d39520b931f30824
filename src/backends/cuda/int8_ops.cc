// CUDA kernel classes of MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv, QLinearAdd and
// DynamicQuantizeLinear (int8_ops.cu's kernels): 8-bit operands (int8 or uint8) with their zero
// points, float32 scales, static shapes. Each reads its geometry at compile time.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/int8_ops.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::cuda {
namespace {

bool is_8bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

// Input i as an 8-bit operand (null where the optional input is absent).
Int8Ref ref8(const KernelContext& k, int i) {
  if (i >= static_cast<int>(k.inputs.size()) || !k.inputs[i].defined()) return {};
  return {k.inputs[i].raw_data(), k.inputs[i].dtype() == DType::kInt8};
}

const float* floats(const KernelContext& k, int i) {
  return static_cast<const float*>(k.inputs[i].raw_data());
}

// QLinearMatMul's and QLinearConv's requantization: their scales are inputs 1 (A or x), 4 (B or w)
// and 6 (y), y's zero point input 7.
Requant requant(const KernelContext& k, int64_t a_count, int64_t b_count, bool out_signed) {
  Requant r;
  r.a_scale = floats(k, 1);
  r.b_scale = floats(k, 4);
  r.y_scale = floats(k, 6);
  r.y_zero_point = ref8(k, 7);
  r.a_count = a_count;
  r.b_count = b_count;
  r.out_signed = out_signed;
  return r;
}

// "" when inputs `eight` are 8-bit (where present), `scales` float32, and shapes static.
std::string check_types(const NodeContext& ctx, const std::vector<int>& eight,
                        const std::vector<int>& scales) {
  for (int i : eight)
    if (ctx.has_input(i) && !is_8bit(ctx.input_dtype(i)))
      return "input " + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
             "; int8 or uint8 only";
  for (int i : scales)
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::kFloat32)
      return "input " + std::to_string(i) + " (a scale) must be float32";
  return check_static_shapes(ctx);
}

// The element count of optional input i (0 when absent).
int64_t count_of(const NodeContext& ctx, int i) {
  return ctx.has_input(i) ? ctx.input_shape(i).numel() : 0;
}

// ---- MatMulInteger, QLinearMatMul ----

IntMatMulDesc matmul_desc(const Shape& a, const Shape& b) {
  IntMatMulDesc d;
  d.m = a.rank() >= 2 ? a[-2] : 1;
  d.k = a[-1];
  d.n = b.rank() >= 2 ? b[-1] : 1;
  std::vector<int64_t> ab(a.dims().begin(), a.dims().end() - std::min(a.rank(), 2));
  std::vector<int64_t> bb(b.dims().begin(), b.dims().end() - std::min(b.rank(), 2));
  const Shape out = broadcast_shapes(Shape(ab), Shape(bb));
  d.batch_rank = out.rank();
  ab.insert(ab.begin(), d.batch_rank - ab.size(), 1);
  bb.insert(bb.begin(), d.batch_rank - bb.size(), 1);
  int64_t a_stride = 1, b_stride = 1;
  for (int k = d.batch_rank - 1; k >= 0; --k) {
    d.batch_dims[k] = out[k];
    d.a_strides[k] = ab[k] == 1 ? 0 : a_stride;
    d.b_strides[k] = bb[k] == 1 ? 0 : b_stride;
    a_stride *= ab[k];
    b_stride *= bb[k];
  }
  d.batches = out.numel();
  return d;
}

// "" when the product's batches fit the launch and the zero points / scales are per tensor or
// per row of A (a_lists) and per column of B (b_lists).
std::string check_matmul(const NodeContext& ctx, int a_in, int b_in,
                         const std::vector<int>& a_lists, const std::vector<int>& b_lists) {
  const Shape& a = ctx.input_shape(a_in);
  const Shape& b = ctx.input_shape(b_in);
  if (a.rank() - 2 > 6 || b.rank() - 2 > 6) return "more than 6 batch dims";
  const IntMatMulDesc d = matmul_desc(a, b);
  if (d.batches > 65535) return "more than 65535 matrices";
  if (d.m > int64_t{65535} * 16 || d.n > (int64_t{1} << 31) - 16) return "too many rows or columns";
  for (int i : a_lists)
    if (ctx.has_input(i) && count_of(ctx, i) != 1 && count_of(ctx, i) != d.m)
      return "input " + std::to_string(i) + " is neither per tensor nor per row";
  for (int i : b_lists)
    if (ctx.has_input(i) && count_of(ctx, i) != 1 && count_of(ctx, i) != d.n)
      return "input " + std::to_string(i) + " is neither per tensor nor per column";
  return "";
}

std::string check_matmul_integer(const NodeContext& ctx) {
  std::string why = check_types(ctx, {0, 1, 2, 3}, {});
  return why.empty() ? check_matmul(ctx, 0, 1, {2}, {3}) : why;
}

std::unique_ptr<Kernel> make_matmul_integer(const NodeContext& ctx) {
  IntMatMulDesc d = matmul_desc(ctx.input_shape(0), ctx.input_shape(1));
  d.a_zp_count = count_of(ctx, 2);
  d.b_zp_count = count_of(ctx, 3);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_int_matmul(d, ref8(k, 0), ref8(k, 1), ref8(k, 2), ref8(k, 3), nullptr, out(k), s);
  });
}

std::string check_qlinear_matmul(const NodeContext& ctx) {
  std::string why = check_types(ctx, {0, 2, 3, 5, 7}, {1, 4, 6});
  return why.empty() ? check_matmul(ctx, 0, 3, {1, 2}, {4, 5}) : why;
}

std::unique_ptr<Kernel> make_qlinear_matmul(const NodeContext& ctx) {
  IntMatMulDesc d = matmul_desc(ctx.input_shape(0), ctx.input_shape(3));
  d.a_zp_count = count_of(ctx, 2);
  d.b_zp_count = count_of(ctx, 5);
  const int64_t a_count = count_of(ctx, 1), b_count = count_of(ctx, 4);
  const bool out_signed = ctx.output(0).dtype == DType::kInt8;
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    const Requant r = requant(k, a_count, b_count, out_signed);
    launch_int_matmul(d, ref8(k, 0), ref8(k, 3), ref8(k, 2), ref8(k, 5), &r, out(k), s);
  });
}

// ---- ConvInteger, QLinearConv ----

std::string check_conv(const NodeContext& ctx, int x_in, int w_in, int w_zp, int w_scale) {
  if (is_channels_last(ctx)) return "channels-last layout (the CPU backend's)";
  const int rank = ctx.input_shape(x_in).rank();
  if (rank < 3 || rank > 5) return "only 1-D to 3-D convolutions";
  const int64_t out_channels = ctx.input_shape(w_in)[0];
  for (int i : {w_zp, w_scale})
    if (i >= 0 && ctx.has_input(i) && count_of(ctx, i) != 1 && count_of(ctx, i) != out_channels)
      return "input " + std::to_string(i) + " is neither per tensor nor per output channel";
  return "";
}

IntConvDesc conv_desc(const NodeContext& ctx, int x_in, int w_in) {
  const Shape& x = ctx.input_shape(x_in);
  const Shape& w = ctx.input_shape(w_in);
  const ConvGeometry g = window_geometry(ctx, x, conv_kernel_shape(ctx, w), false);
  IntConvDesc d;
  d.batch = x[0];
  d.channels = x[1];
  d.out_channels = w[0];
  d.group = ctx.attr_int("group", 1);
  d.window = window_desc(g);
  return d;
}

std::string check_conv_integer(const NodeContext& ctx) {
  std::string why = check_types(ctx, {0, 1, 2, 3}, {});
  return why.empty() ? check_conv(ctx, 0, 1, 3, -1) : why;
}

std::unique_ptr<Kernel> make_conv_integer(const NodeContext& ctx) {
  IntConvDesc d = conv_desc(ctx, 0, 1);
  d.has_x_zp = ctx.has_input(2);
  d.w_zp_count = count_of(ctx, 3);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_int_conv(d, ref8(k, 0), ref8(k, 1), ref8(k, 2), ref8(k, 3), nullptr, nullptr, out(k), s);
  });
}

std::string check_qlinear_conv(const NodeContext& ctx) {
  std::string why = check_types(ctx, {0, 2, 3, 5, 7}, {1, 4, 6});
  if (!why.empty()) return why;
  if (ctx.has_input(8) && ctx.input_dtype(8) != DType::kInt32) return "the bias must be int32";
  if (count_of(ctx, 1) != 1) return "x_scale must be per tensor";
  return check_conv(ctx, 0, 3, 5, 4);
}

std::unique_ptr<Kernel> make_qlinear_conv(const NodeContext& ctx) {
  IntConvDesc d = conv_desc(ctx, 0, 3);
  d.has_x_zp = ctx.has_input(2);
  d.w_zp_count = count_of(ctx, 5);
  const int64_t w_count = count_of(ctx, 4);
  const bool has_bias = ctx.has_input(8);
  const bool out_signed = ctx.output(0).dtype == DType::kInt8;
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    const Requant r = requant(k, 1, w_count, out_signed);
    const auto* bias = has_bias ? static_cast<const int32_t*>(in(k, 8)) : nullptr;
    launch_int_conv(d, ref8(k, 0), ref8(k, 3), ref8(k, 2), ref8(k, 5), bias, &r, out(k), s);
  });
}

// ---- QLinearAdd (com.microsoft) ----

std::string check_qlinear_add(const NodeContext& ctx) {
  std::string why = check_types(ctx, {0, 2, 3, 5, 7}, {1, 4, 6});
  if (!why.empty()) return why;
  if (ctx.input_dtype(0) != ctx.input_dtype(3)) return "A and B of different types";
  for (int i : {1, 2, 4, 5, 6, 7})
    if (ctx.has_input(i) && count_of(ctx, i) != 1) return "scales and zero points per tensor only";
  return "";
}

std::unique_ptr<Kernel> make_qlinear_add(const NodeContext& ctx) {
  const BroadcastDesc desc =
      broadcast_desc(ctx.input_shape(0), ctx.input_shape(3), ctx.output(0).shape);
  const int64_t n = ctx.output(0).shape.numel();
  const bool is_signed = ctx.input_dtype(0) == DType::kInt8;
  const bool a_zp = ctx.has_input(2), b_zp = ctx.has_input(5), c_zp = ctx.has_input(7);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    QAddRefs q;
    q.a_scale = floats(k, 1);
    q.b_scale = floats(k, 4);
    q.c_scale = floats(k, 6);
    q.a_zp = a_zp ? in(k, 2) : nullptr;
    q.b_zp = b_zp ? in(k, 5) : nullptr;
    q.c_zp = c_zp ? in(k, 7) : nullptr;
    launch_qlinear_add(is_signed, q, in(k, 0), in(k, 3), out(k), n, desc, s);
  });
}

// ---- DynamicQuantizeLinear ----

std::string check_dynamic_quantize(const NodeContext& ctx) {
  if (ctx.input_dtype(0) != DType::kFloat32) return "float32 only";
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_dynamic_quantize(const NodeContext& ctx) {
  require_cuda_backend().workspace().reserve(2 * sizeof(float));
  const int64_t n = ctx.input_shape(0).numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    auto output = [&](size_t i) -> void* {
      return i < k.outputs.size() && k.outputs[i].defined() ? k.outputs[i].raw_data() : nullptr;
    };
    launch_dynamic_quantize(static_cast<const float*>(in(k, 0)), n,
                            static_cast<uint8_t*>(output(0)), static_cast<float*>(output(1)),
                            static_cast<uint8_t*>(output(2)),
                            require_cuda_backend().workspace().ptr(), s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(MatMulInteger, &make_matmul_integer, &check_matmul_integer);
LUMEN_REGISTER_CUDA_KERNEL(QLinearMatMul, &make_qlinear_matmul, &check_qlinear_matmul);
LUMEN_REGISTER_CUDA_KERNEL(ConvInteger, &make_conv_integer, &check_conv_integer);
LUMEN_REGISTER_CUDA_KERNEL(QLinearConv, &make_qlinear_conv, &check_qlinear_conv);
LUMEN_REGISTER_CUDA_KERNEL(QLinearAdd, &make_qlinear_add, &check_qlinear_add);
LUMEN_REGISTER_CUDA_KERNEL(DynamicQuantizeLinear, &make_dynamic_quantize, &check_dynamic_quantize);

}  // namespace lumen::cuda
