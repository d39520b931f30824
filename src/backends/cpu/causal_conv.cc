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
    auto given = [&](int i) {
      return i < static_cast<int>(ctx.inputs.size()) && ctx.inputs[i].defined();
    };
    const Tensor& x_tensor = ctx.inputs[0];
    const FloatRows x(x_tensor), weight(ctx.inputs[1]), y(ctx.outputs[0]);
    const bool has_bias = given(2), has_past = given(3);
    const bool has_present = ctx.outputs.size() > 1 && ctx.outputs[1].defined();
    const FloatRows bias = has_bias ? FloatRows(ctx.inputs[2]) : FloatRows();
    const FloatRows past = has_past ? FloatRows(ctx.inputs[3]) : FloatRows();
    const FloatRows present = has_present ? FloatRows(ctx.outputs[1]) : FloatRows();
    const int64_t channels = x_tensor.shape()[1], length = x_tensor.shape()[2];
    const int64_t rows = x_tensor.shape()[0] * channels;
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
        weight.read(c * taps, taps, w);
        if (has_past) {
          past.read(row * carry, carry, padded);
        } else {
          std::fill(padded, padded + carry, 0.0f);
        }
        x.read(row * length, length, padded + carry);
        std::fill(acc, acc + length, has_bias ? bias.get(c) : 0.0f);
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
        y.write(acc, length, row * length);
        if (has_present) present.write(padded + length, carry, row * carry);
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
