// `lumen bench fusion`: Conv followed by Relu as two kernels against the one FusedConv the
// optimizer makes of them, per backend: steps (kernel calls) per run and time per run. The
// original claim was Conv2d+ReLU in one kernel launch.
#include <cstdio>

#include "lumen/lumen.h"
#include "tools/bench_util.h"
#include "tools/commands.h"

namespace lumen::cli {
namespace {

struct FusionArgs {
  int64_t batch = 1;
  int64_t channels = 64;
  int64_t size = 56;
  int64_t runs = 0;
  std::string devices;
};

// The conv layer as a model holds it: Conv then Relu (two nodes), or the fused node; neither is
// optimized further, so the two differ only in the fusion.
Graph build_layer(const FusionArgs& a, const Tensor& w, const Tensor& b, bool fused) {
  Graph g;
  Value* x = g.add_input("x", {a.batch, a.channels, a.size, a.size});
  Attributes attrs{{"pads", {1, 1, 1, 1}}, {"kernel_shape", {3, 3}}};
  std::vector<Value*> in{x, g.add_constant("w", w), g.add_constant("b", b)};
  if (fused) {
    attrs["activation"] = "Relu";
    g.mark_output(g.add_op("FusedConv", in, attrs));
  } else {
    g.mark_output(g.add_op("Relu", {g.add_op("Conv", in, attrs)}));
  }
  return g;
}

}  // namespace

int bench_fusion(const std::vector<std::string>& args) {
  FusionArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&](const char* flag) -> const std::string& {
      if (i + 1 >= args.size())
        throw InvalidArgument(std::string("bench fusion: ") + flag + " needs a value");
      return args[++i];
    };
    if (args[i] == "--runs") {
      a.runs = parse_count(value("--runs"), "--runs");
    } else if (args[i] == "--batch") {
      a.batch = parse_count(value("--batch"), "--batch");
    } else if (args[i] == "--channels") {
      a.channels = parse_count(value("--channels"), "--channels");
    } else if (args[i] == "--size") {
      a.size = parse_count(value("--size"), "--size");
    } else if (args[i] == "--device") {
      a.devices = value("--device");
    } else {
      throw InvalidArgument("bench fusion: unknown argument '" + args[i] + "'");
    }
  }
  Runtime rt;
  std::vector<std::string> backends = parse_backends(a.devices, rt);
  const Tensor w = uniform_tensor({a.channels, a.channels, 3, 3}, 1.0f, 1);
  const Tensor b = uniform_tensor({a.channels}, 1.0f, 2);
  const Tensor x = uniform_tensor({a.batch, a.channels, a.size, a.size}, 1.0f, 3);
  std::printf(
      "fusion: Conv 3x3 (%lld -> %lld channels, %lldx%lld, batch %lld, pads 1) + Relu, float32; "
      "input resident on the backend's device, output back on the host\n",
      static_cast<long long>(a.channels), static_cast<long long>(a.channels),
      static_cast<long long>(a.size), static_cast<long long>(a.size),
      static_cast<long long>(a.batch));
  std::printf("%-8s %-16s %7s %10s %10s %6s  %s\n", "backend", "graph", "kernels", "median_ms",
              "min_ms", "runs", "the steps' ops (a resident input's Copy is a no-op)");
  for (const std::string& backend : backends) {
    const Tensor x_resident = x.to(backend_device(backend));
    Timing t[2];
    size_t steps[2] = {0, 0};
    for (int fused = 0; fused < 2; ++fused) {
      Graph g = build_layer(a, w, b, fused != 0);
      Executable* exe = g.compile(&rt, CompileOptions{{backend}});
      RunProfile profile;
      exe->execute({x_resident}, &profile);
      // The input's Copy step (on a device backend) returns the input itself when it is
      // already there: it is listed, not counted as a kernel.
      std::string ops;
      for (const RunProfile::Step& step : profile.steps) {
        ops += (ops.empty() ? "" : ", ") + step.op;
        steps[fused] += step.op == "Copy" ? 0 : 1;
      }
      t[fused] = time_runs([&] { return wall_ms([&] { exe->execute({x_resident}); }); }, a.runs);
      std::printf("%-8s %-16s %7zu %10.3f %10.3f %6zu  %s\n", backend.c_str(),
                  fused ? "FusedConv(Relu)" : "Conv, Relu", steps[fused], t[fused].median_ms,
                  t[fused].min_ms, t[fused].runs, ops.c_str());
    }
    std::printf(
        "%-8s fused: %zu kernel(s) per run instead of %zu, %.3f ms instead of %.3f (%.2fx)\n",
        backend.c_str(), steps[1], steps[0], t[1].median_ms, t[0].median_ms,
        t[0].median_ms / t[1].median_ms);
  }
  return 0;
}

}  // namespace lumen::cli
