// If, Loop and Scan from ONNX models built here: results against naive references on random
// data, and the load-time errors of bad subgraphs.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

void add_value(onnx::ValueInfoProto* v, const std::string& name, int elem,
               const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
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

void add_graph_attr(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
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

onnx::ModelProto model(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name("main");
  return m;
}

Graph load(const onnx::ModelProto& m, const OnnxLoadOptions& options = {}) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return load_onnx_bytes(bytes, options);
}

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kBool = onnx::TensorProto::BOOL;
constexpr int kInt64 = onnx::TensorProto::INT64;

// out = cond ? x + y : x * y, each branch reading x and y from the main graph. With
// `else_len` != 3 the else branch gives another shape ([else_len] by slicing).
onnx::ModelProto if_model(int else_elem = kFloat) {
  onnx::ModelProto m = model(13);
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "cond", kBool, {});
  add_value(g->add_input(), "x", kFloat, {3});
  add_value(g->add_input(), "y", kFloat, {3});
  add_value(g->add_output(), "out", kFloat, {3});
  onnx::GraphProto then_g, else_g;
  add_node(&then_g, "Add", {"x", "y"}, {"sum"});
  add_value(then_g.add_output(), "sum", kFloat, {});
  add_node(&else_g, "Mul", {"x", "y"}, {"prod"});
  std::string out = "prod";
  if (else_elem != kFloat) {
    auto* cast = add_node(&else_g, "Cast", {"prod"}, {"prod_cast"});
    add_int_attr(cast, "to", else_elem);
    out = "prod_cast";
  }
  add_value(else_g.add_output(), out, else_elem, {});
  auto* n = add_node(g, "If", {"cond"}, {"out"}, "choose");
  add_graph_attr(n, "then_branch", then_g);
  add_graph_attr(n, "else_branch", else_g);
  return m;
}

TEST(ControlFlow, IfRunsTheBranchTheConditionPicks) {
  Graph g = load(if_model());
  Runtime rt;
  Executable* exe = g.compile(&rt);
  Tensor x = test::random_tensor({3}, 1), y = test::random_tensor({3}, 2);
  for (bool c : {true, false}) {
    std::vector<double> want;
    for (int i = 0; i < 3; ++i) {
      double a = x.data<float>()[i], b = y.data<float>()[i];
      want.push_back(c ? a + b : a * b);
    }
    auto out = exe->execute({Tensor::scalar<bool>(c), x, y});
    test::expect_close(out[0], {3}, want);
  }
}

TEST(ControlFlow, IfWithAKnownConditionIsInlined) {
  OnnxLoadOptions options;
  options.input_values["cond"] = Tensor::scalar<bool>(false);
  Graph g = load(if_model(), options);
  for (int id = 0; id < g.num_nodes(); ++id) EXPECT_NE(g.node(id).op, OpKind::kIf);
  Tensor x = test::random_tensor({3}, 3), y = test::random_tensor({3}, 4);
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    want.push_back(double(x.data<float>()[i]) * double(y.data<float>()[i]));
  Runtime rt;
  test::expect_close(g.compile(&rt)->execute(std::vector<Tensor>{x, y})[0], {3}, want);
}

TEST(ControlFlow, IfBranchesOfDifferentTypesAreRefusedAtLoad) {
  try {
    load(if_model(kInt64));
    FAIL() << "expected InvalidModel";
  } catch (const InvalidModel& e) {
    EXPECT_NE(std::string(e.what()).find("'choose' (If, opset 13)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("else_branch"), std::string::npos) << e.what();
  }
}

TEST(ControlFlow, IfBranchesOfDifferentShapesNeedAKnownCondition) {
  onnx::ModelProto m = if_model();
  auto* else_g = m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->mutable_g();
  auto* cat = else_g->add_node();  // the else branch gives [6]
  cat->set_op_type("Concat");
  cat->add_input("x");
  cat->add_input("prod");
  cat->add_output("both");
  add_int_attr(cat, "axis", 0);
  else_g->mutable_output(0)->set_name("both");
  EXPECT_THROW(load(m), ShapeError);
  OnnxLoadOptions options;
  options.input_values["cond"] = Tensor::scalar<bool>(false);
  Graph g = load(m, options);  // known: the else branch is inlined, with its own shape
  Tensor x = test::random_tensor({3}, 9), y = test::random_tensor({3}, 10);
  std::vector<double> want;
  for (int i = 0; i < 3; ++i) want.push_back(x.data<float>()[i]);
  for (int i = 0; i < 3; ++i)
    want.push_back(double(x.data<float>()[i]) * double(y.data<float>()[i]));
  Runtime rt;
  test::expect_close(g.compile(&rt)->execute(std::vector<Tensor>{x, y})[0], {6}, want);
}

// A Loop of trip count M over y [2]: y <- y + x * i (x read from the main graph); scan output
// [M, 2] stacks y after each iteration.
onnx::ModelProto loop_model(const std::string& outer_name = "x") {
  onnx::ModelProto m = model(13);
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "M", kInt64, {});
  add_value(g->add_input(), "x", kFloat, {2});
  add_value(g->add_input(), "y0", kFloat, {2});
  add_value(g->add_output(), "y", kFloat, {2});
  add_value(g->add_output(), "ys", kFloat, {});
  onnx::GraphProto body;
  add_value(body.add_input(), "i", kInt64, {});
  add_value(body.add_input(), "c", kBool, {});
  add_value(body.add_input(), "y_in", kFloat, {2});
  add_node(&body, "Identity", {"c"}, {"c_out"});
  auto* cast = add_node(&body, "Cast", {"i"}, {"fi"});
  add_int_attr(cast, "to", kFloat);
  add_node(&body, "Mul", {outer_name, "fi"}, {"step"});
  add_node(&body, "Add", {"y_in", "step"}, {"y_out"});
  add_node(&body, "Identity", {"y_out"}, {"scan"});
  for (const char* o : {"c_out", "y_out", "scan"}) add_value(body.add_output(), o, 0, {});
  body.mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(kBool);
  body.mutable_output(1)->mutable_type()->mutable_tensor_type()->set_elem_type(kFloat);
  body.mutable_output(2)->mutable_type()->mutable_tensor_type()->set_elem_type(kFloat);
  auto* n = add_node(g, "Loop", {"M", "", "y0"}, {"y", "ys"}, "loop");
  add_graph_attr(n, "body", body);
  return m;
}

std::vector<double> loop_reference(const Tensor& x, const Tensor& y0, int64_t m,
                                   std::vector<double>* scans) {
  std::vector<double> y{y0.data<float>()[0], y0.data<float>()[1]};
  for (int64_t i = 0; i < m; ++i)
    for (int k = 0; k < 2; ++k) {
      y[k] += double(x.data<float>()[k]) * double(i);
      scans->push_back(y[k]);
    }
  return y;
}

TEST(ControlFlow, LoopCarriesValuesAndStacksScanOutputs) {
  Tensor x = test::random_tensor({2}, 5), y0 = test::random_tensor({2}, 6);
  // A trip count known at load gives the scan output a static shape; one fed at run time leaves
  // its first dimension to the run.
  for (bool known : {true, false}) {
    OnnxLoadOptions options;
    if (known) options.input_values["M"] = Tensor::scalar<int64_t>(4);
    Graph g = load(loop_model(), options);
    Runtime rt;
    Executable* exe = g.compile(&rt);
    EXPECT_EQ(exe->outputs()[1].type.shape[0], known ? 4 : kDynamicDim);
    for (int64_t m : {int64_t{4}, int64_t{0}}) {
      if (known && m != 4) continue;
      std::vector<Tensor> ins{x, y0};
      if (!known) ins.insert(ins.begin(), Tensor::scalar<int64_t>(m));
      auto out = exe->execute(ins);
      std::vector<double> scans;
      std::vector<double> y = loop_reference(x, y0, m, &scans);
      test::expect_close(out[0], {2}, y);
      test::expect_close(out[1], {m, 2}, scans);
    }
  }
}

TEST(ControlFlow, ASubgraphReadingAnUnknownNameIsInvalid) {
  try {
    load(loop_model("nowhere"));
    FAIL() << "expected InvalidModel";
  } catch (const InvalidModel& e) {
    EXPECT_NE(std::string(e.what()).find("'loop' (Loop, opset 13)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'nowhere'"), std::string::npos) << e.what();
  }
}

// Scan-9 of a running sum over axis 1 of x [2, 5, 3] read backwards, with the scan output stacked
// on axis 1 too.
TEST(ControlFlow, ALoopCarriedValueThatChangesShapeIsRefusedAtLoad) {
  onnx::ModelProto m = loop_model();
  auto* body = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
  auto* grow = body->add_node();  // y_out becomes [4]: concat(y_in, step)
  grow->set_op_type("Concat");
  grow->add_input("y_in");
  grow->add_input("step");
  grow->add_output("grown");
  add_int_attr(grow, "axis", 0);
  body->mutable_output(1)->set_name("grown");
  try {
    load(m);
    FAIL() << "expected UnsupportedOp";
  } catch (const UnsupportedOp& e) {
    EXPECT_NE(std::string(e.what()).find("'loop' (Loop, opset 13)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("float32[4]"), std::string::npos) << e.what();
  }
}

TEST(ControlFlow, ScanRunsTheBodyOverSlices) {
  onnx::ModelProto m = model(11);
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "init", kFloat, {2, 3});
  add_value(g->add_input(), "x", kFloat, {2, 5, 3});
  add_value(g->add_output(), "final", kFloat, {2, 3});
  add_value(g->add_output(), "partial", kFloat, {2, 5, 3});
  onnx::GraphProto body;
  add_value(body.add_input(), "s_in", kFloat, {2, 3});
  add_value(body.add_input(), "xi", kFloat, {2, 3});
  add_node(&body, "Add", {"s_in", "xi"}, {"s_out"});
  add_node(&body, "Identity", {"s_out"}, {"part"});
  add_value(body.add_output(), "s_out", kFloat, {2, 3});
  add_value(body.add_output(), "part", kFloat, {2, 3});
  auto* n = add_node(g, "Scan", {"init", "x"}, {"final", "partial"}, "scan");
  add_graph_attr(n, "body", body);
  add_int_attr(n, "num_scan_inputs", 1);
  add_ints_attr(n, "scan_input_axes", {1});
  add_ints_attr(n, "scan_input_directions", {1});
  add_ints_attr(n, "scan_output_axes", {1});
  Graph graph = load(m);
  Tensor init = test::random_tensor({2, 3}, 7), x = test::random_tensor({2, 5, 3}, 8);
  std::vector<double> s(6), partial(30);
  for (int k = 0; k < 6; ++k) s[k] = init.data<float>()[k];
  for (int t = 4; t >= 0; --t)  // backwards; iteration (4 - t) lands at index 4 - t
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 3; ++c) {
        s[a * 3 + c] += x.data<float>()[(a * 5 + t) * 3 + c];
        partial[(a * 5 + (4 - t)) * 3 + c] = s[a * 3 + c];
      }
  Runtime rt;
  auto out = graph.compile(&rt)->execute(std::vector<Tensor>{init, x});
  test::expect_close(out[0], {2, 3}, s);
  test::expect_close(out[1], {2, 5, 3}, partial);
}

}  // namespace
}  // namespace lumen
