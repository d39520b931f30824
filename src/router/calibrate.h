// Calibration: measures on this machine what the cost model lacks for a graph (each distinct node
// signature on each candidate backend, the host <-> device links, the launch overhead), within a
// time budget.
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"
#include "router/cost_model.h"

namespace lumen::router {

struct CalibrationReport {
  int measured = 0;    // kernels timed now
  int cached = 0;      // kernels the model already held
  int skipped = 0;     // left unmeasured when the budget ran out (interpolated instead)
  int failed = 0;      // whose kernel could not be built or run on random inputs (estimated)
  int remeasured = 0;  // outliers (CostModel::outliers) timed again
  double seconds = 0;
};

// Whether the constants `nodes` read (each counted once) outgrow `backend`'s last-level cache
// (Backend::cache_bytes), so that every run on it reads them from memory. Its kernels are then
// timed with their constants cold and kept under cold_key().
bool constants_stream(const Graph& graph, const std::vector<int>& nodes, const Backend& backend);

// How calibration times a backend's kernels of one graph, which decides the keys their samples
// take (timed_key).
struct TimingRegime {
  // The constants outgrow the backend's cache (constants_stream): each launch reads them cold.
  bool cold_constants = false;
  // Graph inputs of 1 MiB or more are read cold. Always on a device (a run copies them in); on the
  // host only where the graph's inputs together outgrow half its cache: below that they stay
  // where the caller wrote them, in the cache, as they do between the runs of `lumen run`.
  bool cold_inputs = true;
};

// The regime of `backend` for the nodes `nodes` of `graph`.
TimingRegime timing_regime(const Graph& graph, const std::vector<int>& nodes,
                           const Backend& backend);

// The cost-model key of `node` (whose signature is `sig`) timed under `regime`: the signature's,
// marked cold_key() for cold constants and warm_input_key() for a host kernel that reads 1 MiB or
// more of graph inputs from the cache.
std::string timed_key(const Graph& graph, const Node& node, const NodeSignature& sig,
                      const TimingRegime& regime);

// "cpu=AMD EPYC 7B13 (2 threads); cuda=NVIDIA H100 80GB HBM3": what measurements hold for.
std::string device_identity(const std::vector<Backend*>& backends);

// Times, for every node in `nodes` whose signature `model` lacks on a backend in `backends` that
// supports it, its kernel on random inputs (constants as they are): built once, warmed up, then
// launched back to back until about 2 ms have passed, the median of five such rounds (on the host:
// each run timed alone, the least of up to three rounds' medians), every kernel called once before
// the timing; on a device that records work, also recorded and replayed (its time inside a CUDA
// graph). Where the constants stream (constants_stream), each launch reads another copy of them,
// enough copies to outgrow the cache, so none is read from it; so with graph inputs of 1 MiB or
// more where the regime reads them cold (TimingRegime). Then every sample of these nodes that the
// other samples contradict by an order of magnitude (CostModel::outliers, cached ones included) is
// timed again, twice at most, and the lesser time kept. Also measures each device backend's links
// and launch costs when the model lacks them. Stops when `budget_s` is spent. With `progress`,
// writes a progress line to stderr if it is a terminal.
CalibrationReport calibrate(const Graph& graph, const std::vector<int>& nodes,
                            const std::vector<Backend*>& backends, double budget_s, bool progress,
                            CostModel* model);

}  // namespace lumen::router
