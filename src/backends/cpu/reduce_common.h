// Machinery shared by the CPU reduction kernels (reduce.cc, reduce_extra.cc): accumulator ops,
// vectorised row reduction, the reduction plan (kept / reduced dim groups), odometers over
// groups, OpenMP range splitting and the parsing of a Reduce node's axes.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/kernel.h"
#include "graph/node_context.h"

namespace lumen::cpu {

// Lanes of independent accumulators in a row reduction (two AVX2 vectors of floats).
inline constexpr int kLanes = 16;
// Kept elements accumulated together in a column reduction.
inline constexpr int64_t kColumnChunk = 512;
// Shortest piece a long row is split into when there are fewer outputs than threads.
inline constexpr int64_t kMinPart = 8192;

template <typename T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return x != x;
  else
    return false;
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
  static A init() {
    return A(0);
  }
  template <typename A, typename B>
  static A apply(A a, B x) {
    return a + static_cast<A>(x);
  }
};

struct MaxOp {
  template <typename T>
  using Lane = T;
  template <typename T>
  using Acc = T;
  template <typename A>
  static A init() {
    if constexpr (std::is_floating_point_v<A>)
      return -std::numeric_limits<A>::infinity();
    else
      return std::numeric_limits<A>::lowest();
  }
  // NaN wins, as in NumPy: once a NaN is taken nothing replaces it.
  template <typename A, typename B>
  static A apply(A a, B x) {
    return ((x > a) | is_nan(x)) ? static_cast<A>(x) : a;
  }
};

struct MinOp {
  template <typename T>
  using Lane = T;
  template <typename T>
  using Acc = T;
  template <typename A>
  static A init() {
    if constexpr (std::is_floating_point_v<A>)
      return std::numeric_limits<A>::infinity();
    else
      return std::numeric_limits<A>::max();
  }
  template <typename A, typename B>
  static A apply(A a, B x) {
    return ((x < a) | is_nan(x)) ? static_cast<A>(x) : a;
  }
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

inline ReducePlan make_plan(const Shape& x, const std::vector<bool>& reduced) {
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

// ReduceX with noop_with_empty_axes=1 and no axes: a copy.
class CopyKernel final : public Kernel {
 public:
  void run(KernelContext& ctx) const override {
    if (ctx.inputs[0].nbytes() > 0)
      std::memcpy(ctx.outputs[0].raw_data(), ctx.inputs[0].raw_data(), ctx.inputs[0].nbytes());
  }
};

// The reduced dims of a Reduce node (the schema has checked them); empty when it is a no-op.
inline std::vector<bool> reduced_dims(const NodeContext& ctx, bool* noop) {
  const int rank = ctx.input_shape(0).rank();
  std::vector<int64_t> axes =
      ctx.has_input(1) ? ctx.input_ints(1, "axes") : ctx.attr_ints("axes", {});
  *noop = axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) == 1;
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[normalize_axis(a, rank)] = true;
  return reduced;
}

}  // namespace lumen::cpu
