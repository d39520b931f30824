// convert_to_half_storage: one pass over the values, deciding each float32 value's storage from its
// producer and readers.
#include "runtime/half_storage.h"

#include <algorithm>

#include "core/half.h"
#include "graph/onnx_dtype.h"
#include "graph/op_kind.h"

namespace lumen {
namespace {

// The tensor's float32 values rounded to `half` (nearest even), on the host.
Tensor to_half(const Tensor& t, DType half) {
  Tensor host = t.to(Device::cpu());
  Tensor out = Tensor::empty(host.shape(), half);
  const float* src = host.data<float>();
  auto* dst = static_cast<uint16_t*>(out.raw_data());
  const bool bf16 = half == DType::kBFloat16;
  for (int64_t i = 0; i < host.numel(); ++i)
    dst[i] = bf16 ? float_to_bfloat16(src[i]) : float_to_half(src[i]);
  return out;
}

// Makes node `node` read `to` wherever it read `from`.
void rewire(Graph& graph, int node, int from, int to) {
  Node& n = graph.node(node);
  for (int& in : n.inputs) {
    if (in != from) continue;
    in = to;
    auto& uses = graph.value(from).consumers;
    uses.erase(std::find(uses.begin(), uses.end(), node));
    graph.value(to).consumers.push_back(node);
  }
}

// A Cast of `value` to `dtype`, run on `backend`; returns the new value's id.
int add_cast(Graph& graph, int value, DType dtype, Backend* backend, std::vector<Backend*>& placed,
             std::vector<bool>& needed) {
  Attributes attrs;
  attrs["to"] = static_cast<int64_t>(onnx_from_dtype(dtype));
  const std::string name = graph.unique_name(graph.value(value).name + "/to_" + dtype_name(dtype));
  const int id = graph.add_node(OpKind::kCast, {value}, 1, std::move(attrs), name).id;
  graph.infer_node(id);
  placed.push_back(backend);
  needed.push_back(true);
  return graph.node(id).outputs[0];
}

}  // namespace

int convert_to_half_storage(Graph& graph, DType half, std::vector<Backend*>& placed,
                            std::vector<bool>& needed) {
  const int num_nodes = graph.num_nodes();
  std::vector<bool> on_half(num_nodes, false);
  int count = 0;
  for (int id = 0; id < num_nodes; ++id) {
    const Node& n = graph.node(id);
    if (!needed[id] || n.removed || placed[id] == nullptr || !placed[id]->takes_half_floats(half))
      continue;
    bool any = false;
    for (int v : n.inputs)
      if (v >= 0 && graph.value(v).type.dtype == DType::kFloat32) any = true;
    for (int v : n.outputs)
      if (graph.value(v).type.dtype == DType::kFloat32) any = true;
    on_half[id] = any;
    count += any ? 1 : 0;
  }
  if (count == 0) return 0;
  const int num_values = graph.num_values();
  for (int v = 0; v < num_values; ++v) {
    if (graph.value(v).type.dtype != DType::kFloat32) continue;
    // The readers that run, split by the storage they take (one entry per node).
    std::vector<int> half_readers, float_readers;
    for (int c : graph.value(v).consumers) {
      if (c >= num_nodes || !needed[c] || graph.node(c).removed) continue;
      auto& list = on_half[c] ? half_readers : float_readers;
      if (std::find(list.begin(), list.end(), c) == list.end()) list.push_back(c);
    }
    Value& value = graph.value(v);
    const bool constant = value.data.has_value() && !value.is_input;
    const bool from_half = !constant && value.producer >= 0 && on_half[value.producer];
    if (from_half) {
      value.type.dtype = half;
      if (float_readers.empty() && !value.is_output) continue;
      const int f32 = add_cast(graph, v, DType::kFloat32, placed[value.producer], placed, needed);
      for (int c : float_readers) rewire(graph, c, v, f32);
      if (graph.value(v).is_output) {
        // The graph's output keeps its name and float32 type: the cast's value takes both.
        const std::string name = graph.value(v).name;
        graph.replace_output(v, f32);
        graph.rename(&graph.value(v), graph.unique_name(name + "/" + dtype_name(half)));
        graph.rename(&graph.value(f32), name);
      }
      continue;
    }
    if (half_readers.empty()) continue;
    if (constant && !value.user_weight && float_readers.empty()) {
      value.data = to_half(*value.data, half);
      value.type.dtype = half;
      continue;
    }
    // A 16-bit copy for the 16-bit readers: converted now when constant, else cast at run time.
    const int narrow =
        constant && !value.user_weight
            ? graph
                  .add_constant(graph.unique_name(value.name + "/" + dtype_name(half)),
                                to_half(*value.data, half))
                  ->id
            : add_cast(graph, v, half, placed[half_readers.front()], placed, needed);
    for (int c : half_readers) rewire(graph, c, v, narrow);
  }
  return count;
}

}  // namespace lumen
