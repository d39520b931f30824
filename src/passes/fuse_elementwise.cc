// Element-wise fusion: a tree of two or more float32 element-wise nodes whose inner values each
// have exactly one reader becomes one FusedElementwise node, whose kernel computes the whole tree
// in one pass over the output (graph/fused_elementwise.h describes its program). Scalar constant
// operands become immediates of the program; every other operand becomes an input.
//
// Only nodes whose output has the tree root's shape join a tree: a smaller intermediate (a
// per-channel scale, say) stays a node of its own, since inside the tree it would be recomputed
// for every output element.
#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "graph/fused_elementwise.h"
#include "graph/op_kind.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// A one-element constant of a numeric dtype, read as float (Pow's exponent may be an integer).
bool scalar_value(const Graph& graph, int id, float* out) {
  if (id < 0) return false;
  const Value& v = graph.value(id);
  if (!is_constant(v) || v.data->numel() != 1) return false;
  const DType t = v.data->dtype();
  if (t != DType::kFloat32 && t != DType::kFloat64 && t != DType::kInt32 && t != DType::kInt64)
    return false;
  *out = static_cast<float>(v.data->item_as_double());
  return true;
}

// A float32 operand of static shape (FusedElementwise, like most ops, takes no dynamic shapes).
bool is_float32(const Graph& graph, int id) {
  return id >= 0 && graph.value(id).type.dtype == DType::kFloat32 &&
         graph.value(id).type.shape.is_static();
}

// Whether node `id` is an element-wise op the FusedElementwise kernel runs, in the form it runs
// (float32 data, constant parameters).
bool fusible(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.removed || n.outputs.size() != 1 || n.inputs.empty()) return false;
  const Value& out = graph.value(n.outputs[0]);
  if (out.type.dtype != DType::kFloat32 || !out.type.shape.is_static()) return false;
  float unused = 0.0f;
  switch (n.op) {
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
      return n.inputs.size() == 2 && is_float32(graph, n.inputs[0]) &&
             is_float32(graph, n.inputs[1]);
    case OpKind::kMax:
    case OpKind::kMin:
      if (n.inputs.size() < 2) return false;
      return std::all_of(n.inputs.begin(), n.inputs.end(),
                         [&](int in) { return is_float32(graph, in); });
    case OpKind::kPow:
      return n.inputs.size() == 2 && is_float32(graph, n.inputs[0]) &&
             scalar_value(graph, n.inputs[1], &unused);
    case OpKind::kClip:
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (n.inputs[k] >= 0 && !scalar_value(graph, n.inputs[k], &unused)) return false;
      return is_float32(graph, n.inputs[0]);
    case OpKind::kRelu:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kSqrt:
    case OpKind::kReciprocal:
    case OpKind::kErf:
    case OpKind::kLeakyRelu:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kSoftplus:
    case OpKind::kGelu:
      return n.inputs.size() == 1 && is_float32(graph, n.inputs[0]);
    case OpKind::kSwish: {  // the program's Swish is x * sigmoid(x): alpha 1 only
      auto it = n.attrs.find("alpha");
      return (it == n.attrs.end() || it->second.as_float() == 1.0f) && n.inputs.size() == 1 &&
             is_float32(graph, n.inputs[0]);
    }
    default:
      return false;
  }
}

// The opcode of a unary node (fusible() holds).
EwOp unary_opcode(const Node& n) {
  switch (n.op) {
    case OpKind::kRelu:
      return EwOp::kRelu;
    case OpKind::kSigmoid:
      return EwOp::kSigmoid;
    case OpKind::kTanh:
      return EwOp::kTanh;
    case OpKind::kExp:
      return EwOp::kExp;
    case OpKind::kLog:
      return EwOp::kLog;
    case OpKind::kNeg:
      return EwOp::kNeg;
    case OpKind::kAbs:
      return EwOp::kAbs;
    case OpKind::kSqrt:
      return EwOp::kSqrt;
    case OpKind::kReciprocal:
      return EwOp::kReciprocal;
    case OpKind::kErf:
      return EwOp::kErf;
    case OpKind::kHardSwish:
      return EwOp::kHardSwish;
    case OpKind::kSoftplus:
      return EwOp::kSoftplus;
    case OpKind::kSwish:
      return EwOp::kSwish;
    case OpKind::kGelu: {
      auto it = n.attrs.find("approximate");
      bool tanh = it != n.attrs.end() && it->second.as_string() == "tanh";
      return tanh ? EwOp::kGeluTanh : EwOp::kGeluErf;
    }
    default:
      return EwOp::kCount;
  }
}

EwOp binary_opcode(OpKind op) {
  switch (op) {
    case OpKind::kAdd:
      return EwOp::kAdd;
    case OpKind::kSub:
      return EwOp::kSub;
    case OpKind::kMul:
      return EwOp::kMul;
    case OpKind::kDiv:
      return EwOp::kDiv;
    case OpKind::kMax:
      return EwOp::kMax;
    default:
      return EwOp::kMin;
  }
}

// Writes the program of one tree. Operands are first kept symbolic (input k, temporary t or
// immediate k) because the number of inputs, and so the first temporary register, is known only
// at the end.
class ProgramBuilder {
 public:
  ProgramBuilder(const Graph& graph, const std::vector<bool>& in_tree)
      : graph_(graph), in_tree_(in_tree) {}

  // Emits the tree under node `root`; false when it needs more registers than a program has.
  bool build(int root) {
    Operand out = emit_node(root);
    return out.kind == Kind::kTemp && static_cast<int>(inputs_.size()) + peak_ <= kEwMaxRegisters &&
           instrs_.size() <= static_cast<size_t>(kEwMaxInstructions);
  }

  // Makes input k register 0 (and register 0 register k): the kernel may write its output over
  // input 0 where that input dies.
  void make_first(int k) {
    std::swap(inputs_[0], inputs_[k]);
    for (Instr& i : instrs_)
      for (Operand* o : {&i.a, &i.b})
        if (o->kind == Kind::kInput && (o->index == 0 || o->index == k))
          o->index = o->index == 0 ? k : 0;
  }

  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<float>& consts() const { return consts_; }
  // Constants folded into immediates (their data may be released once the tree is gone).
  const std::vector<int>& immediate_values() const { return immediate_values_; }

  // The `code` attribute, registers numbered now that the inputs are known.
  std::vector<int64_t> code() const {
    const int64_t base = static_cast<int64_t>(inputs_.size());
    auto encode = [&](const Operand& o) -> int64_t {
      switch (o.kind) {
        case Kind::kInput:
          return o.index;
        case Kind::kTemp:
          return base + o.index;
        case Kind::kImmediate:
          return -static_cast<int64_t>(o.index) - 1;
        case Kind::kNone:
          break;
      }
      return 0;
    };
    std::vector<int64_t> code;
    for (const Instr& i : instrs_) {
      code.push_back(static_cast<int64_t>(i.op));
      code.push_back(base + i.dst);
      code.push_back(encode(i.a));
      code.push_back(encode(i.b));
    }
    return code;
  }

 private:
  enum class Kind { kNone, kInput, kTemp, kImmediate };
  struct Operand {
    Kind kind = Kind::kNone;
    int index = 0;
  };
  struct Instr {
    EwOp op;
    int dst;
    Operand a, b;
  };

  bool inside(int value) const {
    int p = graph_.value(value).producer;
    return p >= 0 && static_cast<size_t>(p) < in_tree_.size() && in_tree_[p];
  }

  // The operand for value `v`: the subtree computing it, an immediate (when `immediate` allows
  // and v is a scalar constant) or an input.
  Operand emit_value(int v, bool immediate) {
    if (inside(v)) return emit_node(graph_.value(v).producer);
    float c = 0.0f;
    if (immediate && graph_.value(v).type.dtype == DType::kFloat32 && scalar_value(graph_, v, &c)) {
      immediate_values_.push_back(v);
      return constant(c);
    }
    auto it = std::find(inputs_.begin(), inputs_.end(), v);
    if (it == inputs_.end()) {
      inputs_.push_back(v);
      it = inputs_.end() - 1;
    }
    return {Kind::kInput, static_cast<int>(it - inputs_.begin())};
  }

  Operand constant(float c) {
    consts_.push_back(c);
    return {Kind::kImmediate, static_cast<int>(consts_.size()) - 1};
  }

  // dst = op(a, b): frees the operands' temporaries, then takes the lowest free one.
  Operand emit(EwOp op, Operand a, Operand b) {
    for (const Operand& o : {a, b})
      if (o.kind == Kind::kTemp) free_.push_back(o.index);
    int dst = 0;
    if (free_.empty()) {
      dst = used_++;
    } else {
      auto low = std::min_element(free_.begin(), free_.end());
      dst = *low;
      free_.erase(low);
    }
    peak_ = std::max(peak_, used_);
    instrs_.push_back({op, dst, a, b});
    return {Kind::kTemp, dst};
  }

  // Mul(x, Sigmoid(x)) (Swish) or Mul(x, HardSigmoid(x) with HardSwish's alpha 1/6 and beta
  // 1/2) (HardSwish), the gate in the tree: x, and the one instruction that computes the
  // product, in *op; else -1.
  int gated_operand(const Node& mul, EwOp* op) const {
    for (int k = 0; k < 2; ++k) {
      int s = mul.inputs[k], x = mul.inputs[1 - k];
      if (!inside(s)) continue;
      const Node& gate = graph_.node(graph_.value(s).producer);
      if (gate.inputs[0] != x) continue;
      if (gate.op == OpKind::kSigmoid) {
        *op = EwOp::kSwish;
        return x;
      }
      if (is_hard_swish_gate(gate)) {
        *op = EwOp::kHardSwish;
        return x;
      }
    }
    return -1;
  }

  Operand emit_node(int id) {
    const Node& n = graph_.node(id);
    switch (n.op) {
      case OpKind::kAdd:
      case OpKind::kSub:
      case OpKind::kMul:
      case OpKind::kDiv:
      case OpKind::kMax:
      case OpKind::kMin: {
        EwOp gated = EwOp::kCount;
        if (n.op == OpKind::kMul) {
          if (int x = gated_operand(n, &gated); x >= 0)
            return emit(gated, emit_value(x, false), Operand{});
        }
        const EwOp op = binary_opcode(n.op);
        Operand acc = emit_value(n.inputs[0], true);
        for (size_t k = 1; k < n.inputs.size(); ++k)
          acc = emit(op, acc, emit_value(n.inputs[k], acc.kind != Kind::kImmediate));
        return acc;
      }
      case OpKind::kPow: {
        float p = 0.0f;
        scalar_value(graph_, n.inputs[1], &p);
        immediate_values_.push_back(n.inputs[1]);
        Operand a = emit_value(n.inputs[0], false);
        return emit(EwOp::kPow, a, constant(p));
      }
      case OpKind::kClip: {
        float lo = -std::numeric_limits<float>::infinity();
        float hi = std::numeric_limits<float>::infinity();
        if (n.inputs.size() > 1 && n.inputs[1] >= 0) scalar_value(graph_, n.inputs[1], &lo);
        if (n.inputs.size() > 2 && n.inputs[2] >= 0) scalar_value(graph_, n.inputs[2], &hi);
        for (size_t k = 1; k < n.inputs.size(); ++k)
          if (n.inputs[k] >= 0) immediate_values_.push_back(n.inputs[k]);
        Operand a = emit_value(n.inputs[0], false);
        Operand params = constant(lo);
        constant(hi);
        return emit(EwOp::kClip, a, params);
      }
      case OpKind::kLeakyRelu: {
        Operand a = emit_value(n.inputs[0], false);
        return emit(EwOp::kLeakyRelu, a, constant(attr_float_or(n, "alpha", 0.01f)));
      }
      case OpKind::kHardSigmoid: {
        Operand a = emit_value(n.inputs[0], false);
        Operand params = constant(attr_float_or(n, "alpha", 0.2f));
        constant(attr_float_or(n, "beta", 0.5f));
        return emit(EwOp::kHardSigmoid, a, params);
      }
      default:
        return emit(unary_opcode(n), emit_value(n.inputs[0], false), Operand{});
    }
  }

  const Graph& graph_;
  const std::vector<bool>& in_tree_;
  std::vector<int> inputs_;  // value ids, in register order
  std::vector<float> consts_;
  std::vector<int> immediate_values_;
  std::vector<Instr> instrs_;
  std::vector<int> free_;
  int used_ = 0;
  int peak_ = 0;
};

class FuseElementwisePass : public Pass {
 public:
  const char* name() const override { return "fuse-elementwise"; }

  bool run(Graph& graph) override {
    std::vector<int> order = graph.topological_order();
    std::vector<bool> taken(static_cast<size_t>(graph.num_nodes()), false);
    bool changed = false;
    // Consumers before producers: a node still free here is not part of a tree below a
    // consumer, so it is the root of its own.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      int root = *it;
      if (taken[root] || !fusible(graph, root)) continue;
      std::vector<int> tree = grow(graph, root, taken);
      if (tree.size() < 2) continue;
      if (fuse(graph, root, tree)) {
        changed = true;
        for (int id : tree) taken[id] = true;
      }
    }
    return changed;
  }

 private:
  // The nodes of the tree under `root`, root first, each before the nodes that feed it.
  static std::vector<int> grow(const Graph& graph, int root, const std::vector<bool>& taken) {
    const Shape& shape = graph.value(graph.node(root).outputs[0]).type.shape;
    std::vector<int> tree = {root};
    for (size_t i = 0; i < tree.size(); ++i) {
      for (int in : graph.node(tree[i]).inputs) {
        if (in < 0) continue;
        const Value& v = graph.value(in);
        // (a producer past `taken` is a FusedElementwise this run made)
        if (v.producer < 0 || static_cast<size_t>(v.producer) >= taken.size() ||
            taken[v.producer] || v.is_output || v.consumers.size() != 1 || v.type.shape != shape ||
            !fusible(graph, v.producer))
          continue;
        tree.push_back(v.producer);
      }
    }
    return tree;
  }

  static bool fuse(Graph& graph, int root, const std::vector<int>& tree) {
    std::vector<bool> in_tree(static_cast<size_t>(graph.num_nodes()), false);
    for (int id : tree) in_tree[id] = true;
    ProgramBuilder builder(graph, in_tree);
    if (!builder.build(root)) return false;
    // Input 0, which the output may overwrite, is best the one that dies here: a computed value of
    // the output's shape that only the tree reads.
    for (size_t k = 0; k < builder.inputs().size(); ++k) {
      const Value& v = graph.value(builder.inputs()[k]);
      if (v.producer >= 0 && !v.is_output &&
          v.type == graph.value(graph.node(root).outputs[0]).type &&
          std::all_of(v.consumers.begin(), v.consumers.end(), [&](int c) { return in_tree[c]; })) {
        builder.make_first(static_cast<int>(k));
        break;
      }
    }
    const int root_out = graph.node(root).outputs[0];
    const TensorType want = graph.value(root_out).type;
    // The inputs must broadcast to the root's shape on their own (a scalar constant that widened
    // the rank is an immediate now); and a tree of constants is constant folding's business.
    Shape shape = graph.value(builder.inputs()[0]).type.shape;
    bool all_constant = true;
    for (int v : builder.inputs()) {
      shape = broadcast_shapes(shape, graph.value(v).type.shape);
      all_constant = all_constant && is_constant(graph.value(v));
    }
    if (shape != want.shape || all_constant) return false;
    std::vector<Value*> inputs;
    for (int v : builder.inputs()) inputs.push_back(&graph.value(v));
    Attributes attrs;
    attrs["code"] = builder.code();
    if (!builder.consts().empty()) attrs["consts"] = builder.consts();
    const std::string name = graph.unique_name(graph.node(root).name + "_fused");
    Value* fused = graph.add_op("FusedElementwise", inputs, attrs, name);
    if (!(fused->type == want) || !can_replace_uses(graph, root_out, fused->id)) {
      remove_node(graph, fused->producer);
      return false;
    }
    replace_uses(graph, root_out, fused->id);
    for (int id : tree) remove_node(graph, id);
    for (int v : builder.immediate_values()) release_if_unused(graph, v);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_elementwise_pass() {
  return std::make_unique<FuseElementwisePass>();
}

}  // namespace lumen
