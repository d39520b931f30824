// Runtime and Executable: the documented API, binding errors, concurrent runs.
#include <gtest/gtest.h>

#include <thread>

#include "lumen/lumen.h"
#include "ops/op_test_util.h"

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
  EXPECT_FALSE(packed->data.has_value());
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

// The CPU backend has no float16 Relu (the CUDA backend's kernels take float16).
TEST(Runtime, UnsupportedDTypeIsReportedAtCompile) {
  Runtime rt;
  Graph g;
  try {
    g.mark_output(g.add_op("Relu", {g.add_input("x", {4}, DType::kFloat16)}));
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

}  // namespace
}  // namespace lumen
