// The group-matmuls pass and GroupedMatMul: sibling products of one input by constant weights
// become one node where CUDA is among the compile's backends, and give what the separate MatMuls
// give (a double-precision reference on random data) on the backends of --lumen-backends: one
// skinny launch over all of them (a few rows, every N a multiple of 4, up to 4 weights) or the
// members' own kernels (more rows, other widths, more weights).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/backend_check_util.h"
#include "ops/op_test_util.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

std::vector<double> product(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = test::to_doubles(a), bv = test::to_doubles(b);
  const int64_t k = b.shape()[0], n = b.shape()[1], m = a.numel() / k;
  std::vector<double> y(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] += av[i * k + p] * bv[p * n + j];
  return y;
}

// Compiles `g` (one GroupedMatMul, q_grouped) for --lumen-backends, checks that the group ran on
// the first of them, and runs it twice on `a` (the launch's counters are left ready for the next
// run): output i must be product(ref_a, weights[i]) each time.
void check_outputs(Graph& g, const Tensor& a, const Tensor& ref_a,
                   const std::vector<Tensor>& weights, Precision precision = Precision::kFloat32) {
  Runtime rt;
  CompileOptions options;
  options.backends = test::run_op_backends();
  options.precision = precision;
  Executable* exe = g.compile(&rt, options);
  if (test::run_op_backends() != std::vector<std::string>{"cpu"})
    EXPECT_EQ(test::backend_of_step(exe->summary(), "q_grouped"), test::run_op_backends()[0])
        << exe->summary();
  const int64_t k = a.shape()[-1];
  // float32 sums over K terms; with 16-bit storage (CUDA), values rounded to 11 bits
  const double atol = precision == Precision::kFloat32 ? 1e-5 + 1e-7 * static_cast<double>(k)
                                                       : 4e-3 * std::sqrt(static_cast<double>(k));
  const double rtol = precision == Precision::kFloat32 ? 1e-4 : 1e-2;
  for (int round = 0; round < 2; ++round) {
    const std::vector<Tensor> got = exe->execute(std::vector<Tensor>{a});
    ASSERT_EQ(got.size(), weights.size());
    for (size_t i = 0; i < weights.size(); ++i) {
      std::vector<int64_t> ys = a.shape().dims();
      ys.back() = weights[i].shape()[1];
      test::expect_close(got[i], Shape(ys), product(ref_a, weights[i]), atol, rtol);
    }
  }
}

// x times constant weights of widths `n`, plus a product by a graph input and one of another
// input, which stay MatMuls.
TEST(GroupMatMuls, SiblingWeightProductsBecomeOneNodeWithCuda) {
  for (bool with_cuda : {true, false}) {
    SCOPED_TRACE(with_cuda ? "cuda, cpu" : "cpu");
    Graph g;
    Value* x = g.add_input("x", {1, 1, 16});
    for (int64_t n : {16, 8, 8})
      g.mark_output(g.add_op("MatMul", {x, g.add_constant(g.unique_name("w"),
                                                          test::random_tensor({16, n}, 900 + n))}));
    g.mark_output(g.add_op("MatMul", {x, g.add_input("b", {16, 4})}));
    g.mark_output(g.add_op("MatMul", {g.add_input("x2", {1, 1, 16}),
                                      g.add_constant("w2", test::random_tensor({16, 4}, 950))}));
    if (with_cuda)
      g.optimize({"cuda", "cpu"});
    else
      g.optimize();
    EXPECT_EQ(test::count_ops(g, "GroupedMatMul"), with_cuda ? 1 : 0);
    EXPECT_EQ(test::count_ops(g, "MatMul"), with_cuda ? 2 : 5);
  }
}

struct Group {
  std::vector<int64_t> a;  // [..., M, K]
  std::vector<int64_t> n;  // the weights' widths
};

TEST(GroupMatMuls, GroupedProductsMatchTheirMatMuls) {
  LUMEN_SKIP_WITHOUT_BACKENDS();
  const std::vector<Group> groups = {
      {{1, 1, 64}, {64, 32, 32}},      // a decoding step's q, k, v: one launch
      {{5, 96}, {128, 200}},           // 5 rows: one launch
      {{1, 2, 3000}, {256, 512}},      // long K, many splits
      {{1, 1, 40}, {64, 64, 64, 64}},  // four weights: one launch
      {{1, 1, 40}, {8, 8, 8, 8, 8}},   // five: the members' kernels
      {{2, 7, 48}, {40, 24, 8, 16}},   // 14 rows: the members' kernels
      {{1, 1, 32}, {30, 64}},          // a width not a multiple of 4
  };
  uint64_t seed = 1000;
  for (const Group& c : groups) {
    SCOPED_TRACE(Shape(c.a).to_string() + " x " + std::to_string(c.n.size()) + " weights");
    Graph g;
    Value* x = g.add_input("x", Shape(c.a));
    const int64_t k = c.a.back();
    std::vector<Tensor> weights;
    for (size_t i = 0; i < c.n.size(); ++i) {
      weights.push_back(test::random_tensor({k, c.n[i]}, seed++, -1, 1));
      g.mark_output(g.add_op("MatMul", {x, g.add_constant("w" + std::to_string(i), weights[i])}, {},
                             i == 0 ? "q" : ""));
    }
    g.optimize({"cuda", "cpu"});
    ASSERT_EQ(test::count_ops(g, "GroupedMatMul"), 1);
    const Tensor a = test::random_tensor(Shape(c.a), seed++, -1, 1);
    check_outputs(g, a, a, weights);
  }
}

// RMSNormalization read only by the group, at a decoding step's few rows: the norm becomes the
// group's prologue (CUDA normalizes as it reads A); at more rows, or where a width keeps CUDA's
// one launch out, the norm stays a node. Every output matches the reference either way, also with
// 16-bit storage (CUDA's --precision float16: the members' way, A and gamma in float16).
TEST(GroupMatMuls, RmsNormPrologueAtFewRows) {
  LUMEN_SKIP_WITHOUT_BACKENDS();
  struct Case {
    std::vector<int64_t> a;
    std::vector<int64_t> n;
    bool prologue;
  };
  const std::vector<Case> cases = {{{1, 1, 64}, {64, 16, 16}, true},
                                   {{1, 3, 1000}, {256, 128}, true},
                                   {{12, 64}, {32, 32}, false},
                                   {{1, 1, 32}, {30, 64}, false}};
  uint64_t seed = 1200;
  const float eps = 1e-6f;
  for (const Case& c : cases) {
    SCOPED_TRACE(Shape(c.a).to_string() + " x " + std::to_string(c.n.size()) + " weights");
    const int64_t k = c.a.back();
    const Tensor gamma = test::random_tensor({k}, seed++, 0.5, 1.5);
    std::vector<Tensor> weights;
    for (int64_t n : c.n) weights.push_back(test::random_tensor({k, n}, seed++, -1, 1));
    // The graph, optimized for CUDA and the host (a compile rewrites it: one per precision).
    const auto build = [&](Graph& g) {
      Value* x = g.add_input("x", Shape(c.a));
      Value* normed =
          g.add_op("RMSNormalization", {x, g.add_constant("gamma", gamma)}, {{"epsilon", eps}});
      for (size_t i = 0; i < weights.size(); ++i)
        g.mark_output(g.add_op("MatMul",
                               {normed, g.add_constant("w" + std::to_string(i), weights[i])}, {},
                               i == 0 ? "q" : ""));
      g.optimize({"cuda", "cpu"});
    };
    Graph g;
    build(g);
    ASSERT_EQ(test::count_ops(g, "GroupedMatMul"), 1);
    EXPECT_EQ(test::count_ops(g, "RMSNormalization"), c.prologue ? 0 : 1);
    // The reference: A normalized in double, then each product.
    Tensor a = test::random_tensor(Shape(c.a), seed++, -2, 2);
    const std::vector<double> av = test::to_doubles(a), gv = test::to_doubles(gamma);
    std::vector<float> nv(av.size());
    for (size_t r = 0; r < av.size() / static_cast<size_t>(k); ++r) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += av[r * k + i] * av[r * k + i];
      const double inv = 1 / std::sqrt(sum / static_cast<double>(k) + eps);
      for (int64_t i = 0; i < k; ++i)
        nv[r * k + i] = static_cast<float>(av[r * k + i] * inv * gv[i]);
    }
    const Tensor normalized = Tensor::from_vector<float>(Shape(c.a), nv);
    check_outputs(g, a, normalized, weights);
    SCOPED_TRACE("float16 storage");
    Graph half;
    build(half);
    check_outputs(half, a, normalized, weights, Precision::kFloat16);
  }
}

TEST(GroupMatMuls, BadGroupsAreRejected) {
  Graph g;
  Value* x = g.add_input("x", {2, 16});
  Value* w = g.add_constant("w", test::random_tensor({16, 8}, 1100));
  Value* bad_k = g.add_constant("bad_k", test::random_tensor({12, 8}, 1101));
  Value* bad_rank = g.add_constant("bad_rank", test::random_tensor({2, 16, 8}, 1102));
  EXPECT_THROW(g.add_op("GroupedMatMul", {x, w, bad_k}, 2), ShapeError);
  EXPECT_THROW(g.add_op("GroupedMatMul", {x, w, bad_rank}, 2), ShapeError);
  EXPECT_THROW(g.add_op("GroupedMatMul", {x, w, w}, 3), Error);
  EXPECT_THROW(g.add_op("GroupedMatMul", {x, w}, 1), Error);
  Value* gamma = g.add_constant("gamma", test::random_tensor({16}, 1103));
  Value* bad_gamma = g.add_constant("bad_gamma", test::random_tensor({8}, 1104));
  const Attributes norm = {{"rms_norm_epsilon", 1e-5f}};
  EXPECT_NO_THROW(g.add_op("GroupedMatMul", {x, w, w, gamma}, 2, norm));
  EXPECT_THROW(g.add_op("GroupedMatMul", {x, w, w, bad_gamma}, 2, norm), ShapeError);
  EXPECT_THROW(g.add_op("GroupedMatMul", {x, w, w}, 2, norm), Error);  // gamma missing
  EXPECT_THROW(g.add_op("GroupedMatMul", {x, w, w, gamma}, 2, {{"rms_norm_epsilon", -1.0f}}),
               Error);
}

}  // namespace
}  // namespace lumen
