// CPU kernels of Softmax and LogSoftmax (float32) over any one axis: the tensor is seen as
// [outer, n, inner]; rows along a last axis run contiguous, other axes vectorise across inner.
// Both subtract the maximum first, so large inputs never overflow.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"

namespace lumen::cpu {
namespace {

// Elements of inner processed together when the axis is not the last one.
constexpr int64_t kInnerChunk = 256;

template <bool kLog>
void softmax_row(const float* x, float* y, int64_t n) {
  float m = max_floats(x, n);
  // An all -inf row (or inf max) has no finite shift; use 0 so the result follows IEEE rules.
  if (!std::isfinite(m)) m = std::isnan(m) ? m : 0.0f;
  const float s = exp_shifted_sum(x, m, y, n);
  if constexpr (kLog) {
    // (x - m) - log(s), not x - (m + log(s)): the latter rounds away small outputs for large x.
    const float log_s = std::log(s);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_s;
  } else {
    const float inv = 1.0f / s;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// Softmax over n rows of stride `inner`, for `len` (<= kInnerChunk) adjacent columns.
template <bool kLog>
void softmax_columns(const float* x, float* y, int64_t n, int64_t inner, int64_t len) {
  float m[kInnerChunk];
  float s[kInnerChunk];
  float t[kInnerChunk];
  for (int64_t j = 0; j < len; ++j) {
    m[j] = -INFINITY;
    s[j] = 0.0f;
  }
  for (int64_t r = 0; r < n; ++r) {
    const float* row = x + r * inner;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) m[j] = row[j] > m[j] ? row[j] : m[j];
  }
  for (int64_t j = 0; j < len; ++j)
    if (!std::isfinite(m[j])) m[j] = std::isnan(m[j]) ? m[j] : 0.0f;
  for (int64_t r = 0; r < n; ++r) {
    const float* row = x + r * inner;
    float* out = y + r * inner;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) t[j] = clamp_exp_arg(row[j] - m[j]);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      float e = exp_in_range(t[j]);
      if constexpr (!kLog) out[j] = e;
      s[j] += e;
    }
  }
  if constexpr (kLog) {
    for (int64_t j = 0; j < len; ++j) s[j] = std::log(s[j]);
  } else {
    for (int64_t j = 0; j < len; ++j) s[j] = 1.0f / s[j];
  }
  for (int64_t r = 0; r < n; ++r) {
    const float* row = x + r * inner;
    float* out = y + r * inner;
    if constexpr (kLog) {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) out[j] = (row[j] - m[j]) - s[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) out[j] *= s[j];
    }
  }
}

template <bool kLog>
class SoftmaxKernel final : public Kernel {
 public:
  explicit SoftmaxKernel(const NodeContext& ctx) {
    const Shape& x = ctx.input_shape(0);
    int axis = normalize_axis(ctx.attr_int("axis", -1), x.rank());
    for (int d = 0; d < axis; ++d) outer_ *= x.dims()[d];
    n_ = x.dims()[axis];
    for (int d = axis + 1; d < x.rank(); ++d) inner_ *= x.dims()[d];
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t outer = outer_, n = n_, inner = inner_;
    if (outer * n * inner == 0) return;
    const bool parallel = outer * n * inner > kNormParallelWork;
    if (inner == 1) {
      const auto row = [&](int64_t o) { softmax_row<kLog>(x + o * n, y + o * n, n); };
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t o = 0; o < outer; ++o) isa_call(row, o);
      return;
    }
    const int64_t chunks = (inner + kInnerChunk - 1) / kInnerChunk;
    const auto task = [&](int64_t t) {
      int64_t o = t / chunks;
      int64_t j0 = (t % chunks) * kInnerChunk;
      int64_t off = o * n * inner + j0;
      softmax_columns<kLog>(x + off, y + off, n, inner, std::min(kInnerChunk, inner - j0));
    };
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < outer * chunks; ++t) isa_call(task, t);
  }

 private:
  int64_t outer_ = 1;
  int64_t n_ = 1;
  int64_t inner_ = 1;
};

std::unique_ptr<Kernel> make_softmax(const NodeContext& ctx) {
  return std::make_unique<SoftmaxKernel<false>>(ctx);
}

std::unique_ptr<Kernel> make_log_softmax(const NodeContext& ctx) {
  return std::make_unique<SoftmaxKernel<true>>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Softmax, &make_softmax, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(LogSoftmax, &make_log_softmax, &require_float32);

}  // namespace lumen::cpu
