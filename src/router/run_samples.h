// Kernel times taken inside profiled runs of a compiled plan: what timing a kernel alone misses
// (the caches as the plan's other steps leave them, weights and inputs where the run keeps them).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "lumen/runtime.h"
#include "router/cost_model.h"

namespace lumen::router {

// Per node of `graph` that runs: its signature, keyed as calibration keys `host`'s samples
// (timed_key). Taken before the graph is compiled: a compile that releases weights changes what
// signatures see.
std::map<std::string, NodeSignature> host_step_keys(const Graph& graph, const Backend& host);

// Records in `model`, for every step that `host` ran in `profiles` (profiled runs of one plan,
// whose nodes `keys` holds, from host_step_keys), the median of its step's times as its node's run
// time (KernelSample::run_us, which predictions then prefer); a node calibration never timed gets
// that time as its time alone too. Where every step of the runs ran on the host and the plan's
// unprofiled run measured `measured_us` (median), under kOverheadPlanUs, also that time less the
// median of the runs' step totals as the run overhead (CostModel::set_run_overhead): a profiled
// run's own total includes the profiling. Steps of nodes `keys` lacks (copies, nodes added at
// compile time) are skipped. Returns how many kernels it recorded.
int learn_from_runs(const std::map<std::string, NodeSignature>& keys, const std::string& host,
                    const std::vector<RunProfile>& profiles, double measured_us, CostModel* model);

// Plans whose runs take longer tell the run overhead apart from their steps' noise too poorly.
inline constexpr double kOverheadPlanUs = 1000;

}  // namespace lumen::router
