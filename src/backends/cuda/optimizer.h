// Launcher of the CUDA kernel of the optimizer ops of ai.onnx.preview.training (Adagrad, Adam,
// Momentum; optimizer.cu), with plain C++ types so the kernel class (optimizer_ops.cc) needs no
// CUDA C++. The rules are the CPU kernel's (backends/cpu/training.cc), element by element in
// double, stored in the tensors' dtype.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lumen::cuda {

enum class OptimizerRule { kAdagrad, kAdam, kMomentum };

// The node's attributes (ONNX's defaults where absent); the fields a rule does not use are ignored.
struct OptimizerDesc {
  OptimizerRule rule = OptimizerRule::kAdagrad;
  double norm = 0.0, decay = 0.0, epsilon = 1e-6, alpha = 0.0, beta = 0.0, norm_post = 0.0;
  bool nesterov = false;
};

// One optimized tensor: its inputs by role (X, G, then the states: Adagrad H; Adam V, H;
// Momentum V) and its outputs (X_new, then the new states; null: not written), `count` elements.
struct OptimizerTensors {
  const void* in[4] = {};
  void* out[3] = {};
  int64_t count = 0;
};

// Updates one tensor: R (the learning rate, float32 or float64 as r_double says) and T (int64)
// are read on the device, as the step runs; the tensors are float64 where `f64`, else float32.
void launch_optimizer(const OptimizerDesc& desc, const void* r, bool r_double, const int64_t* t,
                      const OptimizerTensors& tensors, bool f64, cudaStream_t stream);

}  // namespace lumen::cuda
