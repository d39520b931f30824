// The optimizer passes (src/passes): each rewrite is checked by op counts and by running the
// compiled graph against a naive double-precision reference on random data; a negative case per
// pass checks what must be left alone.
#include <gtest/gtest.h>

#include <cmath>

#include "lumen/lumen.h"
#include "ops/op_test_util.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

// Runs one pass, verifies the graph and returns whether it changed something.
bool run_pass(Graph& graph, std::unique_ptr<Pass> pass) {
  bool changed = pass->run(graph);
  graph.verify();
  return changed;
}

std::vector<Tensor> run(Graph& graph, const std::vector<Tensor>& inputs) {
  Runtime rt;
  return graph.compile(&rt)->execute(inputs);
}

std::vector<double> map(const Tensor& t, double (*f)(double)) {
  std::vector<double> out = test::to_doubles(t);
  for (double& v : out) v = f(v);
  return out;
}

double relu(double v) {
  return v > 0 ? v : 0;
}

TEST(DeadCodePass, RemovesUnreadNodesOnly) {
  Graph g;
  Value* x = g.add_input("x", {4, 5});
  g.add_op("Neg", {g.add_op("Sigmoid", {x})});
  Value* y = g.add_op("Relu", {x});
  g.mark_output(y);
  EXPECT_TRUE(run_pass(g, make_dead_code_pass()));
  EXPECT_EQ(test::count_ops(g, "Sigmoid"), 0);
  EXPECT_EQ(test::count_ops(g, "Neg"), 0);
  EXPECT_EQ(test::count_ops(g, "Relu"), 1);
  EXPECT_FALSE(run_pass(g, make_dead_code_pass()));
  Tensor in = test::random_tensor({4, 5}, 1);
  test::expect_close(run(g, {in})[0], {4, 5}, map(in, relu));
}

TEST(IdentityPass, RemovesNoOpsAndKeepsTheOutputName) {
  Graph g;
  Value* x = g.add_input("x", {2, 3});
  Value* h = g.add_op("Relu", {x});
  h = g.add_op("Identity", {h});
  h = g.add_op("Reshape", {h, g.add_constant("shape", Tensor::from_vector<int64_t>({2}, {2, 3}))});
  h = g.add_op("Transpose", {h}, {{"perm", {0, 1}}});
  h = g.add_op("Cast", {h}, {{"to", 1}});  // float32 to float32
  h = g.add_op("Neg", {h});
  Value* y = g.add_op("Identity", {h}, {}, "last");
  g.rename(y, "y");
  g.mark_output(y);
  EXPECT_TRUE(run_pass(g, make_identity_pass()));
  EXPECT_EQ(test::count_ops(g, "Identity") + test::count_ops(g, "Reshape") +
                test::count_ops(g, "Transpose") + test::count_ops(g, "Cast"),
            0);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "y");
  Tensor in = test::random_tensor({2, 3}, 2);
  Runtime rt;
  Executable* exe = g.compile(&rt);
  EXPECT_EQ(exe->outputs()[0].name, "y");
  test::expect_close(exe->execute({in})[0], {2, 3}, map(in, [](double v) { return -relu(v); }));
}

TEST(IdentityPass, KeepsOutputsFedByInputsAndRealTransposes) {
  Graph g;
  Value* x = g.add_input("x", {3, 3});
  g.mark_output(g.add_op("Identity", {x}));
  g.mark_output(g.add_op("Transpose", {x}, {{"perm", {1, 0}}}));
  EXPECT_FALSE(run_pass(g, make_identity_pass()));
  EXPECT_EQ(test::count_ops(g, "Identity"), 1);
  EXPECT_EQ(test::count_ops(g, "Transpose"), 1);
  Tensor in = test::random_tensor({3, 3}, 3);
  auto out = run(g, {in});
  std::vector<double> xs = test::to_doubles(in), xt(9);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) xt[i * 3 + j] = xs[j * 3 + i];
  test::expect_close(out[0], {3, 3}, xs);
  test::expect_close(out[1], {3, 3}, xt);
}

// Transposes of Transposes: a pair that cancels (NHWC -> NCHW -> NHWC) leaves no Transpose; a
// pair that does not becomes one Transpose with the composed permutation (the first stays only
// where something else reads it). Checked against the transposes done by hand.
TEST(IdentityPass, ComposesTransposeChains) {
  Graph g;
  Value* x = g.add_input("x", {2, 3, 4, 5});
  Value* nchw = g.add_op("Transpose", {x}, {{"perm", {0, 3, 1, 2}}});
  g.mark_output(g.add_op("Relu", {g.add_op("Transpose", {nchw}, {{"perm", {0, 2, 3, 1}}})}));
  Value* rolled = g.add_op("Transpose", {x}, {{"perm", {1, 2, 0, 3}}});
  g.mark_output(g.add_op("Transpose", {rolled}, {{"perm", {0, 1, 3, 2}}}));
  g.mark_output(g.add_op("Neg", {rolled}));
  Value* reversed = g.add_op("Transpose", {x});  // no perm: axes reversed
  g.mark_output(g.add_op("Transpose", {reversed}, {{"perm", {3, 2, 1, 0}}}, "back"));
  EXPECT_TRUE(run_pass(g, make_identity_pass()));
  EXPECT_TRUE(run_pass(g, make_dead_code_pass()));
  EXPECT_EQ(test::count_ops(g, "Transpose"),
            3);  // rolled, its composed reader, and "back" (an output)
  Tensor in = test::random_tensor({2, 3, 4, 5}, 5);
  auto out = run(g, {in});
  const std::vector<double> xs = test::to_doubles(in);
  auto at = [&](int64_t a, int64_t b, int64_t c, int64_t d) {
    return xs[((a * 3 + b) * 4 + c) * 5 + d];
  };
  std::vector<double> composed, neg;  // [b, c, d, a] and -[b, c, a, d]
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t c = 0; c < 4; ++c) {
      for (int64_t d = 0; d < 5; ++d)
        for (int64_t a = 0; a < 2; ++a) composed.push_back(at(a, b, c, d));
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t d = 0; d < 5; ++d) neg.push_back(-at(a, b, c, d));
    }
  test::expect_close(out[0], {2, 3, 4, 5}, map(in, relu));
  test::expect_close(out[1], {3, 4, 5, 2}, composed);
  test::expect_close(out[2], {3, 4, 2, 5}, neg);
  test::expect_close(out[3], {2, 3, 4, 5}, xs);
}

// A Transpose that moves only dims of size 1 ([1, 1, H, D] <-> [1, H, 1, D], a decoder's heads at
// one token) becomes a Reshape, also as a graph output (keeping its name); one that reorders two
// dims larger than 1 stays. Checked against the transposes done by hand.
TEST(IdentityPass, TransposesOfSizeOneDimsBecomeReshapes) {
  Graph g;
  Value* x = g.add_input("x", {1, 1, 3, 4});
  Value* heads = g.add_op("Transpose", {x}, {{"perm", {0, 2, 1, 3}}});  // [1, 3, 1, 4]
  g.mark_output(g.add_op("Relu", {heads}));
  g.mark_output(g.add_op("Transpose", {x}, {{"perm", {3, 1, 0, 2}}}));     // [4, 1, 1, 3]
  Value* last = g.add_op("Transpose", {heads}, {{"perm", {0, 1, 3, 2}}});  // [1, 3, 4, 1]
  g.mark_output(last);
  const std::string last_name = last->name;
  EXPECT_TRUE(run_pass(g, make_identity_pass()));
  EXPECT_EQ(test::count_ops(g, "Reshape"), 2) << g.to_text();    // heads, and the last one
  EXPECT_EQ(test::count_ops(g, "Transpose"), 1) << g.to_text();  // the second reorders 4 and 3
  EXPECT_EQ(g.value(g.outputs()[2]).name, last_name);
  Tensor in = test::random_tensor({1, 1, 3, 4}, 7);
  auto out = run(g, {in});
  const std::vector<double> xs = test::to_doubles(in);
  std::vector<double> moved;  // [d, 1, 1, h] = x[0, 0, h, d]
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t h = 0; h < 3; ++h) moved.push_back(xs[h * 4 + d]);
  test::expect_close(out[0], {1, 3, 1, 4}, map(in, relu));
  test::expect_close(out[1], {4, 1, 1, 3}, moved);
  test::expect_close(out[2], {1, 3, 4, 1}, xs);
}

// A Pad by zero everywhere (PyTorch's AvgPool2d export) goes; one that shifts (begin 1, end -1:
// the same shape, other contents) and one that pads stay.
TEST(IdentityPass, RemovesZeroPadsOnly) {
  Graph g;
  Value* x = g.add_input("x", {1, 2, 3, 4});
  auto pads = [&](const char* name, std::vector<int64_t> p) {
    return g.add_constant(name, Tensor::from_vector<int64_t>({8}, p));
  };
  Value* zero = g.add_op("Pad", {x, pads("zero", {0, 0, 0, 0, 0, 0, 0, 0})}, {}, "zero_pad");
  Value* shift = g.add_op("Pad", {zero, pads("shift", {0, 0, 0, 1, 0, 0, 0, -1})}, {}, "shift");
  Value* grow = g.add_op("Pad", {zero, pads("grow", {0, 0, 1, 0, 0, 0, 0, 0})}, {}, "grow");
  g.mark_output(shift);
  g.mark_output(grow);
  EXPECT_TRUE(run_pass(g, make_identity_pass()));
  EXPECT_EQ(test::count_ops(g, "Pad"), 2);
  Tensor in = test::random_tensor({1, 2, 3, 4}, 4);
  auto out = run(g, {in});
  std::vector<double> xs = test::to_doubles(in), shifted(24), grown(32, 0.0);
  for (int p = 0; p < 6; ++p)
    for (int w = 0; w < 4; ++w) {
      shifted[p * 4 + w] = w == 0 ? 0.0 : xs[p * 4 + w - 1];
      const int c = p / 3, h = p % 3;
      grown[(c * 4 + h + 1) * 4 + w] = xs[p * 4 + w];
    }
  test::expect_close(out[0], {1, 2, 3, 4}, shifted);
  test::expect_close(out[1], {1, 2, 4, 4}, grown);
}

TEST(CsePass, MergesEqualNodesOnly) {
  Graph g;
  Value* x = g.add_input("x", {4, 6});
  g.mark_output(g.add_op("Add", {g.add_op("Relu", {x}), g.add_op("Relu", {x})}));
  g.mark_output(g.add_op("Add", {g.add_op("LeakyRelu", {x}, {{"alpha", 0.1f}}),
                                 g.add_op("LeakyRelu", {x}, {{"alpha", 0.2f}})}));
  EXPECT_TRUE(run_pass(g, make_cse_pass()));
  EXPECT_EQ(test::count_ops(g, "Relu"), 1);
  EXPECT_EQ(test::count_ops(g, "LeakyRelu"), 2);  // different alpha
  EXPECT_EQ(test::count_ops(g, "Add"), 2);
  Tensor in = test::random_tensor({4, 6}, 4);
  auto out = run(g, {in});
  test::expect_close(out[0], {4, 6}, map(in, [](double v) { return 2 * relu(v); }));
  test::expect_close(out[1], {4, 6}, map(in, [](double v) { return v > 0 ? 2 * v : 0.3 * v; }));
}

TEST(CsePass, KeepsDuplicatesThatAreBothGraphOutputs) {
  Graph g;
  Value* x = g.add_input("x", {5});
  g.mark_output(g.add_op("Relu", {x}));
  g.mark_output(g.add_op("Relu", {x}));
  EXPECT_FALSE(run_pass(g, make_cse_pass()));
  EXPECT_EQ(test::count_ops(g, "Relu"), 2);
  Tensor in = test::random_tensor({5}, 5);
  auto out = run(g, {in});
  test::expect_close(out[0], {5}, map(in, relu));
  test::expect_close(out[1], {5}, map(in, relu));
}

// Conv (stride 1, pad 1, 3x3) followed by BatchNormalization, naively in double.
std::vector<double> conv_bn_reference(const Tensor& x, const Tensor& w, const Tensor* b,
                                      const std::vector<Tensor>& bn, double eps) {
  const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  const int64_t m = w.shape()[0];
  std::vector<double> out(static_cast<size_t>(n * m * h * wd));
  for (int64_t in = 0; in < n; ++in)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < wd; ++j) {
          double acc = b ? b->item_as_double(o) : 0.0;
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 3; ++kj) {
                int64_t si = i + ki - 1, sj = j + kj - 1;
                if (si < 0 || si >= h || sj < 0 || sj >= wd) continue;
                acc += x.item_as_double(((in * c + ic) * h + si) * wd + sj) *
                       w.item_as_double(((o * c + ic) * 3 + ki) * 3 + kj);
              }
          double y = (acc - bn[2].item_as_double(o)) / std::sqrt(bn[3].item_as_double(o) + eps) *
                         bn[0].item_as_double(o) +
                     bn[1].item_as_double(o);
          out[static_cast<size_t>(((in * m + o) * h + i) * wd + j)] = y;
        }
  return out;
}

struct ConvBn {
  Graph graph;
  Tensor w, b;
  std::vector<Tensor> bn;
  Value* conv = nullptr;
};

// x[2, 3, 5, 5] -> Conv(4 filters, optional bias) -> BatchNormalization(epsilon 1e-3) -> "y".
void build_conv_bn(ConvBn& t, bool bias, bool user_weight) {
  Graph& g = t.graph;
  Value* x = g.add_input("x", {2, 3, 5, 5});
  t.w = test::random_tensor({4, 3, 3, 3}, 10);
  t.b = test::random_tensor({4}, 11);
  Value* w = nullptr;
  if (user_weight) {
    w = g.add_weight("w", {4, 3, 3, 3});
    g.set_data(w, t.w);
  } else {
    w = g.add_constant("w", t.w);
  }
  std::vector<Value*> ins = {x, w};
  if (bias) ins.push_back(g.add_constant("b", t.b));
  t.conv = g.add_op("Conv", ins, {{"pads", {1, 1, 1, 1}}});
  t.bn = {test::random_tensor({4}, 12, 0.5f, 2.0f), test::random_tensor({4}, 13),
          test::random_tensor({4}, 14), test::random_tensor({4}, 15, 0.1f, 3.0f)};
  std::vector<Value*> bn_ins = {t.conv};
  const char* names[] = {"scale", "beta", "mean", "var"};
  for (int k = 0; k < 4; ++k) bn_ins.push_back(g.add_constant(names[k], t.bn[k]));
  Value* y = g.add_op("BatchNormalization", bn_ins, {{"epsilon", 1e-3f}});
  g.rename(y, "y");
  g.mark_output(y);
}

TEST(ConvBnFoldPass, FoldsWithAndWithoutBias) {
  for (bool bias : {true, false}) {
    ConvBn t;
    build_conv_bn(t, bias, false);
    EXPECT_TRUE(run_pass(t.graph, make_conv_bn_fold_pass()));
    EXPECT_EQ(test::count_ops(t.graph, "BatchNormalization"), 0);
    EXPECT_EQ(test::count_ops(t.graph, "Conv"), 1);
    EXPECT_EQ(t.graph.value(t.graph.outputs()[0]).name, "y");
    EXPECT_FALSE(t.graph.find_value("w")->data.has_value());  // the old weights are released
    Tensor in = test::random_tensor({2, 3, 5, 5}, 16);
    test::expect_close(run(t.graph, {in})[0], {2, 4, 5, 5},
                       conv_bn_reference(in, t.w, bias ? &t.b : nullptr, t.bn, 1e-3), 1e-4, 1e-4);
  }
}

TEST(ConvBnFoldPass, LeavesSharedConvOutputsAndUserWeights) {
  ConvBn shared;
  build_conv_bn(shared, true, false);
  shared.graph.mark_output(shared.graph.add_op("Relu", {shared.conv}));
  EXPECT_FALSE(run_pass(shared.graph, make_conv_bn_fold_pass()));
  EXPECT_EQ(test::count_ops(shared.graph, "BatchNormalization"), 1);
  Tensor in = test::random_tensor({2, 3, 5, 5}, 17);
  test::expect_close(run(shared.graph, {in})[0], {2, 4, 5, 5},
                     conv_bn_reference(in, shared.w, &shared.b, shared.bn, 1e-3), 1e-4, 1e-4);

  ConvBn weights;
  build_conv_bn(weights, true, true);
  EXPECT_FALSE(run_pass(weights.graph, make_conv_bn_fold_pass()));
  EXPECT_EQ(test::count_ops(weights.graph, "BatchNormalization"), 1);
}

TEST(ConstantFoldPass, FoldsLargeConstantSubgraphs) {
  Graph g;
  Tensor a = test::random_tensor({80, 80}, 20);
  Tensor b = test::random_tensor({80, 80}, 21);
  Value* x = g.add_input("x", {80, 80});
  Value* sum = g.add_op("Add", {g.add_constant("a", a), g.add_constant("b", b)});
  g.mark_output(g.add_op("Mul", {x, g.add_op("Exp", {sum})}));
  ASSERT_EQ(test::count_ops(g, "Add"), 1);  // too large for build-time folding
  EXPECT_TRUE(run_pass(g, make_constant_fold_pass()));
  EXPECT_EQ(test::count_ops(g, "Add"), 0);
  EXPECT_EQ(test::count_ops(g, "Exp"), 0);
  EXPECT_EQ(test::count_ops(g, "Mul"), 1);
  Tensor in = test::random_tensor({80, 80}, 22);
  std::vector<double> xs = test::to_doubles(in), as = test::to_doubles(a), bs = test::to_doubles(b),
                      want(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) want[i] = xs[i] * std::exp(as[i] + bs[i]);
  test::expect_close(run(g, {in})[0], {80, 80}, want);
}

TEST(ConstantFoldPass, TurnsOutputsKnownAtBuildTimeIntoConstants) {
  Graph g;
  Value* x = g.add_input("x", {2, 7, 3});
  Value* shape = g.add_op("Shape", {x});
  g.rename(shape, "shape");
  g.mark_output(shape);
  EXPECT_TRUE(run_pass(g, make_constant_fold_pass()));
  EXPECT_EQ(test::count_ops(g, "Shape"), 0);
  Runtime rt;
  Executable* exe = g.compile(&rt);
  EXPECT_EQ(exe->outputs()[0].name, "shape");
  test::expect_equal(exe->execute({test::random_tensor({2, 7, 3}, 25)})[0], DType::kInt64, {3},
                     {2, 7, 3});
}

TEST(ConstantFoldPass, LeavesUserWeightsAndInputs) {
  Graph g;
  Value* x = g.add_input("x", {80, 80});
  Value* w = g.add_weight("w", {80, 80});
  Tensor wt = test::random_tensor({80, 80}, 23);
  g.set_data(w, wt);
  g.mark_output(g.add_op("Add", {x, g.add_op("Neg", {w})}));
  EXPECT_FALSE(run_pass(g, make_constant_fold_pass()));
  EXPECT_EQ(test::count_ops(g, "Neg"), 1);
  Tensor in = test::random_tensor({80, 80}, 24);
  std::vector<double> xs = test::to_doubles(in), ws = test::to_doubles(wt), want(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) want[i] = xs[i] - ws[i];
  test::expect_close(run(g, {in})[0], {80, 80}, want);
}

TEST(Optimize, RunsToAFixedPointAndReportsEachPass) {
  Graph g;
  Value* x = g.add_input("x", {3, 4});
  Value* a = g.add_op("Identity", {g.add_op("Relu", {x})});
  Value* b = g.add_op("Relu", {x});
  g.add_op("Sigmoid", {x});
  Value* y = g.add_op("Add", {a, b});
  g.rename(y, "y");
  g.mark_output(y);
  std::vector<PassStats> stats = g.optimize();
  ASSERT_FALSE(stats.empty());
  EXPECT_EQ(test::count_ops(g, "Relu"), 1);
  EXPECT_EQ(test::count_ops(g, "Identity"), 0);
  EXPECT_EQ(test::count_ops(g, "Sigmoid"), 0);
  EXPECT_EQ(stats.front().nodes_before, 5);
  EXPECT_EQ(stats.back().nodes_after, 2);
  EXPECT_FALSE(stats.back().changed);  // the last round changed nothing
  int changed = 0;
  for (const PassStats& s : stats) {
    int total = 0;
    for (const auto& entry : s.ops_after) total += entry.second;
    EXPECT_EQ(total, s.nodes_after);
    changed += s.changed;
  }
  EXPECT_GE(changed, 3);
  EXPECT_TRUE(g.optimize().size() > 0);  // a second call is safe
  Tensor in = test::random_tensor({3, 4}, 30);
  test::expect_close(run(g, {in})[0], {3, 4}, map(in, [](double v) { return 2 * relu(v); }));
}

}  // namespace
}  // namespace lumen
