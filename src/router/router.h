// The router: a backend for every node that runs, chosen to minimise the predicted time of one run
// (kernels, launches and the transfers between devices) from costs measured on this machine and
// cached on disk. compile.cc uses the plan and inserts the copies; `lumen plan` prints it.
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"
#include "lumen/router.h"
#include "router/calibrate.h"

namespace lumen::router {

// Why one node runs where it does.
struct NodeDecision {
  int node = -1;
  std::string backend;
  std::vector<double> kernel_us;  // per candidate: the predicted time there (+inf: cannot run)
  std::vector<double> launch_us;  // per candidate: the launch overhead within kernel_us
  std::vector<double> moved_us;   // per candidate: the run's predicted change were it moved there
  double transfer_us = 0;         // the copies of its inputs it causes where it is
  std::vector<std::string> transfers;  // "x cpu->cuda 0.012 ms"
  std::string source;                  // of its prediction where it is: "measured", ...
  std::string reason;  // "cpu: 0.004 ms vs cuda 0.011 ms (launch 0.005) + copies 0.020 ms"
};

struct RoutePlan {
  std::vector<Backend*> candidates;     // the host backend first
  std::vector<Backend*> backend_of;     // per node id; nullptr for nodes that do not run
  std::vector<int> order;               // the node ids that run, in execution order (schedule.h)
  std::vector<NodeDecision> decisions;  // per node that runs, in execution order
  double predicted_us = 0;  // one run: kernels, launches and transfers as scheduled, overhead
  double kernel_us = 0;     // the kernels' part (launches included)
  double transfer_us = 0;   // the copies' part
  // The rest (schedule.h's simulate): less where host and device work at once, more where a
  // device waits for the host to launch its work.
  double schedule_us = 0;
  double overhead_us = 0;  // the run's own cost beyond its steps (CostModel::run_overhead)
  // Per candidate: the predicted time of the plan on it alone (every node it runs there, the rest
  // on the host; +inf where neither runs a node), costed as the chosen plan is. The chosen plan
  // never predicts more than the host's.
  std::vector<double> single_us;
  // The plan against the single-device plans: "mixed 0.087 ms against cpu only 0.521 ms, ...".
  std::string choice;
  int transfers = 0;          // copies per run
  bool graph_replay = false;  // every node on one device, replayed as a CUDA graph
  std::string method;         // "one backend", "exact", "heuristic", "one device, replayed"
  std::string cache_file;
  std::string cache_devices;  // the devices the cache file's measurements hold for (tune_cache.h)
  bool cache_loaded = false;  // the cache file held measurements for these devices and version
  std::string cache_error;    // why the measurements could not be saved, if they could not
  CalibrationReport calibration;
};

// Nodes that lead to a graph output (a constant's producer does not run): per node id.
std::vector<bool> nodes_to_run(const Graph& graph);

// Places every node that runs on one of `candidates` (which must include the host), and orders
// them so device work is enqueued before independent host work (run_order). With one
// candidate nothing is measured or predicted unless `explain` is set; with several, the costs the
// cache lacks are measured (options.measure) and saved. Throws UnsupportedOp naming a node no
// candidate supports.
RoutePlan route(const Graph& graph, const std::vector<Backend*>& candidates,
                const RouterOptions& options, bool explain = false);

}  // namespace lumen::router
