// One plan for every size of a model's symbolic dims (onnx/shape_family.h): OnnxSession fits a
// family at the first run and later sizes are made from it without a compile. Models are built here
// with the protobuf API; references are plain loops.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>
#include <algorithm>

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kD = 16;       // x's features
constexpr int64_t kH = 32;       // the projection's width: 4 heads of 8
constexpr int64_t kMaxSeq = 64;  // rows of the position table

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

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op,
                          const std::vector<std::string>& ins,
                          const std::vector<std::string>& outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(outs[0]);
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

void add_floats(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                const std::vector<float>& data) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float f : data) t->add_float_data(f);
}

void add_ints(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& data) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(data.size()));
  for (int64_t v : data) t->add_int64_data(v);
}

// The weights of the encoder-like model, drawn once.
struct Weights {
  std::vector<float> w = test::random_floats(kD * kH, 1);
  std::vector<float> b = test::random_floats(kH, 2);
  std::vector<float> pos = test::random_floats(kMaxSeq * kH, 3);
  std::vector<float> gamma = test::random_floats(kH, 4);
  std::vector<float> beta = test::random_floats(kH, 5);
};

// x [batch, seq, 16] -> Relu(x W + b) + pos[:seq] -> 4 heads of 8: Softmax over each head's 8
// (through Transposes) -> [batch, seq, 32] -> LayerNormalization. Every shape the graph uses is
// computed from Shape(x), as exporters write it.
onnx::ModelProto encoder_model(const Weights& w) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("encoder");
  add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", "seq", std::to_string(kD)});
  add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"batch", "seq", std::to_string(kH)});
  add_floats(g, "W", {kD, kH}, w.w);
  add_floats(g, "B", {kH}, w.b);
  add_floats(g, "P", {1, kMaxSeq, kH}, w.pos);
  add_floats(g, "gamma", {kH}, w.gamma);
  add_floats(g, "beta", {kH}, w.beta);
  add_ints(g, "i0", {0});
  add_ints(g, "i1", {1});
  add_ints(g, "heads", {4});
  add_ints(g, "depth", {8});
  add_ints(g, "width", {kH});
  add_node(g, "MatMul", {"x", "W"}, {"xw"});
  add_node(g, "Add", {"xw", "B"}, {"xwb"});
  add_node(g, "Relu", {"xwb"}, {"h"});
  add_node(g, "Shape", {"x"}, {"xs"});
  add_node(g, "Gather", {"xs", "i0"}, {"b"});
  add_node(g, "Gather", {"xs", "i1"}, {"s"});
  add_node(g, "Slice", {"P", "i0", "s", "i1"}, {"p"});
  add_node(g, "Add", {"h", "p"}, {"hp"});
  add_int_attr(add_node(g, "Concat", {"b", "s", "heads", "depth"}, {"shape4"}), "axis", 0);
  add_node(g, "Reshape", {"hp", "shape4"}, {"r"});
  add_ints_attr(add_node(g, "Transpose", {"r"}, {"t"}), "perm", {0, 2, 1, 3});
  add_int_attr(add_node(g, "Softmax", {"t"}, {"sm"}), "axis", -1);
  add_ints_attr(add_node(g, "Transpose", {"sm"}, {"u"}), "perm", {0, 2, 1, 3});
  add_int_attr(add_node(g, "Concat", {"b", "s", "width"}, {"shape3"}), "axis", 0);
  add_node(g, "Reshape", {"u", "shape3"}, {"v"});
  add_node(g, "LayerNormalization", {"v", "gamma", "beta"}, {"y"});
  return m;
}

// The encoder in plain loops, in double.
std::vector<double> encoder_reference(const Weights& w, const Tensor& x) {
  const int64_t batch = x.shape()[0], seq = x.shape()[1];
  const float* xp = x.data<float>();
  std::vector<double> y(static_cast<size_t>(batch * seq * kH));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      double h[kH];
      for (int64_t j = 0; j < kH; ++j) {
        double acc = w.b[j];
        for (int64_t k = 0; k < kD; ++k)
          acc += double(xp[(b * seq + s) * kD + k]) * w.w[k * kH + j];
        h[j] = std::max(acc, 0.0) + w.pos[s * kH + j];
      }
      for (int64_t head = 0; head < 4; ++head) {
        double* e = h + head * 8;
        double mx = e[0], sum = 0.0;
        for (int i = 1; i < 8; ++i) mx = std::max(mx, e[i]);
        for (int i = 0; i < 8; ++i) sum += (e[i] = std::exp(e[i] - mx));
        for (int i = 0; i < 8; ++i) e[i] /= sum;
      }
      double mean = 0.0, var = 0.0;
      for (double v : h) mean += v / kH;
      for (double v : h) var += (v - mean) * (v - mean) / kH;
      for (int64_t j = 0; j < kH; ++j)
        y[(b * seq + s) * kH + j] = (h[j] - mean) / std::sqrt(var + 1e-5) * w.gamma[j] + w.beta[j];
    }
  return y;
}

// x [n] -> every second element (Slice with step 2) -> Relu: ceil(n / 2) is not multilinear in n.
onnx::ModelProto strided_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("strided");
  add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"n"});
  add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"m"});
  add_ints(g, "start", {0});
  add_ints(g, "end", {INT64_MAX});
  add_ints(g, "axis", {0});
  add_ints(g, "step", {2});
  add_node(g, "Slice", {"x", "start", "end", "axis", "step"}, {"half"});
  add_node(g, "Relu", {"half"}, {"y"});
  return m;
}

class ShapeFamilies : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lumen_family_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string save(const onnx::ModelProto& m, const std::string& name) {
    std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }
  void expect_encoder(OnnxSession& session, int64_t batch, int64_t seq, uint64_t seed) {
    Tensor x = test::random_tensor({batch, seq, kD}, seed);
    auto out = session.run({{"x", x}});
    SCOPED_TRACE("batch " + std::to_string(batch) + ", seq " + std::to_string(seq));
    test::expect_close(out[0], {batch, seq, kH}, encoder_reference(weights_, x), 1e-4, 1e-4);
  }
  Weights weights_;
  fs::path dir_;
};

TEST_F(ShapeFamilies, NewSequenceLengthsAndBatchesDoNotCompile) {
  OnnxSession session(save(encoder_model(weights_), "encoder.onnx"));
  expect_encoder(session, 1, 5, 10);  // fits the family of batch 1 and compiles it once
  OnnxSession::Stats st = session.stats();
  EXPECT_EQ(st.families, 1u) << st.refused;
  EXPECT_EQ(st.compiles, 1u);
  uint64_t seed = 11;
  for (int64_t seq : {9, 3, 17, 64, 2, 9}) expect_encoder(session, 1, seq, seed++);
  st = session.stats();
  EXPECT_EQ(st.compiles, 1u);
  EXPECT_EQ(st.sized, 5u);  // 9 came back: its plan was kept
  EXPECT_GT(st.kernels_shared, 0u);
  // Batches of 2 and more are a family of their own (a dim of 1 broadcasts); batch and sequence
  // vary together in it, through their product in the MatMul's rows.
  expect_encoder(session, 2, 5, seed++);
  for (auto [b, s] : {std::pair<int64_t, int64_t>{3, 7}, {2, 33}, {5, 2}, {4, 4}})
    expect_encoder(session, b, s, seed++);
  st = session.stats();
  EXPECT_EQ(st.families, 2u) << st.refused;
  EXPECT_EQ(st.compiles, 2u);
  EXPECT_EQ(st.sized, 9u);
  // Sizes of 1 everywhere have no symbol left to vary: a plan of their own.
  expect_encoder(session, 1, 1, seed++);
  EXPECT_EQ(session.stats().compiles, 3u);
}

// x [batch, seq, 16] -> MatMul with a constant W [16, 32] and nothing after it (a language model's
// head without a bias): a MatMul node, not a FusedMatMul.
onnx::ModelProto projection_model(const Weights& w) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("projection");
  add_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", "seq", std::to_string(kD)});
  add_io(g->add_output(), "y", onnx::TensorProto::FLOAT, {"batch", "seq", std::to_string(kH)});
  add_floats(g, "W", {kD, kH}, w.w);
  add_node(g, "MatMul", {"x", "W"}, {"y"});
  return m;
}

// A family's constant-weight products on either CPU kernel (cpu_isa.h: at AVX-512 each side can
// be forced; at AVX2 both runs take the packed GEMM): on oneDNN a primitive per row count, kept for
// the 32 latest counts (DnnlMatmulByRows), shared by every size like the packed GEMM. 40 lengths,
// then the first ones again after they were dropped; the encoder's product is a FusedMatMul, the
// projection's a MatMul.
TEST_F(ShapeFamilies, ProductsRunAtEveryLengthOnEitherCpuKernel) {
  const std::string encoder = save(encoder_model(weights_), "encoder.onnx");
  const std::string projection = save(projection_model(weights_), "projection.onnx");
  std::map<CpuKernelChoice, std::vector<size_t>> shared;
  for (CpuKernelChoice pick : {CpuKernelChoice::kLumen, CpuKernelChoice::kOneDnn}) {
    set_cpu_kernel_choice(pick);
    SCOPED_TRACE(pick == CpuKernelChoice::kLumen ? "packed GEMM" : "oneDNN");
    OnnxSession session(encoder);
    OnnxSession bare(projection);
    uint64_t seed = 60;
    std::vector<int64_t> lengths;
    for (int64_t seq = 2; seq <= 41; ++seq) lengths.push_back(seq);
    for (int64_t seq : {2, 3, 41}) lengths.push_back(seq);
    for (int64_t seq : lengths) {
      expect_encoder(session, 1, seq, seed++);
      Tensor x = test::random_tensor({1, seq, kD}, seed++);
      std::vector<double> want(static_cast<size_t>(seq * kH), 0.0);
      for (int64_t s = 0; s < seq; ++s)
        for (int64_t j = 0; j < kH; ++j)
          for (int64_t k = 0; k < kD; ++k)
            want[s * kH + j] += double(x.data<float>()[s * kD + k]) * weights_.w[k * kH + j];
      SCOPED_TRACE("projection, seq " + std::to_string(seq));
      test::expect_close(bare.run({{"x", x}})[0], {1, seq, kH}, want, 1e-5, 1e-4);
    }
    for (OnnxSession* s : {&session, &bare}) {
      EXPECT_EQ(s->stats().compiles, 1u);
      shared[pick].push_back(s->stats().kernels_shared);
    }
  }
  set_cpu_kernel_choice(CpuKernelChoice::kMeasure);
  for (size_t model = 0; model < 2; ++model) {
    EXPECT_GT(shared[CpuKernelChoice::kLumen][model], 0u) << model;
    EXPECT_EQ(shared[CpuKernelChoice::kOneDnn][model], shared[CpuKernelChoice::kLumen][model])
        << model;
  }
}

TEST_F(ShapeFamilies, PlanPerShapeCompilesEverySize) {
  OnnxLoadOptions options;
  options.plan_per_shape = true;
  OnnxSession session(save(encoder_model(weights_), "encoder.onnx"), options);
  expect_encoder(session, 1, 5, 30);
  expect_encoder(session, 1, 6, 31);
  const OnnxSession::Stats st = session.stats();
  EXPECT_EQ(st.compiles, 2u);
  EXPECT_EQ(st.sized, 0u);
  EXPECT_EQ(st.families, 0u);
}

TEST_F(ShapeFamilies, SizesOutsideTheModelsRangeAreAShapeErrorAndTheSessionGoesOn) {
  OnnxSession session(save(encoder_model(weights_), "encoder.onnx"));
  expect_encoder(session, 1, 8, 40);
  // The position table has 64 rows: a longer sequence cannot be added to it.
  EXPECT_THROW(session.run({{"x", test::random_tensor({1, kMaxSeq + 16, kD}, 41)}}), ShapeError);
  // A wrong fixed dim is refused as ever.
  EXPECT_THROW(session.run({{"x", test::random_tensor({1, 8, kD + 1}, 42)}}), ShapeError);
  expect_encoder(session, 1, 12, 43);
  EXPECT_EQ(session.stats().compiles, 1u);
}

TEST_F(ShapeFamilies, ShapesThatAreNotMultilinearCompilePerShape) {
  OnnxSession session(save(strided_model(), "strided.onnx"));
  for (int64_t n : {9, 10, 7, 16}) {
    Tensor x = test::random_tensor({n}, static_cast<uint64_t>(n));
    auto out = session.run({{"x", x}});
    std::vector<double> want;
    for (int64_t i = 0; i < n; i += 2) want.push_back(std::max(0.0f, x.data<float>()[i]));
    test::expect_close(out[0], {(n + 1) / 2}, want);
  }
  const OnnxSession::Stats st = session.stats();
  EXPECT_EQ(st.families, 0u);
  EXPECT_EQ(st.sized, 0u);
  EXPECT_EQ(st.compiles, 4u);
  EXPECT_NE(st.refused.find("multilinear"), std::string::npos) << st.refused;
}

// On the GPU, a size's plan takes the kernels that run at any size (products of constant weights,
// norms, softmax, views, element-wise) from the family's first plan, and runs step by step, then
// recorded as a CUDA graph, then replayed: each of the three is checked at every size.
TEST_F(ShapeFamilies, GpuPlansShareKernelsAndReplayAtEverySize) {
  Runtime probe;
  const std::vector<std::string> names = probe.backends();
  if (std::find(names.begin(), names.end(), "cuda") == names.end())
    GTEST_SKIP() << "no CUDA device here: this test runs on the GPU machine";
  CompileOptions compile;
  compile.backends = {"cuda"};
  OnnxSession session(save(encoder_model(weights_), "encoder.onnx"), {}, compile);
  uint64_t seed = 60;
  for (int64_t seq : {5, 9, 3, 17, 64, 9})
    for (int run = 0; run < 3; ++run) expect_encoder(session, 1, seq, seed++);
  const OnnxSession::Stats st = session.stats();
  EXPECT_EQ(st.compiles, 1u);
  EXPECT_EQ(st.sized, 4u);
  EXPECT_GT(st.kernels_shared, st.kernels_built)
      << st.kernels_shared << " shared, " << st.kernels_built << " built";
  // A recorded plan's intermediates live in one device arena planned by liveness.
  Executable* plan = session.plan_for({{"x", test::random_tensor({1, 17, kD}, 1)}});
  const MemoryReport report = plan->memory_report();
  EXPECT_GT(report.arena_bytes, 0u);
  EXPECT_LT(report.arena_bytes, report.no_reuse_bytes);
  EXPECT_NE(plan->summary().find("recorded as one device graph"), std::string::npos)
      << plan->summary();
}

TEST_F(ShapeFamilies, ConcurrentRunsAtManySizesAgree) {
  OnnxSession session(save(encoder_model(weights_), "encoder.onnx"));
  expect_encoder(session, 1, 4, 50);
  std::vector<std::thread> threads;
  std::vector<std::string> failures(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int64_t seq = 2 + t; seq < 40; seq += 4) {
          Tensor x = test::random_tensor({1, seq, kD}, static_cast<uint64_t>(100 + seq));
          auto out = session.run({{"x", x}});
          const std::vector<double> want = encoder_reference(weights_, x);
          const float* got = out[0].data<float>();
          for (size_t i = 0; i < want.size(); ++i)
            if (std::abs(got[i] - want[i]) > 1e-4 + 1e-4 * std::abs(want[i]))
              throw std::runtime_error("seq " + std::to_string(seq) + " element " +
                                       std::to_string(i));
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
  EXPECT_EQ(session.stats().compiles, 1u);
}

}  // namespace
}  // namespace lumen
