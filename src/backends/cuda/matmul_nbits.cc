// CUDA kernel class of MatMulNBits (4- or 8-bit weights; A, scales, bias and output float32, or
// all 16-bit under a float16/bfloat16 compile): the node's sizes are read once at compile time
// into the launch descriptor (matmul_nbits.h); B, scales and zero points are read on the device
// in the op's own layout.
#include <memory>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/matmul_nbits.h"
#include "graph/matmul_nbits.h"

namespace lumen::cuda {
namespace {

std::string check_matmul_nbits(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(kNBitsA);
  if (!is_gpu_float(t)) return std::string("A is ") + dtype_name(t);
  for (int i : {kNBitsScales, kNBitsZeroPoints, kNBitsBias, kNBitsResidual})
    if (ctx.has_input(i) && ctx.input_dtype(i) != t && ctx.input_dtype(i) != DType::kUInt8)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
             " and A " + dtype_name(t);
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && !ctx.input_shape(i).is_static())
      return "input " + std::to_string(i) + "'s shape is known only at run time";
  if (!ctx.output(0).shape.is_static()) return "the output shape is known only at run time";
  UnaryOp op = UnaryOp::kIdentity;
  float alpha = 0.f, beta = 0.f;
  if (!fused_activation(ctx, &op, &alpha, &beta))
    return "no activation '" + ctx.attr_string("activation", "") + "'";
  return "";
}

class MatMulNBitsKernel final : public Kernel {
 public:
  explicit MatMulNBitsKernel(const NodeContext& ctx) : where_(ctx.where()) {
    d_.k = ctx.attr_int("K");
    d_.n = ctx.attr_int("N");
    d_.bits = static_cast<int>(ctx.attr_int("bits", 4));
    d_.block_size = ctx.attr_int("block_size");
    d_.m = ctx.input_shape(kNBitsA).numel() / d_.k;
    if (ctx.has_input(kNBitsZeroPoints))
      d_.zero_points = ctx.input_dtype(kNBitsZeroPoints) == DType::kUInt8 ? NBitsZeroPoints::kPacked
                                                                          : NBitsZeroPoints::kFloat;
    d_.storage = storage_of(ctx.input_dtype(kNBitsA));
    has_bias_ = ctx.has_input(kNBitsBias);
    has_residual_ = ctx.has_input(kNBitsResidual);
    fused_activation(ctx, &d_.act, &d_.alpha, &d_.beta);
  }

  void run(KernelContext& ctx) const override {
    const void* zp = d_.zero_points == NBitsZeroPoints::kDefault
                         ? nullptr
                         : ctx.inputs[kNBitsZeroPoints].raw_data();
    launch_matmul_nbits(d_, ctx.inputs[kNBitsA].raw_data(),
                        static_cast<const uint8_t*>(ctx.inputs[kNBitsB].raw_data()),
                        ctx.inputs[kNBitsScales].raw_data(), zp,
                        has_bias_ ? ctx.inputs[kNBitsBias].raw_data() : nullptr,
                        has_residual_ ? ctx.inputs[kNBitsResidual].raw_data() : nullptr,
                        ctx.outputs[0].raw_data(), stream_of(ctx));
    check_launch(where_);
  }

 private:
  std::string where_;
  NBitsDesc d_;
  bool has_bias_ = false;
  bool has_residual_ = false;
};

std::unique_ptr<Kernel> make_matmul_nbits(const NodeContext& ctx) {
  return std::make_unique<MatMulNBitsKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(MatMulNBits, &make_matmul_nbits, &check_matmul_nbits);

}  // namespace lumen::cuda
