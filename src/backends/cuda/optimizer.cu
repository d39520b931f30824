// The optimizer ops' kernel: a thread per element, the step's rate from R and T in every thread
// (a few double operations against the element's own), the rule in double.
#include <algorithm>

#include "backends/cuda/optimizer.h"

namespace lumen::cuda {
namespace {

__device__ double step_rate(const OptimizerDesc& d, double r, int64_t t) {
  switch (d.rule) {
    case OptimizerRule::kAdagrad:
      return r / (1.0 + static_cast<double>(t) * d.decay);
    case OptimizerRule::kAdam:
      if (t <= 0) return r;
      return r * sqrt(1.0 - pow(d.beta, static_cast<double>(t))) /
             (1.0 - pow(d.alpha, static_cast<double>(t)));
    default:
      return r;
  }
}

template <typename T>
__global__ void optimizer_kernel(OptimizerDesc d, const void* r_ptr, bool r_double,
                                 const int64_t* t_ptr, OptimizerTensors ts) {
  const double r =
      r_double ? *static_cast<const double*>(r_ptr) : *static_cast<const float*>(r_ptr);
  const int64_t t = *t_ptr;
  const double rate = step_rate(d, r, t);
  const T* x = static_cast<const T*>(ts.in[0]);
  const T* grad = static_cast<const T*>(ts.in[1]);
  const T* s0 = static_cast<const T*>(ts.in[2]);
  const T* s1 = static_cast<const T*>(ts.in[3]);
  T* out[3] = {static_cast<T*>(ts.out[0]), static_cast<T*>(ts.out[1]), static_cast<T*>(ts.out[2])};
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < ts.count;
       e += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const double xv = static_cast<double>(x[e]);
    const double g = d.norm * xv + static_cast<double>(grad[e]);
    double v[3];
    if (d.rule == OptimizerRule::kAdagrad) {
      const double h = static_cast<double>(s0[e]) + g * g;
      v[0] = xv - rate * g / (sqrt(h) + d.epsilon);
      v[1] = h;
    } else if (d.rule == OptimizerRule::kAdam) {
      const double m = d.alpha * static_cast<double>(s0[e]) + (1.0 - d.alpha) * g;
      const double h = d.beta * static_cast<double>(s1[e]) + (1.0 - d.beta) * g * g;
      v[0] = (1.0 - d.norm_post) * (xv - rate * m / (sqrt(h) + d.epsilon));
      v[1] = m;
      v[2] = h;
    } else {
      const double m = d.alpha * static_cast<double>(s0[e]) + (t > 0 ? d.beta : 1.0) * g;
      v[0] = xv - rate * (d.nesterov ? g + d.alpha * m : m);
      v[1] = m;
    }
    const int outs = d.rule == OptimizerRule::kAdam ? 3 : 2;
    for (int o = 0; o < outs; ++o)
      if (out[o] != nullptr) out[o][e] = static_cast<T>(v[o]);
  }
}

}  // namespace

void launch_optimizer(const OptimizerDesc& desc, const void* r, bool r_double, const int64_t* t,
                      const OptimizerTensors& tensors, bool f64, cudaStream_t stream) {
  if (tensors.count == 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((tensors.count + kThreads - 1) / kThreads, 65535);
  if (f64)
    optimizer_kernel<double>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(desc, r, r_double, t, tensors);
  else
    optimizer_kernel<float>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(desc, r, r_double, t, tensors);
}

}  // namespace lumen::cuda
