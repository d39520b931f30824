// plan_arena: greedy-by-size best-fit placement of tensors with lifetimes.
#include "memory/planner.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace lumen {
namespace {

size_t round_up(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) & ~(alignment - 1);
}

bool overlap(const TensorLifetime& a, const TensorLifetime& b) {
  return a.first <= b.last && b.first <= a.last;
}

// The most bytes alive at any one step: a sweep over lifetime starts and ends.
size_t peak_alive(const std::vector<TensorLifetime>& tensors, size_t alignment) {
  std::vector<std::pair<int, long long>> events;  // (step, +bytes at first / -bytes after last)
  events.reserve(tensors.size() * 2);
  for (const TensorLifetime& t : tensors) {
    auto bytes = static_cast<long long>(round_up(t.bytes, alignment));
    events.emplace_back(t.first, bytes);
    events.emplace_back(t.last + 1, -bytes);
  }
  // At equal steps, ends (negative) come before starts: a tensor dead after step s does not
  // overlap one born at s + 1.
  std::sort(events.begin(), events.end());
  long long alive = 0, peak = 0;
  for (const auto& [step, delta] : events) {
    alive += delta;
    peak = std::max(peak, alive);
  }
  return static_cast<size_t>(peak);
}

}  // namespace

ArenaPlan plan_arena(const std::vector<TensorLifetime>& tensors, size_t alignment) {
  ArenaPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (tensors[a].bytes != tensors[b].bytes) return tensors[a].bytes > tensors[b].bytes;
    return tensors[a].first < tensors[b].first;
  });
  std::vector<size_t> placed;                   // indices of placed tensors
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of conflicting placed tensors
  for (size_t i : order) {
    size_t need = round_up(tensors[i].bytes, alignment);
    plan.no_reuse_bytes += need;
    busy.clear();
    for (size_t p : placed)
      if (overlap(tensors[i], tensors[p]))
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + round_up(tensors[p].bytes, alignment));
    std::sort(busy.begin(), busy.end());
    // Best fit: the smallest gap between busy ranges that holds `need`; else above them all.
    size_t best = 0, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [begin, end] : busy) {
      if (begin > cursor && begin - cursor >= need && begin - cursor < best_gap) {
        best = cursor;
        best_gap = begin - cursor;
      }
      cursor = std::max(cursor, end);
    }
    plan.offsets[i] = best_gap == SIZE_MAX ? cursor : best;
    plan.arena_bytes = std::max(plan.arena_bytes, plan.offsets[i] + need);
    placed.push_back(i);
  }
  plan.lower_bound_bytes = peak_alive(tensors, alignment);
  return plan;
}

}  // namespace lumen
