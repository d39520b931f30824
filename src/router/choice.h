// The choice between whole plans: the router's mixed plan against the single-device plans, by
// their measured times where they were run (a mixed plan must beat every single device by a
// margin), else by their predictions; and the fingerprint a choice is cached under.
#pragma once

#include <string>
#include <vector>

#include "lumen/graph.h"

namespace lumen::router {

// One whole plan: "auto" (the router's placement), "cpu", "cuda,cpu" (each node on the first
// listed backend that runs it).
struct PlanCandidate {
  std::string name;
  bool mixed = false;        // runs on more than one device, with copies between them
  double predicted_us = -1;  // the cost model's time per run; negative where unknown
  double measured_us = -1;   // the median time per run when it was run; negative where not
};

// A mixed plan is kept only when it measures below this fraction of the best single-device plan:
// a tie goes to the plan without copies, whose time does not hang on a link or a second clock.
inline constexpr double kMixedMargin = 0.98;

struct PlanVerdict {
  int chosen = -1;     // index into the candidates
  std::string reason;  // "cpu: measured 0.024 ms against auto (mixed) 0.064 ms, cuda,cpu 0.077 ms"
};

// The candidate to run: where any was measured, the measured one with the least time, a mixed
// plan only when below kMixedMargin times every measured single-device plan; otherwise the least
// predicted, ties to the earlier candidate. Throws InvalidArgument when `candidates` is empty.
PlanVerdict choose_plan(const std::vector<PlanCandidate>& candidates);

// A hex key for `graph` as compiled: its inputs' names and types and every node's signature
// (signature_of) in topological order, with `extra` (the options that change the plans).
std::string graph_fingerprint(const Graph& graph, const std::string& extra);

}  // namespace lumen::router
