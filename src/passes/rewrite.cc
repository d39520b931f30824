// Graph-editing helpers shared by the optimizer passes.
#include "passes/rewrite.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "graph/op_kind.h"

namespace lumen {

bool is_constant(const Value& value) {
  return value.data.has_value() && !value.user_weight;
}

bool can_replace_uses(const Graph& graph, int from, int to) {
  if (from == to) return false;
  const Value& f = graph.value(from);
  const Value& t = graph.value(to);
  if (!(f.type == t.type)) return false;
  if (!f.is_output) return true;
  return t.producer >= 0 && !t.is_input && !t.is_output && !f.is_input;
}

void replace_uses(Graph& graph, int from, int to) {
  if (!can_replace_uses(graph, from, to))
    throw InvalidArgument("replace_uses: cannot move the uses of '" + graph.value(from).name +
                          "' to '" + graph.value(to).name + "'");
  Value& f = graph.value(from);
  Value& t = graph.value(to);
  std::vector<int> readers = f.consumers;
  std::sort(readers.begin(), readers.end());
  readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
  for (int c : readers) {
    for (int& in : graph.node(c).inputs) {
      if (in != from) continue;
      in = to;
      t.consumers.push_back(c);  // one entry per use
    }
  }
  f.consumers.clear();
  if (f.is_output) {
    std::string output_name = f.name;
    std::string inner_name = t.name;
    graph.rename(&f, graph.unique_name(output_name + "_replaced"));
    graph.rename(&t, output_name);
    graph.rename(&f, inner_name);
    graph.replace_output(from, to);
  }
}

void remove_node(Graph& graph, int id) {
  Node& n = graph.node(id);
  for (int out : n.outputs) {
    const Value& v = graph.value(out);
    bool used = v.is_output;
    for (int c : v.consumers) used = used || !graph.node(c).removed;
    if (used && v.producer == id)
      throw InvalidArgument("remove_node: output '" + v.name + "' of node '" + n.name + "' (" +
                            op_name(n.op) + ") is still used");
  }
  for (int in : n.inputs) {
    if (in < 0) continue;
    auto& cons = graph.value(in).consumers;
    auto it = std::find(cons.begin(), cons.end(), id);
    if (it != cons.end()) cons.erase(it);
  }
  n.removed = true;
}

bool release_if_unused(Graph& graph, int id) {
  Value& v = graph.value(id);
  if (!v.consumers.empty() || v.is_output || v.is_input || v.producer >= 0 || !is_constant(v))
    return false;
  v.data.reset();
  return true;
}

void replace_chain(Graph& graph, const std::vector<int>& chain, int out, int replacement) {
  std::vector<int> constants;
  for (int n : chain)
    for (int in : graph.node(n).inputs)
      if (in >= 0 && is_constant(graph.value(in))) constants.push_back(in);
  replace_uses(graph, out, replacement);
  const std::vector<int> order = graph.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (std::find(chain.begin(), chain.end(), *it) != chain.end()) remove_node(graph, *it);
  for (int k : constants) release_if_unused(graph, k);
}

void set_input(Graph& graph, int id, int k, int to) {
  Node& n = graph.node(id);
  int from = n.inputs.at(k);
  if (from >= 0) {
    auto& cons = graph.value(from).consumers;
    auto it = std::find(cons.begin(), cons.end(), id);
    if (it != cons.end()) cons.erase(it);
  }
  n.inputs[k] = to;
  if (to >= 0) graph.value(to).consumers.push_back(id);
}

int add_reshape(Graph& graph, int v, const Shape& shape, const std::string& name) {
  const std::string unique = graph.unique_name(name);
  const Tensor dims =
      Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(shape.rank())}, shape.dims());
  const int target = graph.add_constant(graph.unique_name(unique + "_shape"), dims)->id;
  const int id = graph.add_node(OpKind::kReshape, {v, target}, 1, {}, unique).id;
  graph.infer_node(id);
  return graph.node(id).outputs[0];
}

bool attributes_equal(const Attribute& a, const Attribute& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case AttrType::kInt:
      return a.as_int() == b.as_int();
    case AttrType::kFloat:
      return a.as_float() == b.as_float();
    case AttrType::kString:
      return a.as_string() == b.as_string();
    case AttrType::kInts:
      return a.as_ints() == b.as_ints();
    case AttrType::kFloats:
      return a.as_floats() == b.as_floats();
    case AttrType::kStrings:
      return a.as_strings() == b.as_strings();
    case AttrType::kTensor: {
      const Tensor& x = a.as_tensor();
      const Tensor& y = b.as_tensor();
      if (x.defined() != y.defined()) return false;
      if (!x.defined()) return true;
      return x.dtype() == y.dtype() && x.shape() == y.shape() &&
             std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
    }
    case AttrType::kGraph:
      return a.as_graph() == b.as_graph();
  }
  return false;
}

bool attributes_equal(const Attributes& a, const Attributes& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
    if (ia->first != ib->first || !attributes_equal(ia->second, ib->second)) return false;
  return true;
}

std::map<std::string, int> op_histogram(const Graph& graph) {
  std::map<std::string, int> histogram;
  for (int id = 0; id < graph.num_nodes(); ++id)
    if (!graph.node(id).removed) ++histogram[op_name(graph.node(id).op)];
  return histogram;
}

int row_bias_value(Graph& graph, int v, int64_t n) {
  const Value& b = graph.value(v);
  if (b.type.dtype != DType::kFloat32 || b.type.shape.rank() < 1 || b.type.shape[-1] != n)
    return -1;
  if (b.type.shape.rank() == 1) return v;
  if (!is_constant(b) || b.data->numel() != n) return -1;
  Tensor flat = Tensor::empty(Shape{n}, DType::kFloat32);
  std::memcpy(flat.raw_data(), b.data->raw_data(), static_cast<size_t>(n) * sizeof(float));
  return graph.add_constant(graph.unique_name(b.name + "_row"), flat)->id;
}

namespace {
float attr_float_or(const Node& n, const char* name, float fallback) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? fallback : it->second.as_float();
}
}  // namespace

bool gemm_fits_fused_matmul(const Graph& graph, const Node& gemm) {
  if (gemm.op != OpKind::kGemm || gemm.outputs.size() != 1) return false;
  if (graph.value(gemm.inputs[0]).type.dtype != DType::kFloat32 ||
      attr_float_or(gemm, "alpha", 1.0f) != 1.0f)
    return false;
  if (gemm.inputs.size() <= 2 || gemm.inputs[2] < 0) return true;
  const int64_t n = graph.value(gemm.outputs[0]).type.shape[-1];
  if (attr_float_or(gemm, "beta", 1.0f) != 1.0f) return false;
  const Value& c = graph.value(gemm.inputs[2]);
  const int rank = c.type.shape.rank();
  if (rank != 1 && !(rank == 2 && c.type.shape[0] == 1 && is_constant(c))) return false;
  return c.type.shape[-1] == n;
}

void gemm_to_fused_matmul(Graph& graph, int id) {
  Node& gemm = graph.node(id);
  const int gemm_bias = gemm.inputs.size() > 2 ? gemm.inputs[2] : -1;
  const int64_t n = graph.value(gemm.outputs[0]).type.shape[-1];
  const int bias = gemm_bias < 0 ? -1 : row_bias_value(graph, gemm_bias, n);
  Node& node = graph.node(id);  // row_bias_value may have grown the graph
  auto flag = [&](const char* name) {
    auto it = node.attrs.find(name);
    return int64_t{it != node.attrs.end() && it->second.as_int() != 0 ? 1 : 0};
  };
  const int64_t trans_a = flag("transA"), trans_b = flag("transB");
  node.attrs.clear();
  node.attrs["trans_a"] = trans_a;
  node.attrs["trans_b"] = trans_b;
  if (node.inputs.size() > 2) set_input(graph, id, 2, bias);
  if (bias < 0) graph.node(id).inputs.resize(2);
  if (gemm_bias >= 0 && bias != gemm_bias) release_if_unused(graph, gemm_bias);
  graph.node(id).op = OpKind::kFusedMatMul;
}

int before_reshapes(const Graph& graph, int y) {
  for (;;) {
    const Value& v = graph.value(y);
    if (v.producer < 0 || v.is_output || v.consumers.size() != 1 || !v.type.shape.is_static())
      return y;
    const Node& n = graph.node(v.producer);
    if (n.op != OpKind::kReshape) return y;
    y = n.inputs[0];
  }
}

bool fused_matmul_has_norm(const Node& n) {
  return n.op == OpKind::kFusedMatMul && n.inputs.size() > 4 && n.inputs[4] >= 0;
}

bool activation_attributes(const Graph& graph, const Node& act, Attributes* attrs) {
  auto param = [&](int k, float fallback, float* out) {
    if (k >= static_cast<int>(act.inputs.size()) || act.inputs[k] < 0) {
      *out = fallback;
      return true;
    }
    const Value& v = graph.value(act.inputs[k]);
    if (!is_constant(v) || v.data->numel() != 1 || v.data->dtype() != DType::kFloat32) return false;
    *out = static_cast<float>(v.data->item_as_double());
    return true;
  };
  switch (act.op) {
    case OpKind::kRelu:
      (*attrs)["activation"] = "Relu";
      return true;
    case OpKind::kSigmoid:
      (*attrs)["activation"] = "Sigmoid";
      return true;
    case OpKind::kTanh:
      (*attrs)["activation"] = "Tanh";
      return true;
    case OpKind::kHardSwish:
      (*attrs)["activation"] = "HardSwish";
      return true;
    case OpKind::kLeakyRelu: {
      float alpha = 0.01f;
      if (auto it = act.attrs.find("alpha"); it != act.attrs.end()) alpha = it->second.as_float();
      (*attrs)["activation"] = "LeakyRelu";
      (*attrs)["activation_alpha"] = alpha;
      return true;
    }
    case OpKind::kClip: {
      float lo = 0, hi = 0;
      if (!param(1, std::numeric_limits<float>::lowest(), &lo) ||
          !param(2, std::numeric_limits<float>::max(), &hi))
        return false;
      (*attrs)["activation"] = "Clip";
      (*attrs)["activation_alpha"] = lo;
      (*attrs)["activation_beta"] = hi;
      return true;
    }
    default:
      return false;
  }
}

bool batch_norm_affine(const Graph& graph, const Node& bn, int64_t channels,
                       std::vector<double>* scale, std::vector<double>* shift) {
  if (bn.op != OpKind::kBatchNormalization || bn.inputs.size() < 5) return false;
  const float* p[4];
  for (int k = 0; k < 4; ++k) {
    const int id = bn.inputs[k + 1];
    if (id < 0) return false;
    const Value& v = graph.value(id);
    if (!is_constant(v) || v.data->dtype() != DType::kFloat32 || v.data->numel() != channels)
      return false;
    p[k] = v.data->data<float>();
  }
  double eps = 1e-5;
  if (auto it = bn.attrs.find("epsilon"); it != bn.attrs.end()) eps = it->second.as_float();
  scale->resize(static_cast<size_t>(channels));
  shift->resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const double s = static_cast<double>(p[0][c]) / std::sqrt(static_cast<double>(p[3][c]) + eps);
    (*scale)[c] = s;
    (*shift)[c] = p[1][c] - p[2][c] * s;
  }
  return true;
}

}  // namespace lumen
