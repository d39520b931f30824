// Schemas of the control-flow ops If, Loop and Scan. Their subgraphs are Graph attributes whose
// inputs are the formal inputs ONNX gives them followed by the outer values they read; the node
// lists those outer values as its last `captured` inputs. Every subgraph is compiled for static
// shapes, so what flows between iterations or out of either branch must keep one type. The one
// dynamic dimension allowed is the iteration count of a Loop's scan outputs when the loop may
// stop early (or has no trip count known at build time). An If branch that the importer could
// not build for the input types at hand is absent, and a string attribute gives the reason.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {
namespace {

const Graph& subgraph(const InferContext& ctx, const char* name) {
  const std::shared_ptr<Graph>& g = ctx.attr(name)->as_graph();
  if (!g) ctx.fail_model(std::string("subgraph '") + name + "' is empty");
  return *g;
}

// Checks that the subgraph's inputs from `first` on take the node's inputs from `node_first` on.
void check_inputs(const InferContext& ctx, const Graph& body, const char* name, int first,
                  int node_first, int count) {
  for (int k = 0; k < count; ++k) {
    const TensorType& want = ctx.input(node_first + k);
    const TensorType& got = body.value(body.inputs()[first + k]).type;
    if (!(want == got))
      ctx.fail_model(std::string("subgraph '") + name + "' input " + std::to_string(first + k) +
                     " is " + got.to_string() + ", but the node passes " + want.to_string());
  }
}

int captured_count(const InferContext& ctx) {
  int64_t c = ctx.attr_int("captured", 0);
  if (c < 0 || c > ctx.num_inputs()) ctx.fail_model("bad 'captured' count " + std::to_string(c));
  return static_cast<int>(c);
}

const TensorType& output_type(const Graph& g, int k) {
  return g.value(g.outputs()[k]).type;
}

void require_static(const InferContext& ctx, const Graph& g, const char* name, int k) {
  if (!output_type(g, k).shape.is_static())
    ctx.fail_unsupported(std::string("subgraph '") + name + "' output " + std::to_string(k) +
                         " has shape " + output_type(g, k).shape.to_string() +
                         ", known only at run time; lumen needs static shapes across iterations");
}

// If: inputs [cond, then's captured..., else's captured...]; then_inputs says how many are then's.
// A branch that the importer could not build for these input types is absent, and its string
// attribute then_error or else_error says why (a run that takes it fails with that reason).
void infer_if(InferContext& ctx) {
  const TensorType& cond = ctx.input(0);
  if (cond.dtype != DType::kBool || cond.shape.numel() != 1)
    ctx.fail_model("cond must be a bool with one element, got " + cond.to_string());
  const char* names[2] = {"then_branch", "else_branch"};
  const Graph* branch[2] = {nullptr, nullptr};
  for (int b = 0; b < 2; ++b) {
    const bool has_graph = ctx.has_attr(names[b]);
    const bool has_error = ctx.has_attr(std::string(names[b]) + "_error");
    if (has_graph == has_error)
      ctx.fail_model(std::string("needs either the subgraph '") + names[b] + "' or " + names[b] +
                     "_error, and not both");
    if (has_graph) branch[b] = &subgraph(ctx, names[b]);
  }
  if (branch[0] == nullptr && branch[1] == nullptr) ctx.fail_model("has neither branch");
  int then_n = static_cast<int>(ctx.attr_int("then_inputs", 0));
  int else_n = ctx.num_inputs() - 1 - then_n;
  auto inputs_of = [](const Graph* g) { return g ? static_cast<int>(g->inputs().size()) : 0; };
  if (then_n < 0 || else_n < 0 || inputs_of(branch[0]) != then_n || inputs_of(branch[1]) != else_n)
    ctx.fail_model("the branches' inputs do not match the node's inputs");
  if (branch[0]) check_inputs(ctx, *branch[0], names[0], 0, 1, then_n);
  if (branch[1]) check_inputs(ctx, *branch[1], names[1], 0, 1 + then_n, else_n);
  const Graph& first = branch[0] ? *branch[0] : *branch[1];
  if (static_cast<int>(first.outputs().size()) < ctx.num_outputs() ||
      (branch[0] && branch[1] && branch[0]->outputs().size() != branch[1]->outputs().size()))
    ctx.fail_model(
        "then_branch has " + std::to_string(branch[0] ? branch[0]->outputs().size() : 0) +
        " outputs, else_branch " + std::to_string(branch[1] ? branch[1]->outputs().size() : 0) +
        ", the node " + std::to_string(ctx.num_outputs()));
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    const TensorType& a = output_type(first, k);
    if (branch[0] && branch[1]) {
      const TensorType& b = output_type(*branch[1], k);
      if (a.dtype != b.dtype)
        ctx.fail_model("output " + std::to_string(k) + " is " + a.to_string() +
                       " in then_branch but " + b.to_string() + " in else_branch");
      // Branches of different shapes make the output's shape depend on cond; lumen compiles for
      // static shapes, so such a cond must be a constant (then the importer inlines the branch).
      if (a.shape != b.shape)
        ctx.fail_shape("output " + std::to_string(k) + " is " + a.to_string() +
                       " in then_branch but " + b.to_string() +
                       " in else_branch, so cond must be known when the graph is built");
    }
    ctx.set_output(k, a.dtype, a.shape);
  }
}

// Whether the body's condition output is always its condition input (or the constant true), so
// the loop never stops before its trip count.
bool cond_passes_through(const Graph& body) {
  int v = body.outputs()[0];
  for (;;) {
    const Value& val = body.value(v);
    if (val.data) return val.data->numel() == 1 && val.data->item_as_double() != 0.0;
    if (val.producer < 0) return v == body.inputs()[1];
    const Node& n = body.node(val.producer);
    if (n.op != OpKind::kIdentity) return false;
    v = n.inputs[0];
  }
}

// Loop: inputs [M or none, cond or none, carried..., captured...]; outputs [carried..., scans...].
// The body takes [iteration (int64 scalar), cond (bool scalar), carried..., captured...] and gives
// [cond, carried..., scan parts...].
void infer_loop(InferContext& ctx) {
  const Graph& body = subgraph(ctx, "body");
  int captured = captured_count(ctx);
  int carried = ctx.num_inputs() - 2 - captured;
  if (carried < 0) ctx.fail_model("takes a trip count, a condition and the loop-carried values");
  if (ctx.has_input(0) && (ctx.input_dtype(0) != DType::kInt64 || ctx.input_shape(0).numel() != 1))
    ctx.fail_model("M must be an int64 with one element, got " + ctx.input(0).to_string());
  if (ctx.has_input(1) && (ctx.input_dtype(1) != DType::kBool || ctx.input_shape(1).numel() != 1))
    ctx.fail_model("cond must be a bool with one element, got " + ctx.input(1).to_string());
  if (!ctx.has_input(0) && !ctx.has_input(1))
    ctx.fail_unsupported("neither a trip count nor a condition is given: the loop never ends");
  if (static_cast<int>(body.inputs().size()) != ctx.num_inputs())
    ctx.fail_model("the body takes " + std::to_string(body.inputs().size()) + " inputs, the node " +
                   std::to_string(ctx.num_inputs()));
  const TensorType iter_t{DType::kInt64, Shape{}}, cond_t{DType::kBool, Shape{}};
  if (!(body.value(body.inputs()[0]).type == iter_t) ||
      !(body.value(body.inputs()[1]).type == cond_t))
    ctx.fail_model("the body's first inputs must be an int64 and a bool scalar");
  check_inputs(ctx, body, "body", 2, 2, carried + captured);
  int scans = static_cast<int>(body.outputs().size()) - 1 - carried;
  if (scans < 0 || ctx.num_outputs() > carried + scans)
    ctx.fail_model("the body gives " + std::to_string(body.outputs().size()) + " outputs for " +
                   std::to_string(carried) + " loop-carried values");
  const TensorType& cond_out = output_type(body, 0);
  if (cond_out.dtype != DType::kBool || cond_out.shape.numel() != 1)
    ctx.fail_model("the body's condition output must be a bool with one element, got " +
                   cond_out.to_string());
  for (int k = 0; k < carried; ++k) {
    require_static(ctx, body, "body", 1 + k);
    const TensorType& in = ctx.input(2 + k);
    const TensorType& out = output_type(body, 1 + k);
    if (!(in == out))
      ctx.fail_unsupported("loop-carried value " + std::to_string(k) + " goes in as " +
                           in.to_string() + " and comes out as " + out.to_string() +
                           "; lumen compiles the body for one static type");
    if (k < ctx.num_outputs()) ctx.set_output(k, in.dtype, in.shape);
  }
  // Iterations: the trip count when it is known and nothing can stop the loop earlier.
  int64_t iterations = kDynamicDim;
  const Tensor* m = ctx.has_input(0) ? ctx.input_value(0) : nullptr;
  const Tensor* c = ctx.has_input(1) ? ctx.input_value(1) : nullptr;
  bool starts = !ctx.has_input(1) || (c != nullptr && c->item_as_double() != 0.0);
  if (m != nullptr && starts && cond_passes_through(body))
    iterations = std::max<int64_t>(0, static_cast<int64_t>(m->item_as_double()));
  if (c != nullptr && c->item_as_double() == 0.0) iterations = 0;
  for (int k = carried; k < ctx.num_outputs(); ++k) {
    require_static(ctx, body, "body", 1 + k);
    const TensorType& part = output_type(body, 1 + k);
    std::vector<int64_t> dims{iterations};
    dims.insert(dims.end(), part.shape.dims().begin(), part.shape.dims().end());
    ctx.set_output(k, part.dtype, Shape(dims));
  }
}

// Scan (opset 9 form): inputs [state..., scan inputs..., captured...]; outputs [state...,
// scan outputs...]. The body takes [state..., one slice of each scan input..., captured...] and
// gives [state..., one slice of each scan output...].
void infer_scan(InferContext& ctx) {
  const Graph& body = subgraph(ctx, "body");
  int captured = captured_count(ctx);
  int64_t num_scan = ctx.attr_int("num_scan_inputs");
  int states = ctx.num_inputs() - captured - static_cast<int>(num_scan);
  if (num_scan < 1 || states < 0)
    ctx.fail_model("num_scan_inputs " + std::to_string(num_scan) + " does not fit " +
                   std::to_string(ctx.num_inputs()) + " inputs");
  int m = static_cast<int>(num_scan);
  std::vector<int64_t> in_axes = ctx.attr_ints("scan_input_axes", std::vector<int64_t>(m, 0));
  std::vector<int64_t> in_dirs = ctx.attr_ints("scan_input_directions", std::vector<int64_t>(m, 0));
  if (static_cast<int>(in_axes.size()) != m || static_cast<int>(in_dirs.size()) != m)
    ctx.fail_model("scan_input_axes and scan_input_directions need one entry per scan input");
  if (static_cast<int>(body.inputs().size()) != ctx.num_inputs())
    ctx.fail_model("the body takes " + std::to_string(body.inputs().size()) + " inputs, the node " +
                   std::to_string(ctx.num_inputs()));
  int64_t length = -1;
  for (int j = 0; j < m; ++j) {
    const TensorType& in = ctx.input(states + j);
    int axis = normalize_axis(in_axes[j], in.shape.rank(), "scan_input_axes");
    if (length >= 0 && in.shape[axis] != length)
      ctx.fail_shape("scan inputs have different lengths " + std::to_string(length) + " and " +
                     std::to_string(in.shape[axis]));
    length = in.shape[axis];
    Shape slice = in.shape;
    slice.dims().erase(slice.dims().begin() + axis);
    const TensorType& got = body.value(body.inputs()[states + j]).type;
    if (!(got == TensorType{in.dtype, slice}))
      ctx.fail_model("the body's scan input " + std::to_string(j) + " is " + got.to_string() +
                     ", expected " + TensorType{in.dtype, slice}.to_string());
  }
  check_inputs(ctx, body, "body", 0, 0, states);
  check_inputs(ctx, body, "body", states + m, states + m, captured);
  int k_out = static_cast<int>(body.outputs().size()) - states;
  if (k_out < 0 || ctx.num_outputs() > states + k_out)
    ctx.fail_model("the body gives " + std::to_string(body.outputs().size()) + " outputs for " +
                   std::to_string(states) + " states");
  std::vector<int64_t> out_axes = ctx.attr_ints("scan_output_axes", std::vector<int64_t>(k_out, 0));
  std::vector<int64_t> out_dirs =
      ctx.attr_ints("scan_output_directions", std::vector<int64_t>(k_out, 0));
  if (static_cast<int>(out_axes.size()) != k_out || static_cast<int>(out_dirs.size()) != k_out)
    ctx.fail_model("scan_output_axes and scan_output_directions need one entry per scan output");
  for (int64_t d : in_dirs)
    if (d != 0 && d != 1) ctx.fail_model("a scan direction must be 0 or 1");
  for (int64_t d : out_dirs)
    if (d != 0 && d != 1) ctx.fail_model("a scan direction must be 0 or 1");
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    require_static(ctx, body, "body", k);
    const TensorType& out = output_type(body, k);
    if (k < states) {
      if (!(out == ctx.input(k)))
        ctx.fail_unsupported("state " + std::to_string(k) + " goes in as " +
                             ctx.input(k).to_string() + " and comes out as " + out.to_string() +
                             "; lumen compiles the body for one static type");
      ctx.set_output(k, out.dtype, out.shape);
      continue;
    }
    int axis = normalize_axis(out_axes[k - states], out.shape.rank() + 1, "scan_output_axes");
    std::vector<int64_t> dims = out.shape.dims();
    dims.insert(dims.begin() + axis, length);
    ctx.set_output(k, out.dtype, Shape(dims));
  }
}

}  // namespace

// Never folded at build time: the node evaluator runs single kernels, not subgraphs.
LUMEN_REGISTER_SCHEMA(If, {.min_inputs = 1,
                           .max_inputs = kVariadic,
                           .min_outputs = 1,
                           .max_outputs = kVariadic,
                           .attrs = {{"then_branch", AttrType::kGraph},
                                     {"else_branch", AttrType::kGraph},
                                     {"then_branch_error", AttrType::kString},
                                     {"else_branch_error", AttrType::kString},
                                     {"then_inputs", AttrType::kInt}},
                           .infer = &infer_if,
                           .foldable = false});
LUMEN_REGISTER_SCHEMA(Loop,
                      {.min_inputs = 0,
                       .max_inputs = kVariadic,
                       .min_outputs = 0,
                       .max_outputs = kVariadic,
                       .attrs = {{"body", AttrType::kGraph, true}, {"captured", AttrType::kInt}},
                       .infer = &infer_loop,
                       .foldable = false,
                       .dynamic_outputs = true});
LUMEN_REGISTER_SCHEMA(Scan, {.min_inputs = 1,
                             .max_inputs = kVariadic,
                             .min_outputs = 1,
                             .max_outputs = kVariadic,
                             .attrs = {{"body", AttrType::kGraph, true},
                                       {"num_scan_inputs", AttrType::kInt, true},
                                       {"scan_input_axes", AttrType::kInts},
                                       {"scan_input_directions", AttrType::kInts},
                                       {"scan_output_axes", AttrType::kInts},
                                       {"scan_output_directions", AttrType::kInts},
                                       {"captured", AttrType::kInt}},
                             .infer = &infer_scan,
                             .foldable = false});

}  // namespace lumen
