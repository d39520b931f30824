// choose_plan and graph_fingerprint.
#include "router/choice.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "lumen/error.h"
#include "router/cost_model.h"

namespace lumen::router {
namespace {

std::string ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", us / 1000);
  return buf;
}

std::string label(const PlanCandidate& c) {
  return c.name + (c.mixed ? " (mixed)" : "");
}

}  // namespace

PlanVerdict choose_plan(const std::vector<PlanCandidate>& candidates) {
  if (candidates.empty()) throw InvalidArgument("choose_plan: no candidate plans");
  PlanVerdict verdict;
  const int n = static_cast<int>(candidates.size());
  bool any_measured = false;
  for (const PlanCandidate& c : candidates) any_measured = any_measured || c.measured_us >= 0;
  auto time = [&](int k) {
    return any_measured ? candidates[k].measured_us : candidates[k].predicted_us;
  };
  int best_single = -1, best_mixed = -1;
  for (int k = 0; k < n; ++k) {
    if (time(k) < 0) continue;
    int& best = candidates[k].mixed ? best_mixed : best_single;
    if (best < 0 || time(k) < time(best)) best = k;
  }
  const char* what = any_measured ? "measured" : "predicted";
  if (best_single < 0 && best_mixed < 0) {
    verdict.chosen = 0;
    verdict.reason = label(candidates[0]) + ": nothing measured or predicted";
    return verdict;
  }
  bool mixed_wins =
      best_mixed >= 0 &&
      (best_single < 0 || (any_measured ? time(best_mixed) < kMixedMargin * time(best_single)
                                        : time(best_mixed) < time(best_single)));
  verdict.chosen = mixed_wins ? best_mixed : best_single;
  verdict.reason = label(candidates[verdict.chosen]) + ": " + what + " " + ms(time(verdict.chosen));
  std::string against;
  for (int k = 0; k < n; ++k) {
    if (k == verdict.chosen) continue;
    against += (against.empty() ? " against " : ", ") + label(candidates[k]) + " " +
               (time(k) >= 0 ? ms(time(k)) : std::string("not ") + what);
  }
  verdict.reason += against;
  if (!mixed_wins && best_mixed >= 0 && best_single >= 0 && time(best_mixed) <= time(best_single))
    verdict.reason += " (the mixed plan within " +
                      std::to_string(static_cast<int>(std::lround(100 * (1 - kMixedMargin)))) +
                      "%: a tie, kept on one device)";
  else if (!mixed_wins && best_mixed >= 0)
    verdict.reason += " (the mixed plan is slower)";
  return verdict;
}

std::string graph_fingerprint(const Graph& graph, const std::string& extra) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& text) {
    for (unsigned char c : text) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  };
  mix(extra);
  for (int in : graph.inputs()) mix(graph.value(in).name + " " + graph.value(in).type.to_string());
  for (int id : graph.topological_order()) mix(signature_of(graph, graph.node(id)).key);
  for (int out : graph.outputs()) mix(graph.value(out).name);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace lumen::router
