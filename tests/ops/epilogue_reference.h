// The epilogue the convolution kernel tests (Winograd, GroupedConv8, Im2colConv, DepthwiseConv)
// hand their kernels, its double-precision reference, and the check of a kernel's every output.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/cpu/packed_gemm.h"

namespace lumen::test {

// Bias, residual flag and activation as given; Clip's bounds are [-0.5, 0.5].
inline cpu::GemmEpilogue conv_epilogue(const float* bias, bool residual, cpu::GemmActivation act) {
  cpu::GemmEpilogue e;
  e.bias = bias;
  e.accumulate = residual;
  e.activation = act;
  e.alpha = -0.5f;
  e.beta = 0.5f;
  return e;
}

// A reference sum (bias included) finished as conv_epilogue's epilogue does: the residual added
// where there is one, then ReLU, Clip, Sigmoid, Tanh, Swish, HardSwish or nothing.
inline double finish_reference(double acc, bool residual, double residual_value,
                               cpu::GemmActivation act) {
  if (residual) acc += residual_value;
  if (act == cpu::GemmActivation::kRelu) acc = std::max(acc, 0.0);
  if (act == cpu::GemmActivation::kClip) acc = std::min(std::max(acc, -0.5), 0.5);
  if (act == cpu::GemmActivation::kSigmoid) acc = 1 / (1 + std::exp(-acc));
  if (act == cpu::GemmActivation::kTanh) acc = std::tanh(acc);
  if (act == cpu::GemmActivation::kSwish) acc = acc / (1 + std::exp(-acc));
  if (act == cpu::GemmActivation::kHardSwish) acc *= std::min(std::max(acc / 6 + 0.5, 0.0), 1.0);
  return acc;
}

// Every output of a channels-last convolution y (batch, out_h, out_w, channels) against its
// double reference: sum(n, oh, ow, o) (the bias included), finished by finish_reference with the
// residual that y held before the run; within atol + rtol |want|. The first 5 misses are reported.
template <typename Sum>
void expect_conv_output(const std::vector<float>& y, const std::vector<float>& residual,
                        int64_t batch, int64_t out_h, int64_t out_w, int64_t channels,
                        bool has_residual, cpu::GemmActivation act, double atol, double rtol,
                        const Sum& sum) {
  int64_t bad = 0;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t oh = 0; oh < out_h; ++oh)
      for (int64_t ow = 0; ow < out_w; ++ow)
        for (int64_t o = 0; o < channels; ++o) {
          const int64_t at = ((n * out_h + oh) * out_w + ow) * channels + o;
          const double want = finish_reference(sum(n, oh, ow, o), has_residual, residual[at], act);
          if (!(std::fabs(y[at] - want) <= atol + rtol * std::fabs(want)) && ++bad <= 5)
            ADD_FAILURE() << "(" << n << ", " << oh << ", " << ow << ", " << o << "): got " << y[at]
                          << ", want " << want;
        }
  EXPECT_EQ(bad, 0);
}

}  // namespace lumen::test
