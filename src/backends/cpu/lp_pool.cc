// CPU kernels of LpPool (1-D to 3-D windows with strides, dilations, padding and ceil_mode) and
// GlobalLpPool, for float32, float64, float16 and bfloat16: y = (sum over the window of
// |x|^p)^(1/p), padding counting as zeros. LpPool first writes |x|^p of the whole input once (so
// the power is not recomputed for every window that covers an element), then sums windows row by
// row as the direct pooling kernel does (output rows over contiguous input rows), then takes the
// p-th root. Sums are in float32 for 16-bit and float32 data, double for float64.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/float_types.h"
#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 15;

// How |v|^p is computed: 1 and 2 exactly, other whole p up to kMaxWholePower by repeated
// multiplication (several times faster than std::pow, and vectorisable), any other p by std::pow.
enum class PowerKind { kOne, kTwo, kWhole, kAny };
constexpr float kMaxWholePower = 16.0f;

PowerKind power_kind(float p) {
  if (p == 1.0f) return PowerKind::kOne;
  if (p == 2.0f) return PowerKind::kTwo;
  if (p == std::floor(p) && p <= kMaxWholePower) return PowerKind::kWhole;
  return PowerKind::kAny;
}

// t[i] = |x[i]|^p for n values, one loop per kind so that each vectorises.
template <typename T, typename C>
void power_row(const T* x, C* t, int64_t n, C p, PowerKind kind, int whole) {
  switch (kind) {
    case PowerKind::kOne:
      for (int64_t i = 0; i < n; ++i) t[i] = std::fabs(static_cast<C>(x[i]));
      break;
    case PowerKind::kTwo:
      for (int64_t i = 0; i < n; ++i) t[i] = static_cast<C>(x[i]) * static_cast<C>(x[i]);
      break;
    case PowerKind::kWhole:
      for (int64_t i = 0; i < n; ++i) {
        const C a = std::fabs(static_cast<C>(x[i]));
        C r = a;
        for (int k = 1; k < whole; ++k) r *= a;
        t[i] = r;
      }
      break;
    default:
      for (int64_t i = 0; i < n; ++i) t[i] = std::pow(std::fabs(static_cast<C>(x[i])), p);
  }
}

// s^(1/p).
template <typename C>
inline C root_of(C s, C p, PowerKind kind) {
  return kind == PowerKind::kOne   ? s
         : kind == PowerKind::kTwo ? std::sqrt(s)
                                   : std::pow(s, C(1) / p);
}

// One spatial axis of a window; missing leading axes (1-D, 2-D) are size-1 axes.
struct Axis {
  int64_t in = 1, out = 1, k = 1, s = 1, d = 1, pad_begin = 0;
};

// The outputs o in [lo, hi) for which o * s + off lies in [0, n).
inline void valid_range(int64_t off, int64_t s, int64_t n, int64_t out, int64_t* lo, int64_t* hi) {
  *lo = off >= 0 ? 0 : (-off + s - 1) / s;
  *hi = n - 1 - off < 0 ? 0 : std::min(out, (n - 1 - off) / s + 1);
  *lo = std::min(*lo, *hi);
}

class LpPoolKernel final : public Kernel {
 public:
  explicit LpPoolKernel(const NodeContext& ctx) : p_(ctx.attr_float("p", 2.0f)) {
    const Shape& x = ctx.input_shape(0);
    ConvGeometry g =
        window_geometry(ctx, x, ctx.attr_ints("kernel_shape"), ctx.attr_int("ceil_mode", 0) != 0);
    planes_ = x[0] * x[1];
    for (int i = 0; i < g.spatial; ++i)
      axes_[3 - g.spatial + i] = {g.in[i],      g.out[i],       g.kernel[i],
                                  g.strides[i], g.dilations[i], g.pad_begin[i]};
  }

  void run(KernelContext& ctx) const override {
    visit_float(ctx.inputs[0].dtype(), [&](auto t) { apply<decltype(t)>(ctx); });
  }

 private:
  template <typename T>
  void apply(KernelContext& ctx) const {
    using C = ComputeOf<T>;
    const Axis ad = axes_[0], ah = axes_[1], aw = axes_[2];
    const int64_t in_n = ctx.inputs[0].numel();
    const int64_t rows = planes_ * ad.out * ah.out;
    if (rows * aw.out == 0) return;
    const T* x = elements<T>(ctx.inputs[0]);
    T* y = elements<T>(ctx.outputs[0]);
    const C p = static_cast<C>(p_);
    const PowerKind kind = power_kind(p_);
    const int whole = static_cast<int>(p_);
    std::vector<C> pw(static_cast<size_t>(in_n));
    C* t = pw.data();
    parallel_chunks(in_n, [&](int64_t begin, int64_t end) {
      power_row(x + begin, t + begin, end - begin, p, kind, whole);
    });
    const int64_t work = rows * aw.out * ad.k * ah.k * aw.k;
#pragma omp parallel if (work > kParallelWork)
    {
      std::vector<C> acc(static_cast<size_t>(aw.out));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t oh = r % ah.out, od = (r / ah.out) % ad.out, plane = r / (ah.out * ad.out);
        std::fill(acc.begin(), acc.end(), C(0));
        for (int64_t kd = 0; kd < ad.k; ++kd) {
          const int64_t id = od * ad.s - ad.pad_begin + kd * ad.d;
          if (id < 0 || id >= ad.in) continue;
          for (int64_t kh = 0; kh < ah.k; ++kh) {
            const int64_t ih = oh * ah.s - ah.pad_begin + kh * ah.d;
            if (ih < 0 || ih >= ah.in) continue;
            const C* in = t + ((plane * ad.in + id) * ah.in + ih) * aw.in;
            for (int64_t kw = 0; kw < aw.k; ++kw) {
              const int64_t off = kw * aw.d - aw.pad_begin;
              int64_t lo = 0, hi = 0;
              valid_range(off, aw.s, aw.in, aw.out, &lo, &hi);
              if (aw.s == 1) {
                for (int64_t o = lo; o < hi; ++o) acc[o] += in[o + off];
              } else {
                for (int64_t o = lo; o < hi; ++o) acc[o] += in[o * aw.s + off];
              }
            }
          }
        }
        T* out = y + r * aw.out;
        for (int64_t o = 0; o < aw.out; ++o) out[o] = T(root_of(acc[o], p, kind));
      }
    }
  }

  float p_;
  int64_t planes_ = 1;
  Axis axes_[3];
};

class GlobalLpPoolKernel final : public Kernel {
 public:
  explicit GlobalLpPoolKernel(const NodeContext& ctx) : p_(ctx.attr_float("p", 2.0f)) {
    const Shape& x = ctx.input_shape(0);
    rows_ = x[0] * x[1];
    for (int d = 2; d < x.rank(); ++d) n_ *= x[d];
  }

  void run(KernelContext& ctx) const override {
    visit_float(ctx.inputs[0].dtype(), [&](auto t) { apply<decltype(t)>(ctx); });
  }

 private:
  template <typename T>
  void apply(KernelContext& ctx) const {
    using C = ComputeOf<T>;
    const int64_t rows = rows_, n = n_;
    const T* x = elements<T>(ctx.inputs[0]);
    T* y = elements<T>(ctx.outputs[0]);
    const C p = static_cast<C>(p_);
    const PowerKind kind = power_kind(p_);
    const int whole = static_cast<int>(p_);
#pragma omp parallel for schedule(static) if (rows * n > kParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
      const T* in = x + r * n;
      double sum = 0.0;
      constexpr int64_t kBlock = 256;
      C t[kBlock];
      for (int64_t b = 0; b < n; b += kBlock) {
        const int64_t len = std::min(kBlock, n - b);
        power_row(in + b, t, len, p, kind, whole);
        C s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < len; ++i) s += t[i];
        sum += static_cast<double>(s);
      }
      y[r] = T(root_of(static_cast<C>(sum), p, kind));
    }
  }

  float p_;
  int64_t rows_ = 1, n_ = 1;
};

std::unique_ptr<Kernel> make_lp_pool(const NodeContext& ctx) {
  return std::make_unique<LpPoolKernel>(ctx);
}
std::unique_ptr<Kernel> make_global_lp_pool(const NodeContext& ctx) {
  return std::make_unique<GlobalLpPoolKernel>(ctx);
}

std::string check_float(const NodeContext& ctx) {
  return require_cpu_float(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(LpPool, &make_lp_pool, &check_float);
LUMEN_REGISTER_CPU_KERNEL(GlobalLpPool, &make_global_lp_pool, &check_float);

}  // namespace lumen::cpu
