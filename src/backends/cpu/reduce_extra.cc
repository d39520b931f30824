// CPU kernels of ReduceProd, ReduceSumSquare, ReduceL1 (float32, float64, int64, int32),
// ReduceLogSum, ReduceLogSumExp, ReduceL2 (float32, float64), CumSum (float32, float64, int64,
// int32), Hardmax (float32) and TopK (float32, int64, int32). ArgMin shares ArgMax's kernel in
// reduce.cc.
//
// The reductions use the plan of reduce_common.h: each element is mapped (square, abs, exp of
// x minus the output's max), combined (sum or product) in a wide accumulator, then finished (log,
// sqrt, + max). ReduceLogSumExp first runs a max reduction to get each output's shift.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"
#include "backends/cpu/reduce_common.h"

namespace lumen::cpu {
namespace {

template <typename T>
using WideAcc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// Integer accumulators wrap around (two's complement) instead of overflowing, as the element-wise
// ops do: the arithmetic is done in the unsigned type.
template <typename A>
A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename A>
A wrap_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

struct SumComb {
  template <typename A>
  static A init() {
    return A(0);
  }
  template <typename A>
  static A apply(A a, A b) {
    return wrap_add(a, b);
  }
};
struct ProdComb {
  template <typename A>
  static A init() {
    return A(1);
  }
  template <typename A>
  static A apply(A a, A b) {
    return wrap_mul(a, b);
  }
};

struct MapId {
  template <typename A, typename T>
  static A apply(T x, A) {
    return static_cast<A>(x);
  }
};
struct MapSquare {
  template <typename A, typename T>
  static A apply(T x, A) {
    return wrap_mul(static_cast<A>(x), static_cast<A>(x));
  }
};
struct MapAbs {
  template <typename A, typename T>
  static A apply(T x, A) {
    A v = static_cast<A>(x);
    return v < 0 ? wrap_mul(v, A(-1)) : v;
  }
};
struct MapExpShift {
  template <typename A, typename T>
  static A apply(T x, A shift) {
    return std::exp(static_cast<A>(x) - shift);
  }
};

enum class Finish { kNone, kLog, kSqrt, kLogShift };

// Reduces every output of `plan` to out[o] = Comb over its elements of Map(x, shift[o]).
template <typename Comb, typename Map, typename T, typename A>
void reduce_mapped(const ReducePlan& p, const T* x, const A* shift, A* out) {
  const bool parallel = p.in_count > kNormParallelWork;
  if (p.inner_reduced) {
    const int64_t row = p.inner;
    // Comb over Map of elements [l0, l0 + len) of every reduced row of the output whose kept
    // offset is `base`.
    auto reduce_part = [&](int64_t base, A s, int64_t l0, int64_t len) {
      Odometer red(p.red_sizes, p.red_strides, 0);
      A lanes[kLanes];
      for (int j = 0; j < kLanes; ++j) lanes[j] = Comb::template init<A>();
      A tail = Comb::template init<A>();
      for (int64_t r = 0; r < p.red_rows; ++r, red.next()) {
        const T* in = x + base + red.offset + l0;
        int64_t i = 0;
        for (; i + kLanes <= len; i += kLanes) {
#pragma omp simd
          for (int j = 0; j < kLanes; ++j)
            lanes[j] = Comb::apply(lanes[j], Map::template apply<A>(in[i + j], s));
        }
        for (; i < len; ++i) tail = Comb::apply(tail, Map::template apply<A>(in[i], s));
      }
      for (int j = 0; j < kLanes; ++j) tail = Comb::apply(tail, lanes[j]);
      return tail;
    };
    const int threads = parallel ? omp_get_max_threads() : 1;
    if (p.out_count >= threads || row < 2 * kMinPart) {
      parallel_ranges(p.out_count, parallel, [&](int64_t begin, int64_t end) {
        Odometer kept(p.kept_sizes, p.kept_strides, begin);
        for (int64_t o = begin; o < end; ++o, kept.next())
          out[o] = reduce_part(kept.offset, shift ? shift[o] : A(0), 0, row);
      });
      return;
    }
    // Few outputs over long rows: reduce parts of the rows in parallel, then combine the parts.
    const int64_t parts = std::min<int64_t>(static_cast<int64_t>(threads) * 2, row / kMinPart);
    const int64_t part_len = (row + parts - 1) / parts;
    std::vector<A> partial(static_cast<size_t>(p.out_count * parts));
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < p.out_count * parts; ++t) {
      const int64_t o = t / parts;
      const int64_t l0 = (t % parts) * part_len;
      const int64_t len = std::max<int64_t>(0, std::min(row, l0 + part_len) - l0);
      Odometer kept(p.kept_sizes, p.kept_strides, o);
      partial[t] = reduce_part(kept.offset, shift ? shift[o] : A(0), l0, len);
    }
    for (int64_t o = 0; o < p.out_count; ++o) {
      A acc = partial[o * parts];
      for (int64_t k = 1; k < parts; ++k) acc = Comb::apply(acc, partial[o * parts + k]);
      out[o] = acc;
    }
    return;
  }
  const int64_t inner = p.inner;
  const int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
  parallel_ranges(p.kept_rows * chunks, parallel, [&](int64_t begin, int64_t end) {
    Odometer kept(p.kept_sizes, p.kept_strides, begin / chunks);
    Odometer red(p.red_sizes, p.red_strides, 0);
    A acc[kColumnChunk];
    A s[kColumnChunk];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t k = t / chunks;
      const int64_t j0 = (t % chunks) * kColumnChunk;
      if (j0 == 0 && t != begin) kept.next();
      const int64_t len = std::min(kColumnChunk, inner - j0);
      for (int64_t j = 0; j < len; ++j) {
        acc[j] = Comb::template init<A>();
        s[j] = shift ? shift[k * inner + j0 + j] : A(0);
      }
      for (int64_t r = 0; r < p.red_rows; ++r, red.next()) {
        const T* in = x + kept.offset + red.offset + j0;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j)
          acc[j] = Comb::apply(acc[j], Map::template apply<A>(in[j], s[j]));
      }
      std::copy(acc, acc + len, out + k * inner + j0);
    }
  });
}

struct MaxComb {
  template <typename A>
  static A init() {
    return -std::numeric_limits<A>::infinity();
  }
  template <typename A>
  static A apply(A a, A b) {
    return ((b > a) | (b != b)) ? b : a;
  }
};

template <typename Comb, typename Map, Finish kFinish, typename T>
class ReduceExtraKernel final : public Kernel {
  using A = WideAcc<T>;

 public:
  explicit ReduceExtraKernel(ReducePlan plan) : plan_(std::move(plan)) {}

  void run(KernelContext& ctx) const override {
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    const ReducePlan& p = plan_;
    if (p.out_count == 0) return;
    std::vector<A> acc(static_cast<size_t>(p.out_count), Comb::template init<A>());
    std::vector<A> shift;
    if (p.in_count > 0) {
      if constexpr (kFinish == Finish::kLogShift) {
        shift.resize(acc.size());
        reduce_mapped<MaxComb, MapId, T, A>(p, x, nullptr, shift.data());
        // An infinite or NaN max cannot shift: use 0 so inf and NaN propagate through exp/log.
        for (A& s : shift)
          if (!std::isfinite(s)) s = A(0);
      }
      reduce_mapped<Comb, Map, T, A>(p, x, shift.empty() ? nullptr : shift.data(), acc.data());
    }
    for (int64_t o = 0; o < p.out_count; ++o) {
      A v = acc[o];
      if constexpr (kFinish == Finish::kLog) v = std::log(v);
      if constexpr (kFinish == Finish::kSqrt) v = std::sqrt(v);
      if constexpr (kFinish == Finish::kLogShift) v = std::log(v) + (shift.empty() ? 0 : shift[o]);
      y[o] = static_cast<T>(v);
    }
  }

 private:
  ReducePlan plan_;
};

class CopyInputKernel final : public Kernel {
 public:
  void run(KernelContext& ctx) const override {
    if (ctx.inputs[0].nbytes() > 0)
      std::memcpy(ctx.outputs[0].raw_data(), ctx.inputs[0].raw_data(), ctx.inputs[0].nbytes());
  }
};

template <typename Comb, typename Map, Finish kFinish, bool kInts>
std::unique_ptr<Kernel> make_reduce_extra(const NodeContext& ctx) {
  bool noop = false;
  std::vector<bool> reduced = reduced_dims(ctx, &noop);
  if (noop && kFinish == Finish::kNone && std::is_same_v<Map, MapId>)
    return std::make_unique<CopyInputKernel>();
  // With noop_with_empty_axes=1 and no axes the map and finish still apply element-wise: a plan
  // reducing nothing does exactly that.
  if (noop) reduced.assign(reduced.size(), false);
  ReducePlan plan = make_plan(ctx.input_shape(0), reduced);
  switch (ctx.input_dtype(0)) {
    case DType::kFloat32:
      return std::make_unique<ReduceExtraKernel<Comb, Map, kFinish, float>>(plan);
    case DType::kFloat64:
      return std::make_unique<ReduceExtraKernel<Comb, Map, kFinish, double>>(plan);
    case DType::kInt64:
      if constexpr (kInts)
        return std::make_unique<ReduceExtraKernel<Comb, Map, kFinish, int64_t>>(plan);
      break;
    case DType::kInt32:
      if constexpr (kInts)
        return std::make_unique<ReduceExtraKernel<Comb, Map, kFinish, int32_t>>(plan);
      break;
    default:
      break;
  }
  ctx.fail_unsupported(std::string("CPU: unsupported dtype ") + dtype_name(ctx.input_dtype(0)));
}

std::string check_float_int(const NodeContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kFloat32 || dt == DType::kInt64 || dt == DType::kInt32) return "";
  return std::string("input is ") + dtype_name(dt) + "; the CPU kernel takes float32, int64, int32";
}

std::string check_reduce_float_int(const NodeContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kInt64 || dt == DType::kInt32)
    return "";
  return std::string("input is ") + dtype_name(dt) +
         "; the CPU kernel takes float32, float64, int64, int32";
}

std::string check_reduce_float(const NodeContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kFloat32 || dt == DType::kFloat64) return "";
  return std::string("input is ") + dtype_name(dt) + "; the CPU kernel takes float32, float64";
}

std::string check_float(const NodeContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kFloat32) return "";
  return std::string("input is ") + dtype_name(dt) + "; the CPU kernel takes float32";
}

// [outer, n, inner] view of a tensor around one axis.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
  AxisView(const Shape& x, int axis) {
    for (int d = 0; d < axis; ++d) outer *= x.dims()[d];
    n = x.dims()[axis];
    for (int d = axis + 1; d < x.rank(); ++d) inner *= x.dims()[d];
  }
  int64_t count() const { return outer * n * inner; }
};

// CumSum along one axis: each [n, inner] slab is walked row by row (forward or reversed) with a
// running sum vectorised along the contiguous inner dim.
template <typename T>
class CumSumKernel final : public Kernel {
 public:
  CumSumKernel(const NodeContext& ctx, int axis)
      : view_(ctx.input_shape(0), axis),
        exclusive_(ctx.attr_int("exclusive", 0) == 1),
        reverse_(ctx.attr_int("reverse", 0) == 1) {}

  void run(KernelContext& ctx) const override {
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    const int64_t outer = view_.outer, n = view_.n, inner = view_.inner;
    if (view_.count() == 0) return;
    const bool parallel = view_.count() > kNormParallelWork;
    const int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < outer * chunks; ++t) {
      const int64_t o = t / chunks;
      const int64_t j0 = (t % chunks) * kColumnChunk;
      const int64_t len = std::min(kColumnChunk, inner - j0);
      T acc[kColumnChunk];
      std::fill(acc, acc + len, T(0));
      for (int64_t step = 0; step < n; ++step) {
        const int64_t r = reverse_ ? n - 1 - step : step;
        const T* in = x + (o * n + r) * inner + j0;
        T* out = y + (o * n + r) * inner + j0;
        if (exclusive_) {
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) {
            out[j] = acc[j];
            acc[j] = wrap_add(acc[j], in[j]);
          }
        } else {
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) {
            acc[j] = wrap_add(acc[j], in[j]);
            out[j] = acc[j];
          }
        }
      }
    }
  }

 private:
  AxisView view_;
  bool exclusive_;
  bool reverse_;
};

std::unique_ptr<Kernel> make_cumsum(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int axis = normalize_axis(ctx.input_ints(1, "axis")[0], x.rank());
  switch (ctx.input_dtype(0)) {
    case DType::kFloat32:
      return std::make_unique<CumSumKernel<float>>(ctx, axis);
    case DType::kFloat64:
      return std::make_unique<CumSumKernel<double>>(ctx, axis);
    case DType::kInt64:
      return std::make_unique<CumSumKernel<int64_t>>(ctx, axis);
    case DType::kInt32:
      return std::make_unique<CumSumKernel<int32_t>>(ctx, axis);
    default:
      ctx.fail_unsupported("CPU: unsupported dtype");
  }
}

std::string check_cumsum(const NodeContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kInt64 || dt == DType::kInt32)
    return "";
  return std::string("input is ") + dtype_name(dt) +
         "; the CPU kernel takes float32, float64, int64, int32";
}

// Hardmax: 1 at the first maximum along the axis, 0 elsewhere.
class HardmaxKernel final : public Kernel {
 public:
  explicit HardmaxKernel(const NodeContext& ctx)
      : view_(ctx.input_shape(0),
              normalize_axis(ctx.attr_int("axis", -1), ctx.input_shape(0).rank())) {}

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t outer = view_.outer, n = view_.n, inner = view_.inner;
    if (view_.count() == 0) return;
    std::fill(y, y + view_.count(), 0.0f);
    const bool parallel = view_.count() > kNormParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < outer * inner; ++t) {
      const int64_t o = t / inner, j = t % inner;
      const float* in = x + o * n * inner + j;
      int64_t best = 0;
      for (int64_t r = 1; r < n; ++r)
        if (in[r * inner] > in[best * inner]) best = r;
      y[o * n * inner + j + best * inner] = 1.0f;
    }
  }

 private:
  AxisView view_;
};

std::unique_ptr<Kernel> make_hardmax(const NodeContext& ctx) {
  return std::make_unique<HardmaxKernel>(ctx);
}

// TopK along one axis: per line, a partial sort of the indices. Values order with NaN above every
// number; ties keep the lower index first.
template <typename T>
class TopKKernel final : public Kernel {
 public:
  TopKKernel(const NodeContext& ctx, int axis, int64_t k)
      : view_(ctx.input_shape(0), axis), k_(k), largest_(ctx.attr_int("largest", 1) == 1) {}

  void run(KernelContext& ctx) const override {
    const T* x = ctx.inputs[0].data<T>();
    T* values = ctx.outputs[0].data<T>();
    int64_t* indices = ctx.outputs.size() > 1 && ctx.outputs[1].defined()
                           ? ctx.outputs[1].data<int64_t>()
                           : nullptr;
    const int64_t outer = view_.outer, n = view_.n, inner = view_.inner, k = k_;
    if (outer * inner * k == 0) return;
    const bool parallel = view_.count() > kNormParallelWork;
#pragma omp parallel if (parallel)
    {
      std::vector<int64_t> order(static_cast<size_t>(n));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < outer * inner; ++t) {
        const int64_t o = t / inner, j = t % inner;
        const T* in = x + o * n * inner + j;
        std::iota(order.begin(), order.end(), int64_t{0});
        auto before = [&](int64_t a, int64_t b) {
          const T va = in[a * inner], vb = in[b * inner];
          const bool a_lt_b = less(va, vb), b_lt_a = less(vb, va);
          if (a_lt_b == b_lt_a) return a < b;
          return largest_ ? b_lt_a : a_lt_b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        const int64_t base = o * k * inner + j;
        for (int64_t r = 0; r < k; ++r) {
          values[base + r * inner] = in[order[r] * inner];
          if (indices) indices[base + r * inner] = order[r];
        }
      }
    }
  }

 private:
  // a < b with NaN above every number (and NaNs equal to each other).
  static bool less(T a, T b) {
    if (is_nan(a)) return false;
    if (is_nan(b)) return true;
    return a < b;
  }

  AxisView view_;
  int64_t k_;
  bool largest_;
};

std::unique_ptr<Kernel> make_topk(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int axis = normalize_axis(ctx.attr_int("axis", -1), x.rank());
  int64_t k = ctx.input_ints(1, "K")[0];
  switch (ctx.input_dtype(0)) {
    case DType::kFloat32:
      return std::make_unique<TopKKernel<float>>(ctx, axis, k);
    case DType::kInt64:
      return std::make_unique<TopKKernel<int64_t>>(ctx, axis, k);
    case DType::kInt32:
      return std::make_unique<TopKKernel<int32_t>>(ctx, axis, k);
    default:
      ctx.fail_unsupported("CPU: unsupported dtype");
  }
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(ReduceProd, &make_reduce_extra<ProdComb, MapId, Finish::kNone, true>,
                          &check_reduce_float_int);
LUMEN_REGISTER_CPU_KERNEL(ReduceSumSquare,
                          &make_reduce_extra<SumComb, MapSquare, Finish::kNone, true>,
                          &check_reduce_float_int);
LUMEN_REGISTER_CPU_KERNEL(ReduceL1, &make_reduce_extra<SumComb, MapAbs, Finish::kNone, true>,
                          &check_reduce_float_int);
LUMEN_REGISTER_CPU_KERNEL(ReduceL2, &make_reduce_extra<SumComb, MapSquare, Finish::kSqrt, false>,
                          &check_reduce_float);
LUMEN_REGISTER_CPU_KERNEL(ReduceLogSum, &make_reduce_extra<SumComb, MapId, Finish::kLog, false>,
                          &check_reduce_float);
LUMEN_REGISTER_CPU_KERNEL(ReduceLogSumExp,
                          &make_reduce_extra<SumComb, MapExpShift, Finish::kLogShift, false>,
                          &check_reduce_float);
LUMEN_REGISTER_CPU_KERNEL(CumSum, &make_cumsum, &check_cumsum);
LUMEN_REGISTER_CPU_KERNEL(Hardmax, &make_hardmax, &check_float);
LUMEN_REGISTER_CPU_KERNEL(TopK, &make_topk, &check_float_int);

}  // namespace lumen::cpu
