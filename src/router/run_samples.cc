// learn_from_runs: per-step times of profiled runs into the cost model.
#include "router/run_samples.h"

#include <algorithm>

#include "router/calibrate.h"
#include "router/router.h"

namespace lumen::router {
namespace {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::map<std::string, NodeSignature> host_step_keys(const Graph& graph, const Backend& host) {
  std::vector<int> nodes;
  const std::vector<bool> runs = nodes_to_run(graph);
  for (int id = 0; id < graph.num_nodes(); ++id)
    if (runs[id]) nodes.push_back(id);
  const TimingRegime regime = timing_regime(graph, nodes, host);
  std::map<std::string, NodeSignature> keys;
  for (int id : nodes) {
    const Node& node = graph.node(id);
    NodeSignature sig = signature_of(graph, node);
    sig.key = timed_key(graph, node, sig, regime);
    keys.emplace(node.name, std::move(sig));
  }
  return keys;
}

int learn_from_runs(const std::map<std::string, NodeSignature>& keys, const std::string& host,
                    const std::vector<RunProfile>& profiles, double measured_us, CostModel* model) {
  if (profiles.empty()) return 0;
  // Per key: its signature and its steps' times in every run. Per run: the time in its steps.
  std::map<std::string, std::pair<const NodeSignature*, std::vector<double>>> times;
  std::vector<double> in_steps_of_run;
  bool host_only = true;
  for (const RunProfile& p : profiles) {
    double in_steps = 0;
    for (const RunProfile::Step& step : p.steps) {
      in_steps += step.duration_us;
      if (step.backend != host) {
        host_only = false;
        continue;
      }
      auto it = keys.find(step.node);
      if (step.op == "Copy" || it == keys.end()) continue;
      auto& [sig, us] = times[it->second.key];
      sig = &it->second;
      us.push_back(step.duration_us);
    }
    in_steps_of_run.push_back(in_steps);
  }
  for (const auto& [key, entry] : times) {
    const auto& [sig, us] = entry;
    KernelSample sample{sig->op, sig->flops, sig->bytes, 0, 0, 0};
    if (const KernelSample* old = model->measured(host, key)) sample = *old;
    sample.run_us = std::max(median(us), 1e-3);
    if (sample.us <= 0) sample.us = sample.run_us;
    model->add_kernel(host, key, sample);
  }
  if (host_only && measured_us > 0 && measured_us < kOverheadPlanUs)
    model->set_run_overhead(std::max(0.0, measured_us - median(in_steps_of_run)));
  return static_cast<int>(times.size());
}

}  // namespace lumen::router
