// QDQ fusion: the QuantizeLinear/DequantizeLinear pairs ONNX Runtime's quantization tool writes
// around Conv, MatMul and Gemm become the integer ops QLinearConv and QLinearMatMul:
//   DQ(x_q), DQ(w_q) [, bias] -> Conv | MatMul | Gemm [-> Relu | Clip] -> QuantizeLinear -> y_q
// becomes QLinear*(x_q, ..., w_q, ..., y_scale, y_zero_point [, int32 bias]) -> y_q.
// Only exact rewrites are made: every scale and zero point a constant, x and y per tensor, w per
// tensor or per output channel, a Relu or Clip only when its bounds quantize outside y's range
// (the requantize's saturation is then the clamp; for Relu: y's zero point is the bottom of the
// range). A float bias becomes int32 in units of x_scale * w_scale[m] (round half to even); a
// DequantizeLinear'd int32 bias whose scale is that product is taken as it is. A Gemm with a bias
// (C of N elements; QLinearMatMul has none) becomes Reshape -> 1x1 channels-last QLinearConv ->
// Reshape.
//   DQ(a_q), DQ(b_q) -> Add [-> Relu | Clip] -> QuantizeLinear -> y_q
// becomes QLinearAdd(a_q, ..., b_q, ..., y_scale, y_zero_point) when a, b and y share one 8-bit
// type and every parameter is per tensor: its kernel computes in float32 as the three ops do.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

bool is_8bit(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8;
}

int64_t attr_int_or(const Node& n, const char* name, int64_t fallback) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? fallback : it->second.as_int();
}

// A constant input of `n` (or nullptr when omitted or not a constant).
const Tensor* const_input(const Graph& graph, const Node& n, size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0) return nullptr;
  const Value& v = graph.value(n.inputs[k]);
  return is_constant(v) ? &*v.data : nullptr;
}

// One DequantizeLinear the fusion can take: q = its 8-bit (or int32) input, scale/zero-point ids
// (zero point -1 when omitted), the scales as floats and the zero points as ints, and whether
// they are per axis (with the normalized axis).
struct Dequant {
  int node = -1;
  int q = -1, scale = -1, zero = -1;
  std::vector<float> scales;
  std::vector<int32_t> zeros;
  bool per_axis = false;
  int axis = 0;
};

std::optional<Dequant> match_dequant(const Graph& graph, int value, bool allow_int32) {
  const int id = producer_of(graph, value, OpKind::kDequantizeLinear);
  if (id < 0) return std::nullopt;
  const Node& n = graph.node(id);
  if (attr_int_or(n, "block_size", 0) != 0 || attr_int_or(n, "output_dtype", 0) != 0)
    return std::nullopt;
  const Value& q = graph.value(n.inputs[0]);
  if (!is_8bit(q.type.dtype) && !(allow_int32 && q.type.dtype == DType::kInt32))
    return std::nullopt;
  const Tensor* s = const_input(graph, n, 1);
  if (!s || s->dtype() != DType::kFloat32 || s->numel() < 1) return std::nullopt;
  Dequant d;
  d.node = id;
  d.q = n.inputs[0];
  d.scale = n.inputs[1];
  d.scales.assign(s->data<float>(), s->data<float>() + s->numel());
  d.per_axis = !(s->numel() == 1 && s->shape().rank() <= 1);
  if (d.per_axis) {
    const int rank = q.type.shape.rank();
    int64_t axis = attr_int_or(n, "axis", 1);
    if (axis < 0) axis += rank;
    d.axis = static_cast<int>(axis);
  }
  d.zeros.assign(d.scales.size(), 0);
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const Tensor* z = const_input(graph, n, 2);
    if (!z || z->numel() != s->numel()) return std::nullopt;
    d.zero = n.inputs[2];
    for (int64_t i = 0; i < z->numel(); ++i)
      d.zeros[i] = static_cast<int32_t>(z->item_as_double(i));
  }
  for (float v : d.scales)
    if (!(v > 0.0f) || !std::isfinite(v)) return std::nullopt;
  return d;
}

class FuseQdqPass : public Pass {
 public:
  const char* name() const override { return "fuse-qdq"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && graph.node(id).op == OpKind::kQuantizeLinear &&
          fuse(graph, id))
        changed = true;
    return changed;
  }

 private:
  // The int32 bias for `m` output channels in units of x_scale * w_scale[c], from a float
  // constant or a DequantizeLinear'd int32 constant; -1 when it cannot be made exactly.
  static int bias_value(Graph& graph, int b, int64_t m, float xs, const std::vector<float>& ws,
                        std::vector<int>* dead) {
    const Value& bv = graph.value(b);
    if (bv.type.shape.numel() != m) return -1;
    std::vector<double> real(static_cast<size_t>(m));
    std::vector<int64_t> exact(static_cast<size_t>(m), -1);
    std::vector<bool> have_exact(static_cast<size_t>(m), false);
    if (std::optional<Dequant> d = match_dequant(graph, b, true)) {
      const Value& q = graph.value(d->q);
      if (q.type.dtype != DType::kInt32 || !is_constant(q) || q.data->numel() != m) return -1;
      if (d->per_axis && static_cast<int64_t>(d->scales.size()) != m) return -1;
      for (int64_t c = 0; c < m; ++c) {
        const int64_t k = d->per_axis ? c : 0;
        const int64_t qv = q.data->data<int32_t>()[c] - d->zeros[k];
        real[c] = static_cast<double>(qv) * d->scales[k];
        const float want = xs * ws[ws.size() == 1 ? 0 : c];
        if (d->scales[k] == want && qv >= INT32_MIN && qv <= INT32_MAX) {
          exact[c] = qv;
          have_exact[c] = true;
        }
      }
      if (sole_reader(graph, b) >= 0) dead->push_back(d->node);
    } else {
      if (!is_constant(bv) || bv.type.dtype != DType::kFloat32) return -1;
      for (int64_t c = 0; c < m; ++c) real[c] = bv.data->data<float>()[c];
    }
    Tensor out = Tensor::empty(Shape{m}, DType::kInt32);
    for (int64_t c = 0; c < m; ++c) {
      double v = 0;
      if (have_exact[c]) {
        v = static_cast<double>(exact[c]);
      } else {
        const double unit = static_cast<double>(xs) * ws[ws.size() == 1 ? 0 : c];
        v = std::nearbyint(real[c] / unit);
      }
      if (!std::isfinite(v) || v < INT32_MIN || v > INT32_MAX) return -1;
      out.data<int32_t>()[c] = static_cast<int32_t>(v);
    }
    return graph.add_constant(graph.unique_name(bv.name + "_int32"), out)->id;
  }

  // Zero point `id`, or (when omitted, -1) a new per-tensor zero constant of `dtype`.
  static int zero_point_or(Graph& graph, int id, DType dtype, const std::string& base) {
    if (id >= 0) return id;
    Tensor z = Tensor::zeros(Shape{}, dtype);
    return graph.add_constant(graph.unique_name(base + "_zero_point"), z)->id;
  }

  // Whether Q(clamp(v, lo, hi)) == Q(v) for every v, with Q the requantize to `t` (scale s, zero
  // point z): Q is monotone, so when Q(lo) is the range's bottom and Q(hi) its top.
  static bool clamp_is_saturation(const Graph& graph, const Node& act, float s, int32_t z,
                                  DType t) {
    const float qmin = t == DType::kUInt8 ? 0.0f : -128.0f, qmax = qmin + 255.0f;
    float lo = 0.0f, hi = std::numeric_limits<float>::infinity();
    if (act.op == OpKind::kClip) {
      if (act.attrs.count("min") || act.attrs.count("max")) return false;  // opset 6's attributes
      lo = -hi;
      if (act.inputs.size() > 1 && act.inputs[1] >= 0 &&
          !scalar_constant(graph, act.inputs[1], &lo))
        return false;
      if (act.inputs.size() > 2 && act.inputs[2] >= 0 &&
          !scalar_constant(graph, act.inputs[2], &hi))
        return false;
    }
    return std::nearbyint(lo / s) + static_cast<float>(z) <= qmin &&
           std::nearbyint(hi / s) + static_cast<float>(z) >= qmax;
  }

  // DQ(a), DQ(b) -> Add `core` [-> `relu`] -> Quantize `q_id` as one QLinearAdd.
  static bool fuse_add(Graph& graph, int q_id, int relu, int core, DType type) {
    const Node& c = graph.node(core);
    if (c.inputs.size() != 2 || c.inputs[0] < 0 || c.inputs[1] < 0) return false;
    std::optional<Dequant> da = match_dequant(graph, c.inputs[0], false);
    std::optional<Dequant> db = match_dequant(graph, c.inputs[1], false);
    if (!da || !db || da->per_axis || db->per_axis) return false;
    if (graph.value(da->q).type.dtype != type || graph.value(db->q).type.dtype != type)
      return false;
    const Node& q = graph.node(q_id);
    const int out = q.outputs[0];
    // Omitted zero points stay omitted: QLinearAdd reads them as 0, as the three ops do.
    std::vector<int> inputs = {da->q, da->scale, da->zero, db->q, db->scale, db->zero, q.inputs[1]};
    if (q.inputs.size() > 2 && q.inputs[2] >= 0) inputs.push_back(q.inputs[2]);
    const std::string base = c.name.empty() ? "qdq" : c.name;
    Node& fused =
        graph.add_node(OpKind::kQLinearAdd, inputs, 1, {}, graph.unique_name(base + "_int8"));
    const int fused_id = fused.id;
    std::vector<int> dead = {q_id};
    if (relu >= 0) dead.push_back(relu);
    dead.push_back(core);
    return commit(graph, {fused_id}, fused.outputs[0], out, dead, {da->node, db->node});
  }

  // Replaces the uses of `out` with `fused_out` (made by the new nodes `added`, inferred here),
  // removes the nodes `dead` and the DequantizeLinear nodes `dequants` once nothing reads them;
  // undoes the new nodes and returns false when the types differ or the uses cannot move.
  static bool commit(Graph& graph, const std::vector<int>& added, int fused_out, int out,
                     const std::vector<int>& dead, const std::vector<int>& dequants) {
    auto undo = [&] {
      for (auto it = added.rbegin(); it != added.rend(); ++it) remove_node(graph, *it);
      return false;
    };
    try {
      for (int id : added) graph.infer_node(id);
    } catch (const Error&) {
      return undo();
    }
    if (!(graph.value(fused_out).type == graph.value(out).type) ||
        !can_replace_uses(graph, out, fused_out))
      return undo();
    std::vector<int> constants;
    for (int n : dead)
      for (int in : graph.node(n).inputs)
        if (in >= 0 && is_constant(graph.value(in))) constants.push_back(in);
    replace_uses(graph, out, fused_out);
    for (int n : dead) remove_node(graph, n);
    // The inputs' DequantizeLinear nodes go once nothing else reads them.
    for (int d : dequants) {
      const Node& dn = graph.node(d);
      if (dn.removed || sole_reader(graph, dn.outputs[0]) >= 0) continue;
      bool used = graph.value(dn.outputs[0]).is_output;
      for (int r : graph.value(dn.outputs[0]).consumers) used = used || !graph.node(r).removed;
      if (used) continue;
      for (int in : dn.inputs)
        if (in >= 0 && is_constant(graph.value(in))) constants.push_back(in);
      graph.value(dn.outputs[0]).data.reset();
      remove_node(graph, d);
    }
    for (int k : constants) release_if_unused(graph, k);
    return true;
  }

  static bool fuse(Graph& graph, int q_id) {
    const Node& q = graph.node(q_id);
    if (q.outputs.size() != 1 || q.inputs.size() < 2) return false;
    if (attr_int_or(q, "block_size", 0) != 0 || q.attrs.count("precision")) return false;
    const int y = q.inputs[0];
    if (graph.value(y).type.dtype != DType::kFloat32) return false;
    const DType out_type = graph.value(q.outputs[0]).type.dtype;
    if (!is_8bit(out_type)) return false;
    const Tensor* ys = const_input(graph, q, 1);
    if (!ys || ys->dtype() != DType::kFloat32 || ys->numel() != 1 || ys->shape().rank() > 1)
      return false;
    int32_t y_zero = 0;
    const int yz_id = q.inputs.size() > 2 ? q.inputs[2] : -1;
    if (yz_id >= 0) {
      const Tensor* yz = const_input(graph, q, 2);
      if (!yz || yz->numel() != 1 || yz->shape().rank() > 1) return false;
      y_zero = static_cast<int32_t>(yz->item_as_double());
    }
    // [Relu | Clip ->] Quantize: the clamp is the requantize's saturation when its bounds
    // quantize outside the 8-bit range (Relu: y's zero point is the bottom of the range).
    int relu = -1, core_out = y;
    const int act = graph.value(y).producer;
    if (act >= 0 && !graph.node(act).removed &&
        (graph.node(act).op == OpKind::kRelu || graph.node(act).op == OpKind::kClip)) {
      if (!clamp_is_saturation(graph, graph.node(act), ys->data<float>()[0], y_zero, out_type))
        return false;
      relu = act;
      core_out = graph.node(act).inputs[0];
      if (core_out < 0 || sole_reader(graph, core_out) != act) return false;
    }
    if (sole_reader(graph, y) != q_id) return false;
    const int core = graph.value(core_out).producer;
    if (core < 0 || graph.node(core).removed || graph.node(core).outputs.size() != 1) return false;
    const OpKind op = graph.node(core).op;
    if (op == OpKind::kAdd) return fuse_add(graph, q_id, relu, core, out_type);
    if (op != OpKind::kConv && op != OpKind::kMatMul && op != OpKind::kGemm) return false;
    const Node& c = graph.node(core);
    if (c.inputs.size() < 2 || c.inputs[0] < 0 || c.inputs[1] < 0) return false;
    std::optional<Dequant> dx = match_dequant(graph, c.inputs[0], false);
    std::optional<Dequant> dw = match_dequant(graph, c.inputs[1], false);
    if (!dx || !dw || dx->per_axis) return false;
    const Shape& ws_shape = graph.value(dw->q).type.shape;
    const Shape& xs_shape = graph.value(dx->q).type.shape;
    int64_t out_channels = 0;
    std::vector<int> inputs;
    std::vector<int> dead = {q_id};
    if (relu >= 0) dead.push_back(relu);
    dead.push_back(core);
    Attributes attrs;
    OpKind fused_op = OpKind::kQLinearMatMul;
    bool gemm_bias = false;
    int w_q = dw->q;
    if (op == OpKind::kConv) {
      out_channels = ws_shape[0];
      if (dw->per_axis &&
          (dw->axis != 0 || static_cast<int64_t>(dw->scales.size()) != out_channels))
        return false;
      fused_op = OpKind::kQLinearConv;
      attrs = c.attrs;
    } else {
      bool trans_b = false;
      if (op == OpKind::kGemm) {
        if (attr_int_or(c, "transA", 0) != 0 || attr_float_or(c, "alpha", 1.0f) != 1.0f)
          return false;
        gemm_bias = c.inputs.size() > 2 && c.inputs[2] >= 0;
        if (gemm_bias && (attr_float_or(c, "beta", 1.0f) != 1.0f || ws_shape.rank() != 2 ||
                          !is_constant(graph.value(dw->q))))
          return false;
        trans_b = attr_int_or(c, "transB", 0) != 0;
      }
      if (ws_shape.rank() < 2 && dw->per_axis) return false;
      if (trans_b && (ws_shape.rank() != 2 || !is_constant(graph.value(dw->q)))) return false;
      const int col_axis = trans_b ? 0 : ws_shape.rank() - 1;
      out_channels = ws_shape.rank() >= 2 ? ws_shape[col_axis] : 1;
      if (dw->per_axis && (ws_shape.rank() != 2 || dw->axis != col_axis ||
                           static_cast<int64_t>(dw->scales.size()) != out_channels))
        return false;
      if (gemm_bias) {
        // A Gemm with a bias runs as a 1x1 QLinearConv (which has the bias) over the M rows as
        // a channels-last image [1, M, 1, K]: a GEMM to oneDNN, with no layout change.
        const Tensor& w = *graph.value(dw->q).data;
        const int64_t n = out_channels, k = ws_shape[trans_b ? 1 : 0];
        Tensor t = Tensor::empty(Shape{n, k, 1, 1}, w.dtype());
        const auto* src = static_cast<const uint8_t*>(w.raw_data());
        auto* dst = static_cast<uint8_t*>(t.raw_data());
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j)
            dst[i * k + j] = trans_b ? src[i * k + j] : src[j * n + i];
        w_q = graph.add_constant(graph.unique_name(graph.value(dw->q).name + "_nk1"), t)->id;
        fused_op = OpKind::kQLinearConv;
        attrs["channels_last"] = int64_t{1};
      } else if (trans_b) {
        const Tensor& w = *graph.value(dw->q).data;
        const int64_t n = ws_shape[0], k = ws_shape[1];
        Tensor t = Tensor::empty(Shape{k, n}, w.dtype());
        const auto* src = static_cast<const uint8_t*>(w.raw_data());
        auto* dst = static_cast<uint8_t*>(t.raw_data());
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < k; ++j) dst[j * n + i] = src[i * k + j];
        w_q = graph.add_constant(graph.unique_name(graph.value(dw->q).name + "_t"), t)->id;
      }
      if (xs_shape.rank() < 1) return false;
    }
    int bias = -1;
    if ((op == OpKind::kConv || gemm_bias) && c.inputs.size() > 2 && c.inputs[2] >= 0) {
      bias = bias_value(graph, c.inputs[2], out_channels, dx->scales[0], dw->scales, &dead);
      if (bias < 0) return false;
    }
    const int out = q.outputs[0];
    const int x_zero =
        zero_point_or(graph, dx->zero, graph.value(dx->q).type.dtype, graph.value(dx->q).name);
    const int w_zero =
        zero_point_or(graph, dw->zero, graph.value(w_q).type.dtype, graph.value(dw->q).name);
    const int y_zero_id = zero_point_or(graph, yz_id, out_type, graph.value(out).name);
    const std::string base = graph.node(core).name.empty() ? "qdq" : graph.node(core).name;
    // For a Gemm with a bias: x [M, K] -> [1, M, 1, K] before, [1, M, 1, N] -> [M, N] after.
    auto reshape = [&](int from, std::vector<int64_t> dims) {
      const int64_t rank = static_cast<int64_t>(dims.size());
      Tensor shape = Tensor::from_vector<int64_t>(Shape{rank}, dims);
      const int sv = graph.add_constant(graph.unique_name(base + "_shape"), shape)->id;
      Node& r =
          graph.add_node(OpKind::kReshape, {from, sv}, 1, {}, graph.unique_name(base + "_reshape"));
      const int rid = r.id;
      graph.infer_node(rid);
      return rid;
    };
    std::vector<int> added;
    int x_in = dx->q;
    if (gemm_bias) {
      added.push_back(reshape(dx->q, {1, xs_shape[0], 1, xs_shape[1]}));
      x_in = graph.node(added.back()).outputs[0];
    }
    inputs = {x_in, dx->scale, x_zero, w_q, dw->scale, w_zero, q.inputs[1], y_zero_id};
    if (bias >= 0) inputs.push_back(bias);
    Node& fused = graph.add_node(fused_op, inputs, 1, attrs, graph.unique_name(base + "_int8"));
    const int fused_id = fused.id;
    int fused_out = fused.outputs[0];
    added.push_back(fused_id);
    if (gemm_bias) {
      try {
        graph.infer_node(fused_id);
        added.push_back(reshape(fused_out, {xs_shape[0], out_channels}));
      } catch (const Error&) {
        for (auto it = added.rbegin(); it != added.rend(); ++it) remove_node(graph, *it);
        return false;
      }
      fused_out = graph.node(added.back()).outputs[0];
    }
    return commit(graph, added, fused_out, out, dead, {dx->node, dw->node});
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_qdq_pass() {
  return std::make_unique<FuseQdqPass>();
}

}  // namespace lumen
