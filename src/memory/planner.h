// Memory planner: places tensors with known sizes and lifetimes at offsets in one arena so that
// tensors alive at the same step never overlap, reusing the space of dead ones.
#pragma once

#include <cstddef>
#include <vector>

namespace lumen {

// One tensor to place: its size and the steps [first, last] (inclusive) during which it is alive.
struct TensorLifetime {
  size_t bytes = 0;
  int first = 0;
  int last = 0;
};

// Where each tensor goes, and how good that is.
struct ArenaPlan {
  std::vector<size_t> offsets;   // one per tensor, each a multiple of the alignment
  size_t arena_bytes = 0;        // the arena's size: the end of the highest placed tensor
  size_t no_reuse_bytes = 0;     // the sum of all tensors (every tensor its own memory)
  size_t lower_bound_bytes = 0;  // the most bytes alive at one step: no plan can do better
};

// Greedy by size with best fit (as TensorFlow Lite's arena planner and ONNX Runtime's memory
// patterns do, but planned ahead of the first run): tensors are placed largest first, each in the
// tightest gap left between the already-placed tensors whose lifetimes overlap its own, or above
// them. Sizes are rounded up to `alignment` (a power of two). Deterministic.
ArenaPlan plan_arena(const std::vector<TensorLifetime>& tensors, size_t alignment);

}  // namespace lumen
