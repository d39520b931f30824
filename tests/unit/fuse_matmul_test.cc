// The fuse-matmul and fold-transpose passes and the FusedMatMul kernel: the rewritten graphs hold
// the expected ops and give the numbers of a naive double-precision matmul + bias + activation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using Act = std::function<double(double)>;

double identity(double v) {
  return v;
}

// act(op(A) x op(B) + bias) for A [batch, m, k] (or [batch, k, m] when trans_a) and B [k, n] (or
// [n, k]) shared by every batch, or B [batch, k, n] (or [batch, n, k]).
std::vector<double> reference(const Tensor& a, const Tensor& b, const Tensor* bias, bool trans_a,
                              bool trans_b, const Act& act) {
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  int64_t m = trans_a ? as[-1] : as[-2], k = trans_a ? as[-2] : as[-1];
  int64_t n = trans_b ? bs[-2] : bs[-1];
  int64_t batch = a.numel() / (m * k);
  bool b_batched = bs.rank() > 2;
  std::vector<double> av = test::to_doubles(a), bv = test::to_doubles(b);
  std::vector<double> cv = bias ? test::to_doubles(*bias) : std::vector<double>(n, 0.0);
  std::vector<double> y(static_cast<size_t>(batch * m * n));
  for (int64_t t = 0; t < batch; ++t) {
    const double* ap = av.data() + t * m * k;
    const double* bp = bv.data() + (b_batched ? t * k * n : 0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = cv[j];
        for (int64_t p = 0; p < k; ++p)
          acc +=
              (trans_a ? ap[p * m + i] : ap[i * k + p]) * (trans_b ? bp[j * k + p] : bp[p * n + j]);
        y[(t * m + i) * n + j] = act(acc);
      }
  }
  return y;
}

std::map<std::string, int> ops_of(const Graph& graph) {
  std::map<std::string, int> ops;
  for (int id : graph.topological_order()) ++ops[op_name(graph.node(id).op)];
  return ops;
}

struct Case {
  const char* op;
  Attributes attrs;
  std::vector<float> bounds;  // Clip's min and max inputs
  Act f;
};

std::vector<Case> cases() {
  return {
      {"Relu", {}, {}, [](double v) { return std::max(v, 0.0); }},
      {"LeakyRelu", {{"alpha", 0.2f}}, {}, [](double v) { return v > 0 ? v : 0.2 * v; }},
      {"Clip", {}, {0.0f, 6.0f}, [](double v) { return std::min(std::max(v, 0.0), 6.0); }},
      {"Clip", {}, {-0.5f, 0.75f}, [](double v) { return std::min(std::max(v, -0.5), 0.75); }},
      {"Sigmoid", {}, {}, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"Tanh", {}, {}, [](double v) { return std::tanh(v); }},
      {"HardSwish", {}, {}, [](double v) { return v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0); }},
      {"Gelu", {}, {}, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"Gelu",
       {{"approximate", "tanh"}},
       {},
       [](double v) {
         return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
       }},
  };
}

Value* add_activation(Graph& graph, const Case& c, Value* y) {
  std::vector<Value*> in = {y};
  for (size_t k = 0; k < c.bounds.size(); ++k)
    in.push_back(
        graph.add_constant(graph.unique_name("bound"), Tensor::scalar<float>(c.bounds[k])));
  return graph.add_op(c.op, in, c.attrs);
}

TEST(FuseMatMul, MatMulBiasActivationIsOneFusedMatMul) {
  Tensor x = test::random_tensor({2, 3, 7}, 1, -2, 2);
  Tensor w = test::random_tensor({7, 5}, 2, -1, 1);
  Tensor b = test::random_tensor({5}, 3, -1, 1);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.op);
    Graph graph;
    Value* in = graph.add_input("x", x.shape());
    Value* y = graph.add_op("MatMul", {in, graph.add_constant("w", w)});
    y = graph.add_op("Add", {graph.add_constant("b", b), y});  // bias first: either order fuses
    graph.mark_output(add_activation(graph, c, y));
    graph.optimize();
    EXPECT_EQ(ops_of(graph), (std::map<std::string, int>{{"FusedMatMul", 1}}));
    Runtime rt;
    test::expect_close(graph.compile(&rt)->execute({x})[0], {2, 3, 5},
                       reference(x, w, &b, false, false, c.f), 1e-5, 1e-4);
  }
}

TEST(FuseMatMul, BiasAloneAndRowShapedBiasFuse) {
  Tensor x = test::random_tensor({4, 6}, 4, -2, 2);
  Tensor w = test::random_tensor({6, 3}, 5, -1, 1);
  Tensor b = test::random_tensor({1, 3}, 6, -1, 1);
  Graph graph;
  Value* in = graph.add_input("x", x.shape());
  Value* y = graph.add_op("MatMul", {in, graph.add_constant("w", w)});
  graph.mark_output(graph.add_op("Add", {y, graph.add_constant("b", b)}));
  graph.optimize();
  EXPECT_EQ(ops_of(graph), (std::map<std::string, int>{{"FusedMatMul", 1}}));
  Runtime rt;
  test::expect_close(graph.compile(&rt)->execute({x})[0], {4, 3},
                     reference(x, w, &b, false, false, identity), 1e-5, 1e-4);
}

TEST(FuseMatMul, GemmWithActivationIsOneFusedMatMul) {
  Tensor x = test::random_tensor({5, 8}, 7, -2, 2);
  Tensor w = test::random_tensor({6, 8}, 8, -1, 1);  // transB = 1, as torch's Linear exports
  Tensor b = test::random_tensor({6}, 9, -1, 1);
  Tensor b_row = test::random_tensor({1, 6}, 10, -1, 1);
  for (const Tensor* bias : std::vector<const Tensor*>{&b, &b_row, nullptr})
    for (const Case& c : cases()) {
      SCOPED_TRACE(std::string(c.op) +
                   (bias ? " bias rank " + std::to_string(bias->shape().rank()) : " no bias"));
      Graph graph;
      Value* in = graph.add_input("x", x.shape());
      std::vector<Value*> gemm_in = {in, graph.add_constant("w", w)};
      if (bias) gemm_in.push_back(graph.add_constant("b", *bias));
      Value* y = graph.add_op("Gemm", gemm_in, {{"transB", int64_t{1}}});
      graph.mark_output(add_activation(graph, c, y));
      graph.optimize();
      EXPECT_EQ(ops_of(graph), (std::map<std::string, int>{{"FusedMatMul", 1}}));
      Runtime rt;
      test::expect_close(graph.compile(&rt)->execute({x})[0], {5, 6},
                         reference(x, w, bias, false, true, c.f), 1e-5, 1e-4);
    }
}

TEST(FuseMatMul, GemmThatFusedMatMulCannotExpressStays) {
  Graph graph;
  Value* in = graph.add_input("x", {3, 4});
  Value* w = graph.add_constant("w", test::random_tensor({4, 2}, 11));
  Value* c = graph.add_constant("c", test::random_tensor({3, 2}, 12));  // not a row: no bias
  graph.mark_output(graph.add_op("Relu", {graph.add_op("Gemm", {in, w, c})}));
  Value* in2 = graph.add_input("x2", {3, 4});
  graph.mark_output(graph.add_op("Relu", {graph.add_op("Gemm", {in2, w}, {{"alpha", 0.5f}})}));
  graph.optimize();
  EXPECT_EQ(ops_of(graph), (std::map<std::string, int>{{"Gemm", 2}, {"Relu", 2}}));
}

TEST(FuseMatMul, MatMulReadTwiceOrAddOfComputedValueIsNotFused) {
  Graph graph;
  Value* in = graph.add_input("x", {3, 4});
  Value* w = graph.add_constant("w", test::random_tensor({4, 4}, 13));
  Value* y = graph.add_op("MatMul", {in, w});
  graph.mark_output(graph.add_op("Relu", {y}));
  graph.mark_output(graph.add_op("Neg", {y}));
  Value* z =
      graph.add_op("MatMul", {in, graph.add_constant("w2", test::random_tensor({4, 4}, 22))});
  graph.mark_output(graph.add_op("Add", {z, graph.add_op("Exp", {in})}));  // a residual, not a bias
  graph.optimize();
  std::map<std::string, int> ops = ops_of(graph);
  EXPECT_EQ(ops["MatMul"], 1);  // read twice
  // The Add of a computed value is a residual (fuse-residual): a FusedMatMul without a bias.
  ASSERT_EQ(ops["FusedMatMul"], 1);
  EXPECT_EQ(ops["Add"], 0);
  for (int id : graph.topological_order()) {
    const Node& n = graph.node(id);
    if (n.op != OpKind::kFusedMatMul) continue;
    ASSERT_EQ(n.inputs.size(), 4u);
    EXPECT_LT(n.inputs[2], 0);
    EXPECT_GE(n.inputs[3], 0);
  }
}

// Compiles and runs `graph` on `inputs` at this CPU's kernel level and at the baseline (the packed
// GEMM or oneDNN, by level), checking output 0 against `want` each time.
void expect_at_both_isas(Graph& graph, const std::vector<Tensor>& inputs, const Shape& shape,
                         const std::vector<double>& want) {
  const CpuIsa before = cpu_isa();
  for (CpuIsa level : {before, CpuIsa::kBaseline}) {
    SCOPED_TRACE(cpu_isa_name(level));
    set_cpu_isa_limit(level);
    Runtime rt;
    Tensor got = graph.compile(&rt)->execute(inputs)[0];
    test::expect_close(got, shape, want, 1e-5, 1e-4);
  }
  set_cpu_isa_limit(before);
}

// A transformer's residual: MatMul + bias, then + Z, then an activation, becomes one FusedMatMul
// with Z as its fourth input (fuse-residual), on the packed GEMM (AVX2) and on oneDNN's sum
// post-op (below AVX2 here; AVX-512 machines take it too), with Z dying there (Y written over it)
// and with Z a graph input (copied into Y first).
TEST(FuseResidual, MatMulBiasAddReluIsOneFusedMatMul) {
  Tensor x = test::random_tensor({2, 5, 16}, 40, -1, 1);
  Tensor w = test::random_tensor({16, 24}, 41, -1, 1);
  Tensor b = test::random_tensor({24}, 42, -1, 1);
  Tensor z = test::random_tensor({2, 5, 24}, 43, -1, 1);
  const std::vector<double> product =
      reference(x, w, &b, false, false, identity);  // op(A) x op(B) + bias
  const std::vector<double> zs = test::to_doubles(z);
  for (bool z_dies : {true, false}) {
    SCOPED_TRACE(z_dies ? "Z computed, dying at the Add" : "Z a graph input");
    Graph graph;
    Value* in = graph.add_input("x", x.shape());
    Value* zin = graph.add_input("z", z.shape());
    Value* zv = z_dies ? graph.add_op("Neg", {graph.add_op("Neg", {zin})}) : zin;
    Value* y = graph.add_op("Add", {graph.add_op("MatMul", {in, graph.add_constant("w", w)}),
                                    graph.add_constant("b", b)});
    graph.mark_output(graph.add_op("Relu", {graph.add_op("Add", {y, zv})}));
    graph.optimize();
    std::map<std::string, int> ops = ops_of(graph);
    EXPECT_EQ(ops["FusedMatMul"], 1);
    EXPECT_EQ(ops["Add"], 0);
    EXPECT_EQ(ops["Relu"], 0);
    std::vector<double> want(product.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, product[i] + zs[i]);
    expect_at_both_isas(graph, {x, z}, {2, 5, 24}, want);
  }
}

// Llama's residuals: a MatMul without a bias, + Z. The MatMul becomes a FusedMatMul with no bias
// and Z as its fourth input, on every CPU kernel (the packed GEMM, oneDNN's sum post-op, the
// one-row and one-column paths), against a double-precision reference on random data.
TEST(FuseResidual, MatMulWithoutBiasTakesTheResidual) {
  struct Shapes {
    std::vector<int64_t> x, w;
  };
  const std::vector<Shapes> shapes = {
      {{2, 5, 16}, {16, 24}}, {{1, 1, 64}, {64, 96}}, {{3, 40}, {40, 1}}, {{1, 7, 33}, {33, 20}}};
  int seed = 60;
  for (const Shapes& sh : shapes) {
    Tensor x = test::random_tensor(Shape(sh.x), seed++, -1, 1);
    Tensor w = test::random_tensor(Shape(sh.w), seed++, -1, 1);
    std::vector<int64_t> ys = sh.x;
    ys.back() = sh.w.back();
    Tensor z = test::random_tensor(Shape(ys), seed++, -1, 1);
    const std::vector<double> product = reference(x, w, nullptr, false, false, identity);
    const std::vector<double> zs = test::to_doubles(z);
    std::vector<double> want(product.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = product[i] + zs[i];
    for (bool z_first : {false, true}) {
      SCOPED_TRACE(x.shape().to_string() + " x " + w.shape().to_string() +
                   (z_first ? ", Add(Z, Y)" : ", Add(Y, Z)"));
      Graph graph;
      Value* in = graph.add_input("x", x.shape());
      Value* zv = graph.add_op("Neg", {graph.add_op("Neg", {graph.add_input("z", z.shape())})});
      Value* y = graph.add_op("MatMul", {in, graph.add_constant("w", w)});
      graph.mark_output(
          graph.add_op("Add", z_first ? std::vector<Value*>{zv, y} : std::vector<Value*>{y, zv}));
      graph.optimize();
      std::map<std::string, int> ops = ops_of(graph);
      EXPECT_EQ(ops["FusedMatMul"], 1);
      EXPECT_EQ(ops["MatMul"], 0);
      EXPECT_EQ(ops["Add"], 0);
      expect_at_both_isas(graph, {x, z}, Shape(ys), want);
    }
  }
}

// A transformer's output projection in [S, N, E] layout: Gemm(x [S N, E], W^T) + bias, Reshaped
// to [S, N, E], + Z. The Gemm becomes a FusedMatMul with Z (reshaped to [S N, E], a view) as its
// fourth input; the Reshape stays, the Add goes.
TEST(FuseResidual, GemmReshapedBeforeTheResidualAddTakesIt) {
  Tensor x = test::random_tensor({10, 16}, 46, -1, 1);
  Tensor w = test::random_tensor({24, 16}, 47, -1, 1);  // [N, K]: transB
  Tensor b = test::random_tensor({24}, 48, -1, 1);
  Tensor z = test::random_tensor({5, 2, 24}, 49, -1, 1);
  const std::vector<double> product = reference(x, w, &b, false, true, identity);
  const std::vector<double> zs = test::to_doubles(z);
  for (bool z_dies : {true, false}) {
    SCOPED_TRACE(z_dies ? "Z computed, dying at the Add" : "Z a graph input");
    Graph graph;
    Value* in = graph.add_input("x", x.shape());
    Value* zin = graph.add_input("z", z.shape());
    Value* zv = z_dies ? graph.add_op("Neg", {graph.add_op("Neg", {zin})}) : zin;
    Value* y = graph.add_op("Gemm", {in, graph.add_constant("w", w), graph.add_constant("b", b)},
                            {{"transB", int64_t{1}}});
    Value* shape = graph.add_constant("shape", Tensor::from_vector<int64_t>({3}, {5, 2, 24}));
    graph.mark_output(graph.add_op("Add", {zv, graph.add_op("Reshape", {y, shape})}));
    graph.optimize();
    std::map<std::string, int> ops = ops_of(graph);
    EXPECT_EQ(ops["FusedMatMul"], 1);
    EXPECT_EQ(ops["Gemm"], 0);
    EXPECT_EQ(ops["Add"], 0);
    std::vector<double> want(product.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = product[i] + zs[i];
    Runtime rt;
    Tensor got = graph.compile(&rt)->execute(std::vector<Tensor>{x, z})[0];
    test::expect_close(got, {5, 2, 24}, want, 1e-5, 1e-4);
  }
}

// The residual is fused where every backend of the graph adds a FusedMatMul's Z (the CPU, Vulkan
// and CUDA), and stays an Add where one does not (the null backend of the router's tests).
TEST(FuseResidual, MatMulResidualFusesForEveryBackendThatAddsIt) {
  const std::vector<std::vector<std::string>> cases = {
      {"cuda"}, {"cuda", "cpu"}, {"vulkan", "cpu"}, {"null", "cpu"}};
  for (const std::vector<std::string>& backends : cases) {
    SCOPED_TRACE(backends[0]);
    Graph graph;
    Value* in = graph.add_input("x", {2, 5, 16});
    Value* y = graph.add_op(
        "Add",
        {graph.add_op("MatMul", {in, graph.add_constant("w", test::random_tensor({16, 24}, 50))}),
         graph.add_constant("b", test::random_tensor({24}, 51))});
    graph.mark_output(graph.add_op("Add", {y, graph.add_input("z", {2, 5, 24})}));
    graph.optimize(backends);
    std::map<std::string, int> ops = ops_of(graph);
    EXPECT_EQ(ops["FusedMatMul"], 1);
    EXPECT_EQ(ops["Add"], backends[0] == "null" ? 1 : 0);
  }
}

// Z must be shaped like Y: a residual that broadcasts stays an Add.
TEST(FuseResidual, MatMulResidualThatBroadcastsIsNotFused) {
  Graph graph;
  Value* in = graph.add_input("x", {2, 5, 16});
  Value* y = graph.add_op(
      "Add",
      {graph.add_op("MatMul", {in, graph.add_constant("w", test::random_tensor({16, 24}, 44))}),
       graph.add_constant("b", test::random_tensor({24}, 45))});
  graph.mark_output(graph.add_op("Add", {y, graph.add_input("z", {5, 24})}));
  graph.optimize();
  std::map<std::string, int> ops = ops_of(graph);
  EXPECT_EQ(ops["FusedMatMul"], 1);
  EXPECT_EQ(ops["Add"], 1);
}

TEST(FoldTranspose, AttentionKeyTransposeIsReadTransposed) {
  Tensor q = test::random_tensor({2, 3, 4, 5}, 14, -1, 1);
  Tensor k = test::random_tensor({2, 3, 6, 5}, 15, -1, 1);
  Graph graph;
  Value* qv = graph.add_input("q", q.shape());
  Value* kv = graph.add_input("k", k.shape());
  Value* kt = graph.add_op("Transpose", {kv}, {{"perm", {0, 1, 3, 2}}});
  graph.mark_output(graph.add_op("MatMul", {qv, kt}));
  graph.optimize();
  EXPECT_EQ(ops_of(graph), (std::map<std::string, int>{{"FusedMatMul", 1}}));
  Runtime rt;
  Tensor got = graph.compile(&rt)->execute(std::vector<Tensor>{q, k})[0];
  test::expect_close(
      got, {2, 3, 4, 6},
      reference(q.reshape({6, 4, 5}), k.reshape({6, 6, 5}), nullptr, false, true, identity), 1e-5,
      1e-4);
}

TEST(FoldTranspose, TransposedLeftOperandWithBiasAndRelu) {
  Tensor a = test::random_tensor({3, 7, 4}, 16, -1, 1);  // read as [3, 4, 7]
  Tensor w = test::random_tensor({7, 5}, 17, -1, 1);
  Tensor b = test::random_tensor({5}, 18, -1, 1);
  Graph graph;
  Value* av = graph.add_input("a", a.shape());
  Value* at = graph.add_op("Transpose", {av}, {{"perm", {0, 2, 1}}});
  Value* y = graph.add_op("MatMul", {at, graph.add_constant("w", w)});
  graph.mark_output(graph.add_op("Relu", {graph.add_op("Add", {y, graph.add_constant("b", b)})}));
  graph.optimize();
  EXPECT_EQ(ops_of(graph), (std::map<std::string, int>{{"FusedMatMul", 1}}));
  Runtime rt;
  test::expect_close(graph.compile(&rt)->execute({a})[0], {3, 4, 5},
                     reference(a, w, &b, true, false, [](double v) { return std::max(v, 0.0); }),
                     1e-5, 1e-4);
}

TEST(FoldTranspose, TransposeAlsoReadElsewhereStays) {
  Graph graph;
  Value* a = graph.add_input("a", {4, 3});
  Value* at = graph.add_op("Transpose", {a}, {{"perm", {1, 0}}});
  graph.mark_output(graph.add_op("MatMul", {at, a}));
  graph.mark_output(graph.add_op("Neg", {at}));
  Value* b = graph.add_input("b", {2, 4, 3});
  Value* c = graph.add_input("c", {3, 5});
  graph.mark_output(
      graph.add_op("MatMul", {graph.add_op("Transpose", {b}, {{"perm", {1, 0, 2}}}), c}));
  graph.optimize();
  std::map<std::string, int> ops = ops_of(graph);
  EXPECT_EQ(ops["FusedMatMul"], 1);
  EXPECT_EQ(ops["Transpose"], 2);  // read by Neg; and a perm that is not a last-two swap
  EXPECT_EQ(ops["MatMul"], 1);
}

// FusedMatMul built directly: the activations no ONNX op pattern produces here yet (GELU, SiLU),
// and a B with its own batch.
TEST(FusedMatMulKernel, GeluAndSwishEpiloguesWithBatchedB) {
  Tensor a = test::random_tensor({2, 3, 4}, 19, -2, 2);
  Tensor b = test::random_tensor({2, 6, 4}, 20, -1, 1);  // trans_b
  Tensor c = test::random_tensor({6}, 21, -1, 1);
  std::map<std::string, Act> acts = {
      {"GeluErf", [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"GeluTanh",
       [](double v) {
         return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
       }},
      {"Swish", [](double v) { return v / (1 + std::exp(-v)); }},
  };
  for (const auto& [name, f] : acts) {
    SCOPED_TRACE(name);
    Graph graph;
    Value* av = graph.add_input("a", a.shape());
    Value* bv = graph.add_input("b", b.shape());
    graph.mark_output(graph.add_op("FusedMatMul", {av, bv, graph.add_constant("c", c)},
                                   {{"trans_b", int64_t{1}}, {"activation", name}}));
    Runtime rt;
    test::expect_close(graph.compile(&rt)->execute(std::vector<Tensor>{a, b})[0], {2, 3, 6},
                       reference(a, b, &c, false, true, f), 1e-5, 1e-4);
  }
}

// One FusedMatMul of A, B (a constant, or an input when !constant_b), bias C and, with `residual`,
// Z, with activation `name` (f in doubles), checked against the reference.
void check_fused_matmul(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& z,
                        bool constant_b, bool trans_b, bool residual, const std::string& name,
                        const Act& f, double atol) {
  Graph graph;
  std::vector<Value*> in = {
      graph.add_input("a", a.shape()),
      constant_b ? graph.add_constant("b", b) : graph.add_input("b", b.shape()),
      graph.add_constant("c", c)};
  if (residual) in.push_back(graph.add_input("z", z.shape()));
  graph.mark_output(graph.add_op("FusedMatMul", in,
                                 {{"trans_b", int64_t{trans_b ? 1 : 0}}, {"activation", name}}));
  std::vector<double> want = reference(a, b, &c, false, trans_b, identity);
  const std::vector<double> zs = test::to_doubles(z);
  for (size_t i = 0; i < want.size(); ++i) want[i] = f(want[i] + (residual ? zs[i] : 0));
  Runtime rt;
  std::vector<Tensor> inputs = {a};
  if (!constant_b) inputs.push_back(b);
  if (residual) inputs.push_back(z);
  test::expect_close(graph.compile(&rt)->execute(inputs)[0], z.shape(), want, atol, 1e-4);
}

// Constant weights run on packed_gemm or oneDNN (kernel_choice.h): each forced in turn, and
// measured, with and without a bias, a residual and B transposed, over tile edges of both GEMMs.
TEST(FusedMatMulKernel, ConstantWeightsOnEitherGemm) {
  const std::map<std::string, Act> acts = {
      {"", identity},
      {"Relu", [](double v) { return std::max(v, 0.0); }},
      {"GeluErf", [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
  };
  struct Dims3 {
    int64_t m, k, n;
  };
  uint64_t seed = 300;
  for (CpuKernelChoice pick :
       {CpuKernelChoice::kLumen, CpuKernelChoice::kOneDnn, CpuKernelChoice::kMeasure}) {
    set_cpu_kernel_choice(pick);
    SCOPED_TRACE(::testing::Message() << "pick " << static_cast<int>(pick));
    for (Dims3 d : {Dims3{7, 40, 48}, Dims3{130, 64, 100}, Dims3{1, 300, 70}})
      for (bool trans_b : {false, true})
        for (bool residual : {false, true})
          for (const auto& [name, f] : acts) {
            SCOPED_TRACE(::testing::Message()
                         << d.m << "x" << d.k << "x" << d.n << " " << name
                         << (trans_b ? " B^T" : "") << (residual ? " residual" : ""));
            Tensor a = test::random_tensor({d.m, d.k}, ++seed, -1, 1);
            Tensor b =
                test::random_tensor(trans_b ? Shape{d.n, d.k} : Shape{d.k, d.n}, ++seed, -1, 1);
            Tensor c = test::random_tensor({d.n}, ++seed, -1, 1);
            Tensor z = test::random_tensor({d.m, d.n}, ++seed, -1, 1);
            check_fused_matmul(a, b, c, z, true, trans_b, residual, name, f, 1e-5);
          }
  }
  set_cpu_kernel_choice(CpuKernelChoice::kMeasure);
}

// One output column runs as a matrix-vector product (gemv.h): A with a batch folded into its rows,
// rows past one call's block (1,024), rows split over threads when few and long; B constant or an
// input, [k, 1] or [1, k]; with a bias, a residual and an activation.
TEST(FusedMatMulKernel, OneOutputColumnIsAMatrixVector) {
  const std::map<std::string, Act> acts = {
      {"", identity},
      {"Sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"Relu", [](double v) { return std::max(v, 0.0); }},
  };
  uint64_t seed = 700;
  for (const Shape& as : {Shape{2, 3, 9000}, Shape{1100, 70}, Shape{4, 1}})
    for (bool constant_b : {true, false})
      for (bool trans_b : {false, true})
        for (bool residual : {false, true})
          for (const auto& [name, f] : acts) {
            SCOPED_TRACE(::testing::Message()
                         << as.to_string() << " " << name << (constant_b ? " constant" : "")
                         << (trans_b ? " B^T" : "") << (residual ? " residual" : ""));
            const int64_t k = as[-1];
            Shape ys = as;
            ys.dims().back() = 1;
            Tensor a = test::random_tensor(as, ++seed, -1, 1);
            Tensor b = test::random_tensor(trans_b ? Shape{1, k} : Shape{k, 1}, ++seed, -1, 1);
            Tensor c = test::random_tensor({1}, ++seed, -1, 1);
            Tensor z = test::random_tensor(ys, ++seed, -1, 1);
            // k = 9000 float products: an absolute error of 1e-5 per thousand terms.
            check_fused_matmul(a, b, c, z, constant_b, trans_b, residual, name, f, 2e-4);
          }
}

TEST(FusedMatMulKernel, BadNodesAreRejected) {
  Graph graph;
  Value* a = graph.add_input("a", {3, 4});
  Value* b = graph.add_input("b", {4, 5});
  Value* v = graph.add_input("v", {4});
  Value* i = graph.add_input("i", {3, 4}, DType::kInt64);
  EXPECT_THROW(graph.add_op("FusedMatMul", {a, b}, {{"activation", "Softmax"}}), InvalidModel);
  EXPECT_THROW(graph.add_op("FusedMatMul", {a, b}, {{"trans_a", int64_t{2}}}), InvalidModel);
  EXPECT_THROW(graph.add_op("FusedMatMul", {a, b, v}), ShapeError);  // bias is not [5]
  EXPECT_THROW(graph.add_op("FusedMatMul", {a, a}), ShapeError);     // 4 != 3
  EXPECT_THROW(graph.add_op("FusedMatMul", {v, b}), ShapeError);     // rank 1
  EXPECT_THROW(graph.add_op("FusedMatMul", {i, b}), ShapeError);     // int64
  EXPECT_NO_THROW(graph.add_op("FusedMatMul", {a, a}, {{"trans_b", int64_t{1}}}));
}

}  // namespace
}  // namespace lumen
