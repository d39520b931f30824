// Control flow nested in control flow, from ONNX models built here: If in If with an LSTM inside,
// reading the outermost graph's input and weights, with Squeeze/Unsqueeze changing ranks inside
// the branches; a Loop whose body holds an If with an LSTM in one branch and a Scan in the other.
// Results are checked against plain-loop references on random data, and a branch that cannot be
// built for the input shapes given is an error naming the If, at load or at the run that takes it.
// The shape of the first model is that of a published voice-activity model (an 8 kHz branch valid
// only for one-frame input beside the 16 kHz one) which lumen used to refuse at load.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kBool = onnx::TensorProto::BOOL;
constexpr int kInt64 = onnx::TensorProto::INT64;

constexpr int64_t kF = 8;  // features of x [1, T, F]
constexpr int64_t kH = 6;  // the LSTM's hidden size

void add_value(onnx::ValueInfoProto* v, const std::string& name, int elem,
               const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

// An output whose shape the model leaves open (as exporters write branch outputs).
void add_output(onnx::GraphProto* g, const std::string& name, int elem) {
  auto* v = g->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op,
                          const std::vector<std::string>& ins, const std::vector<std::string>& outs,
                          const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return n;
}

void add_int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void add_ints_attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void add_graph_attr(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

void fill_tensor(onnx::TensorProto* p, const Tensor& t) {
  for (int64_t d : t.shape().dims()) p->add_dims(d);
  if (t.dtype() == DType::kFloat32) {
    p->set_data_type(kFloat);
    for (int64_t i = 0; i < t.numel(); ++i) p->add_float_data(t.data<float>()[i]);
  } else {
    p->set_data_type(kInt64);
    for (int64_t i = 0; i < t.numel(); ++i) p->add_int64_data(t.data<int64_t>()[i]);
  }
}

void add_initializer(onnx::GraphProto* g, const std::string& name, const Tensor& t) {
  auto* p = g->add_initializer();
  p->set_name(name);
  fill_tensor(p, t);
}

// A Constant node giving `name`: int64 [n] of `values`, or an int64 scalar.
void add_const(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& values,
               bool scalar = false) {
  auto* n = add_node(g, "Constant", {}, {name});
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  fill_tensor(a->mutable_t(),
              scalar ? Tensor::scalar<int64_t>(values[0])
                     : Tensor::from_vector<int64_t>({static_cast<int64_t>(values.size())}, values));
}

onnx::NodeProto* add_lstm(onnx::GraphProto* g, const std::vector<std::string>& ins,
                          const std::vector<std::string>& outs, const std::string& name) {
  auto* n = add_node(g, "LSTM", ins, outs, name);
  add_int_attr(n, "hidden_size", kH);
  return n;
}

onnx::ModelProto new_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(16);
  m.mutable_graph()->set_name("main");
  return m;
}

Graph load(const onnx::ModelProto& m, const OnnxLoadOptions& options = {}) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return load_onnx_bytes(bytes, options);
}

// The random weights every model here reads from its main graph: an LSTM's W [1, 4H, F],
// R [1, 4H, H] and B [1, 8H], a projection P [F, H] and a scale v [H].
struct Weights {
  Tensor w = test::random_tensor({1, 4 * kH, kF}, 101, -0.5f, 0.5f);
  Tensor r = test::random_tensor({1, 4 * kH, kH}, 102, -0.5f, 0.5f);
  Tensor b = test::random_tensor({1, 8 * kH}, 103, -0.5f, 0.5f);
  Tensor p = test::random_tensor({kF, kH}, 104);
  Tensor v = test::random_tensor({kH}, 105);

  void add_to(onnx::GraphProto* g) const {
    add_initializer(g, "W", w);
    add_initializer(g, "R", r);
    add_initializer(g, "B", b);
    add_initializer(g, "P", p);
    add_initializer(g, "v", v);
  }
};

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// One step of ONNX's LSTM (gates i, o, f, c; default activations) on one batch row x [F], with
// state h, c [H] updated in place.
void lstm_step(const Weights& wt, const float* x, std::vector<double>& h, std::vector<double>& c) {
  const float* w = wt.w.data<float>();
  const float* r = wt.r.data<float>();
  const float* b = wt.b.data<float>();
  std::vector<double> gate(4 * kH);
  for (int64_t j = 0; j < 4 * kH; ++j) {
    double s = double(b[j]) + double(b[4 * kH + j]);
    for (int64_t k = 0; k < kF; ++k) s += double(w[j * kF + k]) * double(x[k]);
    for (int64_t k = 0; k < kH; ++k) s += double(r[j * kH + k]) * h[k];
    gate[j] = s;
  }
  for (int64_t k = 0; k < kH; ++k) {
    double i = sigmoid(gate[k]), o = sigmoid(gate[kH + k]), f = sigmoid(gate[2 * kH + k]);
    double g = std::tanh(gate[3 * kH + k]);
    c[k] = f * c[k] + i * g;
    h[k] = o * std::tanh(c[k]);
  }
}

// Hidden states of an LSTM from zero state over x [1, T, F], as [1, T, H].
std::vector<double> lstm_reference(const Weights& wt, const Tensor& x) {
  const int64_t steps = x.shape()[1];
  std::vector<double> h(kH, 0.0), c(kH, 0.0), out;
  for (int64_t t = 0; t < steps; ++t) {
    lstm_step(wt, x.data<float>() + t * kF, h, c);
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

// tanh(x P) over x [1, T, F], as [1, T, H].
std::vector<double> projection_reference(const Weights& wt, const Tensor& x) {
  std::vector<double> out;
  for (int64_t t = 0; t < x.shape()[1]; ++t)
    for (int64_t j = 0; j < kH; ++j) {
      double s = 0.0;
      for (int64_t k = 0; k < kF; ++k)
        s += double(x.data<float>()[t * kF + k]) * double(wt.p.data<float>()[k * kH + j]);
      out.push_back(std::tanh(s));
    }
  return out;
}

// y [1, T, H] = cond ? (cond2 ? LSTM(x) : tanh(x P)) : step(x), from x [1, T, F].
//
// then_branch ("seq"): an If on cond2, a second input of the main graph. Its then_branch reads x
// from the main graph, unsqueezes it to [1, 1, T, F] and squeezes it back, runs the LSTM (weights
// from the main graph) over x transposed to [T, 1, F] and turns Y [T, 1, 1, H] back into
// [1, T, H]; its else_branch is tanh(x P). With `mismatched_inner` that else_branch gives [T, H]
// instead, so the inner If cannot be built while cond2 is known only at run time.
//
// else_branch ("step"): what PyTorch exports for an LSTMCell fed x.squeeze(1): an If on
// T == 1 (known at load) squeezes axis 1 or passes x through, an If on rank != 2 adds a batch
// axis, then x gets a time axis and runs one LSTM step. Only for T == 1 does X reach the LSTM as
// [1, 1, F]; for T = 5 it is [1, 1, 1, 5, F] and this branch cannot be built.
onnx::ModelProto nested_if_model(int64_t steps, const Weights& wt, bool mismatched_inner = false) {
  onnx::ModelProto m = new_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", kFloat, {1, steps, kF});
  add_value(g->add_input(), "cond", kBool, {});
  add_value(g->add_input(), "cond2", kBool, {});
  add_value(g->add_output(), "y", kFloat, {});
  wt.add_to(g);

  onnx::GraphProto lstm_g;
  add_const(&lstm_g, "ax0", {0});
  add_node(&lstm_g, "Unsqueeze", {"x", "ax0"}, {"x4"});  // [1, 1, T, F]
  add_const(&lstm_g, "ax1", {1});
  add_node(&lstm_g, "Squeeze", {"x4", "ax1"}, {"x3"});  // [1, T, F]
  add_ints_attr(add_node(&lstm_g, "Transpose", {"x3"}, {"xt"}), "perm", {1, 0, 2});
  add_lstm(&lstm_g, {"xt", "W", "R", "B"}, {"Y"}, "seq/rnn/LSTM");
  add_const(&lstm_g, "ax1b", {1});
  add_node(&lstm_g, "Squeeze", {"Y", "ax1b"}, {"Y3"});  // [T, 1, H]
  add_ints_attr(add_node(&lstm_g, "Transpose", {"Y3"}, {"seq_y"}), "perm", {1, 0, 2});
  add_output(&lstm_g, "seq_y", kFloat);

  onnx::GraphProto proj_g;
  add_node(&proj_g, "MatMul", {"x", "P"}, {"xp"});
  add_node(&proj_g, "Tanh", {"xp"}, {"proj_y"});
  std::string proj_out = "proj_y";
  if (mismatched_inner) {
    add_const(&proj_g, "ax0p", {0});
    add_node(&proj_g, "Squeeze", {"proj_y", "ax0p"}, {"proj_y2"});  // [T, H]
    proj_out = "proj_y2";
  }
  add_output(&proj_g, proj_out, kFloat);

  onnx::GraphProto seq_g;
  auto* inner = add_node(&seq_g, "If", {"cond2"}, {"inner_y"}, "inner");
  add_graph_attr(inner, "then_branch", lstm_g);
  add_graph_attr(inner, "else_branch", proj_g);
  add_node(&seq_g, "Identity", {"inner_y"}, {"seq_out"});
  add_output(&seq_g, "seq_out", kFloat);

  onnx::GraphProto step_g;
  add_node(&step_g, "Shape", {"x"}, {"shp"});
  add_const(&step_g, "one_i", {1}, true);
  add_int_attr(add_node(&step_g, "Gather", {"shp", "one_i"}, {"t"}), "axis", 0);
  add_node(&step_g, "Equal", {"t", "one_i"}, {"t_is_1"});
  onnx::GraphProto sq_then, sq_else;
  add_const(&sq_then, "ax_m", {1});
  add_node(&sq_then, "Squeeze", {"x", "ax_m"}, {"x_sq"});
  add_output(&sq_then, "x_sq", kFloat);
  add_node(&sq_else, "Identity", {"x"}, {"x_id"});
  add_output(&sq_else, "x_id", kFloat);
  auto* sq = add_node(&step_g, "If", {"t_is_1"}, {"xs"}, "step/decoder/If");
  add_graph_attr(sq, "then_branch", sq_then);
  add_graph_attr(sq, "else_branch", sq_else);
  add_node(&step_g, "Shape", {"xs"}, {"xs_shape"});
  add_node(&step_g, "Size", {"xs_shape"}, {"xs_rank"});
  add_const(&step_g, "two", {2}, true);
  add_node(&step_g, "Equal", {"xs_rank", "two"}, {"rank_is_2"});
  add_node(&step_g, "Not", {"rank_is_2"}, {"unbatched"});
  onnx::GraphProto b_then, b_else;
  add_const(&b_then, "ax_b", {0});
  add_node(&b_then, "Unsqueeze", {"xs", "ax_b"}, {"xs_b"});
  add_output(&b_then, "xs_b", kFloat);
  add_node(&b_else, "Identity", {"xs"}, {"xs_i"});
  add_output(&b_else, "xs_i", kFloat);
  auto* batch = add_node(&step_g, "If", {"unbatched"}, {"xb"}, "step/rnn/If");
  add_graph_attr(batch, "then_branch", b_then);
  add_graph_attr(batch, "else_branch", b_else);
  add_const(&step_g, "ax_t", {0});
  add_node(&step_g, "Unsqueeze", {"xb", "ax_t"}, {"x_step"});  // [1, 1, F] when T == 1
  add_lstm(&step_g, {"x_step", "W", "R", "B"}, {"", "step_h"}, "step/rnn/LSTM");
  add_ints_attr(add_node(&step_g, "Transpose", {"step_h"}, {"step_y"}), "perm", {1, 0, 2});
  add_output(&step_g, "step_y", kFloat);

  auto* outer = add_node(g, "If", {"cond"}, {"y"}, "outer");
  add_graph_attr(outer, "then_branch", seq_g);
  add_graph_attr(outer, "else_branch", step_g);
  return m;
}

std::vector<Tensor> run(Executable* exe, const Tensor& x, bool cond, bool cond2) {
  return exe->execute({x, Tensor::scalar<bool>(cond), Tensor::scalar<bool>(cond2)});
}

void expect_message(const Error& e, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "no '" << p << "' in\n"
                                                                << e.what();
}

TEST(NestedControlFlow, IfInIfRunsTheLstmOnOuterValuesForEveryCondition) {
  const Weights wt;
  for (int64_t steps : {int64_t{5}, int64_t{1}}) {
    SCOPED_TRACE("T = " + std::to_string(steps));
    Graph g = load(nested_if_model(steps, wt));
    Runtime rt;
    Executable* exe = g.compile(&rt);
    const Tensor x = test::random_tensor({1, steps, kF}, 7 + steps);
    const std::vector<double> lstm = lstm_reference(wt, x);
    test::expect_close(run(exe, x, true, true)[0], {1, steps, kH}, lstm);
    test::expect_close(run(exe, x, true, false)[0], {1, steps, kH}, projection_reference(wt, x));
    if (steps == 1) {
      // One frame: the step branch is built too, and one LSTM step is the sequence's only one.
      test::expect_close(run(exe, x, false, true)[0], {1, 1, kH}, lstm);
      test::expect_close(run(exe, x, false, false)[0], {1, 1, kH}, lstm);
    }
  }
}

TEST(NestedControlFlow, ARunThatTakesABranchBuiltForOtherShapesNamesTheIf) {
  const Weights wt;
  Graph g = load(nested_if_model(5, wt));
  Runtime rt;
  Executable* exe = g.compile(&rt);
  const Tensor x = test::random_tensor({1, 5, kF}, 3);
  try {
    run(exe, x, false, true);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    expect_message(e, {"'outer' (If)", "cond is false", "else_branch", "step/rnn/LSTM",
                       "X must have rank 3, got [1, 1, 1, 5, 8]"});
  }
  // The executable is still good for the branch that was built.
  test::expect_close(run(exe, x, true, true)[0], {1, 5, kH}, lstm_reference(wt, x));
}

TEST(NestedControlFlow, ConditionsKnownAtLoadBuildOnlyTheTakenBranches) {
  const Weights wt;
  const Tensor x = test::random_tensor({1, 5, kF}, 11);
  OnnxLoadOptions options;
  options.input_values["cond"] = Tensor::scalar<bool>(true);
  options.input_values["cond2"] = Tensor::scalar<bool>(true);
  Graph g = load(nested_if_model(5, wt), options);
  for (int id = 0; id < g.num_nodes(); ++id) EXPECT_NE(g.node(id).op, OpKind::kIf);
  Runtime rt;
  test::expect_close(g.compile(&rt)->execute(std::vector<Tensor>{x})[0], {1, 5, kH},
                     lstm_reference(wt, x));
  // A known cond that picks the branch these shapes cannot build fails at load.
  options.input_values["cond"] = Tensor::scalar<bool>(false);
  try {
    load(nested_if_model(5, wt), options);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    expect_message(e, {"'outer' (If, opset 16)", "else_branch", "'step/rnn/LSTM' (LSTM, opset 16)",
                       "X must have rank 3"});
  }
}

TEST(NestedControlFlow, BranchesOfDifferentRanksInsideABranchAreAnErrorNamingBothIfs) {
  const Weights wt;
  // T = 5: neither branch of the outer If can be built, so the model cannot run at all.
  try {
    load(nested_if_model(5, wt, true));
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    expect_message(e, {"'outer' (If, opset 16)", "neither branch", "'inner' (If, opset 16)",
                       "then_branch", "float32[1, 5, 6]", "float32[5, 6]", "else_branch",
                       "step/rnn/LSTM", "X must have rank 3"});
  }
  // T = 1: the step branch is built and runs; the other branch names the inner If when taken.
  Graph g = load(nested_if_model(1, wt, true));
  Runtime rt;
  Executable* exe = g.compile(&rt);
  const Tensor x = test::random_tensor({1, 1, kF}, 12);
  test::expect_close(run(exe, x, false, false)[0], {1, 1, kH}, lstm_reference(wt, x));
  try {
    run(exe, x, true, true);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    expect_message(e, {"'outer' (If)", "cond is true", "then_branch", "'inner' (If, opset 16)",
                       "cond must be known"});
  }
}

TEST(NestedControlFlow, AMalformedBranchIsStillRefusedAtLoad) {
  const Weights wt;
  onnx::ModelProto m = nested_if_model(5, wt);
  // The step branch, which these shapes cannot build, first reads a name defined nowhere: a
  // malformed model, not a matter of shapes.
  auto* step = m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->mutable_g();
  add_node(step, "Relu", {"ghost"}, {"boo"});
  for (int k = step->node_size() - 1; k > 0; --k) step->mutable_node()->SwapElements(k, k - 1);
  try {
    load(m);
    FAIL() << "expected InvalidModel";
  } catch (const InvalidModel& e) {
    expect_message(e, {"'outer' (If, opset 16)", "else_branch", "'ghost'"});
  }
}

// Loop over t < T with h, c [1, H] carried: the body reads x [1, T, F] of the main graph at t and,
// on an If of t < K (K from the main graph, t known only inside the loop), runs one LSTM step
// (weights from the main graph) or a Scan over the F features of x_t with h as its state:
// s <- 0.5 s + x_t[k] v (v from the main graph, three graphs out). ys [T, 1, H] stacks h.
onnx::ModelProto loop_model(int64_t steps, const Weights& wt) {
  onnx::ModelProto m = new_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", kFloat, {1, steps, kF});
  add_value(g->add_input(), "h0", kFloat, {1, kH});
  add_value(g->add_input(), "c0", kFloat, {1, kH});
  add_value(g->add_output(), "h", kFloat, {});
  add_value(g->add_output(), "c", kFloat, {});
  add_value(g->add_output(), "ys", kFloat, {});
  wt.add_to(g);
  add_initializer(g, "M", Tensor::scalar<int64_t>(steps));
  add_initializer(g, "K", Tensor::scalar<int64_t>(3));

  onnx::GraphProto lstm_g;
  add_const(&lstm_g, "ax0", {0});
  add_node(&lstm_g, "Unsqueeze", {"xi", "ax0"}, {"X"});
  add_node(&lstm_g, "Unsqueeze", {"h_in", "ax0"}, {"H0"});
  add_node(&lstm_g, "Unsqueeze", {"c_in", "ax0"}, {"C0"});
  add_lstm(&lstm_g, {"X", "W", "R", "B", "", "H0", "C0"}, {"", "Yh", "Yc"}, "loop/rnn/LSTM");
  add_node(&lstm_g, "Squeeze", {"Yh", "ax0"}, {"lstm_h"});
  add_node(&lstm_g, "Squeeze", {"Yc", "ax0"}, {"lstm_c"});
  add_output(&lstm_g, "lstm_h", kFloat);
  add_output(&lstm_g, "lstm_c", kFloat);

  onnx::GraphProto scan_body;
  add_value(scan_body.add_input(), "s", kFloat, {});
  add_value(scan_body.add_input(), "xk", kFloat, {});
  auto* half = add_node(&scan_body, "Constant", {}, {"half"});
  auto* ha = half->add_attribute();
  ha->set_name("value");
  ha->set_type(onnx::AttributeProto::TENSOR);
  fill_tensor(ha->mutable_t(), Tensor::scalar<float>(0.5f));
  add_node(&scan_body, "Mul", {"s", "half"}, {"s_half"});
  add_node(&scan_body, "Mul", {"xk", "v"}, {"xv"});
  add_node(&scan_body, "Add", {"s_half", "xv"}, {"s_out"});
  add_output(&scan_body, "s_out", kFloat);
  onnx::GraphProto scan_g;
  auto* scan = add_node(&scan_g, "Scan", {"h_in", "xi"}, {"scan_h"}, "loop/mix");
  add_graph_attr(scan, "body", scan_body);
  add_int_attr(scan, "num_scan_inputs", 1);
  add_ints_attr(scan, "scan_input_axes", {1});
  add_node(&scan_g, "Identity", {"c_in"}, {"scan_c"});
  add_output(&scan_g, "scan_h", kFloat);
  add_output(&scan_g, "scan_c", kFloat);

  onnx::GraphProto body;
  add_value(body.add_input(), "i", kInt64, {});
  add_value(body.add_input(), "go", kBool, {});
  add_value(body.add_input(), "h_in", kFloat, {});
  add_value(body.add_input(), "c_in", kFloat, {});
  add_node(&body, "Identity", {"go"}, {"go_out"});
  add_int_attr(add_node(&body, "Gather", {"x", "i"}, {"xi"}), "axis", 1);  // [1, F]
  add_node(&body, "Less", {"i", "K"}, {"early"});
  auto* pick = add_node(&body, "If", {"early"}, {"h_out", "c_out"}, "loop/pick");
  add_graph_attr(pick, "then_branch", lstm_g);
  add_graph_attr(pick, "else_branch", scan_g);
  add_node(&body, "Identity", {"h_out"}, {"h_scan"});
  add_output(&body, "go_out", kBool);
  add_output(&body, "h_out", kFloat);
  add_output(&body, "c_out", kFloat);
  add_output(&body, "h_scan", kFloat);
  auto* loop = add_node(g, "Loop", {"M", "", "h0", "c0"}, {"h", "c", "ys"}, "loop");
  add_graph_attr(loop, "body", body);
  return m;
}

TEST(NestedControlFlow, LoopWithAnIfOfAnLstmAndAScan) {
  const Weights wt;
  const int64_t steps = 5;
  Graph g = load(loop_model(steps, wt));
  Runtime rt;
  Executable* exe = g.compile(&rt);
  const Tensor x = test::random_tensor({1, steps, kF}, 21);
  const Tensor h0 = test::random_tensor({1, kH}, 22), c0 = test::random_tensor({1, kH}, 23);
  std::vector<double> h(h0.data<float>(), h0.data<float>() + kH);
  std::vector<double> c(c0.data<float>(), c0.data<float>() + kH);
  std::vector<double> ys;
  for (int64_t t = 0; t < steps; ++t) {
    const float* xt = x.data<float>() + t * kF;
    if (t < 3) {
      lstm_step(wt, xt, h, c);
    } else {
      for (int64_t k = 0; k < kF; ++k)
        for (int64_t j = 0; j < kH; ++j) h[j] = 0.5 * h[j] + double(xt[k]) * wt.v.data<float>()[j];
    }
    ys.insert(ys.end(), h.begin(), h.end());
  }
  auto out = exe->execute(std::vector<Tensor>{x, h0, c0});
  test::expect_close(out[0], {1, kH}, h);
  test::expect_close(out[1], {1, kH}, c);
  test::expect_close(out[2], {steps, 1, kH}, ys);
}

}  // namespace
}  // namespace lumen
