// CPU kernels of ReduceSum/Mean/Max/Min (float32; Sum/Max/Min also int64 and int32) and ArgMax
// (float32, int64, int32 in; int64 out).
//
// A reduction is planned once: size-1 dims are dropped and neighbouring dims that are both
// reduced or both kept are merged, leaving groups. The innermost group is contiguous:
//  - innermost reduced (row reduction): every output reduces contiguous rows with vectorised
//    lane accumulators, one row per combination of the other reduced groups;
//  - innermost kept (column reduction): every output row accumulates whole input rows
//    element-wise, vectorised along the contiguous kept dim.
// Other kept / reduced groups are walked with odometers, so any set of axes works. OpenMP splits
// outputs (and, for few outputs over long rows, the rows themselves).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"

namespace lumen::cpu {
namespace {

// Lanes of independent accumulators in a row reduction (two AVX2 vectors of floats).
constexpr int kLanes = 16;
// Kept elements accumulated together in a column reduction.
constexpr int64_t kColumnChunk = 512;
// Shortest piece a long row is split into when there are fewer outputs than threads.
constexpr int64_t kMinPart = 8192;

template <typename T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

// Splits [0, count) into one contiguous range per OpenMP thread and calls fn(begin, end) on each.
template <typename F>
void parallel_ranges(int64_t count, bool parallel, F&& fn) {
  if (!parallel) {
    fn(int64_t{0}, count);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t id = omp_get_thread_num();
    const int64_t begin = count * id / threads;
    const int64_t end = count * (id + 1) / threads;
    if (begin < end) fn(begin, end);
  }
}

// Reduction ops. Lane<T> is the accumulator inside a row, Acc<T> the one across rows and output
// elements (wider for sums so long reductions keep precision and integers do not wrap early).
struct SumOp {
  template <typename T>
  using Lane = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
  template <typename T>
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  template <typename A>
  static A init() { return A(0); }
  template <typename A, typename B>
  static A apply(A a, B x) { return a + static_cast<A>(x); }
};

struct MaxOp {
  template <typename T>
  using Lane = T;
  template <typename T>
  using Acc = T;
  template <typename A>
  static A init() {
    if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::lowest();
  }
  // NaN wins, as in NumPy: once a NaN is taken nothing replaces it.
  template <typename A, typename B>
  static A apply(A a, B x) { return ((x > a) | is_nan(x)) ? static_cast<A>(x) : a; }
};

struct MinOp {
  template <typename T>
  using Lane = T;
  template <typename T>
  using Acc = T;
  template <typename A>
  static A init() {
    if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
    else return std::numeric_limits<A>::max();
  }
  template <typename A, typename B>
  static A apply(A a, B x) { return ((x < a) | is_nan(x)) ? static_cast<A>(x) : a; }
};

// Reduces n contiguous elements with kLanes independent accumulators (vectorises), in blocks
// whose lane results are folded into Acc.
template <typename Op, typename T>
typename Op::template Acc<T> reduce_row(const T* p, int64_t n) {
  using Lane = typename Op::template Lane<T>;
  using Acc = typename Op::template Acc<T>;
  constexpr int64_t kBlock = 2048;
  Acc total = Op::template init<Acc>();
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    Lane lanes[kLanes];
    for (int j = 0; j < kLanes; ++j) lanes[j] = Op::template init<Lane>();
    int64_t i = b;
    for (; i + kLanes <= e; i += kLanes) {
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) lanes[j] = Op::apply(lanes[j], p[i + j]);
    }
    for (int j = 0; i < e; ++i, ++j) lanes[j] = Op::apply(lanes[j], p[i]);
    for (int j = 0; j < kLanes; ++j) total = Op::apply(total, lanes[j]);
  }
  return total;
}

// Walks a multi-index over groups (sizes, input strides), tracking the input offset.
struct Odometer {
  const std::vector<int64_t>* sizes;
  const std::vector<int64_t>* strides;
  std::vector<int64_t> idx;
  int64_t offset = 0;

  Odometer(const std::vector<int64_t>& s, const std::vector<int64_t>& st, int64_t flat)
      : sizes(&s), strides(&st), idx(s.size(), 0) {
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      idx[d] = flat % s[d];
      flat /= s[d];
      offset += idx[d] * st[d];
    }
  }
  void next() {
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
      offset += (*strides)[d];
      if (++idx[d] < (*sizes)[d]) return;
      offset -= idx[d] * (*strides)[d];
      idx[d] = 0;
    }
  }
};

struct ReducePlan {
  std::vector<int64_t> kept_sizes, kept_strides;  // kept groups, but not a kept innermost one
  std::vector<int64_t> red_sizes, red_strides;    // reduced groups, but not a reduced innermost
  int64_t inner = 1;                              // size of the innermost (contiguous) group
  bool inner_reduced = true;
  int64_t in_count = 0;
  int64_t out_count = 0;
  int64_t reduce_count = 1;  // input elements per output element
  int64_t kept_rows = 1;     // product of kept_sizes
  int64_t red_rows = 1;      // product of red_sizes
};

ReducePlan make_plan(const Shape& x, const std::vector<bool>& reduced) {
  ReducePlan plan;
  plan.in_count = x.numel();
  std::vector<int64_t> strides = x.strides();
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Group> groups;
  for (int d = 0; d < x.rank(); ++d) {
    int64_t size = x.dims()[d];
    if (reduced[d]) plan.reduce_count *= size;
    if (size == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[d]) {
      groups.back().size *= size;
      groups.back().stride = strides[d];
    } else {
      groups.push_back({size, strides[d], static_cast<bool>(reduced[d])});
    }
  }
  plan.out_count = plan.reduce_count == 0 ? 0 : plan.in_count / plan.reduce_count;
  if (plan.reduce_count == 0) {
    plan.out_count = 1;
    for (int d = 0; d < x.rank(); ++d)
      if (!reduced[d]) plan.out_count *= x.dims()[d];
  }
  if (groups.empty()) groups.push_back({1, 1, true});
  plan.inner = groups.back().size;
  plan.inner_reduced = groups.back().reduced;
  groups.pop_back();
  for (const Group& g : groups) {
    if (g.reduced) {
      plan.red_sizes.push_back(g.size);
      plan.red_strides.push_back(g.stride);
      plan.red_rows *= g.size;
    } else {
      plan.kept_sizes.push_back(g.size);
      plan.kept_strides.push_back(g.stride);
      plan.kept_rows *= g.size;
    }
  }
  return plan;
}

template <typename Op, typename T>
class ReduceKernel final : public Kernel {
  using Acc = typename Op::template Acc<T>;

 public:
  ReduceKernel(ReducePlan plan, bool mean) : plan_(std::move(plan)), mean_(mean) {}

  void run(KernelContext& ctx) const override {
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    const ReducePlan& p = plan_;
    if (p.out_count == 0) return;
    if (p.in_count == 0) {
      // Reducing over an empty dim: the sum of nothing is 0, the mean NaN (max/min were refused
      // when the graph was built).
      T fill = mean_ ? std::numeric_limits<T>::quiet_NaN() : T(0);
      std::fill(y, y + p.out_count, fill);
      return;
    }
    if (p.inner_reduced) {
      run_rows(x, y);
    } else {
      run_columns(x, y);
    }
  }

 private:
  T finish(Acc a) const {
    if (mean_) return static_cast<T>(a / static_cast<Acc>(plan_.reduce_count));
    return static_cast<T>(a);
  }

  // Innermost group reduced: output o reduces red_rows contiguous rows of `inner` elements.
  void run_rows(const T* x, T* y) const {
    const ReducePlan& p = plan_;
    const int64_t out_count = p.out_count;
    const int64_t row = p.inner;
    const bool parallel = p.in_count > kNormParallelWork;
    const int threads = parallel ? omp_get_max_threads() : 1;
    if (out_count >= threads || row < 2 * kMinPart) {
      parallel_ranges(out_count, parallel, [&](int64_t begin, int64_t end) {
        Odometer kept(p.kept_sizes, p.kept_strides, begin);
        Odometer red(p.red_sizes, p.red_strides, 0);
        for (int64_t o = begin; o < end; ++o, kept.next()) {
          Acc acc = Op::template init<Acc>();
          for (int64_t r = 0; r < p.red_rows; ++r, red.next())
            acc = Op::apply(acc, reduce_row<Op, T>(x + kept.offset + red.offset, row));
          y[o] = finish(acc);
        }
      });
      return;
    }
    // Few outputs over long rows: split each row into parts and reduce the parts in parallel.
    const int64_t parts = std::min<int64_t>(static_cast<int64_t>(threads) * 2, row / kMinPart);
    const int64_t part_len = (row + parts - 1) / parts;
    std::vector<Acc> partial(static_cast<size_t>(out_count * parts));
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < out_count * parts; ++t) {
      const int64_t l0 = (t % parts) * part_len;
      const int64_t len = std::max<int64_t>(0, std::min(row, l0 + part_len) - l0);
      Odometer kept(p.kept_sizes, p.kept_strides, t / parts);
      Odometer red(p.red_sizes, p.red_strides, 0);
      Acc acc = Op::template init<Acc>();
      for (int64_t r = 0; r < p.red_rows; ++r, red.next())
        acc = Op::apply(acc, reduce_row<Op, T>(x + kept.offset + red.offset + l0, len));
      partial[t] = acc;
    }
    for (int64_t o = 0; o < out_count; ++o) {
      Acc acc = partial[o * parts];
      for (int64_t k = 1; k < parts; ++k) acc = Op::apply(acc, partial[o * parts + k]);
      y[o] = finish(acc);
    }
  }

  // Innermost group kept: output row k (of `inner` elements) accumulates every reduced input row,
  // kColumnChunk elements at a time.
  void run_columns(const T* x, T* y) const {
    const ReducePlan& p = plan_;
    const int64_t inner = p.inner;
    const int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
    const bool parallel = p.in_count > kNormParallelWork;
    parallel_ranges(p.kept_rows * chunks, parallel, [&](int64_t begin, int64_t end) {
      Odometer kept(p.kept_sizes, p.kept_strides, begin / chunks);
      Odometer red(p.red_sizes, p.red_strides, 0);
      Acc acc[kColumnChunk];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t k = t / chunks;
        const int64_t j0 = (t % chunks) * kColumnChunk;
        if (j0 == 0 && t != begin) kept.next();
        const int64_t len = std::min(kColumnChunk, inner - j0);
        for (int64_t j = 0; j < len; ++j) acc[j] = Op::template init<Acc>();
        for (int64_t r = 0; r < p.red_rows; ++r, red.next()) {
          const T* in = x + kept.offset + red.offset + j0;
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) acc[j] = Op::apply(acc[j], in[j]);
        }
        T* out = y + k * inner + j0;
        for (int64_t j = 0; j < len; ++j) out[j] = finish(acc[j]);
      }
    });
  }

  ReducePlan plan_;
  bool mean_;
};

// ReduceX with noop_with_empty_axes=1 and no axes: a copy.
class CopyKernel final : public Kernel {
 public:
  void run(KernelContext& ctx) const override {
    if (ctx.inputs[0].nbytes() > 0)
      std::memcpy(ctx.outputs[0].raw_data(), ctx.inputs[0].raw_data(), ctx.inputs[0].nbytes());
  }
};

// The reduced dims of a Reduce node (the schema has checked them); empty when it is a no-op.
std::vector<bool> reduced_dims(const NodeContext& ctx, bool* noop) {
  const int rank = ctx.input_shape(0).rank();
  std::vector<int64_t> axes =
      ctx.has_input(1) ? ctx.input_ints(1, "axes") : ctx.attr_ints("axes", {});
  *noop = axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) == 1;
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[normalize_axis(a, rank)] = true;
  return reduced;
}

template <typename Op>
std::unique_ptr<Kernel> make_reduce_with(const NodeContext& ctx, bool mean) {
  bool noop = false;
  std::vector<bool> reduced = reduced_dims(ctx, &noop);
  if (noop) return std::make_unique<CopyKernel>();
  ReducePlan plan = make_plan(ctx.input_shape(0), reduced);
  switch (ctx.input_dtype(0)) {
    case DType::kFloat32: return std::make_unique<ReduceKernel<Op, float>>(plan, mean);
    case DType::kInt64: return std::make_unique<ReduceKernel<Op, int64_t>>(plan, mean);
    case DType::kInt32: return std::make_unique<ReduceKernel<Op, int32_t>>(plan, mean);
    default: ctx.fail_unsupported("CPU: unsupported dtype");
  }
}

std::unique_ptr<Kernel> make_reduce_sum(const NodeContext& ctx) {
  return make_reduce_with<SumOp>(ctx, false);
}
std::unique_ptr<Kernel> make_reduce_mean(const NodeContext& ctx) {
  return make_reduce_with<SumOp>(ctx, true);
}
std::unique_ptr<Kernel> make_reduce_max(const NodeContext& ctx) {
  return make_reduce_with<MaxOp>(ctx, false);
}
std::unique_ptr<Kernel> make_reduce_min(const NodeContext& ctx) {
  return make_reduce_with<MinOp>(ctx, false);
}

std::string check_reduce_ints(const NodeContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kFloat32 || dt == DType::kInt64 || dt == DType::kInt32) return "";
  return std::string("input is ") + dtype_name(dt) + "; the CPU kernel takes float32, int64, int32";
}

std::string check_reduce_mean(const NodeContext& ctx) {
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kFloat32) return "";
  return std::string("input is ") + dtype_name(dt) + "; the CPU kernel takes float32";
}

// ArgMax over one axis of [outer, n, inner]. NaN counts as the largest value (NumPy); ties take
// the first index, or the last with select_last_index=1.
template <typename T>
class ArgMaxKernel final : public Kernel {
 public:
  explicit ArgMaxKernel(const NodeContext& ctx)
      : last_(ctx.attr_int("select_last_index", 0) == 1) {
    const Shape& x = ctx.input_shape(0);
    int axis = normalize_axis(ctx.attr_int("axis", 0), x.rank());
    for (int d = 0; d < axis; ++d) outer_ *= x.dims()[d];
    n_ = x.dims()[axis];
    for (int d = axis + 1; d < x.rank(); ++d) inner_ *= x.dims()[d];
  }

  void run(KernelContext& ctx) const override {
    if (last_) {
      run_impl<true>(ctx);
    } else {
      run_impl<false>(ctx);
    }
  }

 private:
  // Whether v replaces the current best b. Branch-free (every comparison always evaluated) so the
  // column loop vectorises.
  template <bool kLast>
  static bool better(T v, T b) {
    const bool greater = kLast ? v >= b : v > b;
    if constexpr (std::is_floating_point_v<T>) {
      const bool v_nan = is_nan(v);
      const bool b_nan = is_nan(b);
      return (greater & !b_nan) | (v_nan & (!b_nan | kLast));
    } else {
      return greater;
    }
  }

  template <bool kLast>
  void run_impl(KernelContext& ctx) const {
    const T* x = ctx.inputs[0].data<T>();
    int64_t* y = ctx.outputs[0].data<int64_t>();
    const int64_t outer = outer_, n = n_, inner = inner_;
    if (outer * n * inner == 0) return;
    const bool parallel = outer * n * inner > kNormParallelWork;
    if (inner == 1) {
      // Contiguous rows: a vectorised max, then the first (or last) position holding it.
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t o = 0; o < outer; ++o) {
        const T* row = x + o * n;
        const T m = reduce_row<MaxOp, T>(row, n);
        // m is in the row (or is NaN and a NaN is), so these scans stop inside it.
        auto hit = [&](int64_t i) { return is_nan(m) ? is_nan(row[i]) : row[i] == m; };
        int64_t at = kLast ? n - 1 : 0;
        while (!hit(at)) at += kLast ? -1 : 1;
        y[o] = at;
      }
      return;
    }
    const int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < outer * chunks; ++t) {
      const int64_t o = t / chunks;
      const int64_t j0 = (t % chunks) * kColumnChunk;
      const int64_t len = std::min(kColumnChunk, inner - j0);
      const T* base = x + o * n * inner + j0;
      T best[kColumnChunk];
      int64_t index[kColumnChunk];
      for (int64_t j = 0; j < len; ++j) {
        best[j] = base[j];
        index[j] = 0;
      }
      for (int64_t r = 1; r < n; ++r) {
        const T* row = base + r * inner;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) {
          bool take = better<kLast>(row[j], best[j]);
          best[j] = take ? row[j] : best[j];
          index[j] = take ? r : index[j];
        }
      }
      std::copy(index, index + len, y + o * inner + j0);
    }
  }

  bool last_;
  int64_t outer_ = 1;
  int64_t n_ = 1;
  int64_t inner_ = 1;
};

std::unique_ptr<Kernel> make_argmax(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kFloat32: return std::make_unique<ArgMaxKernel<float>>(ctx);
    case DType::kInt64: return std::make_unique<ArgMaxKernel<int64_t>>(ctx);
    case DType::kInt32: return std::make_unique<ArgMaxKernel<int32_t>>(ctx);
    default: ctx.fail_unsupported("CPU: unsupported dtype");
  }
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(ReduceSum, &make_reduce_sum, &check_reduce_ints);
LUMEN_REGISTER_CPU_KERNEL(ReduceMean, &make_reduce_mean, &check_reduce_mean);
LUMEN_REGISTER_CPU_KERNEL(ReduceMax, &make_reduce_max, &check_reduce_ints);
LUMEN_REGISTER_CPU_KERNEL(ReduceMin, &make_reduce_min, &check_reduce_ints);
LUMEN_REGISTER_CPU_KERNEL(ArgMax, &make_argmax, &check_reduce_ints);

}  // namespace lumen::cpu
