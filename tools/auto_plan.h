// What `lumen run --device auto` and `lumen plan --measure` share: the one timer both report, and
// the choice of the plan auto runs among the router's placement and the single-device plans.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lumen/lumen.h"
#include "router/choice.h"
#include "router/router.h"

namespace lumen::cli {

// Times `runs` runs of `exe` on `inputs`, each alone on the steady clock, after the previous
// run's outputs (held in *outputs, which ends with the last run's) go back to the pool, so a
// steady-state run reuses their memory. Returns milliseconds per run, sorted. The caller has run
// it once to warm up. `lumen run`'s latency and `lumen plan --measure` both come from here.
std::vector<double> timed_runs(Executable* exe, const std::vector<Tensor>& inputs, int64_t runs,
                               std::vector<Tensor>* outputs);

// The model's graph optimized for a list of backends ({} for auto: every available one), loaded
// as `lumen run` loads it.
using GraphMaker = std::function<Graph(const std::vector<std::string>& backends)>;
// The inputs to run a compiled candidate on.
using InputMaker = std::function<std::vector<Tensor>(Executable*)>;

struct AutoPlan {
  std::unique_ptr<Runtime> runtime;  // owns exe
  Executable* exe = nullptr;
  int chosen = 0;                                 // index into candidates
  std::vector<router::PlanCandidate> candidates;  // "auto", "cpu", "cuda,cpu": as predicted,
                                                  // and measured where they were run now
  std::string reason;                             // why the chosen one (router::choose_plan)
  bool from_cache = false;                        // the choice was in the tune cache
  router::RoutePlan route;  // the router's placement of the auto graph, explained
  double predicted_us() const { return candidates[chosen].predicted_us; }
};

// Compiles the model for device auto: routes the auto graph (measuring what the tune cache
// lacks), costs the single-device plans on graphs optimized for them, and takes the plan the tune
// cache recorded for this graph; else, with `verify` and more than one plan predicted within 3x of
// the best (or under 5 ms), compiles each such plan, runs it (two interleaved rounds of timed_runs,
// up to about 0.3 s a round, the lesser median) and keeps the fastest (choose_plan), recording the
// choice in the tune cache, with the chosen plan's host kernels timed inside its runs
// (router::learn_from_runs; not where those times would move the auto plan's placement); else the
// least predicted. `options` are compile options but for backends.
AutoPlan compile_auto(const GraphMaker& make, const CompileOptions& options,
                      const InputMaker& make_inputs, bool verify);

}  // namespace lumen::cli
