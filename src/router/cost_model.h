// CostModel: predicted kernel times per (node signature, backend), from measurements where there
// are some and interpolated by work where there are not; transfer times between the host and a
// device; the launch overhead of a device kernel, eager and inside a replayed CUDA graph.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lumen/graph.h"

namespace lumen::router {

// What a node computes, independent of where it runs.
struct NodeSignature {
  std::string op;    // "Conv"
  std::string key;   // op, attributes, input and output types (which are constants, graph inputs)
  double flops = 0;  // multiply-adds times two of convolutions and matrix products; else 0
  double bytes = 0;  // bytes of every input and output
  // The amount of work measurements of one op are interpolated by: flops, or bytes when none.
  double work() const { return flops > 0 ? flops : bytes; }
};

// The signature of `node` in `graph` (static shapes; a dynamic one makes a key of its own).
NodeSignature signature_of(const Graph& graph, const Node& node);

// Bytes of the constant inputs `node` reads.
double constant_bytes(const Graph& graph, const Node& node);

// Bytes of the graph inputs (not constants) `node` reads.
double graph_input_bytes(const Graph& graph, const Node& node);

// The key of a kernel measured with its constants out of the device's cache (calibrate.h).
inline std::string cold_key(const std::string& key) {
  return key + ":cold";
}

// The key of a host kernel measured with its large graph inputs in the cache (calibrate.h).
inline std::string warm_input_key(const std::string& key) {
  return key + ":warm-input";
}

// Below this many microseconds above its neighbours' prediction a sample is never an outlier
// (timer and scheduling jitter on small kernels).
inline constexpr double kOutlierMinUs = 50;
// How much further than its own op's neighbours a sample must stray from other ops' rate.
inline constexpr double kLoneOutlierFactor = 10;

// One measured kernel: the time per run of the node's kernel, launched back to back on its
// backend (on a device: launch and execution overlap, as in an eager run); on a device that
// records work, the time per run inside a replayed recording; and on the host, its step's time
// inside profiled runs of a whole plan (run_samples.h), which holds what timing it alone misses
// (the caches as the plan's other steps leave them). 0 where not measured.
struct KernelSample {
  std::string op;
  double flops = 0;
  double bytes = 0;
  double us = 0;
  double graph_us = 0;
  double run_us = 0;
};

// Moving b bytes between the host and a device, one way. Measured at a few sizes (`points`,
// (bytes, us) by ascending bytes): linear between two points, the first point's time below it, the
// last two points' slope past the last; a copy's rate changes with its size (on CUDA, inputs from
// 1 MiB are staged by all the host's threads, and a source larger than the host's cache streams
// from memory), so no single line fits them. Without points: latency_us + b * us_per_byte.
struct Link {
  double latency_us = 0;
  double us_per_byte = 0;
  std::vector<std::pair<double, double>> points = {};
  double us(double bytes) const;
};

// The host time to launch one kernel on a device: in an eager run, and inside a replayed CUDA
// graph (most of it gone).
struct LaunchCost {
  double eager_us = 0;
  double graph_us = 0;
};

// A prediction and where it came from.
struct Prediction {
  double us = 0;
  double graph_us = 0;  // inside a replayed CUDA graph; 0 where no sample says

  std::string source;  // "measured", "interpolated from 3 Conv samples", "estimated"
};

class CostModel {
 public:
  // Records a measured kernel time (replacing an earlier one of the same key and backend).
  void add_kernel(const std::string& backend, const std::string& key, const KernelSample& sample);
  // The measured sample, or nullptr.
  const KernelSample* measured(const std::string& backend, const std::string& key) const;
  // The time per run of `sig` on `backend` in an eager run: measured inside a run where it was,
  // else measured alone; else interpolated linearly in
  // work between the nearest samples of the same op (scaled by work above the largest, the
  // smallest's time below the smallest); else from the backend's median rate over all samples;
  // else a conservative default (host 1 GFLOP/s and 2 GB/s, devices 1 TFLOP/s and 100 GB/s).
  // The time inside a replayed graph is predicted the same way from the samples that have one.
  Prediction kernel(const std::string& backend, const NodeSignature& sig) const;

  void set_link(const std::string& backend, const Link& to_device, const Link& to_host);
  bool has_link(const std::string& backend) const { return links_.count(backend) > 0; }
  // Host -> backend and backend -> host; 10 us + 10 GB/s where nothing was measured.
  Link to_device(const std::string& backend) const;
  Link to_host(const std::string& backend) const;

  void set_launch(const std::string& backend, const LaunchCost& cost);
  bool has_launch(const std::string& backend) const { return launches_.count(backend) > 0; }
  // Zero for the host; 5 us eager and 1 us in a graph where nothing was measured.
  LaunchCost launch(const std::string& backend) const;

  // What a run costs beyond its steps (input checks, output hand-back, step dispatch), measured
  // in profiled runs of a host plan; 0 until measured.
  void set_run_overhead(double us) { run_overhead_us_ = us; }
  double run_overhead() const { return run_overhead_us_; }

  // Keys of `backend`'s measured samples (eager times) that their op's other samples contradict:
  // more than `factor` times, and kOutlierMinUs more than, the time interpolated by work from at
  // least two other samples of the same op; for an op with fewer, more than kLoneOutlierFactor x
  // `factor` times the time of its flops at the median rate of the other samples that do
  // arithmetic (one is enough: a four-node model's 5 ms product among two of 7 and 1 us). A
  // kernel that took 3.9 ms among neighbours that predict 20 us was timed while something else
  // held the machine: it is measured again (a false alarm costs only that).
  std::vector<std::string> outliers(const std::string& backend, double factor = 10) const;

  // The plan a graph was given after its candidate plans were run and timed (choice.h), by the
  // graph's fingerprint; nullptr when none was recorded.
  void set_choice(const std::string& fingerprint, const std::string& plan,
                  const std::string& reason);
  const std::pair<std::string, std::string>* choice(const std::string& fingerprint) const;
  const std::map<std::string, std::pair<std::string, std::string>>& choices() const {
    return choices_;
  }

  // Everything measured, for the cache file.
  const std::map<std::string, std::map<std::string, KernelSample>>& samples() const {
    return samples_;
  }
  const std::map<std::string, std::pair<Link, Link>>& links() const { return links_; }
  const std::map<std::string, LaunchCost>& launches() const { return launches_; }

 private:
  std::map<std::string, std::map<std::string, KernelSample>> samples_;  // backend -> key -> sample
  std::map<std::string, std::pair<Link, Link>> links_;  // backend -> (to device, to host)
  std::map<std::string, LaunchCost> launches_;
  std::map<std::string, std::pair<std::string, std::string>> choices_;  // fingerprint -> plan, why
  double run_overhead_us_ = 0;

  // kernel()'s rule over one field of the samples (those where it is positive).
  Prediction predict(const std::string& backend, const NodeSignature& sig,
                     double KernelSample::*field) const;
};

}  // namespace lumen::router
