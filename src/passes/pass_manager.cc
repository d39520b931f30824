// PassManager: runs passes to a fixed point and records what each did.
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {

void PassManager::add(std::unique_ptr<Pass> pass) {
  passes_.push_back(std::move(pass));
}

std::vector<PassStats> PassManager::run(Graph& graph) {
  std::vector<PassStats> stats;
  auto live_nodes = [](const std::map<std::string, int>& histogram) {
    int n = 0;
    for (const auto& entry : histogram) n += entry.second;
    return n;
  };
  for (int round = 1; round <= kMaxRounds; ++round) {
    bool any = false;
    for (const auto& pass : passes_) {
      PassStats s;
      s.pass = pass->name();
      s.round = round;
      s.ops_before = op_histogram(graph);
      s.nodes_before = live_nodes(s.ops_before);
      s.changed = pass->run(graph);
#ifndef NDEBUG
      graph.verify();
#endif
      s.ops_after = op_histogram(graph);
      s.nodes_after = live_nodes(s.ops_after);
      any = any || s.changed;
      stats.push_back(std::move(s));
    }
    if (!any) break;
  }
  return stats;
}

}  // namespace lumen
