// NumPy-broadcast iteration for CPU kernels: a plan, built once at kernel construction, that
// walks an output shape together with the inputs broadcast to it, one contiguous row at a time.
//
// Usage (a binary op writing a contiguous output):
//   BroadcastPlan plan(out_shape, {a_shape, b_shape});           // in the kernel's constructor
//   for_each_row(plan, [&](int64_t out, const int64_t* in, int64_t n) {  // in run()
//     // out[out .. out+n) pairs with a[in[0] + i * plan.inner_stride(0)] and
//     //                                b[in[1] + i * plan.inner_stride(1)], i in [0, n)
//   });
// Adjacent dimensions that broadcast the same way for every input are merged, so same-shape
// operands become one long row, [N, C] + [C] becomes rows of C with both inputs contiguous, and
// [N, C] + [N, 1] becomes rows of C where the second input repeats one value. Inner strides are
// therefore only ever 1 (contiguous) or 0 (one value repeated), which lets callers write a few
// specialised inner loops that the compiler vectorises.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/isa.h"
#include "lumen/shape.h"

namespace lumen::cpu {

class BroadcastPlan {
 public:
  // The most inputs one plan iterates together.
  static constexpr int kMaxInputs = 4;

  BroadcastPlan() = default;
  // Every shape in `inputs` must broadcast to `out` (NumPy rules: right-aligned, each dimension
  // equal to out's or 1); throws ShapeError otherwise and InvalidArgument for more than
  // kMaxInputs inputs.
  BroadcastPlan(const Shape& out, const std::vector<Shape>& inputs);

  int num_inputs() const { return static_cast<int>(strides_.size()); }
  // Elements of the output.
  int64_t numel() const { return numel_; }
  // Length of one row: the innermost merged dimension (0 when the output is empty).
  int64_t inner() const { return dims_.back(); }
  // Number of rows (numel() / inner(), 0 when the output is empty).
  int64_t rows() const { return inner() == 0 ? 0 : numel_ / inner(); }
  // Step of input k along a row: 1 when contiguous, 0 when one value repeats.
  int64_t inner_stride(int k) const { return strides_[k].back(); }
  // True when input k has exactly the output's elements in the same order.
  bool is_identity(int k) const { return identity_[k]; }
  // The merged output dimensions and input k's element strides along them (0 where broadcast).
  const std::vector<int64_t>& dims() const { return dims_; }
  const std::vector<int64_t>& strides(int k) const { return strides_[k]; }

  // Calls f(out_offset, in_offsets) for rows [begin, end), in order. out_offset is the row's
  // first output element (row * inner()); in_offsets[k] is input k's element under it.
  template <typename F>
  void for_rows(int64_t begin, int64_t end, F&& f) const;

 private:
  std::vector<int64_t> dims_{0};
  std::vector<std::vector<int64_t>> strides_;
  std::vector<bool> identity_;
  int64_t numel_ = 0;
};

// Outputs with fewer elements than this run on one thread.
inline constexpr int64_t kParallelThreshold = 1 << 15;
// Elements per parallel task.
inline constexpr int64_t kParallelChunk = 1 << 14;

// Visits every output element once as row segments: f(out_offset, in_offsets, length) where the
// segment covers output elements [out_offset, out_offset + length) and input k's elements
// in_offsets[k] + i * plan.inner_stride(k). Large outputs are split across OpenMP threads
// (rows, and long rows themselves, into chunks of about kParallelChunk elements); f runs
// concurrently on disjoint segments and must not throw.
template <typename F>
void for_each_row(const BroadcastPlan& plan, F&& f);

// Runs f(begin, end) over [0, n) split into chunks, in parallel when n is large; f must not
// throw. For contiguous element-wise loops that need no broadcasting. Both run f through isa_call
// (backends/cpu/isa.h), so its loops are vectorised for AVX2 where the CPU has it.
template <typename F>
void parallel_chunks(int64_t n, F&& f);

// ---- implementation ----

template <typename F>
void BroadcastPlan::for_rows(int64_t begin, int64_t end, F&& f) const {
  if (begin >= end) return;
  const int outer = static_cast<int>(dims_.size()) - 1;
  const int n = num_inputs();
  const int64_t len = inner();
  int64_t off[kMaxInputs] = {};
  std::vector<int64_t> idx(static_cast<size_t>(outer), 0);
  int64_t rest = begin;
  for (int d = outer - 1; d >= 0; --d) {
    idx[d] = rest % dims_[d];
    rest /= dims_[d];
    for (int k = 0; k < n; ++k) off[k] += idx[d] * strides_[k][d];
  }
  for (int64_t row = begin; row < end; ++row) {
    f(row * len, static_cast<const int64_t*>(off));
    for (int d = outer - 1; d >= 0; --d) {
      if (++idx[d] < dims_[d]) {
        for (int k = 0; k < n; ++k) off[k] += strides_[k][d];
        break;
      }
      idx[d] = 0;
      for (int k = 0; k < n; ++k) off[k] -= (dims_[d] - 1) * strides_[k][d];
    }
  }
}

template <typename F>
void for_each_row(const BroadcastPlan& plan, F&& f) {
  const int64_t inner = plan.inner();
  const int64_t rows = plan.rows();
  if (plan.numel() == 0) return;
  if (plan.numel() < kParallelThreshold) {
    plan.for_rows(0, rows, [&](int64_t o, const int64_t* in) { isa_call(f, o, in, inner); });
    return;
  }
  const int n = plan.num_inputs();
  if (inner >= 2 * kParallelChunk) {
    // Long rows: each task is one segment of one row.
    const int64_t segs = (inner + kParallelChunk - 1) / kParallelChunk;
    const int64_t seg_len = (inner + segs - 1) / segs;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < rows * segs; ++t) {
      const int64_t row = t / segs;
      const int64_t start = (t % segs) * seg_len;
      const int64_t len = std::min(seg_len, inner - start);
      plan.for_rows(row, row + 1, [&](int64_t o, const int64_t* in) {
        int64_t shifted[BroadcastPlan::kMaxInputs];
        for (int k = 0; k < n; ++k) shifted[k] = in[k] + start * plan.inner_stride(k);
        isa_call(f, o + start, static_cast<const int64_t*>(shifted), len);
      });
    }
    return;
  }
  // Short rows: each task is a run of whole rows.
  const int64_t rows_per_task = std::max<int64_t>(1, kParallelChunk / inner);
  const int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t begin = t * rows_per_task;
    plan.for_rows(begin, std::min(rows, begin + rows_per_task),
                  [&](int64_t o, const int64_t* in) { isa_call(f, o, in, inner); });
  }
}

template <typename F>
void parallel_chunks(int64_t n, F&& f) {
  if (n <= 0) return;
  if (n < kParallelThreshold) {
    isa_call(f, int64_t{0}, n);
    return;
  }
  const int64_t tasks = (n + kParallelChunk - 1) / kParallelChunk;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t)
    isa_call(f, t * kParallelChunk, std::min(n, (t + 1) * kParallelChunk));
}

}  // namespace lumen::cpu
