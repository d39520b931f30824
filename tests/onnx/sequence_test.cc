// ONNX sequences and optionals (SequenceConstruct ... ConcatFromSequence, SequenceMap, Optional*,
// and Identity, If and Loop over them), from models built here with the protobuf API and run
// through OnnxSession::run_values on random data; references are plain list manipulation and
// loops. Bad positions, types and kinds are lumen::Errors that say what is wrong.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;
constexpr int kBool = onnx::TensorProto::BOOL;

// Dims as text: a number is fixed, anything else symbolic.
void set_tensor_type(onnx::TypeProto* t, int elem, const std::vector<std::string>& dims) {
  auto* tt = t->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const std::string& d : dims) {
    if (std::isdigit(static_cast<unsigned char>(d[0])))
      shape->add_dim()->set_dim_value(std::stoll(d));
    else
      shape->add_dim()->set_dim_param(d);
  }
}

void tensor_io(onnx::ValueInfoProto* v, const std::string& name, int elem,
               const std::vector<std::string>& dims) {
  v->set_name(name);
  set_tensor_type(v->mutable_type(), elem, dims);
}

void sequence_io(onnx::ValueInfoProto* v, const std::string& name, int elem,
                 const std::vector<std::string>& dims) {
  v->set_name(name);
  set_tensor_type(v->mutable_type()->mutable_sequence_type()->mutable_elem_type(), elem, dims);
}

void optional_io(onnx::ValueInfoProto* v, const std::string& name, int elem,
                 const std::vector<std::string>& dims) {
  v->set_name(name);
  set_tensor_type(v->mutable_type()->mutable_optional_type()->mutable_elem_type(), elem, dims);
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op,
                          const std::vector<std::string>& ins,
                          const std::vector<std::string>& outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(outs.empty() ? op : outs[0] + "_node");
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return n;
}

void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void graph_attr(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

onnx::ModelProto model(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name("main");
  return m;
}

Tensor scalar64(int64_t v) {
  return Tensor::scalar<int64_t>(v);
}

// Checks every element of each tensor against the reference tensors.
void expect_tensors(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    test::expect_close(got[k], want[k].shape(), test::to_doubles(want[k]), 0.0, 0.0);
}

// Rows [begin, end) of a row-major 2-D tensor along `axis` (0 or 1), as a new tensor.
Tensor slice2d(const Tensor& x, int axis, int64_t begin, int64_t end) {
  const int64_t rows = x.shape()[0], cols = x.shape()[1];
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if ((axis == 0 ? r : c) >= begin && (axis == 0 ? r : c) < end)
        out.push_back(x.data<float>()[r * cols + c]);
  Shape s = axis == 0 ? Shape{end - begin, cols} : Shape{rows, end - begin};
  return Tensor::from_vector<float>(s, out);
}

class Sequences : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lumen_seq_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string save(const onnx::ModelProto& m) {
    std::string path = (dir_ / ("m" + std::to_string(count_++) + ".onnx")).string();
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }
  fs::path dir_;
  int count_ = 0;
};

// s = Insert(Construct(a, b), c, ins); s = Erase(s, era); outputs At(s, at), Length(s),
// ConcatFromSequence(s, axis 0), and s itself. Positions are inputs read at run time.
onnx::ModelProto list_ops_model() {
  onnx::ModelProto m = model(13);
  auto* g = m.mutable_graph();
  for (const char* x : {"a", "b", "c"}) tensor_io(g->add_input(), x, kFloat, {"n", "3"});
  for (const char* p : {"ins", "era", "at"}) tensor_io(g->add_input(), p, kInt64, {});
  tensor_io(g->add_output(), "item", kFloat, {"m", "3"});
  tensor_io(g->add_output(), "length", kInt64, {});
  tensor_io(g->add_output(), "joined", kFloat, {"k", "3"});
  sequence_io(g->add_output(), "s3", kFloat, {"m", "3"});
  add_node(g, "SequenceConstruct", {"a", "b"}, {"s1"});
  add_node(g, "SequenceInsert", {"s1", "c", "ins"}, {"s2"});
  add_node(g, "SequenceErase", {"s2", "era"}, {"s3"});
  add_node(g, "SequenceAt", {"s3", "at"}, {"item"});
  add_node(g, "SequenceLength", {"s3"}, {"length"});
  int_attr(add_node(g, "ConcatFromSequence", {"s3"}, {"joined"}), "axis", 0);
  return m;
}

TEST_F(Sequences, ListOpsFollowAListReference) {
  OnnxSession session(save(list_ops_model()));
  EXPECT_EQ(session.info().value_inputs, (std::vector<std::string>{"ins", "era", "at"}));
  Tensor a = test::random_tensor({2, 3}, 1), b = test::random_tensor({1, 3}, 2),
         c = test::random_tensor({4, 3}, 3);
  struct Case {
    int64_t ins, era, at;
  };
  for (Case p : {Case{0, 0, 0}, Case{2, -1, -1}, Case{-1, 1, 1}, Case{1, -3, 0}}) {
    std::vector<Tensor> list{a, b};
    list.insert(list.begin() + (p.ins < 0 ? p.ins + 2 : p.ins), c);
    list.erase(list.begin() + (p.era < 0 ? p.era + 3 : p.era));
    Tensor item = list[p.at < 0 ? p.at + 2 : p.at];
    std::vector<double> joined;
    int64_t rows = 0;
    for (const Tensor& t : list) {
      std::vector<double> d = test::to_doubles(t);
      joined.insert(joined.end(), d.begin(), d.end());
      rows += t.shape()[0];
    }
    std::vector<OnnxValue> out = session.run_values({{"a", OnnxValue::tensor(a)},
                                                     {"b", OnnxValue::tensor(b)},
                                                     {"c", OnnxValue::tensor(c)},
                                                     {"ins", OnnxValue::tensor(scalar64(p.ins))},
                                                     {"era", OnnxValue::tensor(scalar64(p.era))},
                                                     {"at", OnnxValue::tensor(scalar64(p.at))}});
    ASSERT_EQ(out.size(), 4u);
    expect_tensors(out[0].tensors, {item});
    test::expect_equal(out[1].tensors.at(0), DType::kInt64, {}, {2.0});
    test::expect_close(out[2].tensors.at(0), {rows, 3}, joined, 0.0, 0.0);
    EXPECT_EQ(out[3].kind, OnnxValueKind::kSequence);
    expect_tensors(out[3].tensors, list);
  }
  EXPECT_EQ(session.num_plans(), 4u);  // one per set of positions
}

TEST_F(Sequences, PositionOutOfRangeIsAShapeError) {
  OnnxSession session(save(list_ops_model()));
  Tensor a = test::random_tensor({2, 3}, 1);
  try {
    session.run_values({{"a", OnnxValue::tensor(a)},
                        {"b", OnnxValue::tensor(a)},
                        {"c", OnnxValue::tensor(a)},
                        {"ins", OnnxValue::tensor(scalar64(0))},
                        {"era", OnnxValue::tensor(scalar64(0))},
                        {"at", OnnxValue::tensor(scalar64(5))}});
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("SequenceAt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("position 5 is out of range for a sequence of 2 tensors"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("'at'"), std::string::npos) << msg;  // names the run-time input
  }
  EXPECT_THROW(session.run_values({{"a", OnnxValue::tensor(a)},
                                   {"b", OnnxValue::tensor(a)},
                                   {"c", OnnxValue::tensor(a)},
                                   {"ins", OnnxValue::tensor(scalar64(4))},
                                   {"era", OnnxValue::tensor(scalar64(0))},
                                   {"at", OnnxValue::tensor(scalar64(0))}}),
               ShapeError);
}

TEST_F(Sequences, SplitToSequenceAndConcatFromSequence) {
  // parts = SplitToSequence(x, axis, split); back = ConcatFromSequence(parts, axis, new_axis)
  struct Case {
    int axis;
    std::vector<int64_t> split;  // empty: no split input; one value: a scalar split
    bool keepdims;
  };
  Tensor x = test::random_tensor({5, 4}, 7);
  for (const Case& c : {Case{0, {}, false}, Case{1, {}, true}, Case{0, {2}, true},
                        Case{1, {1, 3}, true}, Case{1, {3}, true}}) {
    onnx::ModelProto m = model(13);
    auto* g = m.mutable_graph();
    tensor_io(g->add_input(), "x", kFloat, {"5", "4"});
    sequence_io(g->add_output(), "parts", kFloat, {});
    tensor_io(g->add_output(), "back", kFloat, {});
    std::vector<std::string> ins{"x"};
    if (!c.split.empty()) {
      auto* init = g->add_initializer();
      init->set_name("split");
      init->set_data_type(kInt64);
      if (c.split.size() > 1) init->add_dims(static_cast<int64_t>(c.split.size()));
      for (int64_t v : c.split) init->add_int64_data(v);
      ins.push_back("split");
    }
    auto* split = add_node(g, "SplitToSequence", ins, {"parts"});
    int_attr(split, "axis", c.axis);
    if (!c.keepdims) int_attr(split, "keepdims", 0);
    auto* concat = add_node(g, "ConcatFromSequence", {"parts"}, {"back"});
    int_attr(concat, "axis", c.axis);
    if (!c.keepdims) int_attr(concat, "new_axis", 1);

    std::vector<Tensor> want;
    const int64_t dim = x.shape()[c.axis];
    std::vector<int64_t> lengths = c.split;
    if (c.split.empty()) lengths.assign(static_cast<size_t>(dim), 1);
    if (c.split.size() == 1) {
      lengths.clear();
      for (int64_t at = 0; at < dim; at += c.split[0])
        lengths.push_back(std::min(c.split[0], dim - at));
    }
    int64_t at = 0;
    for (int64_t len : lengths) {
      Tensor part = slice2d(x, c.axis, at, at + len);
      at += len;
      if (!c.keepdims) {
        Shape squeezed = c.axis == 0 ? Shape{part.shape()[1]} : Shape{part.shape()[0]};
        part = Tensor::from_vector<float>(
            squeezed, std::vector<float>(part.data<float>(), part.data<float>() + part.numel()));
      }
      want.push_back(part);
    }
    OnnxSession session(save(m));
    std::vector<OnnxValue> out = session.run_values({{"x", OnnxValue::tensor(x)}});
    SCOPED_TRACE("axis " + std::to_string(c.axis) + ", " + std::to_string(c.split.size()) +
                 " split values");
    ASSERT_EQ(out.size(), 2u);
    expect_tensors(out[0].tensors, want);
    expect_tensors(out[1].tensors, {x});
  }
}

// ys[i] = xs[i] + y and zs[i] = xs[i] * y through SequenceMap, with xs a sequence input.
TEST_F(Sequences, SequenceMapAppliesItsBodyPerElement) {
  onnx::ModelProto m = model(17);
  auto* g = m.mutable_graph();
  sequence_io(g->add_input(), "xs", kFloat, {"n"});
  tensor_io(g->add_input(), "y", kFloat, {"n"});
  sequence_io(g->add_output(), "ys", kFloat, {"n"});
  sequence_io(g->add_output(), "zs", kFloat, {"n"});
  onnx::GraphProto body;
  tensor_io(body.add_input(), "e", kFloat, {"n"});
  tensor_io(body.add_input(), "w", kFloat, {"n"});
  tensor_io(body.add_output(), "sum", kFloat, {"n"});
  tensor_io(body.add_output(), "prod", kFloat, {"n"});
  add_node(&body, "Add", {"e", "w"}, {"sum"});
  add_node(&body, "Mul", {"e", "w"}, {"prod"});
  graph_attr(add_node(g, "SequenceMap", {"xs", "y"}, {"ys", "zs"}), "body", body);
  OnnxSession session(save(m));
  EXPECT_EQ(session.info().inputs.at(0).kind, OnnxValueKind::kSequence);
  for (int length : {3, 1, 0, 3}) {
    std::vector<Tensor> xs;
    for (int i = 0; i < length; ++i) xs.push_back(test::random_tensor({6}, 10 + i));
    Tensor y = test::random_tensor({6}, 99);
    std::vector<Tensor> sums, prods;
    for (const Tensor& x : xs) {
      std::vector<float> s(6), p(6);
      for (int k = 0; k < 6; ++k) {
        s[k] = x.data<float>()[k] + y.data<float>()[k];
        p[k] = x.data<float>()[k] * y.data<float>()[k];
      }
      sums.push_back(Tensor::from_vector<float>({6}, s));
      prods.push_back(Tensor::from_vector<float>({6}, p));
    }
    std::vector<OnnxValue> out =
        session.run_values({{"xs", OnnxValue::sequence(xs)}, {"y", OnnxValue::tensor(y)}});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].kind, OnnxValueKind::kSequence);
    expect_tensors(out[0].tensors, sums);
    expect_tensors(out[1].tensors, prods);
  }
  EXPECT_EQ(session.num_plans(), 3u);  // lengths 3, 1 and 0
  // An element of the wrong type, and a tensor where a sequence belongs.
  Tensor y = test::random_tensor({6}, 1);
  EXPECT_THROW(session.run_values({{"xs", OnnxValue::sequence({test::random_ints({6}, 1, 0, 5)})},
                                   {"y", OnnxValue::tensor(y)}}),
               InvalidArgument);
  EXPECT_THROW(session.run_values({{"xs", OnnxValue::tensor(y)}, {"y", OnnxValue::tensor(y)}}),
               InvalidArgument);
  EXPECT_THROW(session.run({{"xs", y}, {"y", y}}), InvalidArgument);
  EXPECT_THROW(session.plan_for(std::map<std::string, Tensor>{{"y", y}}), InvalidArgument);
}

// has = OptionalHasElement(o); back = Identity(o); got = OptionalGetElement(o) + 1.
TEST_F(Sequences, OptionalsPresentAndEmpty) {
  onnx::ModelProto m = model(18);
  auto* g = m.mutable_graph();
  optional_io(g->add_input(), "o", kFloat, {"3"});
  tensor_io(g->add_output(), "has", kBool, {});
  optional_io(g->add_output(), "back", kFloat, {"3"});
  add_node(g, "OptionalHasElement", {"o"}, {"has"});
  add_node(g, "Identity", {"o"}, {"back"});
  OnnxSession session(save(m));
  Tensor x = test::random_tensor({3}, 5);
  std::vector<OnnxValue> out = session.run_values({{"o", OnnxValue::optional_tensor(x)}});
  test::expect_equal(out[0].tensors.at(0), DType::kBool, {}, {1.0});
  EXPECT_EQ(out[1].kind, OnnxValueKind::kOptionalTensor);
  EXPECT_TRUE(out[1].present);
  expect_tensors(out[1].tensors, {x});
  out = session.run_values({{"o", OnnxValue::empty_optional(OnnxValueKind::kOptionalTensor)}});
  test::expect_equal(out[0].tensors.at(0), DType::kBool, {}, {0.0});
  EXPECT_FALSE(out[1].present);
  EXPECT_TRUE(out[1].tensors.empty());
  // A plain tensor may feed an optional input.
  out = session.run_values({{"o", OnnxValue::tensor(x)}});
  EXPECT_TRUE(out[1].present);

  // OptionalGetElement of an empty optional is an error that says so.
  onnx::ModelProto get = model(18);
  auto* gg = get.mutable_graph();
  optional_io(gg->add_input(), "o", kFloat, {"3"});
  tensor_io(gg->add_output(), "v", kFloat, {"3"});
  add_node(gg, "OptionalGetElement", {"o"}, {"v"});
  OnnxSession getter(save(get));
  out = getter.run_values({{"o", OnnxValue::optional_tensor(x)}});
  expect_tensors(out[0].tensors, {x});
  try {
    getter.run_values({{"o", OnnxValue::empty_optional(OnnxValueKind::kOptionalTensor)}});
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("the optional is empty"), std::string::npos) << e.what();
  }
}

// seq = Loop(trips){ seq.append(x * i) }; stacked = ConcatFromSequence(seq, axis 0, new_axis 1).
TEST_F(Sequences, LoopCarryingASequenceIsUnrolledPerTripCount) {
  onnx::ModelProto m = model(13);
  auto* g = m.mutable_graph();
  tensor_io(g->add_input(), "trips", kInt64, {});
  tensor_io(g->add_input(), "x", kFloat, {"4"});
  sequence_io(g->add_output(), "seq", kFloat, {"4"});
  tensor_io(g->add_output(), "stacked", kFloat, {"t", "4"});
  add_node(g, "SequenceEmpty", {}, {"empty"});
  onnx::GraphProto body;
  tensor_io(body.add_input(), "i", kInt64, {});
  tensor_io(body.add_input(), "c", kBool, {});
  sequence_io(body.add_input(), "s_in", kFloat, {"4"});
  tensor_io(body.add_output(), "c_out", kBool, {});
  sequence_io(body.add_output(), "s_out", kFloat, {"4"});
  add_node(&body, "Identity", {"c"}, {"c_out"});
  int_attr(add_node(&body, "Cast", {"i"}, {"f"}), "to", kFloat);
  add_node(&body, "Mul", {"x", "f"}, {"scaled"});
  add_node(&body, "SequenceInsert", {"s_in", "scaled"}, {"s_out"});
  graph_attr(add_node(g, "Loop", {"trips", "", "empty"}, {"seq"}), "body", body);
  auto* stack = add_node(g, "ConcatFromSequence", {"seq"}, {"stacked"});
  int_attr(stack, "axis", 0);
  int_attr(stack, "new_axis", 1);
  OnnxSession session(save(m));
  EXPECT_EQ(session.info().value_inputs, std::vector<std::string>{"trips"});
  Tensor x = test::random_tensor({4}, 3);
  for (int64_t trips : {3, 1, 5}) {
    std::vector<Tensor> want;
    std::vector<double> stacked;
    for (int64_t i = 0; i < trips; ++i) {
      std::vector<float> v(4);
      for (int k = 0; k < 4; ++k) v[k] = x.data<float>()[k] * static_cast<float>(i);
      want.push_back(Tensor::from_vector<float>({4}, v));
      stacked.insert(stacked.end(), v.begin(), v.end());
    }
    std::vector<OnnxValue> out = session.run_values(
        {{"trips", OnnxValue::tensor(scalar64(trips))}, {"x", OnnxValue::tensor(x)}});
    expect_tensors(out[0].tensors, want);
    test::expect_close(out[1].tensors.at(0), {trips, 4}, stacked, 0.0, 0.0);
  }
  // Unrolling is bounded.
  try {
    session.run_values({{"trips", OnnxValue::tensor(scalar64(5000))}, {"x", OnnxValue::tensor(x)}});
    ADD_FAILURE() << "no error";
  } catch (const UnsupportedOp& e) {
    EXPECT_NE(std::string(e.what()).find("over 4096 iterations"), std::string::npos) << e.what();
  }
}

// res = cond ? [x, x] : [y]: the condition is read at run time and picks the branch.
TEST_F(Sequences, IfGivingASequenceTakesTheBranchItsConditionPicks) {
  onnx::ModelProto m = model(13);
  auto* g = m.mutable_graph();
  tensor_io(g->add_input(), "cond", kBool, {});
  tensor_io(g->add_input(), "x", kFloat, {"2"});
  tensor_io(g->add_input(), "y", kFloat, {"3"});
  sequence_io(g->add_output(), "res", kFloat, {});
  onnx::GraphProto then_g, else_g;
  add_node(&then_g, "SequenceConstruct", {"x", "x"}, {"two"});
  sequence_io(then_g.add_output(), "two", kFloat, {});
  add_node(&else_g, "SequenceConstruct", {"y"}, {"one"});
  sequence_io(else_g.add_output(), "one", kFloat, {});
  auto* n = add_node(g, "If", {"cond"}, {"res"});
  graph_attr(n, "then_branch", then_g);
  graph_attr(n, "else_branch", else_g);
  OnnxSession session(save(m));
  EXPECT_EQ(session.info().value_inputs, std::vector<std::string>{"cond"});
  Tensor x = test::random_tensor({2}, 1), y = test::random_tensor({3}, 2);
  for (bool c : {true, false}) {
    std::vector<OnnxValue> out =
        session.run_values({{"cond", OnnxValue::tensor(Tensor::scalar<bool>(c))},
                            {"x", OnnxValue::tensor(x)},
                            {"y", OnnxValue::tensor(y)}});
    if (c)
      expect_tensors(out[0].tensors, {x, x});
    else
      expect_tensors(out[0].tensors, {y});
  }
}

TEST_F(Sequences, BadModelsAreClearErrors) {
  // A float sequence cannot take an int64 tensor.
  onnx::ModelProto m = model(13);
  auto* g = m.mutable_graph();
  tensor_io(g->add_input(), "x", kFloat, {"2"});
  tensor_io(g->add_input(), "k", kInt64, {"2"});
  sequence_io(g->add_output(), "s2", kFloat, {});
  add_node(g, "SequenceConstruct", {"x"}, {"s1"});
  add_node(g, "SequenceInsert", {"s1", "k"}, {"s2"});
  try {
    OnnxSession session(save(m));
    ADD_FAILURE() << "no error";
  } catch (const InvalidModel& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("SequenceInsert"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot insert a int64 tensor into a sequence of float32"),
              std::string::npos)
        << msg;
  }
  // A sequence where a tensor belongs.
  onnx::ModelProto add = model(13);
  auto* ga = add.mutable_graph();
  tensor_io(ga->add_input(), "x", kFloat, {"2"});
  tensor_io(ga->add_output(), "y", kFloat, {"2"});
  add_node(ga, "SequenceConstruct", {"x"}, {"s"});
  add_node(ga, "Add", {"s", "x"}, {"y"});
  try {
    OnnxSession session(save(add));
    ADD_FAILURE() << "no error";
  } catch (const InvalidModel& e) {
    EXPECT_NE(std::string(e.what()).find("input 's' is a sequence, and Add takes tensors"),
              std::string::npos)
        << e.what();
  }
  // ConcatFromSequence of an empty sequence.
  onnx::ModelProto cat = model(13);
  auto* gc = cat.mutable_graph();
  tensor_io(gc->add_output(), "y", kFloat, {});
  add_node(gc, "SequenceEmpty", {}, {"s"});
  int_attr(add_node(gc, "ConcatFromSequence", {"s"}, {"y"}), "axis", 0);
  EXPECT_THROW(OnnxSession session(save(cat)), ShapeError);
}

}  // namespace
}  // namespace lumen
