// The CUDA kernel classes of QuantizeLinear and DequantizeLinear: the integer types of 8 to 32
// bits with float32, float16 or bfloat16 scales (per tensor, per axis, blocked); 4- and 2-bit
// and float8 types stay on the host, which says so.
#include <memory>
#include <string>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/quant_linear.h"
#include "graph/onnx_dtype.h"

namespace lumen::cuda {
namespace {

bool is_quantized_integer(DType t, bool allow_int32) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16 ||
         (allow_int32 && t == DType::kInt32);
}

// Checks shared by both ops: static shapes, and a zero point of the quantized type `q`.
std::string check_common(const NodeContext& ctx, DType q) {
  std::string why = check_static_shapes(ctx);
  if (!why.empty()) return why;
  if (ctx.num_inputs() > 2 && ctx.has_input(2) && ctx.input_dtype(2) != q)
    return "a zero point of another type than the quantized values";
  return "";
}

std::string check_quantize(const NodeContext& ctx) {
  const DType x = ctx.input_dtype(0), q = ctx.output(0).dtype;
  if (!is_gpu_float(x)) return "input of type " + std::string(dtype_name(x));
  if (ctx.input_dtype(1) != x) return "a scale of another type than the input";
  if (!is_quantized_integer(q, false))
    return std::string(dtype_name(q)) + " output (4-bit, 2-bit and float8 stay on the host)";
  const int64_t precision = ctx.attr_int("precision", 0);
  if (precision != 0 && dtype_from_onnx(precision) != x)
    return "a precision other than the scale's";
  return check_common(ctx, q);
}

std::string check_dequantize(const NodeContext& ctx) {
  const DType q = ctx.input_dtype(0), s = ctx.input_dtype(1);
  if (!is_quantized_integer(q, true))
    return std::string(dtype_name(q)) + " input (4-bit, 2-bit and float8 stay on the host)";
  if (!is_gpu_float(s)) return "a scale of type " + std::string(dtype_name(s));
  if (ctx.output(0).dtype != s) return "an output type other than the scale's";
  return check_common(ctx, q);
}

const void* optional_in(const KernelContext& k, int i) {
  return k.inputs.size() > static_cast<size_t>(i) && k.inputs[i].defined() ? in(k, i) : nullptr;
}

std::unique_ptr<Kernel> make_quantize(const NodeContext& ctx) {
  const QuantLayout l = quant_param_layout(ctx);
  const Storage st = storage_of(ctx.input_dtype(0));
  const Elem q = *elem_of(ctx.output(0).dtype);
  const int64_t n = ctx.input_shape(0).numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_quantize_linear(st, q, l, in(k, 0), in(k, 1), optional_in(k, 2), out(k), n, s);
  });
}

std::unique_ptr<Kernel> make_dequantize(const NodeContext& ctx) {
  const QuantLayout l = quant_param_layout(ctx);
  const Storage st = storage_of(ctx.input_dtype(1));
  const Elem q = *elem_of(ctx.input_dtype(0));
  const int64_t n = ctx.input_shape(0).numel();
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_dequantize_linear(st, q, l, in(k, 0), in(k, 1), optional_in(k, 2), out(k), n, s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(QuantizeLinear, &make_quantize, &check_quantize);
LUMEN_REGISTER_CUDA_KERNEL(DequantizeLinear, &make_dequantize, &check_dequantize);

}  // namespace lumen::cuda
