// Runtime and Executable: the documented API, binding errors, concurrent runs.
#include <gtest/gtest.h>

#include <thread>

#include "backends/backend.h"
#include "backends/stream.h"
#include "core/half.h"
#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"
#include "runtime/half_storage.h"

namespace lumen {
namespace {

// y = relu(x @ w + b), computed naively in double.
std::vector<double> reference_mlp(const Tensor& x, const Tensor& w, const Tensor& b) {
  int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[1];
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = b.item_as_double(j);
      for (int64_t p = 0; p < k; ++p)
        acc += x.item_as_double(i * k + p) * w.item_as_double(p * n + j);
      y[i * n + j] = acc > 0 ? acc : 0;
    }
  return y;
}

TEST(Runtime, DocumentedExampleRuns) {
  Runtime rt;
  Graph graph;
  auto* in = graph.add_input("input", {1, 10});
  auto* w = graph.add_weight("weight", {10, 5});
  auto* out = graph.add_op("matmul", {in, w});
  graph.mark_output(out);
  graph.optimize();
  auto* executable = graph.compile(&rt);
  auto input_buf = rt.alloc({1, 10});
  auto outputs = executable->execute({input_buf});
  ASSERT_EQ(outputs.size(), 1u);
  test::expect_close(outputs[0], {1, 5}, std::vector<double>(5, 0.0));
}

class MlpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    x_ = graph_.add_input("x", {3, 16});
    w_ = test::random_tensor({16, 8}, 11);
    b_ = test::random_tensor({8}, 12);
    Value* h = graph_.add_op("MatMul", {x_, graph_.add_constant("w", w_)});
    Value* y = graph_.add_op("Relu", {graph_.add_op("Add", {h, graph_.add_constant("b", b_)})});
    graph_.mark_output(y);
    exe_ = graph_.compile(&rt_);
  }
  Runtime rt_;
  Graph graph_;
  Value* x_ = nullptr;
  Tensor w_, b_;
  Executable* exe_ = nullptr;
};

TEST_F(MlpTest, MatchesReference) {
  Tensor x = test::random_tensor({3, 16}, 13);
  auto out = exe_->execute({x});
  test::expect_close(out[0], {3, 8}, reference_mlp(x, w_, b_));
  auto named = exe_->execute(std::map<std::string, Tensor>{{"x", x}});
  test::expect_close(named[0], {3, 8}, reference_mlp(x, w_, b_));
  EXPECT_EQ(exe_->inputs().at(0).name, "x");
  EXPECT_EQ(exe_->outputs().at(0).type.shape, (Shape{3, 8}));
}

TEST_F(MlpTest, BadInputsAreErrors) {
  EXPECT_THROW(exe_->execute(std::vector<Tensor>{}), InvalidArgument);
  EXPECT_THROW(exe_->execute({test::random_tensor({3, 15}, 1)}), ShapeError);
  EXPECT_THROW(exe_->execute({Tensor::zeros({3, 16}, DType::kInt64)}), ShapeError);
  EXPECT_THROW(exe_->execute({Tensor()}), InvalidArgument);
  EXPECT_THROW(exe_->execute(std::map<std::string, Tensor>{}), InvalidArgument);
  EXPECT_THROW(exe_->execute(std::map<std::string, Tensor>{{"x", test::random_tensor({3, 16}, 1)},
                                                           {"nope", Tensor::zeros({1})}}),
               InvalidArgument);
}

TEST_F(MlpTest, ConcurrentRunsGiveTheirOwnResults) {
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 50; ++r) {
        Tensor x = test::random_tensor({3, 16}, 1000 + t * 100 + r);
        std::vector<double> want = reference_mlp(x, w_, b_);
        std::vector<double> got = test::to_doubles(exe_->execute({x})[0]);
        for (size_t i = 0; i < want.size(); ++i)
          if (std::abs(got[i] - want[i]) > 1e-4) ++failures[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST_F(MlpTest, SteadyStateRunsDoNotAskTheSystemForMemory) {
  Tensor x = test::random_tensor({3, 16}, 5);
  exe_->execute({x});
  size_t before = rt_.memory_stats().num_system_allocs;
  for (int r = 0; r < 20; ++r) exe_->execute({x});
  EXPECT_EQ(rt_.memory_stats().num_system_allocs, before);
}

TEST(Runtime, OutputsThatAreInputsOrConstants) {
  Graph g;
  Value* x = g.add_input("x", {2});
  Value* c = g.add_constant("c", Tensor::from_vector<float>({2}, {1, 2}));
  g.mark_output(x);
  g.mark_output(c);
  Runtime rt;
  Executable* exe = g.compile(&rt);
  Tensor in = Tensor::from_vector<float>({2}, {5, 6});
  auto out = exe->execute({in});
  test::expect_close(out[0], {2}, {5, 6});
  test::expect_close(out[1], {2}, {1, 2});
  out[1].data<float>()[0] = 100;  // the caller's copy; the constant stays
  test::expect_close(exe->execute({in})[1], {2}, {1, 2});
}

// release_weights: a weight every reader packed leaves the graph during compile; one a kernel
// reads at run time stays; the results do not change; the graph cannot be compiled again.
TEST(Runtime, ReleaseWeightsFreesPackedWeightsOnly) {
  Tensor w = test::random_tensor({16, 8}, 21), v = test::random_tensor({16, 8}, 22);
  Tensor x = test::random_tensor({3, 16}, 23), s = test::random_tensor({16, 8}, 24);
  Tensor zero_bias = Tensor::zeros({8});
  Graph g;
  Value* in = g.add_input("x", {3, 16});
  Value* packed = g.add_constant("w", w);
  Value* read = g.add_constant("v", v);
  g.mark_output(g.add_op("Relu", {g.add_op("MatMul", {in, packed})}));
  g.mark_output(g.add_op("Relu", {g.add_op("MatMul", {in, read})}));
  Value* scale = g.add_input("s", {16, 8});
  g.mark_output(g.add_op("Mul", {scale, read}));
  Runtime rt;
  CompileOptions options;
  options.release_weights = true;
  Executable* exe = g.compile(&rt, options);
#if defined(__x86_64__)
  // Packed by Lumen's GEMM or reordered by oneDNN's; on arm64 oneDNN 2.6's reference GEMM reads
  // the weight where it lies, so it stays.
  EXPECT_FALSE(packed->data.has_value());
#endif
  EXPECT_TRUE(read->data.has_value());
  auto out = exe->execute(std::vector<Tensor>{x, s});
  test::expect_close(out[0], {3, 8}, reference_mlp(x, w, zero_bias));
  test::expect_close(out[1], {3, 8}, reference_mlp(x, v, zero_bias));
  std::vector<double> products(16 * 8);
  for (size_t i = 0; i < products.size(); ++i)
    products[i] =
        s.item_as_double(static_cast<int64_t>(i)) * v.item_as_double(static_cast<int64_t>(i));
  test::expect_close(out[2], {16, 8}, products);
  EXPECT_THROW(g.compile(&rt), InvalidArgument);
}

TEST(Runtime, CompileErrors) {
  Runtime rt;
  Graph empty;
  empty.add_input("x", {1});
  EXPECT_THROW(empty.compile(&rt), InvalidModel);
  Graph g;
  g.mark_output(g.add_op("Relu", {g.add_input("x", {1})}));
  EXPECT_THROW(g.compile(nullptr), InvalidArgument);
  EXPECT_THROW(g.compile(&rt, CompileOptions{{"tpu"}}), InvalidArgument);
  EXPECT_NE(g.compile(&rt, CompileOptions{{"cpu"}}), nullptr);
  EXPECT_EQ(rt.backends().at(0), "cpu");
}

// The CPU backend has no uint4 Relu, not even between Casts (float16, bfloat16 and float64 nodes
// run in float32 between Casts when only a float32 kernel exists).
TEST(Runtime, UnsupportedDTypeIsReportedAtCompile) {
  Runtime rt;
  Graph g;
  try {
    g.mark_output(g.add_op("Relu", {g.add_input("x", {4}, DType::kUInt4)}));
    CompileOptions cpu;
    cpu.backends = {"cpu"};
    g.compile(&rt, cpu);
    FAIL() << "expected UnsupportedOp";
  } catch (const UnsupportedOp& e) {
    EXPECT_NE(std::string(e.what()).find("Relu"), std::string::npos) << e.what();
  } catch (const ShapeError&) {
    // Also acceptable: the schema refused the dtype when the node was added.
  }
}

// A device backend that runs nothing but takes 16-bit floats: the float16 rewrite without a GPU.
class HalfBackend final : public Backend {
 public:
  std::string name() const override { return "half"; }
  Device device() const override { return Device::cuda(0); }
  bool supports(const Graph&, const Node&, std::string*) const override { return true; }
  std::unique_ptr<Kernel> make_kernel(const Graph&, const Node&, Precision) const override {
    throw UnsupportedOp("half: runs nothing");
  }
  Allocator& allocator() const override { return cpu_allocator(); }
  Stream& default_stream() override { return stream_; }
  bool takes_half_floats(DType /*half*/) const override { return true; }

 private:
  CpuStream stream_;
};

// x -> MatMul(w) -> Add(c) on the 16-bit device, then Atan and Sub(c) on the CPU; the Add's output
// is also a graph output.
TEST(HalfStorage, CastsAtTheEdgesAndConvertsConstants) {
  Graph g;
  Value* x = g.add_input("x", {2, 8});
  Tensor wv = test::random_tensor({8, 4}, 301);
  Value* w = g.add_constant("w", wv);
  Value* c = g.add_constant("c", test::random_tensor({4}, 302));
  Value* h = g.add_op("MatMul", {x, w}, {}, "mm");
  Value* a = g.add_op("Add", {h, c}, {}, "add");
  Value* t = g.add_op("Atan", {a}, {}, "atan");
  Value* z = g.add_op("Sub", {t, c}, {}, "sub");
  g.mark_output(a);
  g.mark_output(z);
  const std::string a_name = a->name;
  const int x_id = x->id, w_id = w->id, c_id = c->id, h_id = h->id, a_id = a->id;
  HalfBackend half;
  Backend* cpu = find_backend("cpu");
  std::vector<Backend*> placed = {&half, &half, cpu, cpu};
  std::vector<bool> needed(4, true);
  ASSERT_EQ(convert_to_half_storage(g, DType::kFloat16, placed, needed), 2);
  g.verify();
  ASSERT_EQ(static_cast<int>(placed.size()), g.num_nodes());
  ASSERT_EQ(static_cast<int>(needed.size()), g.num_nodes());
  const Node& mm = g.node(0);
  const Node& add = g.node(1);
  const Node& atan = g.node(2);
  const Node& sub = g.node(3);
  // The input stays float32 and is cast on the device.
  EXPECT_EQ(g.value(x_id).type.dtype, DType::kFloat32);
  const Node& to_half = g.node(g.value(mm.inputs[0]).producer);
  EXPECT_EQ(to_half.op, OpKind::kCast);
  EXPECT_EQ(to_half.inputs[0], x_id);
  EXPECT_EQ(placed[to_half.id], &half);
  // w is read only on the device: converted in place, each value rounded to nearest.
  EXPECT_EQ(mm.inputs[1], w_id);
  ASSERT_EQ(g.value(w_id).type.dtype, DType::kFloat16);
  const auto* wh = static_cast<const uint16_t*>(g.value(w_id).data->raw_data());
  for (int64_t i = 0; i < wv.numel(); ++i) EXPECT_EQ(wh[i], float_to_half(wv.data<float>()[i]));
  // c is read on both: the CPU keeps it, the device reads a float16 copy.
  EXPECT_EQ(g.value(c_id).type.dtype, DType::kFloat32);
  EXPECT_EQ(sub.inputs[1], c_id);
  EXPECT_NE(add.inputs[1], c_id);
  EXPECT_EQ(g.value(add.inputs[1]).type.dtype, DType::kFloat16);
  EXPECT_TRUE(g.value(add.inputs[1]).data.has_value());
  // The device's values are float16; the CPU reads the Add's output through a cast back, and the
  // graph output is that cast, under the original name, float32.
  EXPECT_EQ(g.value(h_id).type.dtype, DType::kFloat16);
  EXPECT_EQ(g.value(a_id).type.dtype, DType::kFloat16);
  const Value& back = g.value(atan.inputs[0]);
  EXPECT_EQ(g.node(back.producer).op, OpKind::kCast);
  EXPECT_EQ(back.type.dtype, DType::kFloat32);
  EXPECT_EQ(placed[back.producer], &half);
  EXPECT_EQ(g.outputs()[0], back.id);
  EXPECT_EQ(back.name, a_name);
  EXPECT_NE(g.value(a_id).name, a_name);
  EXPECT_EQ(g.value(g.outputs()[1]).type.dtype, DType::kFloat32);
  // bfloat16 the same way; a graph with no 16-bit backend is left alone.
  Graph g2;
  g2.mark_output(g2.add_op("Relu", {g2.add_input("x", {3})}));
  std::vector<Backend*> on_cpu = {cpu};
  std::vector<bool> one(1, true);
  EXPECT_EQ(convert_to_half_storage(g2, DType::kBFloat16, on_cpu, one), 0);
  EXPECT_EQ(g2.num_nodes(), 1);
  std::vector<Backend*> on_half = {&half};
  EXPECT_EQ(convert_to_half_storage(g2, DType::kBFloat16, on_half, one), 1);
  EXPECT_EQ(g2.value(g2.node(0).outputs[0]).type.dtype, DType::kBFloat16);
  EXPECT_EQ(g2.value(g2.outputs()[0]).type.dtype, DType::kFloat32);
}

}  // namespace
}  // namespace lumen
