// Liveness: from a run's steps, which value slots the arena holds, how long each lives, and which
// outputs may be written over a dying input (in place).
#pragma once

#include <cstddef>
#include <vector>

#include "memory/planner.h"

namespace lumen {

// What the planner needs to know about one step of an Executable.
struct StepUses {
  std::vector<int> inputs;         // value slots read; -1 for an omitted input
  std::vector<int> outputs;        // value slots written
  bool outputs_are_views = false;  // the kernel sets its outputs itself (views of its inputs, or
                                   // memory of its own): they are not placed in the arena
  int in_place_input = -1;         // input the kernel may overwrite with output 0, or -1
};

// The layout of one arena.
struct ArenaLayout {
  static constexpr size_t kNotInArena = static_cast<size_t>(-1);
  std::vector<size_t> slot_offset;  // per slot: its offset in the arena, or kNotInArena
  std::vector<int> in_place_steps;  // steps whose output 0 shares its dying input's memory
  ArenaPlan plan;                   // arena size, no-reuse total, lower bound (per root tensor)
  size_t intermediate_bytes = 0;    // every arena slot's bytes, in-place ones counted apart
};

// Plans the arena for `steps` run in order. `slot_bytes[s]` is the size of slot s, and
// `in_arena[s]` says whether the arena may hold it (intermediates: not inputs, constants or the
// graph's outputs, which callers keep). A view output keeps the memory of every input of its step
// alive for as long as the view is read; slots in `outputs` (the graph's outputs, which may be
// views) keep theirs to the end of the run. An output is put over its step's in-place input when
// that input is an arena slot that dies at the step, is no smaller, and no other input of the step
// reads its memory.
ArenaLayout plan_steps(const std::vector<StepUses>& steps, const std::vector<size_t>& slot_bytes,
                       const std::vector<bool>& in_arena, const std::vector<int>& outputs,
                       size_t alignment);

}  // namespace lumen
