// CPU kernels of ReduceSum/Mean/Max/Min (float32; Sum/Max/Min also int64 and int32), ArgMax and
// ArgMin (float32, int64, int32 in; int64 out).
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
#include "backends/cpu/reduce_common.h"

namespace lumen::cpu {
namespace {

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
      // Reducing over an empty dim: the sum of nothing is 0, the mean NaN, the maximum -inf (or
      // the type's lowest) and the minimum +inf (or its highest): the reduction's start value.
      T fill = mean_ ? std::numeric_limits<T>::quiet_NaN() : finish(Op::template init<Acc>());
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
  // kColumnChunk elements at a time. With fewer output rows than threads (a global pool of a
  // channels-last image at batch 1) the reduced rows are split into parts instead, one run of
  // them per thread over every column, reduced in parallel and then combined: each thread then
  // reads the pixels the convolution before it wrote on that thread (in its core's cache), and
  // the threads share the work evenly whatever the channel count. EfficientNet-B0's 17 pools,
  // timed in the model (`lumen run --trace`) on 2 Zen 5 cores: 354-366 -> 290-295 us in all
  // (14x14x672: 41-43 -> 24-25 us).
  void run_columns(const T* x, T* y) const {
    const ReducePlan& p = plan_;
    const int64_t inner = p.inner;
    const int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
    const int64_t tasks = p.kept_rows * chunks;
    const bool parallel = p.in_count > kNormParallelWork;
    const int64_t threads = parallel ? omp_get_max_threads() : 1;
    // One part per thread, each at least kMinPartRows rows (so never below one part).
    const int64_t parts =
        p.kept_rows >= threads
            ? 1
            : std::max<int64_t>(1, std::min<int64_t>(threads, p.red_rows / kMinPartRows));
    if (parts == 1) {
      parallel_ranges(tasks, parallel, [&](int64_t begin, int64_t end) {
        Acc acc[kColumnChunk];
        for (int64_t t = begin; t < end; ++t) {
          const int64_t k = t / chunks, j0 = (t % chunks) * kColumnChunk;
          const int64_t len = std::min(kColumnChunk, inner - j0);
          column_part(x, k, j0, len, 0, p.red_rows, acc);
          for (int64_t j = 0; j < len; ++j) y[k * inner + j0 + j] = finish(acc[j]);
        }
      });
      return;
    }
    thread_local std::vector<Acc> partial;
    partial.resize(static_cast<size_t>(tasks * parts * kColumnChunk));
    Acc* parts_acc = partial.data();
    // Part-major, so that the static schedule gives each thread whole parts (runs of rows).
#pragma omp parallel for schedule(static)
    for (int64_t u = 0; u < tasks * parts; ++u) {
      const int64_t part = u / tasks, task = u % tasks;
      const int64_t k = task / chunks, j0 = (task % chunks) * kColumnChunk;
      column_part(x, k, j0, std::min(kColumnChunk, inner - j0), part * p.red_rows / parts,
                  (part + 1) * p.red_rows / parts,
                  parts_acc + (task * parts + part) * kColumnChunk);
    }
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t k = task / chunks, j0 = (task % chunks) * kColumnChunk;
      const int64_t len = std::min(kColumnChunk, inner - j0);
      const Acc* first = parts_acc + task * parts * kColumnChunk;
      for (int64_t j = 0; j < len; ++j) {
        Acc acc = first[j];
        for (int64_t q = 1; q < parts; ++q) acc = Op::apply(acc, first[q * kColumnChunk + j]);
        y[k * inner + j0 + j] = finish(acc);
      }
    }
  }

  // acc[0, len) = the reduction of input rows [r0, r1) of output row k, columns j0 .. j0 + len:
  // Lane accumulators (float for float sums, vectorised) over blocks of kRowBlock rows, folded
  // into Acc between blocks, as reduce_row does along a row.
  void column_part(const T* x, int64_t k, int64_t j0, int64_t len, int64_t r0, int64_t r1,
                   Acc* acc) const {
    using Lane = typename Op::template Lane<T>;
    const ReducePlan& p = plan_;
    Odometer kept(p.kept_sizes, p.kept_strides, k);
    Odometer red(p.red_sizes, p.red_strides, r0);
    Lane lane[kColumnChunk];
    for (int64_t j = 0; j < len; ++j) acc[j] = Op::template init<Acc>();
    for (int64_t b = r0; b < r1; b += kRowBlock) {
      for (int64_t j = 0; j < len; ++j) lane[j] = Op::template init<Lane>();
      for (int64_t r = b; r < std::min(r1, b + kRowBlock); ++r, red.next()) {
        const T* in = x + kept.offset + red.offset + j0;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) lane[j] = Op::apply(lane[j], in[j]);
      }
      for (int64_t j = 0; j < len; ++j) acc[j] = Op::apply(acc[j], lane[j]);
    }
  }

  static constexpr int64_t kRowBlock = 64;
  // Fewest reduced rows in a part of a column reduction.
  static constexpr int64_t kMinPartRows = 16;

  ReducePlan plan_;
  bool mean_;
};

template <typename Op>
std::unique_ptr<Kernel> make_reduce_with(const NodeContext& ctx, bool mean) {
  bool noop = false;
  std::vector<bool> reduced = reduced_dims(ctx, &noop);
  if (noop) return std::make_unique<CopyKernel>();
  ReducePlan plan = make_plan(ctx.input_shape(0), reduced);
  switch (ctx.input_dtype(0)) {
    case DType::kFloat32:
      return std::make_unique<ReduceKernel<Op, float>>(plan, mean);
    case DType::kInt64:
      return std::make_unique<ReduceKernel<Op, int64_t>>(plan, mean);
    case DType::kInt32:
      return std::make_unique<ReduceKernel<Op, int32_t>>(plan, mean);
    default:
      ctx.fail_unsupported("CPU: unsupported dtype");
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

// ArgMax (kMin false) or ArgMin (kMin true) over one axis of [outer, n, inner]. NaN counts as the
// largest value for ArgMax and the smallest for ArgMin (NumPy); ties take the first index, or the
// last with select_last_index=1.
template <typename T, bool kMin>
class ArgExtremumKernel final : public Kernel {
 public:
  explicit ArgExtremumKernel(const NodeContext& ctx)
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
    const bool wins = kMin ? (kLast ? v <= b : v < b) : (kLast ? v >= b : v > b);
    if constexpr (std::is_floating_point_v<T>) {
      const bool v_nan = is_nan(v);
      const bool b_nan = is_nan(b);
      return (wins & !b_nan) | (v_nan & (!b_nan | kLast));
    } else {
      return wins;
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
      // Contiguous rows: a vectorised max (min), then the first (or last) position holding it.
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t o = 0; o < outer; ++o) {
        const T* row = x + o * n;
        const T m = reduce_row<std::conditional_t<kMin, MinOp, MaxOp>, T>(row, n);
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

template <bool kMin>
std::unique_ptr<Kernel> make_arg_extremum(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kFloat32:
      return std::make_unique<ArgExtremumKernel<float, kMin>>(ctx);
    case DType::kInt64:
      return std::make_unique<ArgExtremumKernel<int64_t, kMin>>(ctx);
    case DType::kInt32:
      return std::make_unique<ArgExtremumKernel<int32_t, kMin>>(ctx);
    default:
      ctx.fail_unsupported("CPU: unsupported dtype");
  }
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(ReduceSum, &make_reduce_sum, &check_reduce_ints);
LUMEN_REGISTER_CPU_KERNEL(ReduceMean, &make_reduce_mean, &check_reduce_mean);
LUMEN_REGISTER_CPU_KERNEL(ReduceMax, &make_reduce_max, &check_reduce_ints);
LUMEN_REGISTER_CPU_KERNEL(ReduceMin, &make_reduce_min, &check_reduce_ints);
LUMEN_REGISTER_CPU_KERNEL(ArgMax, &make_arg_extremum<false>, &check_reduce_ints);
LUMEN_REGISTER_CPU_KERNEL(ArgMin, &make_arg_extremum<true>, &check_reduce_ints);

}  // namespace lumen::cpu
