// compile_auto: the router's plan checked against the single-device plans by running them.
#include "tools/auto_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "backends/backend.h"
#include "router/run_samples.h"
#include "router/tune_cache.h"

namespace lumen::cli {
namespace {

// A plan predicted below this is run to check it however far its prediction is from the best
// (running it costs at most about 0.7 s of the compile). At 5 ms a wide-and-deep model's CPU plan,
// predicted at 5.0 ms from one outlier in its costs (0.021 ms when run), went unchecked and auto
// ran the cuda,cpu plan at 2.5x its time.
constexpr double kCheapUs = 20000;

// The compile backends of a candidate ({"auto"}, {"cpu"}, {"cuda", "cpu"}) and the list its graph
// is optimized for.
std::vector<std::string> backends_of(const std::string& name) {
  if (name == "auto") return {};
  std::vector<std::string> out;
  for (size_t start = 0; start <= name.size();) {
    size_t comma = std::min(name.find(',', start), name.size());
    out.push_back(name.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

struct Compiled {
  std::unique_ptr<Runtime> runtime;
  Executable* exe = nullptr;
  std::map<std::string, router::NodeSignature> host_keys;  // its nodes' keys on the host
};

Compiled compile_candidate(const GraphMaker& make, const CompileOptions& base,
                           const std::string& name, Graph* ready, const Backend& host) {
  Compiled c;
  c.runtime = std::make_unique<Runtime>();
  CompileOptions options = base;
  options.backends = name == "auto" ? std::vector<std::string>{"auto"} : backends_of(name);
  options.router.measure = false;  // routed (and measured) already
  Graph made;
  Graph& graph = ready != nullptr ? *ready : (made = make(backends_of(name)));
  c.host_keys = router::host_step_keys(graph, host);  // before a compile releases weights
  c.exe = graph.compile(c.runtime.get(), options);
  return c;
}

// The single-device plans' predictions (candidates after the first, in order), each routed on the
// graph optimized for it, as `lumen run --device cpu` and `--device cuda,cpu` compile them; with
// a cached choice only that one is costed. A device that cannot run the model has no candidate.
void predict_single_plans(const GraphMaker& make, const std::vector<Backend*>& backends,
                          const RouterOptions& options, const router::RoutePlan& route,
                          const std::pair<std::string, std::string>* cached,
                          std::vector<router::PlanCandidate>* out) {
  for (size_t d = 0; d < route.candidates.size(); ++d) {
    const std::string name = d == 0 ? "cpu" : route.candidates[d]->name() + ",cpu";
    double predicted = -1;
    if (cached != nullptr && cached->first != name) {
      out->push_back({name, false, -1, -1});
      continue;
    }
    try {
      Graph single = make(backends_of(name));
      // Over every backend, as the auto graph: the cache file holds one set of devices.
      router::RoutePlan p = router::route(single, backends, options, true);
      predicted = std::isfinite(p.single_us[d]) ? p.single_us[d] : -1;
    } catch (const UnsupportedOp&) {
      continue;  // this device cannot run the model
    }
    out->push_back({name, false, predicted, -1});
  }
}

// Whether `route` places more than one device.
bool is_mixed(const router::RoutePlan& route) {
  std::set<std::string> used;
  for (const router::NodeDecision& d : route.decisions) used.insert(d.backend);
  return used.size() > 1;
}

// Each node's backend in `route`, by node name.
std::map<std::string, std::string> placement_of(const Graph& graph,
                                                const router::RoutePlan& route) {
  std::map<std::string, std::string> out;
  for (const router::NodeDecision& d : route.decisions) out[graph.node(d.node).name] = d.backend;
  return out;
}

}  // namespace

std::vector<double> timed_runs(Executable* exe, const std::vector<Tensor>& inputs, int64_t runs,
                               std::vector<Tensor>* outputs) {
  std::vector<double> ms;
  for (int64_t r = 0; r < runs; ++r) {
    outputs->clear();
    auto a = std::chrono::steady_clock::now();
    *outputs = exe->execute(inputs);
    auto b = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(b - a).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

AutoPlan compile_auto(const GraphMaker& make, const CompileOptions& options,
                      const InputMaker& make_inputs, bool verify) {
  AutoPlan out;
  const std::vector<Backend*> backends = auto_backends();
  const Backend& host = *backends.front();
  Graph graph = make({});
  out.route = router::route(graph, backends, options.router, /*explain=*/true);
  out.candidates.push_back({"auto", is_mixed(out.route), out.route.predicted_us, -1});
  if (out.route.candidates.size() == 1) {
    Compiled c = compile_candidate(make, options, "auto", &graph, host);
    out.runtime = std::move(c.runtime);
    out.exe = c.exe;
    out.reason = "auto: the host is the only backend";
    return out;
  }
  // The plan the tune cache holds for this graph on these devices, if any.
  router::CostModel cache;
  const router::CacheIdentity identity{version(), out.route.cache_devices};
  const std::string cache_file = out.route.cache_file;
  router::load_cache(cache_file, identity, &cache);
  const std::string fingerprint =
      router::graph_fingerprint(graph, options.precision == Precision::kFloat32 ? "" : "lowp");
  const std::pair<std::string, std::string>* cached = cache.choice(fingerprint);
  predict_single_plans(make, backends, options.router, out.route, cached, &out.candidates);
  int chosen = -1;
  if (cached != nullptr)
    for (size_t k = 0; k < out.candidates.size(); ++k)
      if (out.candidates[k].name == cached->first) {
        chosen = static_cast<int>(k);
        out.reason = cached->second + " (from the tune cache)";
        out.from_cache = true;
      }
  // Which plans are worth running: within 3x of the least predicted, or predicted under
  // kCheapUs (cheap to run whatever an outlier in its costs says); an auto plan on one device is
  // that device's plan.
  double least = -1;
  for (const router::PlanCandidate& c : out.candidates)
    if (c.predicted_us >= 0 && (least < 0 || c.predicted_us < least)) least = c.predicted_us;
  std::vector<int> contenders;
  for (size_t k = 0; k < out.candidates.size(); ++k) {
    const router::PlanCandidate& c = out.candidates[k];
    if (k == 0 && !c.mixed) continue;
    if (c.predicted_us < 0 || c.predicted_us <= 3 * least || c.predicted_us <= kCheapUs)
      contenders.push_back(static_cast<int>(k));
  }
  if (contenders.empty()) contenders.push_back(0);
  std::vector<Compiled> compiled(out.candidates.size());
  if (chosen < 0 && verify && contenders.size() > 1) {
    std::vector<std::vector<Tensor>> inputs(out.candidates.size());
    std::vector<double> first_ms(out.candidates.size(), 0);
    for (int k : contenders) {
      compiled[k] =
          compile_candidate(make, options, out.candidates[k].name, k == 0 ? &graph : nullptr, host);
      inputs[k] = make_inputs(compiled[k].exe);
      auto t0 = std::chrono::steady_clock::now();
      compiled[k].exe->execute(inputs[k]);  // warm-up, as `lumen run`'s first run
      first_ms[k] =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    for (int round = 0; round < 2; ++round)
      for (int k : contenders) {
        const int64_t runs =
            std::clamp<int64_t>(static_cast<int64_t>(300.0 / std::max(first_ms[k], 1e-3)), 3, 50);
        std::vector<Tensor> outputs;
        std::vector<double> ms = timed_runs(compiled[k].exe, inputs[k], runs, &outputs);
        const double median_us = ms[ms.size() / 2] * 1000;
        double& m = out.candidates[k].measured_us;
        m = m < 0 ? median_us : std::min(m, median_us);
      }
    std::vector<router::PlanCandidate> measured;
    measured.reserve(contenders.size());
    for (int k : contenders) measured.push_back(out.candidates[k]);
    router::PlanVerdict verdict = router::choose_plan(measured);
    chosen = contenders[verdict.chosen];
    out.reason = verdict.reason;
    // The cache as it is now (routing the single-device graphs may have added to it), with the
    // choice.
    router::CostModel latest;
    router::load_cache(cache_file, identity, &latest);
    latest.set_choice(fingerprint, out.candidates[chosen].name, verdict.reason);
    // The chosen plan's host kernels as its runs find them (issue 31: a kernel timed alone may
    // find its data in a cache the run's other steps empty, or in memory the run keeps cached):
    // profiled runs after the timed ones, up to about 0.2 s, into the cost model, so later
    // predictions of this plan hold what a run does. Kept only where the router would still place
    // the auto plan as it was run.
    router::CostModel learned = latest;
    std::vector<RunProfile> profiles(static_cast<size_t>(std::clamp<int64_t>(
        static_cast<int64_t>(200.0 / std::max(out.candidates[chosen].measured_us / 1000, 1e-3)), 3,
        20)));
    for (RunProfile& p : profiles) compiled[chosen].exe->execute(inputs[chosen], &p);
    router::learn_from_runs(compiled[chosen].host_keys, host.name(), profiles,
                            out.candidates[chosen].measured_us, &learned);
    try {
      router::save_cache(cache_file, identity, learned);
      if (chosen == 0) {
        Graph again = make({});
        router::RoutePlan route = router::route(again, backends, options.router, true);
        if (placement_of(again, route) != placement_of(graph, out.route))
          router::save_cache(cache_file, identity, latest);  // the costs measured alone
      }
    } catch (const IoError&) {
      // An unwritable cache costs the next compile this check, not this one its result.
    }
  }
  if (chosen < 0) {
    std::vector<router::PlanCandidate> predicted;
    predicted.reserve(contenders.size());
    for (int k : contenders) predicted.push_back(out.candidates[k]);
    router::PlanVerdict verdict = router::choose_plan(predicted);
    chosen = contenders[verdict.chosen];
    out.reason = verdict.reason;
  }
  out.chosen = chosen;
  if (!compiled[chosen].exe)
    compiled[chosen] = compile_candidate(make, options, out.candidates[chosen].name,
                                         chosen == 0 ? &graph : nullptr, host);
  out.runtime = std::move(compiled[chosen].runtime);
  out.exe = compiled[chosen].exe;
  return out;
}

}  // namespace lumen::cli
