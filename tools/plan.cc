// `lumen plan` and `lumen tune`: the router's placement of a model, explained, and the filling of
// its tune cache ahead of time.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "router/router.h"
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
  if (device == "auto") return available_backends();
  std::vector<Backend*> out;
  for (size_t start = 0; start <= device.size();) {
    size_t comma = std::min(device.find(',', start), device.size());
    std::string name = device.substr(start, comma - start);
    Backend* b = find_backend(name);
    if (b == nullptr && name == "cuda")
      throw DeviceError("--device: backend 'cuda' is not available (no CUDA device, or a build "
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
// where CUDA may run the graph).
Graph load(const PlanArgs& a, const std::vector<Backend*>& backends) {
  Graph graph = load_onnx(a.model, a.load);
  std::vector<std::string> names;
  for (Backend* b : backends) names.push_back(b->name());
  if (a.optimize) graph.optimize(names);
  return graph;
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
      "unmeasurable, in %.2f s; cache %s (%s)\n",
      c.measured, c.cached, c.skipped, c.failed, c.seconds, plan.cache_file.c_str(),
      plan.cache_loaded ? "read" : "new");
  if (!plan.cache_error.empty()) std::printf("cache not saved: %s\n", plan.cache_error.c_str());
}

// A device list without the host (--device cuda): the placement compile makes (each node on the
// first listed backend that runs it, the host as the fallback), step by step.
int plan_by_preference(const PlanArgs& a, const std::vector<Backend*>& backends) {
  Graph graph = load(a, backends);
  Runtime rt;
  CompileOptions options;
  for (Backend* b : backends) options.backends.push_back(b->name());
  Executable* exe = graph.compile(&rt, options);
  const std::string summary = exe->summary();
  std::printf("%s: device list %s, the host as the fallback\n%s", a.model.c_str(),
              a.device.c_str(), summary.c_str());
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
  Graph graph = load(a, backends);
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
  std::printf("\n");
  if (a.measure) {
    Runtime rt;
    CompileOptions options;
    options.backends = {"auto"};
    options.router = a.router;
    options.router.measure = false;  // the route above measured what it needed
    Executable* exe = graph.compile(&rt, options);
    std::vector<Tensor> inputs;
    for (size_t k = 0; k < exe->inputs().size(); ++k)
      inputs.push_back(random_input(exe->inputs()[k], 1234 + k));
    // Median microseconds per run over a.runs runs, after three to warm up.
    auto median_us = [&](const std::vector<Tensor>& given) {
      for (int w = 0; w < 3; ++w) exe->execute(given);
      std::vector<double> times;
      for (int64_t r = 0; r < a.runs; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        exe->execute(given);
        times.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
      return times[times.size() / 2];
    };
    const double median = median_us(inputs);
    std::printf("measured: %.4f ms per run (median of %lld), predicted %.4f ms (%+.1f%%)\n",
                median / 1000, static_cast<long long>(a.runs), plan.predicted_us / 1000,
                100 * (plan.predicted_us - median) / median);
    for (Backend* b : plan.candidates) {
      if (b->device().type == DeviceType::kCPU) continue;
      std::vector<Tensor> on_device;
      for (const Tensor& t : inputs) on_device.push_back(t.to(b->device()));
      std::printf("measured with the inputs on %s: %.4f ms per run (median of %lld)\n",
                  b->name().c_str(), median_us(on_device) / 1000, static_cast<long long>(a.runs));
    }
  }
  return 0;
}

int tune_model(const std::vector<std::string>& args) {
  PlanArgs a = parse(args, "tune", false);
  if (!a.budget_given) a.router.budget_s = 600;  // ahead of time: measure everything
  Graph graph = load(a, available_backends());
  router::RoutePlan plan = router::route(graph, available_backends(), a.router, true);
  std::printf("%s: %zu nodes, backends", a.model.c_str(), plan.decisions.size());
  for (Backend* b : plan.candidates) std::printf(" %s", b->name().c_str());
  std::printf("\n");
  print_calibration(plan);
  std::printf("predicted: %.4f ms per run\n", plan.predicted_us / 1000);
  return 0;
}

}  // namespace lumen::cli
