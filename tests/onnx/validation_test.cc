// Malformed models, one class per test: each is built here with ONNX's protobuf API and must end
// in a lumen::Error of the right kind naming what is wrong, before any kernel runs, never in a
// crash, a hang or a huge allocation. The run-time checks (wrong inputs, indices out of range)
// compare the good runs against naive references on random data.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>

#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;

// A model under construction: graph inputs, outputs, initializers and nodes by name.
class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 13) {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(opset);
    graph_ = model_.mutable_graph();
    graph_->set_name("validation");
  }
  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto& graph() { return *graph_; }

  void input(const std::string& name, const std::vector<int64_t>& dims,
             int elem = onnx::TensorProto::FLOAT) {
    describe(graph_->add_input(), name, dims, elem);
  }
  void output(const std::string& name, int elem = onnx::TensorProto::FLOAT) {
    auto* v = graph_->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  }
  onnx::TensorProto* floats(const std::string& name, const std::vector<int64_t>& dims,
                            const Tensor& data) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(static_cast<const char*>(data.raw_data()), data.nbytes()));
    return t;
  }
  onnx::TensorProto* ints(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return t;
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? outputs.at(0) + "_node" : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  std::string bytes() const { return model_.SerializeAsString(); }

  static void describe(onnx::ValueInfoProto* v, const std::string& name,
                       const std::vector<int64_t>& dims, int elem) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }

 private:
  onnx::ModelProto model_;
  onnx::GraphProto* graph_;
};

onnx::AttributeProto* attr(onnx::NodeProto* n, const std::string& name,
                           onnx::AttributeProto::AttributeType type) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}
void attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  attr(n, name, onnx::AttributeProto::INT)->set_i(v);
}
void attr_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// Loading `bytes` throws E whose message contains every one of `needles`.
template <typename E>
void expect_load_error(const std::string& bytes, const std::vector<std::string>& needles) {
  try {
    load_onnx_bytes(bytes);
    ADD_FAILURE() << "loaded without an error; expected one naming " << needles.at(0);
  } catch (const E& e) {
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << "\nmissing: " << n;
  } catch (const Error& e) {
    ADD_FAILURE() << "wrong error kind: " << e.what();
  }
}

// The whole path a user takes (and the fuzzer's): load, optimize, compile and run on random bytes
// of each input's dtype when the inputs are small. Returns the error's kind, or nullopt when the
// model compiled (and ran, if it was run).
std::optional<ErrorKind> load_and_run(const std::string& bytes) {
  try {
    Graph g = load_onnx_bytes(bytes);
    g.optimize();
    Runtime rt;
    Executable* exe = g.compile(&rt);
    std::vector<Tensor> inputs;
    std::mt19937 rng(7);
    for (const TensorInfo& info : exe->inputs()) {
      if (!info.type.shape.is_static() || info.type.shape.numel() > (1 << 16)) return std::nullopt;
      Tensor t = Tensor::empty(info.type.shape, info.type.dtype);
      auto* p = static_cast<unsigned char*>(t.raw_data());
      const unsigned modulus = info.type.dtype == DType::kBool ? 2 : 5;  // bools hold 0 or 1
      for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(rng() % modulus);
      inputs.push_back(t);
    }
    exe->execute(inputs);
  } catch (const Error& e) {
    return e.kind();
  }
  return std::nullopt;
}

// y = Relu(x @ W + b), x [2, 4].
ModelBuilder small_mlp() {
  ModelBuilder b;
  b.input("x", {2, 4});
  b.output("y");
  b.floats("W", {4, 3}, test::random_tensor({4, 3}, 1));
  b.floats("b", {3}, test::random_tensor({3}, 2));
  b.node("MatMul", {"x", "W"}, {"h"}, "mm");
  b.node("Add", {"h", "b"}, {"hb"}, "add");
  b.node("Relu", {"hb"}, {"y"}, "relu");
  return b;
}

TEST(Validation, EveryTruncationOfAModelFailsCleanly) {
  std::string bytes = small_mlp().bytes();
  int errors = 0;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    try {
      load_onnx_bytes(std::string_view(bytes).substr(0, cut));
    } catch (const Error&) {
      ++errors;
    }
  }
  // A cut between two fields can still be a well-formed smaller model; almost all are not.
  EXPECT_GT(errors, static_cast<int>(bytes.size() * 9 / 10));
  EXPECT_THROW(load_onnx_bytes(std::string_view(bytes).substr(0, bytes.size() - 1)), Error);
}

TEST(Validation, GarbageBytesFailCleanly) {
  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    std::string junk(1 + rng() % 2048, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    EXPECT_THROW(load_onnx_bytes(junk), Error) << i;
  }
  EXPECT_THROW(load_onnx_bytes("\x0a\xff\xff\xff\xff\x0f"), InvalidModel);  // a huge length
}

TEST(Validation, DataLengthThatDisagreesWithTheShape) {
  ModelBuilder b = small_mlp();
  b.graph().mutable_initializer(0)->mutable_raw_data()->resize(47);
  expect_load_error<InvalidModel>(b.bytes(), {"initializer 'W'", "47 bytes"});
  b = small_mlp();
  b.graph().mutable_initializer(0)->mutable_raw_data()->append(4, 'x');
  expect_load_error<InvalidModel>(b.bytes(), {"initializer 'W'", "52 bytes"});
  b = small_mlp();
  auto* w = b.graph().mutable_initializer(0);
  w->clear_raw_data();
  for (int i = 0; i < 11; ++i) w->add_float_data(1.0f);
  expect_load_error<InvalidModel>(b.bytes(), {"initializer 'W'", "11 values"});
  b = small_mlp();
  w = b.graph().mutable_initializer(0);
  w->clear_raw_data();
  for (int i = 0; i < 12; ++i) w->add_int64_data(1);  // the wrong field for FLOAT
  expect_load_error<InvalidModel>(b.bytes(), {"initializer 'W'", "holds 0 values"});
}

// A bool is one byte holding 0 or 1 (anything else is undefined behaviour in C++): other bytes
// in a model's raw data read as true (fuzz finding 2, found by UBSan in a Not kernel).
TEST(Validation, BoolBytesOtherThanZeroAndOneReadAsTrue) {
  ModelBuilder b;
  b.input("x", {4}, onnx::TensorProto::BOOL);
  b.output("y", onnx::TensorProto::BOOL);
  auto* t = b.graph().add_initializer();
  t->set_name("m");
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_dims(4);
  t->set_raw_data(std::string("\x00\x02\xff\x01", 4));
  b.node("Not", {"m"}, {"n"});
  b.node("And", {"n", "x"}, {"y"});
  Graph g = load_onnx_bytes(b.bytes());
  Runtime rt;
  Tensor x = Tensor::from_vector<bool>({4}, {true, true, true, false});
  std::vector<Tensor> out = g.compile(&rt)->execute(std::vector<Tensor>{x});
  test::expect_equal(out.at(0), DType::kBool, {4}, {1, 0, 0, 0});
}

TEST(Validation, NegativeDimensions) {
  ModelBuilder b = small_mlp();
  b.graph().mutable_initializer(0)->set_dims(0, -4);
  expect_load_error<InvalidModel>(b.bytes(), {"initializer 'W'", "negative"});
  b = small_mlp();
  b.graph()
      .mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_value(-4);
  expect_load_error<InvalidModel>(b.bytes(), {"input 'x'", "negative"});
}

TEST(Validation, ZeroSizedTensorsRunToEmptyResults) {
  ModelBuilder b;
  b.input("x", {0, 3});
  b.output("y");
  b.floats("b", {3}, test::random_tensor({3}, 2));
  b.node("Add", {"x", "b"}, {"s"});
  b.node("Relu", {"s"}, {"y"});
  Graph g = load_onnx_bytes(b.bytes());
  Runtime rt;
  std::vector<Tensor> out = g.compile(&rt)->execute(std::vector<Tensor>{Tensor::zeros({0, 3})});
  EXPECT_EQ(out.at(0).shape(), (Shape{0, 3}));
}

TEST(Validation, ElementCountsThatOverflow64Bits) {
  ModelBuilder b = small_mlp();
  auto* w = b.graph().mutable_initializer(0);
  w->set_dims(0, int64_t{1} << 40);
  w->set_dims(1, int64_t{1} << 40);
  expect_load_error<InvalidModel>(b.bytes(), {"initializer 'W'"});
  b = small_mlp();
  b.graph().mutable_initializer(0)->set_dims(0, int64_t{1} << 61);  // fits, but not in bytes
  expect_load_error<InvalidModel>(b.bytes(), {"initializer 'W'", "too large"});
}

// A shape that needs more memory than the machine has is refused before anything is allocated:
// an initializer declaring 2^33 floats with 48 bytes of data, and a ConstantOfShape of 2^38
// floats (1 TiB), which must end in an Error (OutOfMemory) wherever the size is first needed.
TEST(Validation, HugeSizesAreRefusedBeforeAllocating) {
  MemoryStats before = cpu_allocator().stats();
  ModelBuilder b = small_mlp();
  b.graph().mutable_initializer(0)->set_dims(0, int64_t{1} << 31);
  expect_load_error<InvalidModel>(b.bytes(), {"initializer 'W'", "48 bytes"});
  EXPECT_LE(cpu_allocator().stats().peak_bytes_in_use, before.peak_bytes_in_use + (1 << 20));

  ModelBuilder c;
  c.input("x", {1});
  c.output("y");
  c.ints("shape", {int64_t{1} << 19, int64_t{1} << 19});
  c.node("ConstantOfShape", {"shape"}, {"big"});
  c.node("Add", {"big", "x"}, {"y"});
  EXPECT_EQ(load_and_run(c.bytes()), ErrorKind::kOutOfMemory);
}

TEST(Validation, InputsThatNothingProduces) {
  ModelBuilder b = small_mlp();
  b.graph().mutable_node(1)->set_input(0, "ghost");
  expect_load_error<InvalidModel>(b.bytes(), {"node 'add'", "'ghost'", "produced by nothing"});
  b = small_mlp();
  b.graph().mutable_output(0)->set_name("nowhere");
  expect_load_error<InvalidModel>(b.bytes(), {"'nowhere'", "produced by nothing"});
}

TEST(Validation, Cycles) {
  ModelBuilder b;  // a -> b -> a
  b.input("x", {2});
  b.output("q");
  b.node("Add", {"x", "q"}, {"p"}, "first");
  b.node("Relu", {"p"}, {"q"}, "second");
  expect_load_error<InvalidModel>(b.bytes(), {"node 'first'", "'q'"});
  ModelBuilder self;  // a node reading its own output
  self.input("x", {2});
  self.output("y");
  self.node("Add", {"x", "y"}, {"y"}, "self");
  expect_load_error<InvalidModel>(self.bytes(), {"node 'self'", "'y'"});
}

TEST(Validation, DuplicateValueNames) {
  ModelBuilder b = small_mlp();
  b.graph().mutable_node(2)->set_output(0, "h");  // a second producer of 'h'
  expect_load_error<InvalidModel>(b.bytes(), {"node 'relu'", "'h'", "already defined"});
  b = small_mlp();
  b.floats("W", {4, 3}, test::random_tensor({4, 3}, 3));
  expect_load_error<InvalidModel>(b.bytes(), {"initializer 'W'", "twice"});
  b = small_mlp();
  b.input("x", {2, 4});
  expect_load_error<InvalidModel>(b.bytes(), {"input 'x'", "twice"});
  b = small_mlp();
  b.graph().mutable_node(0)->set_output(0, "b");  // overwrites an initializer
  expect_load_error<InvalidModel>(b.bytes(), {"node 'mm'", "'b'"});
}

// A one-node model over x [1, 4, 6, 6] with a 3x3 weight of `out_channels` filters.
ModelBuilder conv_model(int64_t out_channels = 2, int64_t in_per_group = 4) {
  ModelBuilder b;
  b.input("x", {1, 4, 6, 6});
  b.output("y");
  b.floats("w", {out_channels, in_per_group, 3, 3},
           test::random_tensor({out_channels, in_per_group, 3, 3}, 5));
  b.node("Conv", {"x", "w"}, {"y"}, "conv");
  return b;
}

TEST(Validation, AttributesOfTheWrongType) {
  ModelBuilder b = conv_model();
  attr(b.graph().mutable_node(0), "strides", onnx::AttributeProto::FLOAT)->set_f(1.0f);
  expect_load_error<InvalidModel>(b.bytes(), {"node 'conv'", "strides"});
  ModelBuilder s;
  s.input("x", {2, 3});
  s.output("y");
  attr(s.node("Softmax", {"x"}, {"y"}, "sm"), "axis", onnx::AttributeProto::STRING)->set_s("1");
  expect_load_error<InvalidModel>(s.bytes(), {"node 'sm'", "axis"});
  b = conv_model();
  attr(b.graph().mutable_node(0), "group", onnx::AttributeProto::UNDEFINED);  // no type, no value
  expect_load_error<InvalidModel>(b.bytes(), {"node 'conv'", "group"});
  b = conv_model();
  attr_int(b.graph().mutable_node(0), "group", 1);
  attr_int(b.graph().mutable_node(0), "group", 1);
  expect_load_error<InvalidModel>(b.bytes(), {"node 'conv'", "repeats"});
}

TEST(Validation, AttributesOutOfRange) {
  struct Case {
    const char* what;
    std::function<void(onnx::NodeProto*)> edit;
    ModelBuilder model;
  };
  std::vector<Case> cases;
  cases.push_back({"zero stride", [](auto* n) { attr_ints(n, "strides", {0, 1}); }, conv_model()});
  cases.push_back({"negative pads",
                   [](auto* n) {
                     attr_ints(n, "pads", {-1, 0, 0, 0});
                   },
                   conv_model()});
  cases.push_back({"zero dilation",
                   [](auto* n) {
                     attr_ints(n, "dilations", {1, 0});
                   },
                   conv_model()});
  cases.push_back({"group 0", [](auto* n) { attr_int(n, "group", 0); }, conv_model()});
  cases.push_back(
      {"group 3 of 4 channels", [](auto* n) { attr_int(n, "group", 3); }, conv_model(3, 1)});
  cases.push_back({"kernel_shape against the weight",
                   [](auto* n) {
                     attr_ints(n, "kernel_shape", {5, 5});
                   },
                   conv_model()});
  cases.push_back({"pads of the wrong length",
                   [](auto* n) {
                     attr_ints(n, "pads", {1, 1});
                   },
                   conv_model()});
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    c.edit(c.model.graph().mutable_node(0));
    try {
      load_onnx_bytes(c.model.bytes());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_TRUE(e.kind() == ErrorKind::kInvalidModel || e.kind() == ErrorKind::kShapeError)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("node 'conv'"), std::string::npos) << e.what();
    }
  }
  // Axes out of range on other ops.
  auto one_op = [](const std::string& op, int64_t axis) {
    ModelBuilder b;
    b.input("x", {2, 3});
    b.output("y");
    auto* n = b.node(op, {"x"}, {"y"}, "op");
    if (op == "Concat") n->add_input("x");
    attr_int(n, "axis", axis);
    return b.bytes();
  };
  for (const char* op : {"Softmax", "Concat", "Flatten", "LogSoftmax"})
    for (int64_t axis : {int64_t{3}, int64_t{-4}, int64_t{1} << 40}) {
      SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis));
      try {
        load_onnx_bytes(one_op(op, axis));
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("node 'op'"), std::string::npos) << e.what();
      }
    }
  ModelBuilder t;
  t.input("x", {2, 3});
  t.output("y");
  attr_ints(t.node("Transpose", {"x"}, {"y"}, "tr"), "perm", {0, 0});
  expect_load_error<InvalidModel>(t.bytes(), {"node 'tr'", "perm"});
}

TEST(Validation, UnknownOpsDomainsAndOpsets) {
  ModelBuilder b = small_mlp();
  b.graph().mutable_node(2)->set_op_type("FancyRelu");
  expect_load_error<UnsupportedOp>(b.bytes(), {"node 'relu'", "FancyRelu", "opset 13"});
  b = small_mlp();
  b.graph().mutable_node(2)->set_domain("com.example");
  expect_load_error<UnsupportedOp>(b.bytes(), {"node 'relu'", "com.example"});
  for (int64_t opset : {int64_t{0}, int64_t{99}, int64_t{-3}}) {
    b = small_mlp();
    b.model().mutable_opset_import(0)->set_version(opset);
    expect_load_error<UnsupportedOp>(b.bytes(), {"opset " + std::to_string(opset)});
  }
  b = small_mlp();
  b.model().mutable_opset_import(0)->set_domain("com.example");
  expect_load_error<UnsupportedOp>(b.bytes(), {"com.example"});
  b = small_mlp();
  b.model().clear_opset_import();
  expect_load_error<InvalidModel>(b.bytes(), {"opset"});
}

TEST(Validation, SubgraphsThatReadMissingOuterValues) {
  ModelBuilder b;
  b.input("c", {}, onnx::TensorProto::BOOL);
  b.input("x", {2});
  b.output("y");
  auto* node = b.node("If", {"c"}, {"y"}, "branch");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = attr(node, name, onnx::AttributeProto::GRAPH);
    auto* g = a->mutable_g();
    g->set_name(name);
    auto* n = g->add_node();
    n->set_op_type("Relu");
    n->add_input(std::string(name) == "then_branch" ? "x" : "ghost");
    n->add_output("r");
    auto* out = g->add_output();
    out->set_name("r");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  expect_load_error<InvalidModel>(b.bytes(), {"node 'branch'", "else_branch", "'ghost'"});
}

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lumen_validation_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "model" / "sub");
    std::ofstream(dir_ / "secret.bin", std::ios::binary) << std::string(48, 's');
    std::ofstream(dir_ / "model" / "w.bin", std::ios::binary) << std::string(64, '\0');
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Loads small_mlp() with W read from external data under these entries.
  void expect_refused(const std::vector<std::pair<std::string, std::string>>& entries,
                      ErrorKind kind, const std::string& needle) {
    ModelBuilder b = small_mlp();
    auto* w = b.graph().mutable_initializer(0);
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [k, v] : entries) {
      auto* e = w->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    std::string path = (dir_ / "model" / "m.onnx").string();
    {
      std::ofstream out(path, std::ios::binary);
      b.model().SerializeToOstream(&out);
    }
    try {
      load_onnx(path);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("initializer 'W'"), std::string::npos) << e.what();
    }
  }
  fs::path dir_;
};

TEST_F(ExternalData, AbsolutePathsAreRefused) {
  expect_refused({{"location", (dir_ / "secret.bin").string()}}, ErrorKind::kIoError, "absolute");
}

TEST_F(ExternalData, DotDotIsRefused) {
  expect_refused({{"location", "../secret.bin"}}, ErrorKind::kIoError, "leaves");
  expect_refused({{"location", "sub/../../secret.bin"}}, ErrorKind::kIoError, "leaves");
}

TEST_F(ExternalData, SymbolicLinksOutOfTheFolderAreRefused) {
  fs::create_symlink(dir_ / "secret.bin", dir_ / "model" / "link.bin");
  expect_refused({{"location", "link.bin"}}, ErrorKind::kIoError, "symbolic link");
  fs::create_directory_symlink(dir_, dir_ / "model" / "sub" / "up");
  expect_refused({{"location", "sub/up/secret.bin"}}, ErrorKind::kIoError, "symbolic link");
}

TEST_F(ExternalData, RangesPastTheEndOfTheFileAreRefused) {
  expect_refused({{"location", "w.bin"}, {"offset", "32"}}, ErrorKind::kIoError, "past the end");
  expect_refused({{"location", "w.bin"}, {"offset", "9223372036854775800"}}, ErrorKind::kIoError,
                 "past the end");
  expect_refused({{"location", "w.bin"}, {"offset", "-8"}}, ErrorKind::kIoError, "negative");
  expect_refused({{"location", "w.bin"}, {"offset", "twelve"}}, ErrorKind::kInvalidModel,
                 "not a number");
  expect_refused({{"location", "w.bin"}, {"length", "40"}}, ErrorKind::kInvalidModel, "40 bytes");
}

TEST_F(ExternalData, MissingFilesAndFoldersAreRefused) {
  expect_refused({{"location", "absent.bin"}}, ErrorKind::kIoError, "no such file");
  expect_refused({{"location", "sub"}}, ErrorKind::kIoError, "not a regular file");
  expect_refused({{"location", ""}}, ErrorKind::kIoError, "empty");
}

// Gather from a runtime index input: data x [5, 3], indices i [2] (int64).
std::string gather_model() {
  ModelBuilder b;
  b.input("x", {5, 3});
  b.input("i", {2}, onnx::TensorProto::INT64);
  b.output("y");
  b.node("Gather", {"x", "i"}, {"y"}, "gather");
  return b.bytes();
}

TEST(Validation, WrongInputsAtRunTime) {
  std::string path =
      (fs::temp_directory_path() / ("lumen_validation_run_" + std::to_string(::getpid()) + ".onnx"))
          .string();
  {
    std::ofstream out(path, std::ios::binary);
    out << gather_model();
  }
  OnnxSession session(path);
  fs::remove(path);
  Tensor x = test::random_tensor({5, 3}, 3);
  Tensor i = Tensor::from_vector<int64_t>({2}, {4, -5});
  EXPECT_THROW(session.run({{"x", x}}), InvalidArgument);                      // missing
  EXPECT_THROW(session.run({{"x", x}, {"i", i}, {"z", x}}), InvalidArgument);  // unknown
  EXPECT_THROW(session.run({{"x", x}, {"i", Tensor::zeros({2}, DType::kInt32)}}), ShapeError);
  EXPECT_THROW(session.run({{"x", Tensor::zeros({5, 3}, DType::kFloat64)}, {"i", i}}), ShapeError);
  Graph g = load_onnx_bytes(gather_model());
  Runtime rt;
  Executable* exe = g.compile(&rt);
  EXPECT_THROW(exe->execute(std::vector<Tensor>{test::random_tensor({5, 4}, 1), i}), ShapeError);
  EXPECT_THROW(exe->execute(std::vector<Tensor>{x}), InvalidArgument);
  EXPECT_THROW(exe->execute(std::map<std::string, Tensor>{{"x", x}, {"j", i}}), InvalidArgument);
  std::vector<double> xs = test::to_doubles(x), want;
  for (int64_t r : {4, 0})
    for (int c = 0; c < 3; ++c) want.push_back(xs[r * 3 + c]);
  test::expect_close(session.run({{"x", x}, {"i", i}}).at(0), {2, 3}, want, 0, 0);
}

// Runs a one-node model whose index input comes at run time; returns the error's kind.
template <typename Build>
void expect_index_error(const std::string& op, Build build, const std::vector<Tensor>& inputs) {
  SCOPED_TRACE(op);
  Graph g = load_onnx_bytes(build());
  Runtime rt;
  Executable* exe = g.compile(&rt);
  try {
    exe->execute(inputs);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

TEST(Validation, IndexInputsOutOfRange) {
  Tensor x = test::random_tensor({5, 3}, 4);
  for (std::vector<int64_t> bad : {std::vector<int64_t>{1, 5}, {-6, 0}, {INT64_MIN, 0}})
    expect_index_error("Gather", gather_model, {x, Tensor::from_vector<int64_t>({2}, bad)});

  auto two_inputs = [](const std::string& op, const std::vector<int64_t>& idims, bool with_updates,
                       const std::vector<int64_t>& udims) {
    return [=] {
      ModelBuilder b;
      b.input("x", {5, 3});
      b.input("i", idims, onnx::TensorProto::INT64);
      std::vector<std::string> ins = {"x", "i"};
      if (with_updates) {
        b.input("u", udims);
        ins.push_back("u");
      }
      b.output("y");
      b.node(op, ins, {"y"}, "op");
      return b.bytes();
    };
  };
  expect_index_error("GatherElements", two_inputs("GatherElements", {2, 3}, false, {}),
                     {x, Tensor::from_vector<int64_t>({2, 3}, {0, 1, 2, 3, 4, 5})});
  expect_index_error("GatherND", two_inputs("GatherND", {2, 2}, false, {}),
                     {x, Tensor::from_vector<int64_t>({2, 2}, {0, 0, 1, 3})});
  expect_index_error(
      "ScatterND", two_inputs("ScatterND", {2, 1}, true, {2, 3}),
      {x, Tensor::from_vector<int64_t>({2, 1}, {0, 7}), test::random_tensor({2, 3}, 5)});
  expect_index_error(
      "ScatterElements", two_inputs("ScatterElements", {1, 3}, true, {1, 3}),
      {x, Tensor::from_vector<int64_t>({1, 3}, {0, -6, 1}), test::random_tensor({1, 3}, 6)});

  // Slice clamps starts and ends to the dimension (ONNX's rule), and refuses a zero step.
  auto slice = [](const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                  const std::vector<int64_t>& steps) {
    ModelBuilder b;
    b.input("x", {5, 3});
    b.output("y");
    b.ints("starts", starts);
    b.ints("ends", ends);
    b.ints("axes", {0});
    b.ints("steps", steps);
    b.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"}, "slice");
    return b.bytes();
  };
  Graph g = load_onnx_bytes(slice({-100}, {100}, {2}));
  Runtime rt;
  std::vector<double> xs = test::to_doubles(x), want;
  for (int r : {0, 2, 4})
    for (int c = 0; c < 3; ++c) want.push_back(xs[r * 3 + c]);
  test::expect_close(g.compile(&rt)->execute(std::vector<Tensor>{x}).at(0), {3, 3}, want, 0, 0);
  expect_load_error<InvalidModel>(slice({0}, {5}, {0}), {"node 'slice'", "steps"});
}

// A run that fails leaves nothing behind that looks like a result: execute() throws instead of
// returning, outputs of earlier runs keep their values, and the next good run is right.
TEST(Validation, AFailedRunLeavesNoValidLookingOutput) {
  Graph g = load_onnx_bytes(gather_model());
  Runtime rt;
  Executable* exe = g.compile(&rt);
  Tensor x = test::random_tensor({5, 3}, 8);
  std::vector<double> xs = test::to_doubles(x), want;
  for (int64_t r : {2, 3})
    for (int c = 0; c < 3; ++c) want.push_back(xs[r * 3 + c]);
  std::vector<Tensor> first =
      exe->execute(std::vector<Tensor>{x, Tensor::from_vector<int64_t>({2}, {2, 3})});
  std::vector<Tensor> failed;
  EXPECT_THROW(
      failed = exe->execute(std::vector<Tensor>{x, Tensor::from_vector<int64_t>({2}, {1, 9})}),
      InvalidArgument);
  EXPECT_TRUE(failed.empty());
  test::expect_close(first.at(0), {2, 3}, want, 0, 0);
  test::expect_close(
      exe->execute(std::vector<Tensor>{x, Tensor::from_vector<int64_t>({2}, {2, 3})}).at(0), {2, 3},
      want, 0, 0);
}

// Every input the fuzzer found a crash with (tests/fuzz/regressions, kept as found) goes through
// the fuzzer's path here too, so the plain and sanitizer builds replay them: each must end in a
// lumen::Error or run.
TEST(Validation, FuzzerFindingsEndInAnErrorOrARun) {
  fs::path dir = fs::path(LUMEN_SOURCE_DIR) / "tests" / "fuzz" / "regressions";
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".onnx") continue;
    ++count;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().filename().string());
    std::optional<ErrorKind> kind = load_and_run(bytes);
    if (kind) std::printf("%s: %s\n", entry.path().filename().c_str(), error_kind_name(*kind));
  }
  if (count == 0) GTEST_SKIP() << "no findings kept in " << dir;
}

}  // namespace
}  // namespace lumen
