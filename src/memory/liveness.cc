// plan_steps: alias roots, lifetimes and in-place merging over a run's steps, then plan_arena.
#include "memory/liveness.h"

#include <algorithm>

namespace lumen {
namespace {

// Per slot, the arena slots ("roots") whose memory it may share: itself for an arena slot, the
// roots of its step's inputs for a view, none for inputs and constants.
using Roots = std::vector<std::vector<int>>;

void add_roots(std::vector<int>& into, const std::vector<int>& from) {
  for (int r : from)
    if (std::find(into.begin(), into.end(), r) == into.end()) into.push_back(r);
}

}  // namespace

ArenaLayout plan_steps(const std::vector<StepUses>& steps, const std::vector<size_t>& slot_bytes,
                       const std::vector<bool>& in_arena, const std::vector<int>& outputs,
                       size_t alignment) {
  const size_t num_slots = slot_bytes.size();
  const int end_of_run = static_cast<int>(steps.size());
  Roots roots(num_slots);
  std::vector<int> first(num_slots, -1), last(num_slots, -1);
  std::vector<int> merged_into(num_slots, -1);  // in-place: slot -> the root it was put over

  // Forward: roots of every slot.
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepUses& step = steps[i];
    for (int out : step.outputs) {
      if (step.outputs_are_views || !in_arena[out]) {
        if (step.outputs_are_views)
          for (int in : step.inputs)
            if (in >= 0) add_roots(roots[out], roots[in]);
        continue;
      }
      roots[out] = {out};
      first[out] = static_cast<int>(i);
      last[out] = static_cast<int>(i);
    }
  }
  // Lifetimes: each read of a slot keeps its roots alive; so does being a graph output.
  for (size_t i = 0; i < steps.size(); ++i)
    for (int in : steps[i].inputs)
      if (in >= 0)
        for (int r : roots[in]) last[r] = std::max(last[r], static_cast<int>(i));
  for (int out : outputs)
    for (int r : roots[out]) last[r] = end_of_run;

  ArenaLayout layout;
  for (size_t s = 0; s < num_slots; ++s)
    if (first[s] >= 0) layout.intermediate_bytes += slot_bytes[s];

  // In place: output 0 over input k when k's memory dies here and nothing else of the step reads
  // it. The output's root becomes the input's, whose lifetime grows to cover the output's.
  auto root_of = [&](int s) {
    while (merged_into[s] >= 0) s = merged_into[s];
    return s;
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepUses& step = steps[i];
    if (step.in_place_input < 0 || step.outputs_are_views || step.outputs.empty()) continue;
    if (static_cast<size_t>(step.in_place_input) >= step.inputs.size()) continue;
    int in = step.inputs[step.in_place_input], out = step.outputs[0];
    if (in < 0 || first[out] < 0 || roots[in].size() != 1 || roots[in][0] != in) continue;
    int r = root_of(in);
    if (last[r] != static_cast<int>(i) || slot_bytes[in] < slot_bytes[out]) continue;
    bool shared = false;
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      int other = step.inputs[k];
      if (static_cast<int>(k) == step.in_place_input || other < 0) continue;
      for (int q : roots[other]) shared = shared || root_of(q) == r;
    }
    if (shared) continue;
    merged_into[out] = r;
    last[r] = std::max(last[r], last[out]);
    layout.in_place_steps.push_back(static_cast<int>(i));
  }

  // One tensor per root, sized for the largest slot put over it.
  std::vector<int> root_index(num_slots, -1);
  std::vector<TensorLifetime> tensors;
  std::vector<size_t> root_bytes(num_slots, 0);
  for (size_t s = 0; s < num_slots; ++s)
    if (first[s] >= 0) {
      int r = root_of(static_cast<int>(s));
      root_bytes[r] = std::max(root_bytes[r], slot_bytes[s]);
    }
  for (size_t s = 0; s < num_slots; ++s)
    if (first[s] >= 0 && merged_into[s] < 0) {
      root_index[s] = static_cast<int>(tensors.size());
      tensors.push_back({root_bytes[s], first[s], last[s]});
    }
  layout.plan = plan_arena(tensors, alignment);
  layout.slot_offset.assign(num_slots, ArenaLayout::kNotInArena);
  for (size_t s = 0; s < num_slots; ++s)
    if (first[s] >= 0) layout.slot_offset[s] = layout.plan.offsets[root_index[root_of(s)]];
  return layout;
}

}  // namespace lumen
