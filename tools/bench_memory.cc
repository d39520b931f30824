// `lumen bench memory [MODEL.onnx]`: what the memory planner saves, planned and in the process:
// the intermediates' sum without reuse against the planned arena, and the process's peak resident
// memory after compiling and running once. Without a model: the 20-layer MLP of Lumen's original
// claim (20 Linear layers of width 1024 with ReLU between them, batch 64), built in code.
#include <cmath>
#include <cstdio>

#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "tools/bench_util.h"
#include "tools/commands.h"

namespace lumen::cli {
namespace {

constexpr int64_t kMlpDepth = 20;
constexpr int64_t kMlpWidth = 1024;
constexpr int64_t kMlpBatch = 64;

// The MLP as an exporter writes it: MatMul, Add of the bias, Relu, per layer.
Graph build_mlp20() {
  Graph g;
  Value* x = g.add_input("input", {kMlpBatch, kMlpWidth});
  const float he = std::sqrt(6.0f / static_cast<float>(kMlpWidth));
  for (int64_t i = 0; i < kMlpDepth; ++i) {
    std::string layer = "fc" + std::to_string(i);
    Value* w =
        g.add_constant(layer + ".weight", uniform_tensor({kMlpWidth, kMlpWidth}, he, 2 * i + 1));
    Value* b = g.add_constant(layer + ".bias", uniform_tensor({kMlpWidth}, 0.01f, 2 * i + 2));
    x = g.add_op("Add", {g.add_op("MatMul", {x, w}), b});
    if (i + 1 < kMlpDepth) x = g.add_op("Relu", {x});
  }
  g.mark_output(x);
  return g;
}

double mb(size_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

}  // namespace

int bench_memory(const std::vector<std::string>& args) {
  std::string model;
  std::string devices = "cpu";
  OnnxLoadOptions load;
  bool optimize = true;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&](const char* flag) -> const std::string& {
      if (i + 1 >= args.size())
        throw InvalidArgument(std::string("bench memory: ") + flag + " needs a value");
      return args[++i];
    };
    if (args[i] == "--shape") {
      auto [name, shape] = parse_shape_arg(value("--shape"));
      load.input_shapes[name] = shape;
    } else if (args[i] == "--device") {
      devices = value("--device");
    } else if (args[i] == "--no-optimize") {
      optimize = false;
    } else if (!args[i].empty() && args[i][0] != '-' && model.empty()) {
      model = args[i];
    } else {
      throw InvalidArgument("bench memory: unknown argument '" + args[i] + "'");
    }
  }
  const size_t rss_start = resident_bytes();
  Runtime rt;
  CompileOptions options{parse_backends(devices, rt)};
  options.release_weights = true;
  std::string name = model.empty() ? "mlp20 (20 x Linear 1024 + ReLU, batch 64)" : model;
  Executable* exe = nullptr;
  size_t weight_bytes = 0;
  {
    Graph graph = model.empty() ? build_mlp20() : load_onnx(model, load);
    for (int id = 0; id < graph.num_values(); ++id)
      if (graph.value(id).is_weight()) weight_bytes += graph.value(id).data->nbytes();
    if (optimize) graph.optimize(options.backends);
    exe = graph.compile(&rt, options);
  }
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < exe->inputs().size(); ++k)
    inputs.push_back(random_input(exe->inputs()[k], 1234 + k));
  exe->execute(inputs);
  const size_t peak = peak_resident_bytes();
  const MemoryReport r = exe->memory_report();
  const size_t saved = r.no_reuse_bytes - r.arena_bytes;
  const double cut = r.no_reuse_bytes ? 100.0 * saved / r.no_reuse_bytes : 0.0;
  std::printf("memory: %s, %s%s\n", name.c_str(), devices.c_str(),
              optimize ? ", optimized" : ", as imported");
  std::printf(
      "planned: %zu intermediates, %.2f MB without reuse -> arena %.2f MB (-%.1f%%; lower bound "
      "%.2f MB, %zu steps in place)\n",
      r.tensors.size(), mb(r.no_reuse_bytes), mb(r.arena_bytes), cut, mb(r.lower_bound_bytes),
      r.in_place_steps);
  std::printf(
      "process: peak resident %.1f MB after compiling and one run (%.1f MB before the model; "
      "weights %.1f MB); without reuse %.1f MB (computed: the peak plus the %.2f MB the plan "
      "saves): -%.1f%%\n",
      mb(peak), mb(rss_start), mb(weight_bytes), mb(peak + saved), mb(saved),
      peak ? 100.0 * saved / static_cast<double>(peak + saved) : 0.0);
  return 0;
}

}  // namespace lumen::cli
