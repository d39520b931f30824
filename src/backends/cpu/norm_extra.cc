// CPU kernels of RMSNormalization, GroupNormalization and LpNormalization, for float32, float64,
// float16 and bfloat16 (16-bit data computed in float32, float64 in double). Sums are float
// partial sums over blocks added in double (norm_math.h) for float32, double throughout otherwise.
// GroupNormalization works per channel plane so that every pass is parallel over N * C planes:
// plane sums give each group's first mean, plane sums of deviations from it the corrected mean and
// variance (as LayerNormalization does per row), and the last pass writes x * a[c] + b[c].
#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/float_types.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"

namespace lumen::cpu {
namespace {

// Sum of p[i] over n values.
template <typename T>
double sum_values(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return sum_floats(p, n);
  } else {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(static_cast<ComputeOf<T>>(p[i]));
    return s;
  }
}

// Sum of p[i]^2 over n values.
template <typename T>
double sum_squares(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    constexpr int64_t kBlock = 256;
    double total = 0.0;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t e = std::min(b + kBlock, n);
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t i = b; i < e; ++i) s += p[i] * p[i];
      total += s;
    }
    return total;
  } else {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(static_cast<ComputeOf<T>>(p[i]));
      s += v * v;
    }
    return s;
  }
}

// Sum of |p[i]| over n values.
template <typename T>
double sum_abs(const T* p, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    constexpr int64_t kBlock = 256;
    double total = 0.0;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t e = std::min(b + kBlock, n);
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t i = b; i < e; ++i) s += std::fabs(p[i]);
      total += s;
    }
    return total;
  } else {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i)
      s += std::fabs(static_cast<double>(static_cast<ComputeOf<T>>(p[i])));
    return s;
  }
}

// Sums of (p[i] - mean) and its square over n values.
template <typename T>
void sum_deviations_of(const T* p, int64_t n, double mean, double* sum_d, double* sum_d2) {
  if constexpr (std::is_same_v<T, float>) {
    sum_deviations(p, n, static_cast<float>(mean), sum_d, sum_d2);
    // sum_deviations measured from the float mean: move the sums to `mean` itself.
    const double shift = static_cast<double>(static_cast<float>(mean)) - mean;
    *sum_d2 += 2.0 * shift * *sum_d + shift * shift * static_cast<double>(n);
    *sum_d += shift * static_cast<double>(n);
  } else {
    double s = 0.0, s2 = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(static_cast<ComputeOf<T>>(p[i])) - mean;
      s += d;
      s2 += d * d;
    }
    *sum_d = s;
    *sum_d2 = s2;
  }
}

// Reads a parameter that broadcasts onto `norm` (the normalised dims) as a dense row of C.
template <typename C, typename T>
std::vector<C> dense_param(const Tensor& t, const Shape& norm) {
  const T* p = elements<T>(t);
  std::vector<C> out(static_cast<size_t>(norm.numel()));
  const Shape& s = t.shape();
  std::vector<int64_t> strides(norm.rank(), 0);
  int64_t acc = 1;
  for (int k = 1; k <= s.rank(); ++k) {
    const int64_t d = s[s.rank() - k];
    if (k <= norm.rank() && d != 1) strides[norm.rank() - k] = acc;
    acc *= d;
  }
  std::vector<int64_t> idx(norm.rank(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t src = 0;
    for (int d = 0; d < norm.rank(); ++d) src += idx[d] * strides[d];
    out[i] = static_cast<C>(p[src]);
    for (int d = norm.rank() - 1; d >= 0; --d) {
      if (++idx[d] < norm[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// ---- RMSNormalization: y = x / sqrt(mean(x^2) + epsilon) * scale over rows of the last dims ----

class RmsNormKernel final : public Kernel {
 public:
  explicit RmsNormKernel(const NodeContext& ctx)
      : epsilon_(ctx.attr_float("epsilon", 1e-5f)),
        same_type_(ctx.input_dtype(0) == ctx.input_dtype(1)) {
    const Shape& x = ctx.input_shape(0);
    const int axis = normalize_axis(ctx.attr_int("axis", -1), x.rank());
    std::vector<int64_t> norm;
    for (int d = 0; d < axis; ++d) rows_ *= x[d];
    for (int d = axis; d < x.rank(); ++d) norm.push_back(x[d]);
    norm_shape_ = Shape(std::move(norm));
    n_ = norm_shape_.numel();
  }

  void run(KernelContext& ctx) const override {
    visit_float(ctx.inputs[0].dtype(), [&](auto tx) {
      visit_float(ctx.inputs[1].dtype(), [&](auto tv) { apply<decltype(tx), decltype(tv)>(ctx); });
    });
  }

  // Y may overwrite X only when it has X's type (Y has scale's type, which may differ).
  int in_place_input() const override { return same_type_ ? 0 : -1; }

 private:
  template <typename TX, typename TV>
  void apply(KernelContext& ctx) const {
    using C =
        std::conditional_t<std::is_same_v<TX, double> || std::is_same_v<TV, double>, double, float>;
    const int64_t rows = rows_, n = n_;
    if (rows == 0 || n == 0) return;
    const TX* x = elements<TX>(ctx.inputs[0]);
    TV* y = elements<TV>(ctx.outputs[0]);
    const std::vector<C> scale = dense_param<C, TV>(ctx.inputs[1], norm_shape_);
    const C* s = scale.data();
    const double eps = epsilon_;
#pragma omp parallel for schedule(static) if (rows * n > kNormParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
      const TX* in = x + r * n;
      TV* out = y + r * n;
      const C inv =
          static_cast<C>(1.0 / std::sqrt(sum_squares(in, n) / static_cast<double>(n) + eps));
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = TV(static_cast<C>(in[i]) * inv * s[i]);
    }
  }

  float epsilon_;
  bool same_type_;
  int64_t rows_ = 1;
  int64_t n_ = 1;
  Shape norm_shape_;
};

// ---- GroupNormalization over (N, C, spatial...) with per-channel scale and bias ----

class GroupNormKernel final : public Kernel {
 public:
  explicit GroupNormKernel(const NodeContext& ctx) : epsilon_(ctx.attr_float("epsilon", 1e-5f)) {
    const Shape& x = ctx.input_shape(0);
    batch_ = x[0];
    channels_ = x[1];
    groups_ = ctx.attr_int("num_groups");
    for (int d = 2; d < x.rank(); ++d) spatial_ *= x[d];
  }

  void run(KernelContext& ctx) const override {
    visit_float(ctx.inputs[0].dtype(), [&](auto t) { apply<decltype(t)>(ctx); });
  }

  int in_place_input() const override { return 0; }

 private:
  template <typename T>
  void apply(KernelContext& ctx) const {
    using C = ComputeOf<T>;
    const int64_t planes = batch_ * channels_, spatial = spatial_;
    const int64_t per_group = channels_ / groups_;
    const int64_t num_groups = batch_ * groups_;
    if (planes == 0 || spatial == 0) return;
    const T* x = elements<T>(ctx.inputs[0]);
    const T* scale = elements<T>(ctx.inputs[1]);
    const T* bias = elements<T>(ctx.inputs[2]);
    T* y = elements<T>(ctx.outputs[0]);
    const bool parallel = planes * spatial > kNormParallelWork;
    const double count = static_cast<double>(per_group * spatial);
    std::vector<double> sum(planes), sum_d(planes), sum_d2(planes), mean(num_groups),
        inv(num_groups);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < planes; ++p) sum[p] = sum_values(x + p * spatial, spatial);
    for (int64_t g = 0; g < num_groups; ++g) {
      double s = 0.0;
      for (int64_t k = 0; k < per_group; ++k) s += sum[g * per_group + k];
      mean[g] = s / count;
    }
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < planes; ++p)
      sum_deviations_of(x + p * spatial, spatial, mean[p / per_group], &sum_d[p], &sum_d2[p]);
    for (int64_t g = 0; g < num_groups; ++g) {
      double d = 0.0, d2 = 0.0;
      for (int64_t k = 0; k < per_group; ++k) {
        d += sum_d[g * per_group + k];
        d2 += sum_d2[g * per_group + k];
      }
      double var = (d2 - d * d / count) / count;
      var = var < 0.0 ? 0.0 : var;  // rounding can leave a tiny negative
      mean[g] += d / count;
      inv[g] = 1.0 / std::sqrt(var + epsilon_);
    }
    // (x - mean) * a + bias: x - mean loses nothing where x is near the mean (far from zero),
    // where x * a + (bias - mean * a) would cancel two large terms and keep their rounding
    // unless the CPU fuses the multiply-add.
    const auto plane = [&](int64_t p) {
      const int64_t c = p % channels_, g = p / per_group;
      const C ac = static_cast<C>(static_cast<double>(static_cast<C>(scale[c])) * inv[g]);
      const C mc = static_cast<C>(mean[g]);
      const C bc = static_cast<C>(bias[c]);
      const T* in = x + p * spatial;
      T* out = y + p * spatial;
#pragma omp simd
      for (int64_t i = 0; i < spatial; ++i) out[i] = T((static_cast<C>(in[i]) - mc) * ac + bc);
    };
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < planes; ++p) isa_call(plane, p);
  }

  float epsilon_;
  int64_t batch_ = 1, channels_ = 1, groups_ = 1, spatial_ = 1;
};

// ---- LpNormalization: x / ||x||_p along one axis (0 where the norm is 0) ----

class LpNormKernel final : public Kernel {
 public:
  explicit LpNormKernel(const NodeContext& ctx) : p_(ctx.attr_int("p", 2)) {
    const Shape& x = ctx.input_shape(0);
    const int axis = normalize_axis(ctx.attr_int("axis", -1), x.rank());
    for (int d = 0; d < axis; ++d) outer_ *= x[d];
    n_ = x[axis];
    for (int d = axis + 1; d < x.rank(); ++d) inner_ *= x[d];
  }

  void run(KernelContext& ctx) const override {
    visit_float(ctx.inputs[0].dtype(), [&](auto t) {
      using T = decltype(t);
      if (inner_ == 1)
        rows<T>(ctx);
      else
        columns<T>(ctx);
    });
  }

  int in_place_input() const override { return 0; }

 private:
  static constexpr int64_t kColumnChunk = 512;
  static constexpr int64_t kRowBlock = 64;

  // 1 / norm from the sum of |x| (p = 1) or of x^2 (p = 2); 0 when the norm is 0.
  double inverse_norm(double sum) const {
    const double norm = p_ == 1 ? sum : std::sqrt(sum);
    return norm == 0.0 ? 0.0 : 1.0 / norm;
  }

  template <typename T>
  void rows(KernelContext& ctx) const {
    using C = ComputeOf<T>;
    const int64_t outer = outer_, n = n_;
    const T* x = elements<T>(ctx.inputs[0]);
    T* y = elements<T>(ctx.outputs[0]);
#pragma omp parallel for schedule(static) if (outer * n > kNormParallelWork)
    for (int64_t r = 0; r < outer; ++r) {
      const T* in = x + r * n;
      T* out = y + r * n;
      const double sum = p_ == 2 ? sum_squares(in, n) : sum_abs(in, n);
      const C inv = static_cast<C>(inverse_norm(sum));
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = T(static_cast<C>(in[i]) * inv);
    }
  }

  // The axis is strided: each task takes a chunk of the inner columns of one outer index and
  // walks the axis over it, so every inner loop is contiguous.
  template <typename T>
  void columns(KernelContext& ctx) const {
    using C = ComputeOf<T>;
    const int64_t outer = outer_, n = n_, inner = inner_;
    const int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
    const T* x = elements<T>(ctx.inputs[0]);
    T* y = elements<T>(ctx.outputs[0]);
#pragma omp parallel for schedule(static) if (outer * n * inner > kNormParallelWork)
    for (int64_t task = 0; task < outer * chunks; ++task) {
      const int64_t o = task / chunks;
      const int64_t begin = (task % chunks) * kColumnChunk;
      const int64_t len = std::min(kColumnChunk, inner - begin);
      // Sums in C over blocks of kRowBlock lines, added into double: vectorised, and about
      // float precision however long the axis.
      double acc[kColumnChunk];
      C part[kColumnChunk];
      C inv[kColumnChunk];
      std::fill(acc, acc + len, 0.0);
      const T* base = x + o * n * inner + begin;
      for (int64_t j0 = 0; j0 < n; j0 += kRowBlock) {
        const int64_t j1 = std::min(j0 + kRowBlock, n);
        std::fill(part, part + len, C(0));
        for (int64_t j = j0; j < j1; ++j) {
          const T* in = base + j * inner;
          if (p_ == 2) {
#pragma omp simd
            for (int64_t i = 0; i < len; ++i)
              part[i] += static_cast<C>(in[i]) * static_cast<C>(in[i]);
          } else {
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) part[i] += std::fabs(static_cast<C>(in[i]));
          }
        }
        for (int64_t i = 0; i < len; ++i) acc[i] += static_cast<double>(part[i]);
      }
      for (int64_t i = 0; i < len; ++i) inv[i] = static_cast<C>(inverse_norm(acc[i]));
      T* out_base = y + o * n * inner + begin;
      for (int64_t j = 0; j < n; ++j) {
        const T* in = base + j * inner;
        T* out = out_base + j * inner;
#pragma omp simd
        for (int64_t i = 0; i < len; ++i) out[i] = T(static_cast<C>(in[i]) * inv[i]);
      }
    }
  }

  int64_t p_;
  int64_t outer_ = 1, n_ = 1, inner_ = 1;
};

std::unique_ptr<Kernel> make_rms_norm(const NodeContext& ctx) {
  return std::make_unique<RmsNormKernel>(ctx);
}
std::unique_ptr<Kernel> make_group_norm(const NodeContext& ctx) {
  return std::make_unique<GroupNormKernel>(ctx);
}
std::unique_ptr<Kernel> make_lp_norm(const NodeContext& ctx) {
  return std::make_unique<LpNormKernel>(ctx);
}

std::string check_float(const NodeContext& ctx) {
  return require_cpu_float(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(RMSNormalization, &make_rms_norm, &check_float);
LUMEN_REGISTER_CPU_KERNEL(GroupNormalization, &make_group_norm, &check_float);
LUMEN_REGISTER_CPU_KERNEL(LpNormalization, &make_lp_norm, &check_float);

}  // namespace lumen::cpu
