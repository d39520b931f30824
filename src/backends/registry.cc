// The list of backends, and the build-time evaluator the graph uses to fold shape arithmetic.
#include <mutex>

#include "backends/backend.h"
#include "backends/backend_registry.h"
#include "backends/cpu/cpu_backend.h"
#include "core/plugins.h"
#include "graph/schema.h"

namespace lumen {
namespace {

// Runs one node on the CPU backend over known inputs.
std::vector<Tensor> evaluate_on_cpu(const Graph& graph, const Node& node,
                                    const std::vector<Tensor>& inputs) {
  Backend& cpu = cpu::cpu_backend();
  std::string reason;
  if (!cpu.supports(graph, node, &reason)) throw UnsupportedOp(reason);
  auto kernel = cpu.make_kernel(graph, node, Precision::kFloat32);
  std::vector<Tensor> outputs(node.outputs.size());
  if (!kernel->makes_outputs())
    for (size_t k = 0; k < outputs.size(); ++k) {
      const TensorType& t = graph.value(node.outputs[k]).type;
      outputs[k] = Tensor::empty(t.shape, t.dtype);
    }
  KernelContext ctx{inputs, outputs, &cpu.default_stream()};
  kernel->run(ctx);
  for (Tensor& t : outputs)
    if (t.buffer().use_count() > 1 || t.offset() != 0) t = t.clone();  // never alias inputs
  return outputs;
}

const bool kEvaluatorInstalled = (set_node_evaluator(&evaluate_on_cpu), true);

std::vector<Backend* (*)()>& probes() {
  static std::vector<Backend* (*)()> list;
  return list;
}

std::mutex& probes_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

bool register_backend(Backend* (*probe)()) {
  std::lock_guard<std::mutex> lock(probes_mutex());
  probes().push_back(probe);
  return true;
}

std::vector<Backend*> available_backends() {
  load_default_plugins();
  std::vector<Backend* (*)()> list;
  {
    std::lock_guard<std::mutex> lock(probes_mutex());
    list = probes();
  }
  std::vector<Backend*> out = {&cpu::cpu_backend()};
  for (auto probe : list)
    if (Backend* b = probe()) out.push_back(b);
  return out;
}

std::vector<Backend*> auto_backends() {
  std::vector<Backend*> out;
  for (Backend* b : available_backends())
    if (b->in_auto()) out.push_back(b);
  return out;
}

Backend* find_backend(const std::string& name) {
  if (name == "cpu") return &cpu::cpu_backend();  // never loads a plugin
  for (Backend* b : available_backends())
    if (b->name() == name) return b;
  return nullptr;
}

}  // namespace lumen
