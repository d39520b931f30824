// The ONNX importer on models built here with the protobuf API: correct ones against a naive
// reference, malformed ones against the error they must raise.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>

#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;

void set_float_tensor(onnx::TensorProto* t, const std::string& name,
                      const std::vector<int64_t>& dims, const Tensor& data) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(static_cast<const char*>(data.raw_data()), data.nbytes()));
}

void add_io(onnx::ValueInfoProto* v, const std::string& name,
            const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (const std::string& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

// y = relu(x @ W + b) with x [batch, 4], W [4, 3], b [3].
onnx::ModelProto mlp_model(const Tensor& w, const Tensor& b, int64_t opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("mlp");
  add_io(g->add_input(), "x", {"batch", "4"});
  add_io(g->add_output(), "y", {"batch", "3"});
  set_float_tensor(g->add_initializer(), "W", {4, 3}, w);
  set_float_tensor(g->add_initializer(), "b", {3}, b);
  auto* mm = g->add_node();
  mm->set_op_type("MatMul");
  mm->set_name("mm");
  mm->add_input("x");
  mm->add_input("W");
  mm->add_output("h");
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->add_input("h");
  add->add_input("b");
  add->add_output("hb");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("hb");
  relu->add_output("y");
  return m;
}

std::vector<double> mlp_reference(const Tensor& x, const Tensor& w, const Tensor& b) {
  int64_t m = x.shape()[0];
  std::vector<double> y(static_cast<size_t>(m * 3));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      double acc = b.item_as_double(j);
      for (int64_t k = 0; k < 4; ++k)
        acc += x.item_as_double(i * 4 + k) * w.item_as_double(k * 3 + j);
      y[i * 3 + j] = std::max(acc, 0.0);
    }
  return y;
}

class OnnxImport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lumen_onnx_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "model");
    w_ = test::random_tensor({4, 3}, 1);
    b_ = test::random_tensor({3}, 2);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string save(const onnx::ModelProto& m, const std::string& name = "model/m.onnx") {
    std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }
  fs::path dir_;
  Tensor w_, b_;
};

TEST_F(OnnxImport, RunsAModelWithASymbolicBatch) {
  std::string path = save(mlp_model(w_, b_));
  for (int64_t batch : {1, 5}) {
    OnnxLoadOptions options;
    options.input_shapes["x"] = Shape{batch, 4};
    OnnxModelInfo info;
    Graph g = load_onnx(path, options, &info);
    EXPECT_EQ(info.opset, 13);
    ASSERT_EQ(info.inputs.size(), 1u);
    EXPECT_EQ(info.inputs[0].symbols[0], "batch");
    Runtime rt;
    Tensor x = test::random_tensor({batch, 4}, 10 + batch);
    auto out = g.compile(&rt)->execute({x});
    test::expect_close(out[0], {batch, 3}, mlp_reference(x, w_, b_));
    EXPECT_NE(g.find_value("y"), nullptr);
  }
}

TEST_F(OnnxImport, SessionCompilesOncePerInputShape) {
  OnnxSession session(save(mlp_model(w_, b_)));
  ASSERT_EQ(session.info().inputs.size(), 1u);
  EXPECT_EQ(session.num_plans(), 0u);
  for (int64_t batch : {3, 7, 3, 7, 1}) {
    Tensor x = test::random_tensor({batch, 4}, 20 + batch);
    auto out = session.run({{"x", x}});
    test::expect_close(out[0], {batch, 3}, mlp_reference(x, w_, b_));
  }
  EXPECT_EQ(session.num_plans(), 3u);
  EXPECT_EQ(session.plan_for({{"x", Shape{3, 4}}}), session.plan_for({{"x", Shape{3, 4}}}));
  EXPECT_EQ(session.num_plans(), 3u);
  // Concurrent runs at two shapes share the cache and stay correct.
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      int64_t batch = 2 + t % 2;
      Tensor x = test::random_tensor({batch, 4}, 40 + t);
      std::vector<double> want = mlp_reference(x, w_, b_);
      for (int r = 0; r < 10; ++r) {
        std::vector<double> got = test::to_doubles(session.run({{"x", x}})[0]);
        for (size_t i = 0; i < got.size(); ++i) wrong[t] += std::abs(got[i] - want[i]) > 1e-4;
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[t], 0);
  EXPECT_EQ(session.num_plans(), 4u);  // batch 2 is new, batch 3 was cached
}

// Every plan is built from the weights the session read once: later plans need neither the file
// nor another copy of the weights.
TEST_F(OnnxImport, SessionPlansOutliveTheFile) {
  const std::string path = save(mlp_model(w_, b_));
  OnnxSession session(path);
  fs::remove(path);
  for (int64_t batch : {2, 9}) {
    Tensor x = test::random_tensor({batch, 4}, 60 + batch);
    test::expect_close(session.run({{"x", x}})[0], {batch, 3}, mlp_reference(x, w_, b_));
  }
  EXPECT_EQ(session.num_plans(), 2u);
}

TEST_F(OnnxImport, SessionRejectsBadInputsAndBadFiles) {
  OnnxSession session(save(mlp_model(w_, b_)));
  EXPECT_THROW(session.run({}), InvalidArgument);
  EXPECT_THROW(session.run({{"x", test::random_tensor({2, 4}, 1)}, {"z", Tensor()}}),
               InvalidArgument);
  EXPECT_THROW(session.run({{"x", test::random_tensor({2, 5}, 1)}}), ShapeError);
  EXPECT_THROW(OnnxSession((dir_ / "missing.onnx").string()), IoError);
  std::ofstream((dir_ / "garbage.onnx").string()) << "not a model";
  EXPECT_THROW(OnnxSession((dir_ / "garbage.onnx").string()), InvalidModel);
}

TEST_F(OnnxImport, RejectsAShapeThatContradictsTheModel) {
  std::string path = save(mlp_model(w_, b_));
  OnnxLoadOptions options;
  options.input_shapes["x"] = Shape{2, 5};
  EXPECT_THROW(load_onnx(path, options), ShapeError);
  options.input_shapes = {{"nope", Shape{1}}};
  EXPECT_THROW(load_onnx(path, options), InvalidArgument);
}

TEST_F(OnnxImport, MissingAndTruncatedFiles) {
  EXPECT_THROW(load_onnx((dir_ / "absent.onnx").string()), IoError);
  std::string bytes = mlp_model(w_, b_).SerializeAsString();
  for (size_t cut : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 3}) {
    EXPECT_THROW(load_onnx_bytes(std::string_view(bytes).substr(0, cut)), Error) << cut;
  }
  EXPECT_THROW(load_onnx_bytes("this is not a protobuf at all \xff\xff\xff"), InvalidModel);
  EXPECT_THROW(load_onnx_bytes(""), InvalidModel);  // parses as an empty model: no graph
}

// load_onnx(path) reads the main graph's raw initializer bytes straight from the file
// (onnx/model_file.cc): a file load must agree with a bytes load, also when the initializers mix
// raw and typed data, and every cut or corrupted file must fail cleanly.
TEST_F(OnnxImport, FileLoadsMatchBytesLoadsAndRejectCorruption) {
  onnx::ModelProto m = mlp_model(w_, b_);
  auto* bias = m.mutable_graph()->mutable_initializer(1);
  bias->clear_raw_data();
  for (int64_t i = 0; i < 3; ++i) bias->add_float_data(b_.data<float>()[i]);
  std::string path = save(m);
  Tensor x = test::random_tensor({2, 4}, 40);
  OnnxLoadOptions options;
  options.input_shapes["x"] = Shape{2, 4};
  Runtime rt;
  Graph from_file = load_onnx(path, options);
  test::expect_close(from_file.compile(&rt)->execute({x})[0], {2, 3}, mlp_reference(x, w_, b_));

  std::string bytes = m.SerializeAsString();
  for (size_t cut = 1; cut < bytes.size(); cut += 7) {
    std::string cut_path = (dir_ / "model" / "cut.onnx").string();
    std::ofstream(cut_path, std::ios::binary) << bytes.substr(0, cut);
    EXPECT_THROW(load_onnx(cut_path), Error) << cut;
  }
  std::string wire = bytes;
  wire[0] = static_cast<char>(0x0b);  // field 1 with wire type 3 (a group): not ONNX
  std::string wire_path = (dir_ / "model" / "wire.onnx").string();
  std::ofstream(wire_path, std::ios::binary) << wire;
  EXPECT_THROW(load_onnx(wire_path), InvalidModel);

  onnx::ModelProto short_raw = mlp_model(w_, b_);
  short_raw.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(20);
  EXPECT_THROW(load_onnx(save(short_raw, "model/short.onnx")), InvalidModel);
  EXPECT_THROW(load_onnx(dir_.string()), IoError);  // a folder, not a file
}

TEST_F(OnnxImport, WrongTensorSizes) {
  onnx::ModelProto m = mlp_model(w_, b_);
  m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(20);
  EXPECT_THROW(load_onnx_bytes(m.SerializeAsString()), InvalidModel);
  m = mlp_model(w_, b_);
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->add_float_data(1.0f);  // 1 value for 12 elements
  EXPECT_THROW(load_onnx_bytes(m.SerializeAsString()), InvalidModel);
  m = mlp_model(w_, b_);
  m.mutable_graph()->mutable_initializer(0)->set_dims(0, -4);
  EXPECT_THROW(load_onnx_bytes(m.SerializeAsString()), InvalidModel);
  m = mlp_model(w_, b_);
  m.mutable_graph()->mutable_initializer(0)->set_dims(0, int64_t{1} << 40);
  m.mutable_graph()->mutable_initializer(0)->set_dims(1, int64_t{1} << 40);
  EXPECT_THROW(load_onnx_bytes(m.SerializeAsString()), InvalidModel);
}

TEST_F(OnnxImport, NodesWithMissingInputsOrUnknownOps) {
  onnx::ModelProto m = mlp_model(w_, b_);
  m.mutable_graph()->mutable_node(1)->set_input(0, "ghost");
  try {
    load_onnx_bytes(m.SerializeAsString());
    FAIL();
  } catch (const InvalidModel& e) {
    EXPECT_NE(std::string(e.what()).find("ghost"), std::string::npos) << e.what();
  }
  m = mlp_model(w_, b_);
  m.mutable_graph()->mutable_node(2)->set_op_type("FancyRelu");
  try {
    load_onnx_bytes(m.SerializeAsString());
    FAIL();
  } catch (const UnsupportedOp& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("FancyRelu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("opset 13"), std::string::npos) << msg;
  }
  m = mlp_model(w_, b_);
  m.mutable_graph()->mutable_node(2)->set_domain("com.example");
  EXPECT_THROW(load_onnx_bytes(m.SerializeAsString()), UnsupportedOp);
  m = mlp_model(w_, b_);
  m.mutable_graph()->mutable_output(0)->set_name("nothing");
  EXPECT_THROW(load_onnx_bytes(m.SerializeAsString()), InvalidModel);
  m = mlp_model(w_, b_, 3);
  EXPECT_THROW(load_onnx_bytes(m.SerializeAsString()), UnsupportedOp);  // MatMul changed since 3
  m = mlp_model(w_, b_, 28);
  EXPECT_NO_THROW(load_onnx_bytes(m.SerializeAsString()));  // the newest opset lumen reads
  m = mlp_model(w_, b_, 29);
  try {
    load_onnx_bytes(m.SerializeAsString());
    FAIL() << "opset 29 loaded";
  } catch (const UnsupportedOp& e) {  // newer than lumen reads: the opset, domain and first op
    std::string msg = e.what();
    EXPECT_NE(msg.find("opset 29"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ai.onnx"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MatMul"), std::string::npos) << msg;
  }
  m = mlp_model(w_, b_);
  m.mutable_opset_import(0)->set_domain("com.example");
  try {
    load_onnx_bytes(m.SerializeAsString());
    FAIL() << "a model of another domain loaded";
  } catch (const UnsupportedOp& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("com.example"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MatMul"), std::string::npos) << msg;
  }
  m = mlp_model(w_, b_);
  m.mutable_graph()->mutable_node(0)->set_output(0, "x");  // redefines the input
  EXPECT_THROW(load_onnx_bytes(m.SerializeAsString()), InvalidModel);
}

// INT16 and UINT16 come in int32_data, UINT32 and UINT64 in uint64_data (or any of them as raw
// bytes); each reads back exactly, 64-bit values beyond double's precision included.
TEST_F(OnnxImport, ReadsTheWiderIntegerDtypes) {
  auto load = [&](const onnx::TensorProto& t) {
    std::string path = (dir_ / "t.pb").string();
    std::ofstream out(path, std::ios::binary);
    t.SerializeToOstream(&out);
    out.close();
    return load_onnx_tensor(path);
  };
  auto proto = [](onnx::TensorProto::DataType type, int64_t n) {
    onnx::TensorProto t;
    t.set_data_type(type);
    t.add_dims(n);
    return t;
  };
  onnx::TensorProto i16 = proto(onnx::TensorProto::INT16, 3);
  for (int v : {-32768, -5, 32767}) i16.add_int32_data(v);
  Tensor t = load(i16);
  ASSERT_EQ(t.dtype(), DType::kInt16);
  EXPECT_EQ(test::to_doubles(t), (std::vector<double>{-32768, -5, 32767}));

  onnx::TensorProto u16 = proto(onnx::TensorProto::UINT16, 2);
  for (int v : {65535, 9}) u16.add_int32_data(v);
  t = load(u16);
  ASSERT_EQ(t.dtype(), DType::kUInt16);
  EXPECT_EQ(test::to_doubles(t), (std::vector<double>{65535, 9}));

  onnx::TensorProto u32 = proto(onnx::TensorProto::UINT32, 2);
  for (uint64_t v : {uint64_t{4000000000}, uint64_t{1}}) u32.add_uint64_data(v);
  t = load(u32);
  ASSERT_EQ(t.dtype(), DType::kUInt32);
  EXPECT_EQ(t.data<uint32_t>()[0], 4000000000u);
  EXPECT_EQ(t.data<uint32_t>()[1], 1u);

  const uint64_t big = (uint64_t{1} << 63) + 5;
  onnx::TensorProto u64 = proto(onnx::TensorProto::UINT64, 2);
  for (uint64_t v : {big, uint64_t{7}}) u64.add_uint64_data(v);
  t = load(u64);
  ASSERT_EQ(t.dtype(), DType::kUInt64);
  EXPECT_EQ(t.data<uint64_t>()[0], big);
  EXPECT_EQ(t.data<uint64_t>()[1], 7u);

  onnx::TensorProto raw = proto(onnx::TensorProto::UINT64, 1);
  raw.set_raw_data(std::string(reinterpret_cast<const char*>(&big), 8));
  EXPECT_EQ(load(raw).data<uint64_t>()[0], big);

  u64.add_uint64_data(1);  // 3 values for 2 elements
  EXPECT_THROW(load(u64), InvalidModel);
  onnx::TensorProto wrong_field = proto(onnx::TensorProto::UINT32, 1);
  wrong_field.add_int32_data(1);  // UINT32 belongs in uint64_data
  EXPECT_THROW(load(wrong_field), InvalidModel);
}

TEST_F(OnnxImport, ExternalDataInsideTheFolderLoads) {
  {
    std::ofstream bin(dir_ / "model" / "weights.bin", std::ios::binary);
    std::string pad(100, '\0');
    bin.write(pad.data(), 100);
    bin.write(static_cast<const char*>(w_.raw_data()), static_cast<std::streamsize>(w_.nbytes()));
  }
  onnx::ModelProto m = mlp_model(w_, b_);
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [w](const std::string& k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "100");
  add_kv("length", std::to_string(w_.nbytes()));
  Graph g = load_onnx(save(m), {{{"x", Shape{2, 4}}}});
  Runtime rt;
  Tensor x = test::random_tensor({2, 4}, 3);
  test::expect_close(g.compile(&rt)->execute({x})[0], {2, 3}, mlp_reference(x, w_, b_));
}

TEST_F(OnnxImport, ExternalDataThatEscapesIsRefused) {
  {
    std::ofstream secret(dir_ / "secret.bin", std::ios::binary);
    secret << std::string(48, 'x');
  }
  fs::create_symlink(dir_ / "secret.bin", dir_ / "model" / "link.bin");
  for (std::string location :
       {std::string("../secret.bin"), (dir_ / "secret.bin").string(), std::string("link.bin"),
        std::string("missing.bin"), std::string("sub/../../secret.bin")}) {
    onnx::ModelProto m = mlp_model(w_, b_);
    auto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = w->add_external_data();
    e->set_key("location");
    e->set_value(location);
    EXPECT_THROW(load_onnx(save(m)), IoError) << location;
  }
  // A range past the end of the file.
  {
    std::ofstream small(dir_ / "model" / "small.bin", std::ios::binary);
    small << std::string(8, 'x');
  }
  onnx::ModelProto m = mlp_model(w_, b_);
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("small.bin");
  EXPECT_THROW(load_onnx(save(m)), IoError);
}

// GroupNormalization before opset 21 takes scale and bias per group; the importer spreads each
// group's value over its channels. The opset 21 form (per channel) loads as it is.
onnx::ModelProto group_norm_model(int64_t opset, const Tensor& scale, const Tensor& bias) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("group_norm");
  add_io(g->add_input(), "x", {"2", "6", "5"});
  add_io(g->add_output(), "y", {"2", "6", "5"});
  set_float_tensor(g->add_initializer(), "scale", {scale.numel()}, scale);
  set_float_tensor(g->add_initializer(), "bias", {bias.numel()}, bias);
  auto* n = g->add_node();
  n->set_op_type("GroupNormalization");
  n->set_name("gn");
  for (const char* in : {"x", "scale", "bias"}) n->add_input(in);
  n->add_output("y");
  auto* groups = n->add_attribute();
  groups->set_name("num_groups");
  groups->set_type(onnx::AttributeProto::INT);
  groups->set_i(3);
  return m;
}

// y for x [2, 6, 5] in 3 groups; scale and bias per channel.
std::vector<double> group_norm_reference(const Tensor& x, const std::vector<double>& scale,
                                         const std::vector<double>& bias) {
  std::vector<double> y(static_cast<size_t>(x.numel()));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t g = 0; g < 3; ++g) {
      const int64_t first = (n * 6 + g * 2) * 5;
      double sum = 0, sq = 0;
      for (int64_t k = 0; k < 10; ++k) sum += x.item_as_double(first + k);
      const double mean = sum / 10;
      for (int64_t k = 0; k < 10; ++k)
        sq += (x.item_as_double(first + k) - mean) * (x.item_as_double(first + k) - mean);
      const double inv = 1.0 / std::sqrt(sq / 10 + 1e-5);
      for (int64_t k = 0; k < 10; ++k) {
        const int64_t c = g * 2 + k / 5;
        y[first + k] = (x.item_as_double(first + k) - mean) * inv * scale[c] + bias[c];
      }
    }
  return y;
}

TEST_F(OnnxImport, GroupNormalizationParametersPerGroupBeforeOpset21) {
  Tensor x = test::random_tensor({2, 6, 5}, 30);
  Tensor s3 = test::random_tensor({3}, 31), b3 = test::random_tensor({3}, 32);
  Tensor s6 = test::random_tensor({6}, 33), b6 = test::random_tensor({6}, 34);
  auto spread = [](const Tensor& t) {
    std::vector<double> v;
    for (int64_t c = 0; c < 6; ++c) v.push_back(t.item_as_double(c / 2));
    return v;
  };
  for (int64_t opset : {18, 20}) {
    Graph g = load_onnx_bytes(group_norm_model(opset, s3, b3).SerializeAsString());
    Runtime rt;
    test::expect_close(g.compile(&rt)->execute({x})[0], {2, 6, 5},
                       group_norm_reference(x, spread(s3), spread(b3)));
  }
  Graph g21 = load_onnx_bytes(group_norm_model(21, s6, b6).SerializeAsString());
  Runtime rt;
  test::expect_close(g21.compile(&rt)->execute({x})[0], {2, 6, 5},
                     group_norm_reference(x, test::to_doubles(s6), test::to_doubles(b6)));
  // Per-channel parameters at opset 18, per-group ones at opset 21: clear shape errors.
  for (auto [opset, s, b] : {std::tuple{18, s6, b6}, std::tuple{21, s3, b3}}) {
    try {
      load_onnx_bytes(group_norm_model(opset, s, b).SerializeAsString());
      ADD_FAILURE() << "opset " << opset;
    } catch (const ShapeError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("node 'gn' (GroupNormalization, opset " + std::to_string(opset)),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find(opset == 18 ? "per group" : "per channel"), std::string::npos) << msg;
    }
  }
}

// An empty model importing opset 17 and com.microsoft opset 1, its graph named `name`.
onnx::ModelProto microsoft_model(const std::string& name) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  m.mutable_graph()->set_name(name);
  return m;
}

// com.microsoft: MatMulNBits is read (4-bit weights of all 1s, scale 0.5, default zero point 8:
// W = -3.5 everywhere); every other op of that domain, and MatMulNBits in the default domain,
// are refused naming the node, op and domain.
TEST_F(OnnxImport, MicrosoftDomainMatMulNBitsOnly) {
  auto nbits_model = [](const std::string& op, const std::string& domain) {
    onnx::ModelProto m = microsoft_model("nbits");
    auto* g = m.mutable_graph();
    add_io(g->add_input(), "x", {"2", "32"});
    add_io(g->add_output(), "y", {"2", "4"});
    auto* b = g->add_initializer();
    b->set_name("B");
    b->set_data_type(onnx::TensorProto::UINT8);
    for (int64_t d : {4, 1, 16}) b->add_dims(d);
    b->set_raw_data(std::string(64, '\x11'));
    set_float_tensor(g->add_initializer(), "S", {4},
                     Tensor::from_vector<float>(Shape{4}, {0.5f, 0.5f, 0.5f, 0.5f}));
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_domain(domain);
    n->set_name("q");
    for (const char* in : {"x", "B", "S"}) n->add_input(in);
    n->add_output("y");
    for (auto [name, v] :
         {std::pair<const char*, int64_t>{"K", 32}, {"N", 4}, {"bits", 4}, {"block_size", 32}}) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(v);
    }
    return m;
  };
  Graph g = load_onnx_bytes(nbits_model("MatMulNBits", "com.microsoft").SerializeAsString());
  Runtime rt;
  const Tensor x = test::random_tensor({2, 32}, 3);
  const Tensor y = g.compile(&rt)->execute({x})[0];
  std::vector<double> want(8);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 32; ++k) s += x.item_as_double(i * 32 + k) * -3.5;
      want[i * 4 + j] = s;
    }
  test::expect_close(y, Shape{2, 4}, want);
  for (auto [op, domain, needle] : {std::tuple<const char*, const char*, const char*>{
                                        "FusedMatMul", "com.microsoft", "only MatMulNBits"},
                                    {"MatMulNBits", "", "domain 'com.microsoft'"}}) {
    try {
      load_onnx_bytes(nbits_model(op, domain).SerializeAsString());
      FAIL() << op << " of domain '" << domain << "' loaded";
    } catch (const UnsupportedOp& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("node 'q'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  }
}

// com.microsoft QLinearAdd (what ONNX Runtime's QOperator-format quantizer writes): uint8 A [2, 3]
// plus B [3] broadcast, against the spec's formula in float32 steps; refused in the default domain.
TEST_F(OnnxImport, MicrosoftQLinearAdd) {
  auto model = [](const std::string& domain) {
    onnx::ModelProto m = microsoft_model("qadd");
    auto* g = m.mutable_graph();
    add_io(g->add_input(), "a", {"2", "3"});
    add_io(g->add_input(), "b", {"3"});
    add_io(g->add_output(), "c", {"2", "3"});
    for (auto* v : {g->mutable_input(0), g->mutable_input(1), g->mutable_output(0)})
      v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::UINT8);
    const std::pair<const char*, float> scales[] = {{"as", 0.05f}, {"bs", 0.02f}, {"cs", 0.08f}};
    for (const auto& [name, v] : scales)
      set_float_tensor(g->add_initializer(), name, {}, Tensor::scalar<float>(v));
    const std::pair<const char*, char> zeros[] = {{"az", 100}, {"bz", 30}, {"cz", 60}};
    for (const auto& [name, v] : zeros) {
      auto* t = g->add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::UINT8);
      t->set_raw_data(std::string(1, v));
    }
    auto* n = g->add_node();
    n->set_op_type("QLinearAdd");
    n->set_domain(domain);
    n->set_name("q");
    for (const char* in : {"a", "as", "az", "b", "bs", "bz", "cs", "cz"}) n->add_input(in);
    n->add_output("c");
    return m;
  };
  Graph g = load_onnx_bytes(model("com.microsoft").SerializeAsString());
  Runtime rt;
  const Tensor a = test::random_ints({2, 3}, 5, 0, 255, DType::kUInt8);
  const Tensor b = test::random_ints({3}, 6, 0, 255, DType::kUInt8);
  const Tensor c = g.compile(&rt)->execute(std::vector<Tensor>{a, b})[0];
  ASSERT_EQ(c.dtype(), DType::kUInt8);
  ASSERT_EQ(c.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) {
    // volatile: each product rounded on its own, never contracted into a multiply-add.
    const volatile float fa = static_cast<float>(a.data<uint8_t>()[i] - 100) * 0.05f;
    const volatile float fb = static_cast<float>(b.data<uint8_t>()[i % 3] - 30) * 0.02f;
    const float want = std::clamp(std::nearbyint((fa + fb) / 0.08f) + 60.0f, 0.0f, 255.0f);
    EXPECT_EQ(c.data<uint8_t>()[i], static_cast<uint8_t>(want)) << "element " << i;
  }
  try {
    load_onnx_bytes(model("").SerializeAsString());
    FAIL() << "QLinearAdd of the default domain loaded";
  } catch (const UnsupportedOp& e) {
    EXPECT_NE(std::string(e.what()).find("QLinearAdd is an op of domain 'com.microsoft'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lumen
