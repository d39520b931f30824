// write_cache_in_place: a decoding step's Concat(past, new) nodes become TensorScatter into the
// cache (cache_in_place.h).
#include "onnx/cache_in_place.h"

#include <vector>

#include "graph/op_kind.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// One layer's key or value: its past input, the Concat that extends it, and its present output.
struct CacheConcat {
  int past = -1, node = -1, present = -1;
};

// The Concat of input `past_name` whose output is output `present_name`, or a CacheConcat with
// node -1 where the graph has another form.
CacheConcat find_concat(Graph& graph, const std::string& past_name,
                        const std::string& present_name) {
  CacheConcat c;
  const Value* past = graph.find_value(past_name);
  const Value* present = graph.find_value(present_name);
  if (past == nullptr || present == nullptr || !past->is_input || !present->is_output ||
      past->consumers.size() != 1 || past->type.shape.rank() != 4 ||
      !present->type.shape.is_static())
    return c;
  const Node& n = graph.node(past->consumers[0]);
  if (n.op != OpKind::kConcat || n.inputs.size() != 2 || n.inputs[0] != past->id ||
      n.outputs.size() != 1 || n.outputs[0] != present->id)
    return c;
  auto axis = n.attrs.find("axis");
  if (axis == n.attrs.end() || normalize_axis(axis->second.as_int(), 4) != 2) return c;
  const Shape& cache = present->type.shape;
  const Shape& added = graph.value(n.inputs[1]).type.shape;
  if (added.rank() != 4 || added[2] != 1 || added[0] != cache[0] || added[1] != cache[1] ||
      added[3] != cache[3])
    return c;
  c.past = past->id;
  c.node = n.id;
  c.present = present->id;
  return c;
}

}  // namespace

bool write_cache_in_place(Graph& graph, int64_t layers) {
  std::vector<CacheConcat> found;
  for (int64_t l = 0; l < layers; ++l)
    for (const char* kind : {".key", ".value"}) {
      const std::string layer = std::to_string(l) + kind;
      CacheConcat c = find_concat(graph, "past_key_values." + layer, "present." + layer);
      if (c.node < 0) return false;
      found.push_back(c);
    }
  if (found.empty() || graph.find_value(kCacheWriteIndex) != nullptr) return false;
  const int64_t batch = graph.value(found[0].present).type.shape[0];
  Value* index = graph.add_input(kCacheWriteIndex, Shape{batch}, DType::kInt64);
  for (const CacheConcat& c : found) {
    Value& past = graph.value(c.past);
    past.type = graph.value(c.present).type;
    Node& n = graph.node(c.node);
    n.op = OpKind::kTensorScatter;
    n.attrs = {{"axis", int64_t{2}}, {"mode", std::string("linear")}};
    n.inputs.resize(3, -1);
    set_input(graph, c.node, 2, index->id);
    graph.infer_node(c.node);
    graph.remove_output(c.present);
    graph.mark_input_written(&past);
  }
  return true;
}

}  // namespace lumen
