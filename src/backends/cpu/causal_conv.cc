// CPU kernel of CausalConvWithState (opset 27): a stateful causal depthwise 1-D convolution with
// optional fused SiLU, float32 / float16 / bfloat16 storage computed in float32.
//
// Each (batch, channel) row is independent: rows run in parallel with OpenMP. A row builds its
// padded sequence [past_state or zeros (k - 1), input (L)] in a thread-local buffer, accumulates
// the k taps as k contiguous multiply-add sweeps over the L outputs (vectorised), applies the
// activation, and hands the last k - 1 padded positions on as present_state.
#include <algorithm>
#include <memory>
#include <vector>

#include "backends/cpu/float_rows.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"
#include "graph/schemas/linear_attention.h"

namespace lumen::cpu {
namespace {

// Multiply-adds below which one thread runs the node.
constexpr int64_t kParallelWork = 1 << 15;

class CausalConvKernel final : public Kernel {
 public:
  explicit CausalConvKernel(const NodeContext& ctx) : spec_(causal_conv_spec(ctx)) {}

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& weight = ctx.inputs[1];
    auto optional = [&](int i) -> const Tensor* {
      return i < static_cast<int>(ctx.inputs.size()) && ctx.inputs[i].defined() ? &ctx.inputs[i]
                                                                               : nullptr;
    };
    const Tensor* bias = optional(2);
    const Tensor* past = optional(3);
    const Tensor& y = ctx.outputs[0];
    const Tensor* present =
        ctx.outputs.size() > 1 && ctx.outputs[1].defined() ? &ctx.outputs[1] : nullptr;
    const int64_t channels = x.shape()[1], length = x.shape()[2];
    const int64_t rows = x.shape()[0] * channels;
    const int64_t taps = spec_.kernel, carry = taps - 1;
    const bool silu = spec_.silu;
#pragma omp parallel if (rows > 1 && rows * (length + carry) * taps > kParallelWork)
    {
      std::vector<float> padded_buf(carry + length), acc_buf(length), arg_buf(silu ? length : 0),
          w_buf(taps);
      float* __restrict padded = padded_buf.data();
      float* __restrict acc = acc_buf.data();
      float* __restrict arg = arg_buf.data();
      float* __restrict w = w_buf.data();
#pragma omp for schedule(static)
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t c = row % channels;
        read_floats(weight, c * taps, taps, w);
        if (past != nullptr) {
          read_floats(*past, row * carry, carry, padded);
        } else {
          std::fill(padded, padded + carry, 0.0f);
        }
        read_floats(x, row * length, length, padded + carry);
        float b = 0.0f;
        if (bias != nullptr) read_floats(*bias, c, 1, &b);
        std::fill(acc, acc + length, b);
        for (int64_t j = 0; j < taps; ++j) {
          const float wj = w[j];
          const float* __restrict src = padded + j;
#pragma omp simd
          for (int64_t t = 0; t < length; ++t) acc[t] += wj * src[t];
        }
        if (silu) {
          // x * sigmoid(x) = x / (1 + exp(-x)); the clamp keeps exp finite (its own loop, so
          // that the arithmetic loop has no branches and vectorises).
          for (int64_t t = 0; t < length; ++t) arg[t] = clamp_exp_arg(-acc[t]);
#pragma omp simd
          for (int64_t t = 0; t < length; ++t) acc[t] = acc[t] / (1.0f + exp_in_range(arg[t]));
        }
        write_floats(acc, length, y, row * length);
        if (present != nullptr) write_floats(padded + length, carry, *present, row * carry);
      }
    }
  }

 private:
  CausalConvSpec spec_;
};

std::unique_ptr<Kernel> make_causal_conv(const NodeContext& ctx) {
  return std::make_unique<CausalConvKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(CausalConvWithState, &make_causal_conv);

}  // namespace lumen::cpu
