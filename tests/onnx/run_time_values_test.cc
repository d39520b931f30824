// Inputs whose values decide shapes, given at run time: OnnxSession reads them at each run and
// keys its plans by them; a bad value is a ShapeError naming the node, the input and the value.
// Models are built here with the protobuf API; references are plain loops.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;

void add_io(onnx::ValueInfoProto* v, const std::string& name, int elem_type,
            const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  for (const std::string& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::string& name,
                          const std::vector<std::string>& ins,
                          const std::vector<std::string>& outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return n;
}

Tensor ints(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

class RunTimeValues : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lumen_rtv_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string save(const onnx::ModelProto& m, const std::string& name) {
    std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }
  // y = ReduceSum(Reshape(x, shape), axes) at opset 18: both the shape and the axes are inputs.
  std::string reshape_reduce_model() {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(18);
    auto* g = m.mutable_graph();
    g->set_name("reshape_reduce");
    add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"n"});
    add_io(g->add_input(), "shape", onnx::TensorProto::INT64, {"2"});
    add_io(g->add_input(), "axes", onnx::TensorProto::INT64, {"1"});
    add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"m"});
    add_node(g, "Reshape", "reshape", {"x", "shape"}, {"r"});
    auto* reduce = add_node(g, "ReduceSum", "reduce", {"r", "axes"}, {"y"});
    auto* keep = reduce->add_attribute();
    keep->set_name("keepdims");
    keep->set_type(onnx::AttributeProto::INT);
    keep->set_i(0);
    return save(m, "reshape_reduce.onnx");
  }
  fs::path dir_;
};

// Plain-loop reference: x viewed as rows x cols, summed over `axis`.
std::vector<double> reduce_reference(const Tensor& x, int64_t rows, int64_t cols, int64_t axis) {
  std::vector<double> out(axis == 0 ? cols : rows, 0.0);
  const float* p = x.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[axis == 0 ? c : r] += p[r * cols + c];
  return out;
}

TEST_F(RunTimeValues, SessionCompilesAPlanPerValueAndReusesIt) {
  OnnxSession session(reshape_reduce_model());
  EXPECT_EQ(session.info().value_inputs, (std::vector<std::string>{"shape", "axes"}));
  Tensor x = test::random_tensor({12}, 7);
  struct Run {
    int64_t rows, cols, axis;
  };
  for (Run r : {Run{3, 4, 0}, Run{3, 4, 1}, Run{6, 2, 1}, Run{3, 4, 0}, Run{-1, 2, 0}}) {
    int64_t rows = r.rows < 0 ? 12 / r.cols : r.rows;
    auto out = session.run({{"x", x}, {"shape", ints({r.rows, r.cols})}, {"axes", ints({r.axis})}});
    test::expect_close(out[0], {r.axis == 0 ? r.cols : rows},
                       reduce_reference(x, rows, r.cols, r.axis));
  }
  EXPECT_EQ(session.num_plans(), 4u);  // (3,4,0) came back; -1 resolves at compile, its own plan
  // A new length of x with the same values is another plan too (shapes are part of the key).
  Tensor x2 = test::random_tensor({8}, 8);
  auto out = session.run({{"x", x2}, {"shape", ints({2, 4})}, {"axes", ints({1})}});
  test::expect_close(out[0], {2}, reduce_reference(x2, 2, 4, 1));
}

TEST_F(RunTimeValues, ABadValueNamesTheNodeTheInputAndTheValue) {
  OnnxSession session(reshape_reduce_model());
  Tensor x = test::random_tensor({12}, 9);
  try {
    session.run({{"x", x}, {"shape", ints({5, 5})}, {"axes", ints({0})}});
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("reshape"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'shape'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[5, 5]"), std::string::npos) << msg;
  }
  EXPECT_THROW(session.run({{"x", x}, {"shape", ints({3, 4})}, {"axes", ints({2})}}), Error);
  // The session is still usable, and a failed value left no plan behind.
  EXPECT_EQ(session.num_plans(), 0u);
  auto out = session.run({{"x", x}, {"shape", ints({4, 3})}, {"axes", ints({0})}});
  test::expect_close(out[0], {3}, reduce_reference(x, 4, 3, 0));
  // plan_for by shapes alone cannot know the values.
  EXPECT_THROW(session.plan_for(std::map<std::string, Shape>{{"x", Shape{12}}}), InvalidArgument);
}

TEST_F(RunTimeValues, PlansAreBoundedLeastRecentlyUsedFirst) {
  OnnxSession session(reshape_reduce_model());
  EXPECT_EQ(session.max_plans(), OnnxSession::kDefaultMaxPlans);
  session.set_max_plans(2);
  Tensor x = test::random_tensor({24}, 11);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{2, 12}, {3, 8}, {4, 6}, {2, 12}};
  for (auto [rows, cols] : shapes) {
    auto out = session.run({{"x", x}, {"shape", ints({rows, cols})}, {"axes", ints({1})}});
    test::expect_close(out[0], {rows}, reduce_reference(x, rows, cols, 1));
    EXPECT_LE(session.num_plans(), 2u);
  }
  session.set_max_plans(1);
  EXPECT_EQ(session.num_plans(), 1u);
  EXPECT_THROW(session.set_max_plans(0), InvalidArgument);
}

TEST_F(RunTimeValues, ValuesComputedFromAnInputAndShapeOnlyReads) {
  // k1 = k + 1 feeds TopK's K; Reshape(y, Shape(x)) reads only x's shape, so x is no value input.
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("topk");
  add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"2", "5"});
  add_io(g->add_input(), "k", onnx::TensorProto::INT64, {"1"});
  add_io(g->add_input(), "y", onnx::TensorProto::FLOAT, {"10"});
  add_io(g->add_output(), "values", onnx::TensorProto::FLOAT, {"2", "k"});
  add_io(g->add_output(), "y2", onnx::TensorProto::FLOAT, {"2", "5"});
  auto* one = add_node(g, "Constant", "one", {}, {"one"});
  auto* value = one->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_int64_data(1);
  add_node(g, "Add", "k_plus_one", {"k", "one"}, {"k1"});
  add_node(g, "TopK", "topk", {"x", "k1"}, {"values", "indices"});
  add_node(g, "Shape", "shape_of_x", {"x"}, {"xs"});
  add_node(g, "Reshape", "reshape", {"y", "xs"}, {"y2"});
  OnnxSession session(save(m, "topk.onnx"));
  EXPECT_EQ(session.info().value_inputs, (std::vector<std::string>{"k"}));
  Tensor x = test::random_tensor({2, 5}, 12);
  Tensor y = test::random_tensor({10}, 13);
  for (int64_t k : {1, 3, 0}) {
    auto out = session.run({{"x", x}, {"k", ints({k})}, {"y", y}});
    std::vector<double> want;
    for (int r = 0; r < 2; ++r) {
      std::vector<double> row(x.data<float>() + r * 5, x.data<float>() + r * 5 + 5);
      std::sort(row.begin(), row.end(), std::greater<>());
      want.insert(want.end(), row.begin(), row.begin() + k + 1);
    }
    test::expect_close(out[0], {2, k + 1}, want);
    test::expect_close(out[1], {2, 5}, test::to_doubles(y));
  }
  // Without a session the load names the input and the way out.
  OnnxModelInfo info;
  try {
    load_onnx((dir_ / "topk.onnx").string(), {}, &info);
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'k'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("OnnxSession"), std::string::npos) << e.what();
  }
  EXPECT_EQ(info.value_inputs, (std::vector<std::string>{"k"}));
}

}  // namespace
}  // namespace lumen
