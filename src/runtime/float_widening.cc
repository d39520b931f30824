#include "runtime/float_widening.h"

#include <algorithm>
#include <optional>

#include "graph/onnx_dtype.h"
#include "graph/op_kind.h"
#include "runtime/control_flow.h"

namespace lumen {
namespace {

bool widenable(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64;
}

bool supported(const Graph& graph, const Node& node, const std::vector<Backend*>& backends) {
  std::string why;
  for (Backend* b : backends)
    if (b->supports(graph, node, &why)) return true;
  return false;
}

// A Cast of `value` to `dtype`; returns the new value's id.
int add_cast(Graph& graph, int value, DType dtype, std::vector<bool>& needed) {
  Attributes attrs;
  attrs["to"] = static_cast<int64_t>(onnx_from_dtype(dtype));
  const std::string name = graph.unique_name(graph.value(value).name + "/to_" + dtype_name(dtype));
  const int id = graph.add_node(OpKind::kCast, {value}, 1, std::move(attrs), name).id;
  graph.infer_node(id);
  needed.push_back(true);
  return graph.node(id).outputs[0];
}

// Whether `node` would be supported with its widenable inputs as float32: the inputs' dtypes are
// changed and the node re-inferred, then everything is put back as it was.
bool supported_as_float32(Graph& graph, int id, const std::vector<Backend*>& backends) {
  Node& n = graph.node(id);
  std::vector<std::pair<int, DType>> inputs;
  for (int v : n.inputs)
    if (v >= 0 && widenable(graph.value(v).type.dtype)) inputs.emplace_back(v, graph.value(v).type.dtype);
  if (inputs.empty()) return false;
  std::vector<Value> outputs;
  for (int v : n.outputs) outputs.push_back(graph.value(v));
  // A constant input is taken as unknown for the trial: its data keeps its own dtype, which the
  // schema must not fold with.
  std::vector<std::optional<Tensor>> data;
  for (auto& [v, t] : inputs) {
    data.push_back(std::move(graph.value(v).data));
    graph.value(v).data.reset();
    graph.value(v).type.dtype = DType::kFloat32;
  }
  bool ok = false;
  try {
    graph.infer_node(id);
    ok = supported(graph, graph.node(id), backends);
  } catch (const Error&) {
    ok = false;
  }
  // In reverse, so a value read twice gets back the data its first entry took.
  for (size_t k = inputs.size(); k-- > 0;) {
    graph.value(inputs[k].first).type.dtype = inputs[k].second;
    graph.value(inputs[k].first).data = std::move(data[k]);
  }
  for (size_t k = 0; k < outputs.size(); ++k) graph.value(graph.node(id).outputs[k]) = outputs[k];
  return ok;
}

}  // namespace

int widen_unsupported_floats(Graph& graph, const std::vector<Backend*>& backends,
                             std::vector<bool>& needed) {
  int widened = 0;
  const int num_nodes = graph.num_nodes();
  for (int id = 0; id < num_nodes; ++id) {
    const Node& n = graph.node(id);
    if (n.removed || !needed[id] || is_control_flow(n.op) || n.op == OpKind::kCast ||
        n.op == OpKind::kCastLike || supported(graph, n, backends) ||
        !supported_as_float32(graph, id, backends))
      continue;
    // Inputs: a float32 copy for this node (one per input value, however often it reads it).
    std::vector<int> old_inputs = graph.node(id).inputs;
    for (int v : old_inputs) {
      if (v < 0 || !widenable(graph.value(v).type.dtype)) continue;
      const int wide = add_cast(graph, v, DType::kFloat32, needed);
      Node& node = graph.node(id);
      for (int& in : node.inputs) {
        if (in != v) continue;
        in = wide;
        auto& uses = graph.value(v).consumers;
        uses.erase(std::find(uses.begin(), uses.end(), id));
        graph.value(wide).consumers.push_back(id);
      }
    }
    std::vector<DType> declared;
    for (int v : graph.node(id).outputs) declared.push_back(graph.value(v).type.dtype);
    graph.infer_node(id);
    // Outputs that became float32: a Cast back to the declared type, which every reader (and the
    // graph's output list, under the same name) takes instead.
    const std::vector<int> outs = graph.node(id).outputs;
    for (size_t k = 0; k < outs.size(); ++k) {
      const int v = outs[k];
      if (graph.value(v).type.dtype == declared[k]) continue;
      std::vector<int> readers = graph.value(v).consumers;
      const int back = add_cast(graph, v, declared[k], needed);
      for (int c : readers) {
        Node& reader = graph.node(c);
        for (int& in : reader.inputs) {
          if (in != v) continue;
          in = back;
          auto& uses = graph.value(v).consumers;
          uses.erase(std::find(uses.begin(), uses.end(), c));
          graph.value(back).consumers.push_back(c);
        }
      }
      if (graph.value(v).is_output) {
        const std::string name = graph.value(v).name;
        graph.replace_output(v, back);
        graph.rename(&graph.value(v), graph.unique_name(name + "/float32"));
        graph.rename(&graph.value(back), name);
      }
    }
    ++widened;
  }
  return widened;
}

}  // namespace lumen
