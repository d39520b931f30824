// `lumen plan` and `lumen tune`: the router's placement of a model, explained, and the filling of
// its tune cache ahead of time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "router/router.h"
#include "router/tune_cache.h"
#include "tools/auto_plan.h"
#include "tools/commands.h"

namespace lumen::cli {
namespace {

// What plan and tune share: the model, its input shapes and how to place it.
struct PlanArgs {
  std::string model;
  OnnxLoadOptions load;
  std::string device = "auto";
  bool optimize = true;
  bool measure = false;
  bool budget_given = false;
  int64_t runs = 20;
  RouterOptions router;
};

PlanArgs parse(const std::vector<std::string>& args, const char* command, bool plan) {
  if (args.empty()) throw InvalidArgument(std::string("lumen ") + command + ": give a model file");
  PlanArgs out;
  out.model = args[0];
  for (size_t i = 1; i < args.size(); ++i) {
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= args.size()) throw InvalidArgument(std::string(flag) + " needs a value");
      return args[++i];
    };
    const std::string& a = args[i];
    if (a == "--shape") {
      auto [name, shape] = parse_shape_arg(value("--shape"));
      out.load.input_shapes[name] = shape;
    } else if (a == "--budget") {
      out.router.budget_s = static_cast<double>(parse_count(value("--budget"), "--budget"));
      out.budget_given = true;
    } else if (a == "--no-optimize") {
      out.optimize = false;
    } else if (plan && a == "--device") {
      out.device = value("--device");
    } else if (plan && a == "--measure") {
      out.measure = true;
    } else if (plan && a == "--runs") {
      out.runs = parse_count(value("--runs"), "--runs");
    } else {
      throw InvalidArgument(std::string("lumen ") + command + ": unknown argument '" + a + "'");
    }
  }
  return out;
}

// The candidates of --device: "auto" is every available backend, else a comma-separated list.
std::vector<Backend*> candidates(const std::string& device) {
  if (device == "auto") return auto_backends();
  std::vector<Backend*> out;
  for (size_t start = 0; start <= device.size();) {
    size_t comma = std::min(device.find(',', start), device.size());
    std::string name = device.substr(start, comma - start);
    Backend* b = find_backend(name);
    if (b == nullptr && name == "cuda")
      throw DeviceError(
          "--device: backend 'cuda' is not available (no CUDA device, or a build "
          "without CUDA)");
    if (b == nullptr)
      throw InvalidArgument("--device: backend '" + name + "' is not available here (" +
                            std::to_string(available_backends().size()) + " available)");
    out.push_back(b);
    start = comma + 1;
  }
  return out;
}

// The model optimized for `backends`, as `lumen run --device` optimizes it (no CPU-only fusions
// where CUDA may run the graph; {} for auto: every available backend).
Graph load(const PlanArgs& a, const std::vector<std::string>& backends) {
  Graph graph = load_onnx(a.model, a.load);
  if (a.optimize) graph.optimize(backends);
  return graph;
}

// The backend list `lumen run --device` compiles for: {} for auto.
std::vector<std::string> run_backends(const std::string& device) {
  std::vector<std::string> names;
  if (device == "auto") return names;
  for (Backend* b : candidates(device)) names.push_back(b->name());
  return names;
}

std::string ms(double us) {
  if (!std::isfinite(us)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", us / 1000);
  return buf;
}

void print_calibration(const router::RoutePlan& plan) {
  const router::CalibrationReport& c = plan.calibration;
  std::printf(
      "calibration: %d kernels measured, %d cached, %d left to interpolation (budget), %d "
      "unmeasurable, %d outliers timed again, in %.2f s; cache %s (%s)\n",
      c.measured, c.cached, c.skipped, c.failed, c.remeasured, c.seconds, plan.cache_file.c_str(),
      plan.cache_loaded ? "read" : "new");
  if (!plan.cache_error.empty()) std::printf("cache not saved: %s\n", plan.cache_error.c_str());
}

// A device list without the host (--device cuda): the placement compile makes (each node on the
// first listed backend that runs it, the host as the fallback), step by step.
int plan_by_preference(const PlanArgs& a, const std::vector<Backend*>& backends) {
  Graph graph = load(a, run_backends(a.device));
  Runtime rt;
  CompileOptions options;
  for (Backend* b : backends) options.backends.push_back(b->name());
  Executable* exe = graph.compile(&rt, options);
  const std::string summary = exe->summary();
  std::printf("%s: device list %s, the host as the fallback\n%s", a.model.c_str(), a.device.c_str(),
              summary.c_str());
  print_host_fallbacks(summary);
  return 0;
}

}  // namespace

int plan_model(const std::vector<std::string>& args) {
  PlanArgs a = parse(args, "plan", true);
  std::vector<Backend*> backends = candidates(a.device);
  if (std::none_of(backends.begin(), backends.end(),
                   [](Backend* b) { return b->device().type == DeviceType::kCPU; }))
    return plan_by_preference(a, backends);
  Graph graph = load(a, run_backends(a.device));
  router::RoutePlan plan = router::route(graph, backends, a.router, true);
  std::printf("%s: %zu nodes on %zu candidate backends, placed by %s\n", a.model.c_str(),
              plan.decisions.size(), plan.candidates.size(), plan.method.c_str());
  print_calibration(plan);
  std::printf("%-32s %-16s %-7s", "node", "op", "backend");
  for (Backend* b : plan.candidates) std::printf(" %10s", (b->name() + " ms").c_str());
  std::printf("  %-10s reason\n", "copies ms");
  std::map<std::string, int> per_backend;
  for (const router::NodeDecision& d : plan.decisions) {
    const Node& node = graph.node(d.node);
    ++per_backend[d.backend];
    std::printf("%-32.32s %-16.16s %-7s", node.name.c_str(), op_name(node.op), d.backend.c_str());
    for (double us : d.kernel_us) std::printf(" %10s", ms(us).c_str());
    std::printf("  %-10s %s\n", d.transfer_us > 0 ? ms(d.transfer_us).c_str() : "",
                d.reason.c_str());
    for (const std::string& t : d.transfers) std::printf("%52s copy %s\n", "", t.c_str());
  }
  std::string counts;
  for (const auto& [name, n] : per_backend)
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " on " + name;
  std::printf("placement: %s; %d copies per run%s\n", counts.c_str(), plan.transfers,
              plan.graph_replay ? "; replayed as a CUDA graph" : "");
  std::printf("predicted: %.4f ms per run = kernels %.4f ms + copies %.4f ms",
              plan.predicted_us / 1000, plan.kernel_us / 1000, plan.transfer_us / 1000);
  if (plan.schedule_us != 0)
    std::printf(" %s schedule %.4f ms (host and device at once, devices waiting for launches)",
                plan.schedule_us < 0 ? "-" : "+", std::abs(plan.schedule_us) / 1000);
  if (plan.overhead_us > 0)
    std::printf(" + run overhead %.4f ms (measured in runs)", plan.overhead_us / 1000);
  std::printf("\n");
  std::printf("against one device: %s\n", plan.choice.c_str());
  if (a.device == "auto" && !a.measure) {
    // What `lumen run --device auto` found when it ran the plans, if it has.
    router::CostModel cache;
    router::load_cache(plan.cache_file, {version(), plan.cache_devices}, &cache);
    if (const auto* choice = cache.choice(router::graph_fingerprint(graph, "")))
      std::printf("auto runs plan %s (tune cache): %s\n", choice->first.c_str(),
                  choice->second.c_str());
  }
  if (a.measure) {
    // What `lumen run --device D` runs: the same graph, compile, inputs, warm-up and timer.
    auto make = [&](const std::vector<std::string>& names) { return load(a, names); };
    auto make_inputs = [](Executable* e) {
      std::vector<Tensor> inputs;
      for (size_t k = 0; k < e->inputs().size(); ++k)
        inputs.push_back(random_input(e->inputs()[k], 1234 + k));
      return inputs;
    };
    CompileOptions options;
    options.release_weights = true;
    options.router = a.router;
    std::unique_ptr<Runtime> rt;
    Executable* exe = nullptr;
    double predicted_us = plan.predicted_us;
    if (a.device == "auto") {
      AutoPlan chosen = compile_auto(make, options, make_inputs, /*verify=*/true);
      rt = std::move(chosen.runtime);
      exe = chosen.exe;
      predicted_us = chosen.predicted_us();
      std::printf("plans:");
      for (const router::PlanCandidate& c : chosen.candidates)
        std::printf("  %s%s predicted %s ms, measured %s ms;", c.name.c_str(),
                    c.mixed ? " (mixed)" : "", ms(c.predicted_us).c_str(),
                    c.measured_us >= 0 ? ms(c.measured_us).c_str() : "-");
      std::printf("\nauto runs plan %s: %s\n", chosen.candidates[chosen.chosen].name.c_str(),
                  chosen.reason.c_str());
    } else {
      rt = std::make_unique<Runtime>();
      options.backends = run_backends(a.device);
      Graph fresh = make(options.backends);
      exe = fresh.compile(rt.get(), options);
    }
    std::vector<Tensor> inputs = make_inputs(exe);
    std::vector<Tensor> outputs = exe->execute(inputs);  // warm-up, as `lumen run`'s first run
    std::vector<double> times = timed_runs(exe, inputs, a.runs, &outputs);
    const double median = times[times.size() / 2] * 1000;
    std::printf("measured: %.4f ms per run (median of %lld), predicted %.4f ms (%+.1f%%)\n",
                median / 1000, static_cast<long long>(a.runs), predicted_us / 1000,
                100 * (predicted_us - median) / median);
  }
  return 0;
}

int tune_model(const std::vector<std::string>& args) {
  PlanArgs a = parse(args, "tune", false);
  if (!a.budget_given) a.router.budget_s = 600;  // ahead of time: measure everything
  Graph graph = load(a, {});
  router::RoutePlan plan = router::route(graph, auto_backends(), a.router, true);
  // The graphs `lumen run --device auto` compares its plan with: optimized for the host alone
  // (its fusions), and for each device before the host.
  // (Routed over every backend, as the auto graph: the cache file holds one set of devices.)
  for (Backend* b : plan.candidates) {
    std::vector<std::string> names = {b->name()};
    if (b != plan.candidates[0]) names.push_back("cpu");
    try {
      Graph single = load(a, names);
      router::RoutePlan p = router::route(single, plan.candidates, a.router, true);
      plan.calibration.measured += p.calibration.measured;
      plan.calibration.remeasured += p.calibration.remeasured;
      plan.calibration.seconds += p.calibration.seconds;
    } catch (const UnsupportedOp&) {
    }
  }
  std::printf("%s: %zu nodes, backends", a.model.c_str(), plan.decisions.size());
  for (Backend* b : plan.candidates) std::printf(" %s", b->name().c_str());
  std::printf("\n");
  print_calibration(plan);
  std::printf("predicted: %.4f ms per run\n", plan.predicted_us / 1000);
  return 0;
}

}  // namespace lumen::cli
