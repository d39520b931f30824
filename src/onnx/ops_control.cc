// Converters for ONNX's control flow: If, Loop and Scan. Each subgraph is imported as a Graph of
// its own, typed by the values the node passes in, and outer values it reads become extra inputs
// of the node (see Subgraph). An If whose condition is known at import is replaced by the nodes of
// the taken branch; otherwise If, Loop and Scan become lumen nodes whose kernels run the compiled
// subgraphs (src/runtime/control_flow.cc). Scan-8's batch axis is unrolled into one Scan per batch
// entry (the batch is static), so the runtime has one Scan form. A Loop that carries a sequence
// or an optional is unrolled when the graph is built instead (ops_sequence.cc).
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/op_kind.h"
#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

bool known_value(const Value* v) {
  return v != nullptr && v->data && !v->user_weight && !v->is_input;
}

// One branch of an If: its subgraph, or (graph left empty) why it cannot be built for the input
// types at hand.
struct Branch {
  const char* attr;
  Subgraph sub;
  std::string reason;  // "subgraph 'else_branch': node ...: ..."
  ErrorKind kind = ErrorKind::kShapeError;
};

Branch import_branch(ImportContext& ctx, const char* attr) {
  Branch b{attr, {}, {}};
  try {
    b.sub = ctx.import_subgraph(attr, {});
  } catch (const Error& e) {
    if (!is_node_build_failure(e)) throw;
    b.reason = error_detail(e);
    const std::string prefix = ctx.where() + ": ";
    if (b.reason.rfind(prefix, 0) == 0) b.reason = b.reason.substr(prefix.size());
    b.kind = e.kind();
  }
  return b;
}

std::vector<Value*> convert_if(ImportContext& ctx) {
  Value* cond = ctx.input(0);
  if (cond == nullptr) ctx.unsupported("cond is missing");
  if (known_value(cond)) {
    // The condition is a constant: only the taken branch exists, so its nodes join this graph
    // (and its sequences and optionals stay lists of values).
    if (cond->data->numel() != 1) ctx.unsupported("cond must hold one value");
    bool then = cond->data->item_as_double() != 0.0;
    return forward_outputs(
        ctx, ctx.inline_subgraph(then ? "then_branch" : "else_branch", {}, then ? "then" : "else"));
  }
  // Both branches are built for the input types at hand. One that cannot be (see
  // NodeBuildFailure) is left out, and a run whose cond picks it fails with the reason kept here.
  Branch then_b = import_branch(ctx, "then_branch");
  Branch else_b = import_branch(ctx, "else_branch");
  if (!then_b.sub.graph && !else_b.sub.graph) {
    // Marked in turn, so an If around this one may still take its other branch.
    rethrow_as(Error(then_b.kind, then_b.reason),
               ctx.where() + ": neither branch can be built for these input types: " +
                   then_b.reason + "; and " + else_b.reason,
               true);
  }
  std::vector<Value*> ins{cond};
  Attributes attrs{{"then_inputs", static_cast<int64_t>(then_b.sub.captured.size())}};
  for (Branch* b : {&then_b, &else_b}) {
    ins.insert(ins.end(), b->sub.captured.begin(), b->sub.captured.end());
    if (b->sub.graph) {
      attrs[b->attr] = b->sub.graph;
    } else {
      attrs[std::string(b->attr) + "_error"] = b->reason;
    }
  }
  const Graph& built = then_b.sub.graph ? *then_b.sub.graph : *else_b.sub.graph;
  return ctx.emit("If", ins, attrs, static_cast<int>(built.outputs().size()));
}

std::vector<Value*> convert_loop(ImportContext& ctx) {
  for (size_t k = 2; k < ctx.inputs().size(); ++k)
    if (ctx.list_input(k) != nullptr) return unroll_loop(ctx);
  std::vector<Value*> ins = ctx.inputs();
  ins.resize(std::max<size_t>(ins.size(), 2), nullptr);
  std::vector<TensorType> types{{DType::kInt64, Shape{}}, {DType::kBool, Shape{}}};
  for (size_t k = 2; k < ins.size(); ++k) {
    if (ins[k] == nullptr)
      ctx.unsupported("loop-carried value " + std::to_string(k - 2) + " is omitted");
    types.push_back(ins[k]->type);
  }
  Subgraph body = ctx.import_subgraph("body", types);
  ins.insert(ins.end(), body.captured.begin(), body.captured.end());
  Attributes attrs{{"body", body.graph}, {"captured", static_cast<int64_t>(body.captured.size())}};
  int outputs = static_cast<int>(body.graph->outputs().size()) - 1;
  if (outputs < ctx.num_outputs())
    throw InvalidModel(ctx.where() + ": the body gives fewer outputs than the node has");
  return ctx.emit("Loop", ins, attrs, outputs);
}

// The body's input types: the states as given, and each scan input without its scan axis.
constexpr int64_t kMaxScan8Batch = 4096;

// num_scan_inputs checked against the node's `count` inputs (as int64, before any narrowing).
int scan_input_count(const ImportContext& ctx, int64_t m, size_t count) {
  if (m < 1 || m > static_cast<int64_t>(count))
    throw InvalidModel(ctx.where() + ": num_scan_inputs " + std::to_string(m) + " does not fit " +
                       std::to_string(count) + " inputs");
  return static_cast<int>(m);
}

std::vector<TensorType> scan_body_types(ImportContext& ctx, const std::vector<Value*>& ins,
                                        int states, const std::vector<int64_t>& axes) {
  std::vector<TensorType> types;
  for (size_t k = 0; k < ins.size(); ++k) {
    if (ins[k] == nullptr) ctx.unsupported("input " + std::to_string(k) + " is omitted");
    TensorType t = ins[k]->type;
    if (static_cast<int>(k) >= states) {
      int64_t axis = axes[k - states];
      if (axis < -t.shape.rank() || axis >= t.shape.rank())
        throw InvalidModel(ctx.where() + ": scan axis " + std::to_string(axis) +
                           " is out of range for " + t.to_string());
      t.shape.dims().erase(t.shape.dims().begin() + (axis < 0 ? axis + t.shape.rank() : axis));
    }
    types.push_back(t);
  }
  return types;
}

std::vector<Value*> convert_scan(ImportContext& ctx) {
  Attributes attrs = ctx.attrs();
  auto m_attr = attrs.find("num_scan_inputs");
  if (m_attr == attrs.end()) throw InvalidModel(ctx.where() + ": num_scan_inputs is missing");
  std::vector<Value*> ins = ctx.inputs();
  const int m = scan_input_count(ctx, m_attr->second.as_int(), ins.size());
  const int states = static_cast<int>(ins.size()) - m;
  std::vector<int64_t> axes(m, 0);
  if (attrs.count("scan_input_axes")) axes = attrs.at("scan_input_axes").as_ints();
  if (static_cast<int>(axes.size()) != m)
    throw InvalidModel(ctx.where() + ": scan_input_axes needs one entry per scan input");
  Subgraph body = ctx.import_subgraph("body", scan_body_types(ctx, ins, states, axes));
  ins.insert(ins.end(), body.captured.begin(), body.captured.end());
  attrs["body"] = body.graph;
  attrs["captured"] = static_cast<int64_t>(body.captured.size());
  return ctx.emit("Scan", ins, attrs, static_cast<int>(body.graph->outputs().size()));
}

// Scan-8: input 0 is sequence_lens, and every other input and output has a batch axis first. The
// batch is static, so each batch entry becomes a Scan of the opset-9 form over its slice (scan
// axis 0 once the batch axis is gone), and the results are stacked again.
std::vector<Value*> convert_scan8(ImportContext& ctx) {
  if (ctx.input(0) != nullptr) ctx.unsupported("sequence_lens is not supported");
  Attributes attrs = ctx.attrs();
  auto m_attr = attrs.find("num_scan_inputs");
  if (m_attr == attrs.end()) throw InvalidModel(ctx.where() + ": num_scan_inputs is missing");
  if (ctx.inputs().size() < 2)
    throw InvalidModel(ctx.where() + ": Scan-8 needs sequence_lens and at least one scan input");
  std::vector<Value*> ins(ctx.inputs().begin() + 1, ctx.inputs().end());
  const int m = scan_input_count(ctx, m_attr->second.as_int(), ins.size());
  const int states = static_cast<int>(ins.size()) - m;
  for (Value* v : ins)
    if (v == nullptr || v->type.shape.rank() < 1)
      throw InvalidModel(ctx.where() + ": every input needs a batch axis");
  const int64_t batch = ins[0]->type.shape[0];
  // Scan-8 is unrolled into one Scan per batch item, so the batch bounds the nodes it creates.
  if (batch > kMaxScan8Batch)
    ctx.unsupported("Scan-8 is unrolled per batch item, and batch " + std::to_string(batch) +
                    " is over " + std::to_string(kMaxScan8Batch));
  std::vector<int64_t> dirs(m, 0);
  if (attrs.count("directions")) dirs = attrs.at("directions").as_ints();
  if (static_cast<int>(dirs.size()) != m)
    throw InvalidModel(ctx.where() + ": directions needs one entry per scan input");
  Attributes scan_attrs{{"num_scan_inputs", static_cast<int64_t>(m)},
                        {"scan_input_directions", dirs}};
  std::vector<std::vector<Value*>> per_batch;
  for (int64_t b = 0; b < batch; ++b) {
    Value* index = ctx.graph().add_constant(ctx.graph().unique_name(ctx.name() + "/batch"),
                                            Tensor::scalar<int64_t>(b));
    std::vector<Value*> slices;
    for (Value* v : ins) {
      if (v->type.shape[0] != batch)
        throw ShapeError(ctx.where() + ": inputs disagree on the batch size");
      slices.push_back(ctx.emit1("Gather", {v, index}, {{"axis", int64_t{0}}}));
    }
    Subgraph body = ctx.import_subgraph(
        "body", scan_body_types(ctx, slices, states, std::vector<int64_t>(m, 0)));
    slices.insert(slices.end(), body.captured.begin(), body.captured.end());
    Attributes a = scan_attrs;
    a["body"] = body.graph;
    a["captured"] = static_cast<int64_t>(body.captured.size());
    per_batch.push_back(
        ctx.emit("Scan", slices, a, static_cast<int>(body.graph->outputs().size())));
  }
  std::vector<Value*> result;
  Value* zero = ctx.constant_ints({0});
  for (size_t k = 0; batch > 0 && k < per_batch[0].size(); ++k) {
    std::vector<Value*> parts;
    for (const auto& outs : per_batch) parts.push_back(ctx.emit1("Unsqueeze", {outs[k], zero}));
    result.push_back(parts.size() == 1 ? parts[0]
                                       : ctx.emit1("Concat", parts, {{"axis", int64_t{0}}}));
  }
  if (batch == 0) ctx.unsupported("an empty batch is not supported");
  return result;
}

}  // namespace

LUMEN_ONNX_CONVERTER(If, "If", 1, 1000, &convert_if);
LUMEN_ONNX_CONVERTER(Loop, "Loop", 1, 1000, &convert_loop);
LUMEN_ONNX_CONVERTER(Scan8, "Scan", 8, 8, &convert_scan8);
LUMEN_ONNX_CONVERTER(Scan, "Scan", 9, 1000, &convert_scan);

}  // namespace lumen::onnx_import
