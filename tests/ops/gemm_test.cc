// Tests of MatMul and Gemm on the CPU against naive double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "ops/op_test_util.h"

namespace lumen::test {
namespace {

struct Ref {
  Shape shape;
  std::vector<double> values;
};

// numpy.matmul in double: 1-D operands promoted and the added dims dropped, batch dims broadcast.
Ref ref_matmul(const Tensor& a, const Tensor& b) {
  std::vector<double> av = to_doubles(a), bv = to_doubles(b);
  std::vector<int64_t> ad = a.shape().dims(), bd = b.shape().dims();
  bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  Shape a_batch(std::vector<int64_t>(ad.begin(), ad.end() - 2));
  Shape b_batch(std::vector<int64_t>(bd.begin(), bd.end() - 2));
  size_t r = std::max(a_batch.dims().size(), b_batch.dims().size());
  std::vector<int64_t> out_batch(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i + a_batch.rank() >= r ? a_batch.dims()[i + a_batch.rank() - r] : 1;
    int64_t y = i + b_batch.rank() >= r ? b_batch.dims()[i + b_batch.rank() - r] : 1;
    out_batch[i] = x == 1 ? y : x;
  }
  Shape ob(out_batch);
  Ref ref;
  int64_t batches = ob.numel();
  ref.values.assign(static_cast<size_t>(batches * m * n), 0.0);
  for (int64_t t = 0; t < batches; ++t) {
    std::vector<int64_t> idx = unravel(t, ob);
    int64_t sa = broadcast_source(idx, a_batch), sb = broadcast_source(idx, b_batch);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p) acc += av[(sa * m + i) * k + p] * bv[(sb * k + p) * n + j];
        ref.values[(t * m + i) * n + j] = acc;
      }
  }
  std::vector<int64_t> out = out_batch;
  if (!a_vec) out.push_back(m);
  if (!b_vec) out.push_back(n);
  ref.shape = Shape(out);
  return ref;
}

// Gemm in double; a and b are stored transposed when ta / tb.
Ref ref_gemm(const Tensor& a, const Tensor& b, const Tensor* c, double alpha, double beta, bool ta,
             bool tb) {
  std::vector<double> av = to_doubles(a), bv = to_doubles(b);
  int64_t m = ta ? a.shape()[1] : a.shape()[0], k = ta ? a.shape()[0] : a.shape()[1];
  int64_t n = tb ? b.shape()[0] : b.shape()[1];
  Ref ref{Shape{m, n}, std::vector<double>(static_cast<size_t>(m * n))};
  std::vector<double> cv = c ? to_doubles(*c) : std::vector<double>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p)
        acc += av[ta ? p * m + i : i * k + p] * bv[tb ? j * k + p : p * n + j];
      double cval = c ? cv[broadcast_source({i, j}, c->shape())] : 0.0;
      ref.values[i * n + j] = alpha * acc + beta * cval;
    }
  return ref;
}

void check_matmul(const Shape& as, const Shape& bs, bool b_constant = false, uint64_t seed = 1) {
  SCOPED_TRACE(as.to_string() + " x " + bs.to_string() + (b_constant ? " (B constant)" : ""));
  Tensor a = random_tensor(as, seed), b = random_tensor(bs, seed + 100);
  Ref want = ref_matmul(a, b);
  std::vector<Tensor> got = run_op("MatMul", {a, OpInput(b, b_constant)});
  expect_close(got[0], want.shape, want.values, 1e-4, 1e-4);
}

TEST(MatMul, TwoD) {
  check_matmul({3, 4}, {4, 5});
  check_matmul({1, 1}, {1, 1});
  check_matmul({7, 1}, {1, 3});
  check_matmul({1, 9}, {9, 1});
  check_matmul({37, 70}, {70, 19});
  check_matmul({130, 257}, {257, 66});
}

TEST(MatMul, OneDOperands) {
  check_matmul({4}, {4, 5});
  check_matmul({3, 4}, {4});
  check_matmul({6}, {6});
  check_matmul({1}, {1});
  check_matmul({4}, {2, 4, 5});
  check_matmul({2, 3, 4}, {4});
}

TEST(MatMul, Batched) {
  check_matmul({2, 3, 4}, {2, 4, 5});
  check_matmul({2, 2, 3, 4}, {2, 2, 4, 5});
  check_matmul({1, 3, 4}, {1, 4, 5});
}

TEST(MatMul, BroadcastBatch) {
  check_matmul({2, 1, 4, 5}, {3, 5, 6});  // both sides broadcast, in different dims
  check_matmul({3, 4, 5}, {2, 1, 5, 6});
  check_matmul({2, 3, 4}, {4, 5});  // B without batch: A's batch folds into M
  check_matmul({2, 3, 4}, {1, 4, 5});
  check_matmul({4, 5}, {2, 5, 6});  // A without batch
  check_matmul({1, 3, 4}, {2, 4, 5});
  check_matmul({2, 1, 3, 4}, {1, 3, 4, 2});
}

TEST(MatMul, RankAboveOneDnnLimit) {
  // 12 batch dims + 2 exceeds oneDNN's 12: the kernel loops over 2-D products.
  std::vector<int64_t> a(12, 1), b(11, 1);
  a[0] = 2;
  a[11] = 3;
  b[9] = 2;
  a.insert(a.end(), {2, 4});
  b.insert(b.end(), {4, 3});
  check_matmul(Shape(a), Shape(b));
}

// Constant weights run on packed_gemm or oneDNN (kernel_choice.h): each forced in turn, then
// measured.
TEST(MatMul, ConstantB) {
  for (CpuKernelChoice pick :
       {CpuKernelChoice::kLumen, CpuKernelChoice::kOneDnn, CpuKernelChoice::kMeasure}) {
    set_cpu_kernel_choice(pick);
    SCOPED_TRACE(::testing::Message() << "pick " << static_cast<int>(pick));
    check_matmul({8, 32}, {32, 16}, true);
    check_matmul({64, 256}, {256, 128}, true);
    check_matmul({1, 256}, {256, 128}, true);
    check_matmul({2, 3, 40}, {40, 24}, true);
    check_matmul({2, 3, 4}, {2, 4, 5}, true);
    check_matmul({2, 1, 4, 5}, {3, 5, 6}, true);
    check_matmul({5}, {5}, true);
  }
}

// One output column runs as a matrix-vector product (gemv.h): rows over threads, long rows split.
TEST(MatMul, OneColumn) {
  check_matmul({1, 20000}, {20000, 1});  // one long row: split over the threads
  check_matmul({3, 50001}, {50001, 1}, true);
  check_matmul({300, 77}, {77, 1});
  check_matmul({2, 5, 4099}, {4099, 1}, true);  // A's batch folds into the rows
  check_matmul({4, 9000}, {9000});
}

TEST(MatMul, EmptyDims) {
  // K = 0: every output element is an empty sum.
  Tensor a = Tensor::empty({3, 0}), b = Tensor::empty({0, 4});
  expect_close(run_op("MatMul", {a, b})[0], Shape{3, 4}, std::vector<double>(12, 0.0));
  expect_close(run_op("MatMul", {Tensor::empty({2, 3, 0}), Tensor::empty({0, 2})})[0],
               Shape{2, 3, 2}, std::vector<double>(12, 0.0));
  expect_close(run_op("MatMul", {Tensor::empty({0}), Tensor::empty({0})})[0], Shape{},
               std::vector<double>{0.0});
  check_matmul({0, 4}, {4, 5});
  check_matmul({3, 4}, {4, 0});
  check_matmul({0, 2, 3}, {3, 4});
  check_matmul({2, 3}, {0, 3, 4});
}

TEST(MatMul, ConcurrentExecute) {
  Graph graph;
  Tensor b = random_tensor({96, 80}, 7);
  Value* x = graph.add_input("x", {3, 64, 96});
  graph.mark_output(graph.add_op("MatMul", {x, graph.add_weight("w", {96, 80})}));
  graph.set_data(graph.find_value("w"), b);
  Runtime rt;
  Executable* exe = graph.compile(&rt);
  std::vector<Tensor> inputs;
  std::vector<Ref> wants;
  for (int t = 0; t < 4; ++t) {
    inputs.push_back(random_tensor({3, 64, 96}, 20 + t));
    wants.push_back(ref_matmul(inputs.back(), b));
  }
  std::vector<std::vector<Tensor>> got(inputs.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < inputs.size(); ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r) got[t] = exe->execute({inputs[t]});
    });
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < inputs.size(); ++t)
    expect_close(got[t][0], wants[t].shape, wants[t].values, 1e-4, 1e-4);
}

TEST(MatMul, BadInputs) {
  Tensor m34 = random_tensor({3, 4}, 1);
  EXPECT_THROW(run_op("MatMul", {m34, random_tensor({5, 6}, 2)}), ShapeError);
  EXPECT_THROW(run_op("MatMul", {m34, random_tensor({3}, 2)}), ShapeError);
  EXPECT_THROW(run_op("MatMul", {random_tensor({2, 3, 4}, 1), random_tensor({3, 4, 5}, 2)}),
               ShapeError);
  EXPECT_THROW(run_op("MatMul", {Tensor::scalar(1.0f), m34}), ShapeError);
  EXPECT_THROW(run_op("MatMul", {m34, Tensor::scalar(1.0f)}), ShapeError);
  EXPECT_THROW(run_op("MatMul", {m34, random_ints({4, 2}, 3, -3, 3, DType::kInt64)}), ShapeError);
  EXPECT_THROW(run_op("MatMul", {random_ints({3, 4}, 3, 0, 1, DType::kBool),
                                 random_ints({4, 2}, 3, 0, 1, DType::kBool)}),
               ShapeError);
  // int64 MatMul is valid ONNX (the schema accepts it) but the CPU kernel is float32 only.
  EXPECT_THROW(run_op("MatMul", {random_ints({3, 4}, 3, -3, 3), random_ints({4, 2}, 4, -3, 3)}),
               UnsupportedOp);
  EXPECT_THROW(run_op("MatMul", {m34}), InvalidModel);
  EXPECT_THROW(run_op("MatMul", {m34, random_tensor({4, 2}, 2)}, {{"alpha", 1.0f}}), InvalidModel);
}

struct GemmCase {
  Shape c;  // {-1} for no C
  float alpha, beta;
  bool ta, tb;
};

void check_gemm(int64_t m, int64_t k, int64_t n, const GemmCase& g, bool b_constant = false) {
  bool has_c = !(g.c.rank() == 1 && g.c[0] == -1);
  SCOPED_TRACE("M=" + std::to_string(m) + " K=" + std::to_string(k) + " N=" + std::to_string(n) +
               " C=" + (has_c ? g.c.to_string() : "none") + " alpha=" + std::to_string(g.alpha) +
               " beta=" + std::to_string(g.beta) + " transA=" + std::to_string(g.ta) +
               " transB=" + std::to_string(g.tb) + (b_constant ? " B constant" : ""));
  Tensor a = random_tensor(g.ta ? Shape{k, m} : Shape{m, k}, 11);
  Tensor b = random_tensor(g.tb ? Shape{n, k} : Shape{k, n}, 12);
  Tensor c = has_c ? random_tensor(g.c, 13) : Tensor();
  Attributes attrs{
      {"alpha", g.alpha}, {"beta", g.beta}, {"transA", g.ta ? 1 : 0}, {"transB", g.tb ? 1 : 0}};
  std::vector<OpInput> inputs{a, OpInput(b, b_constant)};
  if (has_c) inputs.emplace_back(c);
  Ref want = ref_gemm(a, b, has_c ? &c : nullptr, g.alpha, g.beta, g.ta, g.tb);
  expect_close(run_op("Gemm", inputs, attrs)[0], want.shape, want.values, 1e-4, 1e-4);
}

TEST(Gemm, TransposeCombinations) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_gemm(3, 5, 4, {{3, 4}, 0.5f, 2.0f, ta, tb});
      check_gemm(17, 33, 9, {{9}, 1.0f, 1.0f, ta, tb});
      check_gemm(6, 7, 8, {{-1}, 1.0f, 1.0f, ta, tb});
      check_gemm(20, 64, 48, {{20, 1}, -1.5f, 0.25f, ta, tb}, true);
    }
}

TEST(Gemm, BroadcastC) {
  const int64_t m = 5, k = 6, n = 7;
  std::vector<Shape> forms{Shape{},     Shape{1},    Shape{n},   Shape{1, n},
                           Shape{m, 1}, Shape{m, n}, Shape{1, 1}};
  for (const Shape& c : forms) {
    check_gemm(m, k, n, {c, 1.0f, 1.0f, false, false});  // [N]/[1,N]: oneDNN bias
    check_gemm(m, k, n, {c, 2.0f, 2.0f, false, true});   // bias scaled by alpha
    check_gemm(m, k, n, {c, 1.5f, 0.5f, true, false});   // C added through the sum post-op
    check_gemm(m, k, n, {c, 1.0f, -1.0f, true, true});
  }
  check_gemm(1, 4, 1, {{1}, 1.0f, 1.0f, false, false});
  check_gemm(4, 3, 1, {{4, 1}, 1.0f, 1.0f, false, false});
}

TEST(Gemm, AlphaBetaAndNoC) {
  check_gemm(4, 5, 6, {{-1}, 3.0f, 1.0f, false, false});
  check_gemm(4, 5, 6, {{4, 6}, 0.0f, 1.0f, false, false});
  check_gemm(4, 5, 6, {{4, 6}, 2.0f, 0.0f, false, false});
  check_gemm(4, 5, 6, {{6}, 1.0f, 0.0f, false, true});
  // Attributes left to their defaults (alpha = beta = 1, no transposes).
  Tensor a = random_tensor({3, 4}, 1), b = random_tensor({4, 2}, 2), c = random_tensor({2}, 3);
  Ref want = ref_gemm(a, b, &c, 1.0, 1.0, false, false);
  expect_close(run_op("Gemm", {a, b, c})[0], want.shape, want.values, 1e-4, 1e-4);
}

TEST(Gemm, ConstantWeights) {
  for (CpuKernelChoice pick :
       {CpuKernelChoice::kLumen, CpuKernelChoice::kOneDnn, CpuKernelChoice::kMeasure}) {
    set_cpu_kernel_choice(pick);
    SCOPED_TRACE(::testing::Message() << "pick " << static_cast<int>(pick));
    check_gemm(32, 256, 128, {{128}, 1.0f, 1.0f, false, true}, true);
    check_gemm(1, 256, 128, {{1, 128}, 1.0f, 1.0f, false, true}, true);
    check_gemm(16, 100, 60, {{16, 60}, 0.5f, 1.5f, true, false}, true);
    // B as given (not transposed), without C and with a bias: packed_gemm's forms.
    check_gemm(21, 70, 50, {{-1}, 1.0f, 1.0f, false, false}, true);
    check_gemm(21, 70, 50, {{50}, 1.0f, 1.0f, false, false}, true);
  }
}

TEST(Gemm, OneColumn) {
  check_gemm(1, 30011, 1, {{1}, 1.0f, 1.0f, false, true}, true);  // bias, one long row
  check_gemm(32, 10000, 1, {{1, 1}, 0.5f, 0.5f, false, false});   // bias scaled by alpha
  check_gemm(600, 70, 1, {{600, 1}, 1.5f, -0.5f, false, true});   // C beside, over 256 rows
  check_gemm(5, 9000, 1, {{-1}, 2.0f, 1.0f, false, false}, true);
  check_gemm(7, 40, 1, {{7, 1}, 1.0f, 1.0f, true, false});  // A transposed: oneDNN
}

TEST(Gemm, EmptyDims) {
  check_gemm(3, 0, 4, {{3, 4}, 1.0f, 2.0f, false, false});
  check_gemm(3, 0, 4, {{4}, 1.0f, 1.0f, true, true});
  check_gemm(3, 0, 4, {{-1}, 1.0f, 1.0f, false, false});
  check_gemm(0, 5, 4, {{4}, 1.0f, 1.0f, false, false});
  check_gemm(3, 5, 0, {{-1}, 1.0f, 1.0f, false, true});
}

TEST(Gemm, BadInputs) {
  Tensor a = random_tensor({3, 4}, 1), b = random_tensor({4, 2}, 2);
  EXPECT_THROW(run_op("Gemm", {a, random_tensor({5, 2}, 2)}), ShapeError);
  EXPECT_THROW(run_op("Gemm", {a, b}, {{"transB", 1}}), ShapeError);
  EXPECT_THROW(run_op("Gemm", {random_tensor({2, 3, 4}, 1), b}), ShapeError);
  EXPECT_THROW(run_op("Gemm", {random_tensor({4}, 1), b}), ShapeError);
  EXPECT_THROW(run_op("Gemm", {Tensor::scalar(1.0f), b}), ShapeError);
  EXPECT_THROW(run_op("Gemm", {a, b, random_tensor({4, 2}, 3)}), ShapeError);
  EXPECT_THROW(run_op("Gemm", {a, b, random_tensor({3}, 3)}), ShapeError);
  EXPECT_THROW(run_op("Gemm", {a, b, random_tensor({1, 3, 2}, 3)}), ShapeError);
  EXPECT_THROW(run_op("Gemm", {a, random_ints({4, 2}, 3, -3, 3)}), ShapeError);
  EXPECT_THROW(run_op("Gemm", {random_ints({3, 4}, 3, -3, 3), random_ints({4, 2}, 4, -3, 3)}),
               UnsupportedOp);
  EXPECT_THROW(run_op("Gemm", {a, b}, {{"transA", 1.0f}}), InvalidModel);
  EXPECT_THROW(run_op("Gemm", {a, b}, {{"transB", "yes"}}), InvalidModel);
  EXPECT_THROW(run_op("Gemm", {a, b}, {{"alpha", "big"}}), InvalidModel);
  EXPECT_THROW(run_op("Gemm", {a, b}, {{"axis", 1}}), InvalidModel);
  EXPECT_THROW(run_op("Gemm", {a}), InvalidModel);
}

}  // namespace
}  // namespace lumen::test
