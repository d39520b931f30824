// Channels-last layout: convolutions and the element-wise ops, pools and concats between them run
// on (N, H, W, C) tensors, with one Transpose where a region begins and one where it ends.
//
// oneDNN's convolutions are fastest on a channels-minor layout; fed (N, C, H, W) they reorder
// every input and output (measured on resnet50 with oneDNN 2.6: 40 reorders per run, and its 1x1
// convolutions ran as plain GEMMs, 2x slower with an activation post-op). Keeping whole regions in
// (N, H, W, C) removes those reorders: element-wise ops do not care about the order of their
// elements, so only the ops that name an axis change (Conv, the pools, Concat's and
// ChannelShuffle's axis, the global pools, which become a ReduceMean/ReduceMax over the spatial
// axes). Constant operands of binary ops (per-channel scales, biases) are transposed once here.
//
// Quantized models take part the same way: QLinearConv, per-tensor QuantizeLinear and
// DequantizeLinear (element-wise) and QLinearAdd, whose 8-bit activations then stay in
// (N, H, W, C) between oneDNN's int8 convolutions.
#include <algorithm>
#include <initializer_list>
#include <map>
#include <numeric>
#include <set>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// kQBinary: QLinearAdd, whose activations are inputs 0 and 3.
enum class Role { kNone, kConv, kPool, kUnary, kBinary, kQBinary, kConcat, kShuffle, kGlobalPool };

bool is_float_4d(const Value& v) {
  return v.type.dtype == DType::kFloat32 && v.type.shape.rank() == 4 && v.type.shape.is_static();
}

// A float32 or 8-bit (N, C, H, W) activation of known shape.
bool is_activation_4d(const Value& v) {
  const DType t = v.type.dtype;
  return (t == DType::kFloat32 || t == DType::kUInt8 || t == DType::kInt8) &&
         v.type.shape.rank() == 4 && v.type.shape.is_static();
}

int64_t attr_int(const Node& n, const char* name, int64_t fallback) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? fallback : it->second.as_int();
}

// Whether input k of a unary node is a scalar parameter (Clip's min and max), not an activation.
bool scalar_constant(const Graph& graph, int id) {
  return id < 0 || (is_constant(graph.value(id)) && graph.value(id).data->numel() == 1);
}

// A constant operand of a binary op that can be rewritten for a (N, H, W, C) output: float32 of
// rank 4 or less (broadcast from the right, as ONNX does).
bool permutable_constant(const Value& v) {
  return is_constant(v) && v.data->dtype() == DType::kFloat32 && v.type.shape.rank() <= 4;
}

// The role of a quantized op (QLinearConv, per-tensor QuantizeLinear and DequantizeLinear,
// QLinearAdd), or kNone.
Role quantized_role(const Graph& graph, const Node& n) {
  if (n.outputs.size() != 1 || !is_activation_4d(graph.value(n.outputs[0]))) return Role::kNone;
  auto activation_in = [&](int k) {
    return k < static_cast<int>(n.inputs.size()) && n.inputs[k] >= 0 &&
           !is_constant(graph.value(n.inputs[k])) && is_activation_4d(graph.value(n.inputs[k]));
  };
  // Every input but the activations is a one-element constant (a scale or zero point).
  auto parameters_scalar = [&](std::initializer_list<int> activations) {
    for (int k = 0; k < static_cast<int>(n.inputs.size()); ++k)
      if (std::find(activations.begin(), activations.end(), k) == activations.end() &&
          !scalar_constant(graph, n.inputs[k]))
        return false;
    return true;
  };
  switch (n.op) {
    case OpKind::kQLinearConv:
      return attr_int(n, "channels_last", 0) == 0 && activation_in(0) ? Role::kConv : Role::kNone;
    case OpKind::kQuantizeLinear:
    case OpKind::kDequantizeLinear:
      return attr_int(n, "block_size", 0) == 0 && activation_in(0) && parameters_scalar({0})
                 ? Role::kUnary
                 : Role::kNone;
    case OpKind::kQLinearAdd:
      return activation_in(0) && activation_in(3) && parameters_scalar({0, 3}) ? Role::kQBinary
                                                                               : Role::kNone;
    default:
      return Role::kNone;
  }
}

Role role_of(const Graph& graph, const Node& n) {
  if (const Role r = quantized_role(graph, n); r != Role::kNone) return r;
  if (n.outputs.empty() || !is_float_4d(graph.value(n.outputs[0]))) return Role::kNone;
  if (n.inputs.empty() || n.inputs[0] < 0) return Role::kNone;
  auto activation_in = [&](int k) { return is_float_4d(graph.value(n.inputs[k])); };
  switch (n.op) {
    case OpKind::kConv:
    case OpKind::kFusedConv:
      return attr_int(n, "channels_last", 0) == 0 && activation_in(0) ? Role::kConv : Role::kNone;
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: {
      if (n.outputs.size() != 1 || attr_int(n, "channels_last", 0) != 0 || !activation_in(0))
        return Role::kNone;
      // oneDNN counts ceil_mode's overhang in count_include_pad's divisor (pool.cc): the
      // direct kernel, which reads (N, C, H, W) only, runs that case.
      bool overhang_divisor = n.op == OpKind::kAveragePool && attr_int(n, "ceil_mode", 0) != 0 &&
                              attr_int(n, "count_include_pad", 0) != 0;
      return overhang_divisor ? Role::kNone : Role::kPool;
    }
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool:
      return activation_in(0) ? Role::kGlobalPool : Role::kNone;
    case OpKind::kRelu:
    case OpKind::kLeakyRelu:
    case OpKind::kClip:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kElu:
    case OpKind::kSoftplus:
    case OpKind::kExp:
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kSqrt:
    case OpKind::kErf:
    case OpKind::kIdentity: {
      if (!activation_in(0)) return Role::kNone;
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (!scalar_constant(graph, n.inputs[k])) return Role::kNone;
      return Role::kUnary;
    }
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv: {
      if (n.inputs.size() != 2 || n.inputs[1] < 0) return Role::kNone;
      for (int k = 0; k < 2; ++k) {
        const Value& v = graph.value(n.inputs[k]);
        if (is_constant(v) ? !permutable_constant(v) : !is_float_4d(v)) return Role::kNone;
      }
      return Role::kBinary;
    }
    case OpKind::kConcat:
    case OpKind::kFusedConcat: {
      if (attr_int(n, "axis", 0) != 1 && attr_int(n, "axis", 0) != -3) return Role::kNone;
      // FusedConcat's scale and shift (inputs 0 and 1) hold one value per channel in any shape.
      const size_t first = n.op == OpKind::kFusedConcat ? 2 : 0;
      for (size_t k = first; k < n.inputs.size(); ++k) {
        const int in = n.inputs[k];
        if (in < 0 || is_constant(graph.value(in)) || !is_float_4d(graph.value(in)))
          return Role::kNone;
      }
      return Role::kConcat;
    }
    case OpKind::kChannelShuffle: {
      if (attr_int(n, "axis", 0) != 1 && attr_int(n, "axis", 0) != -3) return Role::kNone;
      for (int in : n.inputs)
        if (in < 0 || is_constant(graph.value(in)) || !is_float_4d(graph.value(in)))
          return Role::kNone;
      for (int out : n.outputs)
        if (!is_float_4d(graph.value(out))) return Role::kNone;
      return Role::kShuffle;
    }
    default:
      return Role::kNone;
  }
}

// Inputs of `n` that carry (N, C, H, W) activations, which the rewrite turns channels-last.
std::vector<int> activation_inputs(const Graph& graph, const Node& n, Role role) {
  std::vector<int> ks;
  for (int k = 0; k < static_cast<int>(n.inputs.size()); ++k) {
    int in = n.inputs[k];
    if (in < 0 || is_constant(graph.value(in))) continue;
    bool all = role == Role::kBinary || role == Role::kQBinary || role == Role::kConcat ||
               role == Role::kShuffle;
    if (k == 0 || all) ks.push_back(k);
  }
  return ks;
}

// A float32 constant broadcast against a rank-4 (N, C, H, W) tensor, rewritten for (N, H, W, C):
// padded to rank 4 on the left, then its axes permuted the same way.
Tensor to_channels_last_constant(const Tensor& t) {
  std::vector<int64_t> d = t.shape().dims();
  while (d.size() < 4) d.insert(d.begin(), 1);
  const int64_t n = d[0], c = d[1], h = d[2], w = d[3];
  Tensor out = Tensor::empty(Shape({n, h, w, c}), DType::kFloat32);
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw)
          dst[((in * h + ih) * w + iw) * c + ic] = src[((in * c + ic) * h + ih) * w + iw];
  return out;
}

class ChannelsLastPass : public Pass {
 public:
  const char* name() const override { return "channels-last"; }

  bool run(Graph& graph) override {
    std::vector<int> order = graph.topological_order();
    std::map<int, Role> roles;
    for (int id : order) {
      Role r = role_of(graph, graph.node(id));
      if (r != Role::kNone) roles[id] = r;
    }
    // Regions: candidates joined by the activations they pass each other.
    std::map<int, int> parent;
    for (const auto& [id, role] : roles) parent[id] = id;
    auto find = [&parent](int x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    for (const auto& [id, role] : roles)
      for (int k : activation_inputs(graph, graph.node(id), role)) {
        int producer = graph.value(graph.node(id).inputs[k]).producer;
        if (producer >= 0 && roles.count(producer)) parent[find(producer)] = find(id);
      }
    // Only regions with at least two convolutions pay for their two transposes.
    std::map<int, int> convs;
    for (const auto& [id, role] : roles)
      if (role == Role::kConv) ++convs[find(id)];
    std::set<int> region;
    for (const auto& [id, role] : roles)
      if (convs[find(id)] >= 2) region.insert(id);
    if (region.empty()) return false;

    std::map<int, int> entered;    // (N, C, H, W) value -> its channels-last transpose
    std::map<int, int> constants;  // constant operand -> its channels-last copy
    for (int id : order) {
      if (!region.count(id)) continue;
      Role role = roles[id];
      for (int k : activation_inputs(graph, graph.node(id), role)) {
        int in = graph.node(id).inputs[k];
        int producer = graph.value(in).producer;
        if (producer >= 0 && region.count(producer)) continue;
        if (!entered.count(in)) {
          Value* t = graph.add_op("Transpose", {&graph.value(in)}, {{"perm", {0, 2, 3, 1}}},
                                  graph.unique_name(graph.value(in).name + "_nhwc"));
          entered[in] = t->id;
        }
        set_input(graph, id, k, entered[in]);
      }
      if (role == Role::kBinary) {
        for (int k = 0; k < 2; ++k) {
          int in = graph.node(id).inputs[k];
          if (!is_constant(graph.value(in))) continue;
          if (!constants.count(in)) {
            Tensor t = to_channels_last_constant(*graph.value(in).data);
            constants[in] =
                graph.add_constant(graph.unique_name(graph.value(in).name + "_nhwc"), t)->id;
          }
          set_input(graph, id, k, constants[in]);
          release_if_unused(graph, in);
        }
      }
      Node& n = graph.node(id);
      switch (role) {
        case Role::kConv:
          if (n.op == OpKind::kConv) {
            n.op = OpKind::kFusedConv;
            n.attrs["activation"] = "";
          }
          n.attrs["channels_last"] = int64_t{1};
          break;
        case Role::kPool:
          n.attrs["channels_last"] = int64_t{1};
          break;
        case Role::kConcat:
        case Role::kShuffle:
          n.attrs["axis"] = int64_t{3};
          break;
        case Role::kGlobalPool:
          n.op = n.op == OpKind::kGlobalAveragePool ? OpKind::kReduceMean : OpKind::kReduceMax;
          n.attrs = {{"axes", std::vector<int64_t>{1, 2}}, {"keepdims", int64_t{1}}};
          break;
        default:
          break;
      }
      graph.infer_node(id);
    }
    // Where a region's value leaves it (a reader outside, or a graph output), one Transpose
    // gives the rest of the graph its (N, C, H, W) value back.
    for (int id : order) {
      if (!region.count(id)) continue;
      for (int out : std::vector<int>(graph.node(id).outputs)) {
        std::vector<std::pair<int, int>> outside;  // (node, input index)
        std::set<int> readers(graph.value(out).consumers.begin(), graph.value(out).consumers.end());
        for (int reader : readers) {
          if (region.count(reader)) continue;
          const Node& r = graph.node(reader);
          for (int k = 0; k < static_cast<int>(r.inputs.size()); ++k)
            if (r.inputs[k] == out) outside.emplace_back(reader, k);
        }
        bool is_output = graph.value(out).is_output;
        if (outside.empty() && !is_output) continue;
        std::string name = graph.value(out).name;
        Value* back = graph.add_op("Transpose", {&graph.value(out)}, {{"perm", {0, 3, 1, 2}}},
                                   graph.unique_name(name + "_nchw"));
        for (auto [reader, k] : outside) set_input(graph, reader, k, back->id);
        if (is_output) {
          graph.replace_output(out, back->id);
          graph.rename(&graph.value(out), graph.unique_name(name + "_nhwc"));
          graph.rename(back, name);
        }
      }
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_channels_last_pass() {
  return std::make_unique<ChannelsLastPass>();
}

}  // namespace lumen
