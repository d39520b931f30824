// The fuse-matmul-norm pass and FusedMatMul's norm epilogue on the CPU: a post-LN transformer's
// projection, bias, residual and LayerNormalization become one FusedMatMul where CUDA is among the
// backends, stay as they are where it is not or the norm cannot fuse, and give the numbers of a
// double-precision product + bias + residual + LayerNormalization.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

std::map<std::string, int> ops_of(const Graph& graph) {
  std::map<std::string, int> ops;
  for (int id : graph.topological_order()) ++ops[op_name(graph.node(id).op)];
  return ops;
}

// Y [m, n] = act(A [m, k] x B [k, n] + bias + Z), then each row normalized (LayerNormalization
// over n with `eps`, scale and shift, shift may be empty), in double.
std::vector<double> reference(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor* z,
                              const Tensor& scale, const Tensor* shift, double eps,
                              double (*act)(double)) {
  const int64_t k = a.shape()[-1], m = a.numel() / k, n = b.shape()[-1];
  const std::vector<double> av = test::to_doubles(a), bv = test::to_doubles(b),
                            cv = test::to_doubles(bias), sv = test::to_doubles(scale);
  const std::vector<double> zv = z ? test::to_doubles(*z) : std::vector<double>(m * n, 0.0);
  const std::vector<double> hv = shift ? test::to_doubles(*shift) : std::vector<double>(n, 0.0);
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    double* row = y.data() + i * n;
    for (int64_t j = 0; j < n; ++j) {
      double acc = cv[j] + zv[i * n + j];
      for (int64_t p = 0; p < k; ++p) acc += av[i * k + p] * bv[p * n + j];
      row[j] = act(acc);
    }
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += row[j] / static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j)
      var += (row[j] - mean) * (row[j] - mean) / static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) row[j] = (row[j] - mean) / std::sqrt(var + eps) * sv[j] + hv[j];
  }
  return y;
}

double identity(double v) {
  return v;
}

double relu(double v) {
  return v > 0 ? v : 0;
}

struct PostNormLayer {
  Tensor x = test::random_tensor({10, 16}, 501, -1, 1);
  Tensor w = test::random_tensor({16, 24}, 502, -1, 1);
  Tensor b = test::random_tensor({24}, 503, -1, 1);
  Tensor z = test::random_tensor({5, 2, 24}, 504, -1, 1);
  Tensor scale = test::random_tensor({24}, 505, 0.5, 1.5);
  Tensor shift = test::random_tensor({24}, 506, -1, 1);
  static constexpr float kEps = 1e-3f;

  // x [S N, E] x W + b, reshaped to [S, N, E], + z, LayerNormalization over E (with the shift
  // where `with_shift`, on `axis`); with `stats_used` its Mean output is a graph output too.
  void build(Graph& graph, bool with_shift = true, int64_t axis = -1,
             bool stats_used = false) const {
    Value* in = graph.add_input("x", x.shape());
    Value* zin = graph.add_input("z", z.shape());
    Value* y = graph.add_op("Add", {graph.add_op("MatMul", {in, graph.add_constant("w", w)}),
                                    graph.add_constant("b", b)});
    Value* shape = graph.add_constant("shape", Tensor::from_vector<int64_t>({3}, {5, 2, 24}));
    Value* sum = graph.add_op("Add", {graph.add_op("Reshape", {y, shape}), zin});
    std::vector<Value*> ln_in = {sum, graph.add_constant("scale", scale)};
    if (with_shift) ln_in.push_back(graph.add_constant("shift", shift));
    std::vector<Value*> outs = graph.add_op("LayerNormalization", ln_in, stats_used ? 2 : 1,
                                            {{"axis", axis}, {"epsilon", kEps}}, "ln");
    graph.mark_output(outs[0]);
    if (stats_used) graph.mark_output(outs[1]);
  }

  std::vector<double> want(bool with_shift) const {
    return reference(x, w, b, &z, scale, with_shift ? &shift : nullptr, kEps, identity);
  }
};

TEST(FuseMatMulNorm, PostNormProjectionIsOneFusedMatMul) {
  const PostNormLayer layer;
  for (bool with_shift : {true, false}) {
    SCOPED_TRACE(with_shift ? "with a shift" : "without a shift");
    Graph graph;
    layer.build(graph, with_shift);
    graph.optimize({"cuda", "cpu"});
    std::map<std::string, int> ops = ops_of(graph);
    EXPECT_EQ(ops["FusedMatMul"], 1);
    EXPECT_EQ(ops["LayerNormalization"], 0);
    EXPECT_EQ(ops["Add"], 0);
    Runtime rt;
    CompileOptions options;
    options.backends = {"cpu"};
    Tensor got = graph.compile(&rt, options)->execute(std::vector<Tensor>{layer.x, layer.z})[0];
    test::expect_close(got, {5, 2, 24}, layer.want(with_shift), 1e-5, 1e-4);
  }
}

// Only where CUDA is among the backends and every backend has the epilogue; never with the
// statistics outputs in use or over another axis.
TEST(FuseMatMulNorm, NormStaysWhereItCannotFuse) {
  const PostNormLayer layer;
  struct Case {
    std::vector<std::string> backends;
    int64_t axis;
    bool stats_used;
    const char* why;
  };
  const std::vector<Case> cases = {
      {{"cpu"}, -1, false, "the CPU alone gains nothing"},
      {{"cuda", "vulkan"}, -1, false, "Vulkan has no norm epilogue"},
      {{"cuda", "cpu"}, -1, true, "Mean is a graph output"},
      {{"cuda", "cpu"}, 1, false, "normalized over [N, E]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    Graph graph;
    layer.build(graph, true, c.axis, c.stats_used);
    graph.optimize(c.backends);
    std::map<std::string, int> ops = ops_of(graph);
    EXPECT_EQ(ops["FusedMatMul"], 1);
    EXPECT_EQ(ops["LayerNormalization"], 1);
  }
}

// The epilogue on every CPU path of FusedMatMul: constant weights (packed GEMM or oneDNN), weights
// as an input, a batched B (a loop of products), with an activation before the norm and rows
// longer than one SIMD block.
TEST(FusedMatMulKernel, NormEpilogueOnEveryPath) {
  uint64_t seed = 520;
  struct Dims3 {
    int64_t m, k, n;
  };
  for (Dims3 d : {Dims3{7, 40, 48}, Dims3{130, 64, 300}, Dims3{1, 300, 70}})
    for (bool constant_b : {true, false})
      for (bool relu_first : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << d.m << "x" << d.k << "x" << d.n << (constant_b ? " constant" : "")
                     << (relu_first ? " Relu" : ""));
        Tensor a = test::random_tensor({d.m, d.k}, ++seed, -1, 1);
        Tensor b = test::random_tensor({d.k, d.n}, ++seed, -1, 1);
        Tensor c = test::random_tensor({d.n}, ++seed, -1, 1);
        Tensor z = test::random_tensor({d.m, d.n}, ++seed, -1, 1);
        Tensor scale = test::random_tensor({d.n}, ++seed, 0.5, 1.5);
        Tensor shift = test::random_tensor({d.n}, ++seed, -1, 1);
        Graph graph;
        Value* av = graph.add_input("a", a.shape());
        Value* bv = constant_b ? graph.add_constant("b", b) : graph.add_input("b", b.shape());
        graph.mark_output(
            graph.add_op("FusedMatMul",
                         {av, bv, graph.add_constant("c", c), graph.add_input("z", z.shape()),
                          graph.add_constant("scale", scale), graph.add_constant("shift", shift)},
                         {{"activation", relu_first ? "Relu" : ""}, {"norm_epsilon", 1e-4f}}));
        std::vector<Tensor> inputs = {a};
        if (!constant_b) inputs.push_back(b);
        inputs.push_back(z);
        Runtime rt;
        test::expect_close(
            graph.compile(&rt)->execute(inputs)[0], {d.m, d.n},
            reference(a, b, c, &z, scale, &shift, 1e-4, relu_first ? relu : identity), 1e-4, 1e-4);
      }
  // A batched B: [2, 3, 9] x [2, 9, 11], no bias, no residual, no shift.
  Tensor a = test::random_tensor({2, 3, 9}, ++seed, -1, 1);
  Tensor b = test::random_tensor({2, 9, 11}, ++seed, -1, 1);
  Tensor scale = test::random_tensor({11}, ++seed, 0.5, 1.5);
  Graph graph;
  graph.mark_output(
      graph.add_op("FusedMatMul", {graph.add_input("a", a.shape()), graph.add_input("b", b.shape()),
                                   nullptr, nullptr, graph.add_constant("scale", scale)}));
  Runtime rt;
  Tensor got = graph.compile(&rt)->execute(std::vector<Tensor>{a, b})[0];
  std::vector<double> want;
  const Tensor zero_bias = Tensor::zeros(Shape{11}, DType::kFloat32);
  for (int64_t t = 0; t < 2; ++t) {
    Tensor at = Tensor::empty(Shape{3, 9}, DType::kFloat32);
    Tensor bt = Tensor::empty(Shape{9, 11}, DType::kFloat32);
    std::copy_n(a.data<float>() + t * 27, 27, at.data<float>());
    std::copy_n(b.data<float>() + t * 99, 99, bt.data<float>());
    std::vector<double> part =
        reference(at, bt, zero_bias, nullptr, scale, nullptr, 1e-5, identity);
    want.insert(want.end(), part.begin(), part.end());
  }
  test::expect_close(got, {2, 3, 11}, want, 1e-5, 1e-4);
}

TEST(FusedMatMulKernel, BadNormInputsAreRejected) {
  Graph graph;
  Value* a = graph.add_input("a", {3, 4});
  Value* b = graph.add_input("b", {4, 5});
  Value* v4 = graph.add_input("v4", {4});
  Value* v5 = graph.add_input("v5", {5});
  Value* m5 = graph.add_input("m5", {1, 5});
  EXPECT_THROW(graph.add_op("FusedMatMul", {a, b, nullptr, nullptr, v4}), ShapeError);
  EXPECT_THROW(graph.add_op("FusedMatMul", {a, b, nullptr, nullptr, m5}), ShapeError);
  EXPECT_THROW(graph.add_op("FusedMatMul", {a, b, nullptr, nullptr, v5, v4}), ShapeError);
  EXPECT_THROW(graph.add_op("FusedMatMul", {a, b, nullptr, nullptr, nullptr, v5}), InvalidModel);
  EXPECT_THROW(graph.add_op("FusedMatMul", {a, b, nullptr, nullptr, v5}, {{"norm_epsilon", -1.f}}),
               InvalidModel);
  EXPECT_NO_THROW(graph.add_op("FusedMatMul", {a, b, nullptr, nullptr, v5, v5}));
}

}  // namespace
}  // namespace lumen
