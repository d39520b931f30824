// The fold-kv-group pass and FusedAttention's kv_group: Llama's grouped-query attention (key and
// value heads repeated by Unsqueeze, Expand and Reshape before the attention) loses its repetition
// where the attention stays a FusedAttention (a decoding step among CUDA's backends), and runs on
// the backends of --lumen-backends against a double-precision reference on random data.
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

struct Gqa {
  int64_t batch, heads, kv_heads, sq, sk, depth;
};

Value* ints(Graph& g, const std::vector<int64_t>& v) {
  return g.add_constant(g.unique_name("c"),
                        Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v));
}

// repeat_kv as exported: x [B, Hk, S, D] -> Unsqueeze [B, Hk, 1, S, D] -> Expand [B, Hk, G, S, D]
// -> Reshape [B, H, S, D].
Value* repeat_kv(Graph& g, Value* x, const Gqa& c) {
  const int64_t group = c.heads / c.kv_heads;
  Value* u = g.add_op("Unsqueeze", {x, ints(g, {2})});
  Value* e = g.add_op("Expand", {u, ints(g, {c.batch, c.kv_heads, group, c.sk, c.depth})});
  return g.add_op("Reshape", {e, ints(g, {c.batch, c.heads, c.sk, c.depth})});
}

// softmax(Q K^T / sqrt(D) + mask) V with Q [B, H, Sq, D], K and V [B, Hk, S, D] repeated to H
// heads, mask [B, 1, 1, S].
void build(Graph& g, const Gqa& c) {
  Value* q = g.add_input("q", {c.batch, c.heads, c.sq, c.depth});
  Value* k = repeat_kv(g, g.add_input("k", {c.batch, c.kv_heads, c.sk, c.depth}), c);
  Value* v = repeat_kv(g, g.add_input("v", {c.batch, c.kv_heads, c.sk, c.depth}), c);
  Value* mask = g.add_input("mask", {c.batch, 1, 1, c.sk});
  Value* kt = g.add_op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value* scale = g.add_constant(
      "scale", Tensor::scalar<float>(1.0f / std::sqrt(static_cast<float>(c.depth))));
  Value* scores = g.add_op("Add", {g.add_op("Mul", {g.add_op("MatMul", {q, kt}), scale}), mask});
  g.mark_output(
      g.add_op("MatMul", {g.add_op("Softmax", {scores}, {{"axis", int64_t{-1}}}), v}));
}

std::vector<double> reference(const Gqa& c, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& mask) {
  const std::vector<double> qd = test::to_doubles(q), kd = test::to_doubles(k),
                            vd = test::to_doubles(v), md = test::to_doubles(mask);
  const int64_t group = c.heads / c.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.depth));
  std::vector<double> y(static_cast<size_t>(c.batch * c.heads * c.sq * c.depth));
  std::vector<double> s(static_cast<size_t>(c.sk));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t kvh = h / group;
      const double* kb = kd.data() + (b * c.kv_heads + kvh) * c.sk * c.depth;
      const double* vb = vd.data() + (b * c.kv_heads + kvh) * c.sk * c.depth;
      for (int64_t i = 0; i < c.sq; ++i) {
        const double* qr = qd.data() + ((b * c.heads + h) * c.sq + i) * c.depth;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < c.sk; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < c.depth; ++d) acc += qr[d] * kb[j * c.depth + d];
          s[j] = acc * scale + md[b * c.sk + j];
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j < c.sk; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t d = 0; d < c.depth; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < c.sk; ++j) acc += s[j] / sum * vb[j * c.depth + d];
          y[((b * c.heads + h) * c.sq + i) * c.depth + d] = acc;
        }
      }
    }
  return y;
}

// Decoding steps (1 and 3 query rows), a batch of 2, multi-query (one kv head) and several key
// tiles: the repetition goes, the attention reads kv_group, and every output matches.
TEST(FoldKvGroup, GroupedQueryAttentionReadsUnrepeatedHeads) {
  LUMEN_SKIP_WITHOUT_BACKENDS();
  const std::vector<Gqa> cases = {{1, 8, 2, 1, 37, 64},
                                  {2, 4, 1, 3, 70, 32},
                                  {1, 16, 4, 1, 129, 64},
                                  {2, 6, 3, 2, 300, 16}};
  uint64_t seed = 700;
  for (const Gqa& c : cases) {
    SCOPED_TRACE("batch " + std::to_string(c.batch) + ", heads " + std::to_string(c.heads) + "/" +
                 std::to_string(c.kv_heads) + ", rows " + std::to_string(c.sq) + ", keys " +
                 std::to_string(c.sk) + ", depth " + std::to_string(c.depth));
    Graph graph;
    build(graph, c);
    graph.optimize({"cuda", "cpu"});
    const std::map<std::string, int> ops = op_histogram(graph);
    EXPECT_EQ(ops.count("Expand"), 0u);
    ASSERT_EQ(ops.count("FusedAttention"), 1u);
    for (int id : graph.topological_order())
      if (graph.node(id).op == OpKind::kFusedAttention)
        EXPECT_EQ(graph.node(id).attrs.at("kv_group").as_int(), c.heads / c.kv_heads);
    Tensor q = test::random_tensor({c.batch, c.heads, c.sq, c.depth}, seed++, -1, 1);
    Tensor k = test::random_tensor({c.batch, c.kv_heads, c.sk, c.depth}, seed++, -1, 1);
    Tensor v = test::random_tensor({c.batch, c.kv_heads, c.sk, c.depth}, seed++, -1, 1);
    Tensor mask = test::random_tensor({c.batch, 1, 1, c.sk}, seed++, -2, 0);
    Runtime rt;
    CompileOptions options;
    options.backends = test::run_op_backends();
    Executable* exe = graph.compile(&rt, options);
    const Tensor got = exe->execute(std::vector<Tensor>{q, k, v, mask})[0];
    test::expect_close(got, {c.batch, c.heads, c.sq, c.depth}, reference(c, q, k, v, mask), 1e-5,
                       1e-4);
  }
}

// Where the attention becomes a StridedAttention (the CPU alone) or K and V repeat differently,
// the repetition stays and the results still match.
TEST(FoldKvGroup, OtherFormsKeepTheirRepetition) {
  const Gqa c{1, 8, 2, 1, 20, 16};
  Graph graph;
  build(graph, c);
  graph.optimize();
  EXPECT_EQ(op_histogram(graph).count("FusedAttention"), 0u);
  Tensor q = test::random_tensor({1, 8, 1, 16}, 800, -1, 1);
  Tensor k = test::random_tensor({1, 2, 20, 16}, 801, -1, 1);
  Tensor v = test::random_tensor({1, 2, 20, 16}, 802, -1, 1);
  Tensor mask = test::random_tensor({1, 1, 1, 20}, 803, -2, 0);
  Runtime rt;
  const Tensor got = graph.compile(&rt)->execute(std::vector<Tensor>{q, k, v, mask})[0];
  test::expect_close(got, {1, 8, 1, 16}, reference(c, q, k, v, mask), 1e-5, 1e-4);
}

// FusedAttention's schema: kv_group must divide Q's heads and K's and V's heads must be Q's over it.
TEST(FoldKvGroup, BadKvGroupIsAShapeError) {
  for (int64_t group : {3, 2, 0}) {
    SCOPED_TRACE("kv_group " + std::to_string(group));
    Graph g;
    Value* q = g.add_input("q", {1, 8, 1, 16});
    Value* k = g.add_input("k", {1, 2, 5, 16});
    Value* v = g.add_input("v", {1, 2, 5, 16});
    EXPECT_THROW(g.add_op("FusedAttention", {q, k, v},
                          {{"scale", 0.25f}, {"kv_group", int64_t{group}}}),
                 Error);
  }
}

}  // namespace
}  // namespace lumen
