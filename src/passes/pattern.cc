// Pattern-matching queries shared by the transformer fusion passes.
#include "passes/pattern.h"

#include <algorithm>
#include <cmath>

#include "graph/op_kind.h"
#include "passes/rewrite.h"

namespace lumen {

int sole_reader(const Graph& graph, int id) {
  const Value& v = graph.value(id);
  if (v.is_output || v.consumers.size() != 1) return -1;
  int reader = v.consumers[0];
  return graph.node(reader).removed ? -1 : reader;
}

int producer_of(const Graph& graph, int id, OpKind op) {
  if (id < 0) return -1;
  int p = graph.value(id).producer;
  if (p < 0) return -1;
  const Node& n = graph.node(p);
  return !n.removed && n.op == op && n.outputs.size() == 1 ? p : -1;
}

bool scalar_constant(const Graph& graph, int id, float* out) {
  if (id < 0) return false;
  const Value& v = graph.value(id);
  if (!is_constant(v) || v.data->dtype() != DType::kFloat32 || v.data->numel() != 1) return false;
  *out = v.data->data<float>()[0];
  return true;
}

bool int_scalar_constant(const Graph& graph, int id, int64_t* out) {
  if (id < 0) return false;
  const Value& v = graph.value(id);
  if (!is_constant(v) || v.data->numel() != 1) return false;
  if (v.data->dtype() == DType::kInt64) {
    *out = v.data->data<int64_t>()[0];
    return true;
  }
  if (v.data->dtype() == DType::kInt32) {
    *out = v.data->data<int32_t>()[0];
    return true;
  }
  return false;
}

bool axis_slice(const Graph& graph, int v, AxisSlice* out) {
  const int p = graph.value(v).producer;
  if (p < 0) return false;
  const Node& s = graph.node(p);
  if (s.removed || s.op != OpKind::kSlice || s.inputs.size() < 4 || s.inputs[0] < 0) return false;
  const Shape& shape = graph.value(s.inputs[0]).type.shape;
  if (!shape.is_static()) return false;
  int64_t b = 0, e = 0, axis = 0, step = 1;
  if (!int_scalar_constant(graph, s.inputs[1], &b) ||
      !int_scalar_constant(graph, s.inputs[2], &e) ||
      !int_scalar_constant(graph, s.inputs[3], &axis))
    return false;
  if (s.inputs.size() > 4 && s.inputs[4] >= 0 && !int_scalar_constant(graph, s.inputs[4], &step))
    return false;
  const int64_t r = shape.rank();
  if (axis < -r || axis >= r || step != 1) return false;
  if (axis < 0) axis += r;
  const int64_t n = shape[axis];
  if (b < 0) b += n;
  if (e < 0) e += n;
  out->source = s.inputs[0];
  out->axis = axis;
  out->begin = std::min(std::max<int64_t>(b, 0), n);
  out->end = std::min(std::max<int64_t>(e, 0), n);
  return true;
}

bool is_scalar(const Graph& graph, int id, float want) {
  float got = 0.0f;
  return scalar_constant(graph, id, &got) && std::fabs(got - want) <= 1e-4f * std::fabs(want);
}

int other_input(const Node& node, int id) {
  if (node.inputs.size() != 2) return -1;
  if (node.inputs[0] == id && node.inputs[1] != id) return node.inputs[1];
  if (node.inputs[1] == id && node.inputs[0] != id) return node.inputs[0];
  return -1;
}

bool swaps_last_two(const Graph& graph, int id) {
  const Node& t = graph.node(id);
  if (t.op != OpKind::kTranspose || t.inputs.size() != 1 || t.inputs[0] < 0) return false;
  const TensorType& type = graph.value(t.inputs[0]).type;
  int rank = type.shape.rank();
  if (type.dtype != DType::kFloat32 || rank < 2) return false;
  auto it = t.attrs.find("perm");
  if (it == t.attrs.end()) return rank == 2;  // the default perm reverses the dimensions
  const std::vector<int64_t>& perm = it->second.as_ints();
  if (static_cast<int>(perm.size()) != rank) return false;
  for (int i = 0; i < rank - 2; ++i)
    if (perm[i] != i) return false;
  return perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}

float attr_float_or(const Node& n, const char* name, float fallback) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? fallback : it->second.as_float();
}

bool is_hard_swish_gate(const Node& gate) {
  return gate.op == OpKind::kHardSigmoid && attr_float_or(gate, "alpha", 0.2f) == 1.0f / 6.0f &&
         attr_float_or(gate, "beta", 0.5f) == 0.5f;
}

}  // namespace lumen
