// The epilogue the convolution kernel tests (Winograd, GroupedConv8, Im2colConv, DepthwiseConv)
// hand their kernels, and its double-precision reference.
#pragma once

#include <algorithm>
#include <cmath>

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
// where there is one, then ReLU, Clip, Sigmoid, Tanh, Swish or nothing.
inline double finish_reference(double acc, bool residual, double residual_value,
                               cpu::GemmActivation act) {
  if (residual) acc += residual_value;
  if (act == cpu::GemmActivation::kRelu) acc = std::max(acc, 0.0);
  if (act == cpu::GemmActivation::kClip) acc = std::min(std::max(acc, -0.5), 0.5);
  if (act == cpu::GemmActivation::kSigmoid) acc = 1 / (1 + std::exp(-acc));
  if (act == cpu::GemmActivation::kTanh) acc = std::tanh(acc);
  if (act == cpu::GemmActivation::kSwish) acc = acc / (1 + std::exp(-acc));
  return acc;
}

}  // namespace lumen::test
