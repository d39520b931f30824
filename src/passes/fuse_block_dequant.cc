// Block-dequant fusion: a blocked DequantizeLinear (opset 21, `block_size`) of a constant 2-D
// int4/uint4/int8/uint8 weight, blocks along K (axis 0), feeding MatMul as its B operand becomes
// one MatMulNBits (graph/matmul_nbits.h), whose kernels never make the float weights:
//   MatMul(A, DequantizeLinear(w_q [K, N], scale [ceil(K / bs), N], zero_point?)) ->
//   MatMulNBits(A, B, scales, zero_points?)
// The weights are rewritten into MatMulNBits' unsigned layout, which is exact: a signed value
// and its zero point both move up by 2^(bits - 1), so (q - z) is unchanged. Only made where the
// rewrite is exact and MatMulNBits can hold it: float32 A, scales and output, constant scales and
// zero points, block_size a power of two of at least 16. Runs before constant folding, which
// would otherwise turn the weights into float constants.
// Then a MatMulNBits (fused here or imported) whose only reader adds a constant row bias takes it
// as its bias input: one pass over the output fewer.
#include <optional>
#include <vector>

#include "graph/matmul_nbits.h"
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

int64_t attr_int_or(const Node& n, const char* name, int64_t fallback) {
  auto it = n.attrs.find(name);
  return it == n.attrs.end() ? fallback : it->second.as_int();
}

// The constant input k of n, or nullptr.
const Tensor* const_input(const Graph& graph, const Node& n, size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0) return nullptr;
  const Value& v = graph.value(n.inputs[k]);
  return is_constant(v) ? &*v.data : nullptr;
}

// Bits of a quantized weight type MatMulNBits can hold (0: none), and whether it is signed.
int bits_of(DType t, bool* is_signed) {
  *is_signed = t == DType::kInt4 || t == DType::kInt8;
  if (t == DType::kInt4 || t == DType::kUInt4) return 4;
  if (t == DType::kInt8 || t == DType::kUInt8) return 8;
  return 0;
}

// Element i of a 4- or 8-bit integer tensor (stored one byte per element, signed types
// sign-extended).
int32_t element(const Tensor& t, int64_t i, bool is_signed) {
  const uint8_t byte = static_cast<const uint8_t*>(t.raw_data())[i];
  return is_signed ? static_cast<int32_t>(static_cast<int8_t>(byte)) : static_cast<int32_t>(byte);
}

// MatMulNBits' constants for one blocked DequantizeLinear: B, scales and (unless every zero
// point is the default) packed zero points.
struct NBitsConstants {
  NBitsLayout layout;
  Tensor b, scales;
  std::optional<Tensor> zero_points;
};

// Builds MatMulNBits' constants from w_q [K, N], scale [blocks, N] and zero point (or null).
NBitsConstants make_constants(const Tensor& wq, const Tensor& scale, const Tensor* zp, int bits,
                              bool is_signed, int64_t block) {
  NBitsConstants c;
  NBitsLayout& l = c.layout;
  l.k = wq.shape()[0];
  l.n = wq.shape()[1];
  l.bits = bits;
  l.block_size = block;
  const int64_t blocks = l.n_blocks();
  const int32_t shift = is_signed ? l.default_zero_point() : 0;
  c.b = Tensor::zeros(Shape{l.n, blocks, l.blob_bytes()}, DType::kUInt8);
  uint8_t* b = c.b.data<uint8_t>();
  for (int64_t k = 0; k < l.k; ++k)
    for (int64_t n = 0; n < l.n; ++n) {
      const auto q = static_cast<uint8_t>(element(wq, k * l.n + n, is_signed) + shift);
      const int64_t blk = k / block, in = k % block;
      uint8_t* blob = b + (n * blocks + blk) * l.blob_bytes();
      if (bits == 8)
        blob[in] = q;
      else
        blob[in / 2] |= static_cast<uint8_t>(q << (4 * (in & 1)));
    }
  c.scales = Tensor::empty(Shape{l.n * blocks}, DType::kFloat32);
  const float* s = scale.data<float>();
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t n = 0; n < l.n; ++n) c.scales.data<float>()[n * blocks + blk] = s[blk * l.n + n];
  bool all_default = true;
  std::vector<uint8_t> z(static_cast<size_t>(l.n * blocks), 0);
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t n = 0; n < l.n; ++n) {
      const int32_t v = (zp ? element(*zp, blk * l.n + n, is_signed) : 0) + shift;
      z[n * blocks + blk] = static_cast<uint8_t>(v);
      all_default = all_default && v == l.default_zero_point();
    }
  if (!all_default) {
    Tensor packed = Tensor::zeros(Shape{l.n, l.zero_point_bytes()}, DType::kUInt8);
    uint8_t* p = packed.data<uint8_t>();
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const uint8_t v = z[n * blocks + blk];
        if (bits == 8)
          p[n * l.zero_point_bytes() + blk] = v;
        else
          p[n * l.zero_point_bytes() + blk / 2] |= static_cast<uint8_t>(v << (4 * (blk & 1)));
      }
    c.zero_points = packed;
  }
  return c;
}

class FuseBlockDequantPass : public Pass {
 public:
  const char* name() const override { return "fuse-block-dequant"; }
  bool run(Graph& graph) override {
    bool changed = false;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && graph.node(id).op == OpKind::kMatMul && fuse(graph, id))
        changed = true;
    for (int id : graph.topological_order())
      if (!graph.node(id).removed && graph.node(id).op == OpKind::kMatMulNBits &&
          fuse_bias(graph, id))
        changed = true;
    return changed;
  }

 private:
  // MatMulNBits without bias -> Add(., b) with b a float32 constant of N elements along the last
  // axis (its only reader): b becomes the node's bias (added as each output is written).
  static bool fuse_bias(Graph& graph, int id) {
    const Node& mm = graph.node(id);
    if (mm.inputs.size() > kNBitsGroupIndex) return false;  // g_idx or a bias already
    const int out = mm.outputs[0];
    const int add_id = sole_reader(graph, out);
    if (add_id < 0 || graph.node(add_id).op != OpKind::kAdd) return false;
    const Node& add = graph.node(add_id);
    const int b = other_input(add, out);
    if (b < 0 || !is_constant(graph.value(b))) return false;
    const Tensor& bias = *graph.value(b).data;
    const int64_t n = attr_int_or(mm, "N", 0);
    const Shape& bs = bias.shape();
    if (bias.dtype() != DType::kFloat32 || bias.numel() != n || bs.rank() < 1 || bs[-1] != n ||
        bs.rank() > graph.value(out).type.shape.rank())
      return false;
    const int add_out = add.outputs[0];
    if (!(graph.value(add_out).type == graph.value(out).type) ||
        !can_replace_uses(graph, add_out, out))
      return false;
    int bias_id = b;
    if (bs.rank() != 1)
      bias_id =
          graph
              .add_constant(graph.unique_name(graph.value(b).name + "_row"), bias.reshape(Shape{n}))
              ->id;
    replace_uses(graph, add_out, out);
    remove_node(graph, add_id);
    graph.node(id).inputs.resize(kNBitsBias + 1, -1);
    set_input(graph, id, kNBitsBias, bias_id);
    graph.infer_node(id);
    release_if_unused(graph, b);
    return true;
  }

  static bool fuse(Graph& graph, int mm_id) {
    const Node& mm = graph.node(mm_id);
    if (mm.inputs.size() != 2 || mm.outputs.size() != 1) return false;
    const int a = mm.inputs[0], out = mm.outputs[0];
    if (graph.value(a).type.dtype != DType::kFloat32 ||
        graph.value(out).type.dtype != DType::kFloat32 || graph.value(a).type.shape.rank() < 1)
      return false;
    const int dq_id = producer_of(graph, mm.inputs[1], OpKind::kDequantizeLinear);
    if (dq_id < 0) return false;
    const Node& dq = graph.node(dq_id);
    const int64_t block = attr_int_or(dq, "block_size", 0);
    if (block < 16 || (block & (block - 1)) != 0) return false;
    const int64_t out_dtype = attr_int_or(dq, "output_dtype", 0);
    if (out_dtype != 0 && out_dtype != 1) return false;  // 1: float32
    const Tensor* wq = const_input(graph, dq, 0);
    const Tensor* scale = const_input(graph, dq, 1);
    if (!wq || !scale || wq->rank() != 2 || scale->dtype() != DType::kFloat32) return false;
    int64_t axis = attr_int_or(dq, "axis", 1);
    if (axis < 0) axis += 2;
    if (axis != 0) return false;
    bool is_signed = false;
    const int bits = bits_of(wq->dtype(), &is_signed);
    if (bits == 0) return false;
    const int64_t k = wq->shape()[0], n = wq->shape()[1];
    if (scale->shape() != Shape{(k + block - 1) / block, n}) return false;
    const Tensor* zp = nullptr;
    if (dq.inputs.size() > 2 && dq.inputs[2] >= 0) {
      zp = const_input(graph, dq, 2);
      if (!zp || zp->dtype() != wq->dtype() || zp->shape() != scale->shape()) return false;
    }
    NBitsConstants c = make_constants(*wq, *scale, zp, bits, is_signed, block);
    const std::string base = mm.name.empty() ? "matmul" : mm.name;
    std::vector<int> inputs = {
        a, graph.add_constant(graph.unique_name(base + "_nbits_b"), c.b)->id,
        graph.add_constant(graph.unique_name(base + "_nbits_scales"), c.scales)->id};
    if (c.zero_points)
      inputs.push_back(
          graph.add_constant(graph.unique_name(base + "_nbits_zero_points"), *c.zero_points)->id);
    Attributes attrs = {{"K", k}, {"N", n}, {"bits", int64_t{bits}}, {"block_size", block}};
    Node& fused =
        graph.add_node(OpKind::kMatMulNBits, inputs, 1, attrs, graph.unique_name(base + "_nbits"));
    const int fused_id = fused.id, fused_out = fused.outputs[0];
    try {
      graph.infer_node(fused_id);
    } catch (const Error&) {
      remove_node(graph, fused_id);
      return false;
    }
    if (!(graph.value(fused_out).type == graph.value(out).type) ||
        !can_replace_uses(graph, out, fused_out)) {
      remove_node(graph, fused_id);
      return false;
    }
    const int dq_out = graph.node(dq_id).outputs[0];
    replace_uses(graph, out, fused_out);
    remove_node(graph, mm_id);
    // The DequantizeLinear goes once no other node reads its output, and its constants with it.
    const Value& dv = graph.value(dq_out);
    bool used = dv.is_output;
    for (int r : dv.consumers) used = used || !graph.node(r).removed;
    if (!used) {
      const std::vector<int> dq_inputs = graph.node(dq_id).inputs;
      remove_node(graph, dq_id);
      for (int in : dq_inputs)
        if (in >= 0) release_if_unused(graph, in);
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_block_dequant_pass() {
  return std::make_unique<FuseBlockDequantPass>();
}

}  // namespace lumen
