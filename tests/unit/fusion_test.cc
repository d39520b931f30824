// The fuse-activation pass: Conv -> activation becomes one FusedConv whose oneDNN post-op gives
// the same numbers as a naive convolution followed by the activation.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

// 3x3 convolution, stride 1, padding 1, NCHW, in double.
std::vector<double> conv3x3(const Tensor& x, const Tensor& w, const Tensor& b) {
  return test::conv2d_reference(test::to_doubles(x), x.shape(), w, b, 1, 1);
}

std::string op_name_of(const Graph& graph, int id) {
  return op_name(graph.node(id).op);
}

struct Case {
  const char* op;
  Attributes attrs;
  std::vector<float> bounds;  // Clip's min and max inputs
  std::function<double(double)> f;
};

std::vector<Case> cases() {
  return {
      {"Relu", {}, {}, [](double v) { return std::max(v, 0.0); }},
      {"LeakyRelu", {{"alpha", 0.2f}}, {}, [](double v) { return v > 0 ? v : 0.2 * v; }},
      {"Clip", {}, {0.0f, 6.0f}, [](double v) { return std::min(std::max(v, 0.0), 6.0); }},
      {"Sigmoid", {}, {}, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"Tanh", {}, {}, [](double v) { return std::tanh(v); }},
      {"HardSwish", {}, {}, [](double v) { return v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0); }},
  };
}

TEST(FuseActivation, ConvWithEachActivationIsOneFusedConv) {
  Tensor x = test::random_tensor({2, 3, 7, 6}, 1, -2, 2);
  Tensor w = test::random_tensor({4, 3, 3, 3}, 2, -1, 1);
  Tensor b = test::random_tensor({4}, 3, -1, 1);
  std::vector<double> conv = conv3x3(x, w, b);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.op);
    Graph graph;
    Value* in = graph.add_input("x", x.shape());
    Value* y = graph.add_op("Conv", {in, graph.add_constant("w", w), graph.add_constant("b", b)},
                            {{"pads", {1, 1, 1, 1}}});
    std::vector<Value*> act_in = {y};
    for (size_t k = 0; k < c.bounds.size(); ++k)
      act_in.push_back(
          graph.add_constant("bound" + std::to_string(k), Tensor::scalar<float>(c.bounds[k])));
    graph.mark_output(graph.add_op(c.op, act_in, c.attrs, "act"));
    graph.optimize();
    int fused = 0, others = 0;
    for (int id : graph.topological_order())
      (op_name_of(graph, id) == "FusedConv" ? fused : others) += 1;
    EXPECT_EQ(fused, 1);
    EXPECT_EQ(others, 0);
    Runtime rt;
    Tensor got = graph.compile(&rt)->execute({x})[0];
    std::vector<double> want;
    for (double v : conv) want.push_back(c.f(v));
    test::expect_close(got, {2, 4, 7, 6}, want, 1e-5, 1e-4);
  }
}

// SiLU, Mul(y, Sigmoid(y)), and HardSwish as exporters before opset 14 write it, Mul(y,
// HardSigmoid(y)) with alpha 1/6 and beta 1/2, in either operand order: one FusedConv, for the CPU
// and for CUDA. HardSigmoid with its default alpha (0.2) times its input is not HardSwish: no
// convolution takes that activation, and the result is still y * clamp(0.2 y + 0.5, 0, 1). The
// graph optimized for CUDA runs here on the CPU, whose FusedConv takes the same activations.
TEST(FuseActivation, GatedActivationsInEitherOrderAreOneFusedConv) {
  Tensor x = test::random_tensor({1, 3, 6, 5}, 21, -4, 4);
  Tensor w = test::random_tensor({4, 3, 3, 3}, 22, -1, 1);
  Tensor b = test::random_tensor({4}, 23, -1, 1);
  const std::vector<double> conv = conv3x3(x, w, b);
  struct Gate {
    const char* op;
    Attributes attrs;
    const char* activation;  // the FusedConv's, or null where the pair must not fuse
    double (*f)(double);
  };
  const Gate gates[] = {
      {"Sigmoid", {}, "Swish", [](double v) { return v / (1 + std::exp(-v)); }},
      {"HardSigmoid",
       {{"alpha", 1.0f / 6.0f}},
       "HardSwish",
       [](double v) { return v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0); }},
      {"HardSigmoid",
       {},
       nullptr,
       [](double v) { return v * std::min(std::max(0.2 * v + 0.5, 0.0), 1.0); }},
  };
  for (const Gate& g : gates) {
    std::vector<double> want = conv;
    for (double& v : want) v = g.f(v);
    for (int form = 0; form < 4; ++form) {
      const bool gate_first = form & 1, for_cuda = form & 2;
      SCOPED_TRACE(std::string(g.op) + (gate_first ? " first" : " second") +
                   (for_cuda ? " for cuda,cpu" : " for cpu"));
      Graph graph;
      Value* in = graph.add_input("x", x.shape());
      Value* y = graph.add_op("Conv", {in, graph.add_constant("w", w), graph.add_constant("b", b)},
                              {{"pads", {1, 1, 1, 1}}});
      Value* s = graph.add_op(g.op, {y}, g.attrs);
      graph.mark_output(
          graph.add_op("Mul", gate_first ? std::vector<Value*>{s, y} : std::vector<Value*>{y, s}));
      graph.optimize(for_cuda ? std::vector<std::string>{"cuda", "cpu"}
                              : std::vector<std::string>{"cpu"});
      std::vector<int> order = graph.topological_order();
      if (g.activation != nullptr) {
        ASSERT_EQ(order.size(), 1u);
        EXPECT_EQ(graph.node(order[0]).attrs.at("activation").as_string(), g.activation);
      }
      for (int id : order) {
        auto act = graph.node(id).attrs.find("activation");
        if (g.activation == nullptr && act != graph.node(id).attrs.end())
          EXPECT_NE(act->second.as_string(), "HardSwish");
      }
      Runtime rt;
      test::expect_close(graph.compile(&rt, CompileOptions{{"cpu"}})->execute({x})[0], {1, 4, 6, 5},
                         want, 1e-5, 1e-4);
    }
  }
}

// A pointwise convolution + Relu stays two nodes for the CPU (oneDNN runs it as a GEMM, where the
// post-op is a slow second pass) and becomes one FusedConv for CUDA (cuDNN applies it in the same
// call); the fused form gives the same numbers. So does one with SiLU after it.
TEST(FuseActivation, PointwiseConvFusesOnlyOffTheCpu) {
  Tensor x = test::random_tensor({2, 5, 4, 3}, 31, -2, 2);
  Tensor w = test::random_tensor({6, 5, 1, 1}, 32, -1, 1);
  Tensor b = test::random_tensor({6}, 33, -1, 1);
  std::vector<double> xv = test::to_doubles(x), wv = test::to_doubles(w), bv = test::to_doubles(b);
  std::vector<double> want(2 * 6 * 4 * 3), want_silu(want.size());
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t o = 0; o < 6; ++o)
      for (int64_t p = 0; p < 12; ++p) {
        double acc = bv[o];
        for (int64_t c = 0; c < 5; ++c) acc += xv[(i * 5 + c) * 12 + p] * wv[o * 5 + c];
        want[(i * 6 + o) * 12 + p] = std::max(acc, 0.0);
        want_silu[(i * 6 + o) * 12 + p] = acc / (1 + std::exp(-acc));
      }
  for (bool cpu : {true, false}) {
    SCOPED_TRACE(cpu ? "cpu" : "cuda");
    Graph graph;
    Value* in = graph.add_input("x", x.shape());
    Value* y = graph.add_op("Conv", {in, graph.add_constant("w", w), graph.add_constant("b", b)});
    graph.mark_output(graph.add_op("Relu", {y}));
    graph.optimize(std::vector<std::string>{cpu ? "cpu" : "cuda"});
    std::vector<int> order = graph.topological_order();
    ASSERT_EQ(order.size(), cpu ? 2u : 1u);
    if (!cpu) EXPECT_EQ(op_name_of(graph, order[0]), "FusedConv");
    Runtime rt;
    Tensor got = graph.compile(&rt, CompileOptions{{"cpu"}})->execute({x})[0];
    test::expect_close(got, {2, 6, 4, 3}, want, 1e-5, 1e-4);
  }
  // SiLU after the pointwise convolution: one FusedConv with Swish for CUDA (EfficientNet's
  // expansions), which the CPU runs too.
  Graph graph;
  Value* in = graph.add_input("x", x.shape());
  Value* y = graph.add_op("Conv", {in, graph.add_constant("w", w), graph.add_constant("b", b)});
  graph.mark_output(graph.add_op("Mul", {y, graph.add_op("Sigmoid", {y})}));
  graph.optimize(std::vector<std::string>{"cuda", "cpu"});
  std::vector<int> order = graph.topological_order();
  ASSERT_EQ(order.size(), 1u);
  EXPECT_EQ(graph.node(order[0]).attrs.at("activation").as_string(), "Swish");
  Runtime rt;
  Tensor got = graph.compile(&rt, CompileOptions{{"cpu"}})->execute({x})[0];
  test::expect_close(got, {2, 6, 4, 3}, want_silu, 1e-5, 1e-4);
}

TEST(FuseActivation, ConvReadTwiceIsNotFused) {
  Graph graph;
  Value* in = graph.add_input("x", {1, 2, 5, 5});
  Value* y =
      graph.add_op("Conv", {in, graph.add_constant("w", test::random_tensor({2, 2, 3, 3}, 5))},
                   {{"pads", {1, 1, 1, 1}}});
  graph.mark_output(graph.add_op("Relu", {y}));
  graph.mark_output(graph.add_op("Neg", {y}));
  graph.optimize();
  int fused = 0;
  for (int id : graph.topological_order()) fused += op_name_of(graph, id) == "FusedConv";
  EXPECT_EQ(fused, 0);
}

TEST(FuseActivation, ClipWithRuntimeBoundsIsNotFused) {
  Graph graph;
  Value* in = graph.add_input("x", {1, 2, 5, 5});
  Value* lo = graph.add_input("lo", {});
  Value* y =
      graph.add_op("Conv", {in, graph.add_constant("w", test::random_tensor({2, 2, 3, 3}, 6))});
  graph.mark_output(graph.add_op("Clip", {y, lo}));
  graph.optimize();
  int fused = 0;
  for (int id : graph.topological_order()) fused += op_name_of(graph, id) == "FusedConv";
  EXPECT_EQ(fused, 0);
}

TEST(FuseActivation, UnknownActivationIsRejected) {
  Graph graph;
  Value* in = graph.add_input("x", {1, 2, 5, 5});
  Value* w = graph.add_constant("w", test::random_tensor({2, 2, 3, 3}, 7));
  EXPECT_THROW(graph.add_op("FusedConv", {in, w}, {{"activation", "Softmax"}}), InvalidModel);
  EXPECT_THROW(graph.add_op("FusedConv", {in, w}, {{"channels_last", int64_t{2}}}), InvalidModel);
  EXPECT_THROW(graph.add_op("MaxPool", {in}, {{"kernel_shape", {2, 2}}, {"channels_last", 3}}),
               InvalidModel);
}

// Two 3x3 convolutions, a per-channel bias and a residual Add, a 2x2 max pool, a global average
// pool: the channels-last pass turns the whole chain to (N, H, W, C), with one Transpose in and
// one out per graph output, and the numbers stay those of a naive NCHW computation.
TEST(ChannelsLast, ConvRegionMatchesNaiveReference) {
  const int64_t c = 5, h = 7, wd = 6;
  Tensor x = test::random_tensor({1, 3, h, wd}, 11, -2, 2);
  Tensor w1 = test::random_tensor({c, 3, 3, 3}, 12, -1, 1);
  Tensor b1 = test::random_tensor({c}, 13, -1, 1);
  Tensor w2 = test::random_tensor({c, c, 3, 3}, 14, -1, 1);
  Tensor b2 = test::random_tensor({c}, 15, -1, 1);
  Tensor scale = test::random_tensor({c, 1, 1}, 16, 0.5, 1.5);
  Graph graph;
  Value* in = graph.add_input("x", x.shape());
  Value* y1 = graph.add_op(
      "Relu",
      {graph.add_op("Conv", {in, graph.add_constant("w1", w1), graph.add_constant("b1", b1)},
                    {{"pads", {1, 1, 1, 1}}})});
  Value* y2 = graph.add_op("Conv", {y1, graph.add_constant("w2", w2), graph.add_constant("b2", b2)},
                           {{"pads", {1, 1, 1, 1}}});
  Value* sum = graph.add_op("Add", {graph.add_op("Mul", {y2, graph.add_constant("s", scale)}), y1},
                            {}, "sum");
  Value* pooled = graph.add_op("MaxPool", {sum}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}});
  graph.mark_output(sum);
  Value* gap_out = graph.add_op("GlobalAveragePool", {pooled}, {}, "gap");
  graph.mark_output(gap_out);
  const std::string sum_name = sum->name, gap_name = gap_out->name;
  graph.optimize();
  std::map<std::string, int> ops;
  for (int id : graph.topological_order()) {
    const Node& n = graph.node(id);
    ++ops[op_name(n.op)];
    if (n.op == OpKind::kFusedConv) EXPECT_EQ(n.attrs.at("channels_last").as_int(), 1);
  }
  EXPECT_EQ(ops["FusedConv"], 2);
  EXPECT_EQ(ops["Transpose"], 2);  // x in; sum out
  EXPECT_EQ(ops["Reshape"], 1);    // the pooled mean out: [1, 1, 1, C] moves only size-1 dims
  EXPECT_EQ(ops["GlobalAveragePool"], 0);
  EXPECT_EQ(ops["Relu"], 0);  // fused into the first convolution
  EXPECT_EQ(graph.value(graph.outputs()[0]).name, sum_name);
  EXPECT_EQ(graph.value(graph.outputs()[1]).name, gap_name);

  std::vector<double> a = conv3x3(x, w1, b1);
  for (double& v : a) v = std::max(v, 0.0);
  Tensor a_t = Tensor::empty({1, c, h, wd});
  for (size_t i = 0; i < a.size(); ++i) a_t.data<float>()[i] = static_cast<float>(a[i]);
  std::vector<double> b = conv3x3(a_t, w2, b2);
  std::vector<double> sv = test::to_doubles(scale);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < h * wd; ++i) {
      size_t k = static_cast<size_t>(ch * h * wd + i);
      b[k] = b[k] * sv[static_cast<size_t>(ch)] + a[k];
    }
  std::vector<double> gap(static_cast<size_t>(c));
  const int64_t ph = h / 2, pw = wd / 2;
  for (int64_t ch = 0; ch < c; ++ch) {
    double total = 0;
    for (int64_t r = 0; r < ph; ++r)
      for (int64_t q = 0; q < pw; ++q) {
        double m = -1e300;
        for (int64_t dr = 0; dr < 2; ++dr)
          for (int64_t dq = 0; dq < 2; ++dq)
            m = std::max(m, b[static_cast<size_t>((ch * h + 2 * r + dr) * wd + 2 * q + dq)]);
        total += m;
      }
    gap[static_cast<size_t>(ch)] = total / static_cast<double>(ph * pw);
  }
  Runtime rt;
  std::vector<Tensor> got = graph.compile(&rt)->execute({x});
  test::expect_close(got[0], {1, c, h, wd}, b, 1e-5, 1e-4);
  test::expect_close(got[1], {1, c, 1, 1}, gap, 1e-5, 1e-4);
}

// ResNet's block tail, conv -> Add(residual) -> Relu, and MobileNet's, conv -> Add: the Add and
// the Relu become the convolution's sum and eltwise post-ops. Optimized for CUDA the FusedConvs
// stay in (N, C, H, W); run on the CPU they still give the same numbers.
TEST(FuseResidual, ConvAddReluIsOneFusedConv) {
  const int64_t c = 4, h = 6, wd = 5;
  Tensor x = test::random_tensor({1, c, h, wd}, 31, -2, 2);
  Tensor w1 = test::random_tensor({c, c, 3, 3}, 32, -1, 1);
  Tensor b1 = test::random_tensor({c}, 33, -1, 1);
  Tensor w2 = test::random_tensor({c, c, 3, 3}, 34, -1, 1);
  Tensor b2 = test::random_tensor({c}, 35, -1, 1);
  std::vector<double> a = conv3x3(x, w1, b1);
  for (double& v : a) v = std::max(v, 0.0);
  Tensor a_t = Tensor::empty({1, c, h, wd});
  for (size_t i = 0; i < a.size(); ++i) a_t.data<float>()[i] = static_cast<float>(a[i]);
  std::vector<double> b = conv3x3(a_t, w2, b2);
  for (int variant = 0; variant < 4; ++variant) {
    const bool relu = variant % 2 == 0, for_cuda = variant >= 2;
    SCOPED_TRACE(std::string(relu ? "conv-add-relu" : "conv-add") + (for_cuda ? " for cuda" : ""));
    Graph graph;
    Value* in = graph.add_input("x", x.shape());
    Value* y1 = graph.add_op(
        "Relu",
        {graph.add_op("Conv", {in, graph.add_constant("w1", w1), graph.add_constant("b1", b1)},
                      {{"pads", {1, 1, 1, 1}}})});
    Value* y2 =
        graph.add_op("Conv", {y1, graph.add_constant("w2", w2), graph.add_constant("b2", b2)},
                     {{"pads", {1, 1, 1, 1}}});
    Value* sum = graph.add_op("Add", {y2, y1});
    graph.mark_output(relu ? graph.add_op("Relu", {sum}) : sum);
    graph.optimize(std::vector<std::string>{for_cuda ? "cuda" : "cpu"});
    std::map<std::string, int> ops;
    for (int id : graph.topological_order()) ++ops[op_name(graph.node(id).op)];
    EXPECT_EQ(ops["FusedConv"], 2);
    if (for_cuda) EXPECT_EQ(ops.size(), 1u);  // no layout changes
    EXPECT_EQ(ops["Add"], 0);
    EXPECT_EQ(ops["Relu"], 0);
    std::vector<double> want = b;
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] += a[i];
      if (relu) want[i] = std::max(want[i], 0.0);
    }
    Runtime rt;
    test::expect_close(graph.compile(&rt)->execute({x})[0], {1, c, h, wd}, want, 1e-5, 1e-4);
  }
}

// DenseNet's BN -> ReLU with no convolution before it: on the CPU the BatchNormalization becomes a
// per-channel Mul and Add (then fused with the ReLU), with the same numbers.
TEST(BnToAffine, UnfoldedBatchNormIsAPerChannelAffine) {
  const int64_t c = 3;
  Tensor x = test::random_tensor({2, c, 4, 5}, 61, -2, 2);
  Tensor scale = test::random_tensor({c}, 62, 0.5, 2), beta = test::random_tensor({c}, 63, -1, 1);
  Tensor mean = test::random_tensor({c}, 64, -1, 1), var = test::random_tensor({c}, 65, 0.1, 2);
  Graph graph;
  Value* in = graph.add_input("x", x.shape());
  Value* bn = graph.add_op("BatchNormalization",
                           {in, graph.add_constant("s", scale), graph.add_constant("b", beta),
                            graph.add_constant("m", mean), graph.add_constant("v", var)},
                           {{"epsilon", 1e-3f}});
  graph.mark_output(graph.add_op("Relu", {bn}));
  graph.optimize();
  for (int id : graph.topological_order()) EXPECT_NE(op_name_of(graph, id), "BatchNormalization");
  std::vector<double> xv = test::to_doubles(x), sv = test::to_doubles(scale),
                      bv = test::to_doubles(beta), mv = test::to_doubles(mean),
                      vv = test::to_doubles(var);
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t ch = (i / 20) % c;
    want[i] = std::max((xv[i] - mv[ch]) / std::sqrt(vv[ch] + 1e-3) * sv[ch] + bv[ch], 0.0);
  }
  Runtime rt;
  test::expect_close(graph.compile(&rt)->execute({x})[0], {2, c, 4, 5}, want, 1e-5, 1e-4);
}

TEST(FuseResidual, ResidualOfAnotherShapeIsRejected) {
  Graph graph;
  Value* in = graph.add_input("x", {1, 2, 5, 5});
  Value* w = graph.add_constant("w", test::random_tensor({2, 2, 3, 3}, 9));
  Value* z = graph.add_input("z", {1, 2, 4, 4});
  EXPECT_THROW(graph.add_op("FusedConv", {in, w, nullptr, z}, {{"pads", {1, 1, 1, 1}}}),
               ShapeError);
}

TEST(ChannelsLast, SingleConvIsLeftAlone) {
  Graph graph;
  Value* in = graph.add_input("x", {1, 2, 5, 5});
  Value* y =
      graph.add_op("Conv", {in, graph.add_constant("w", test::random_tensor({2, 2, 3, 3}, 8))});
  graph.mark_output(graph.add_op("Relu", {y}));
  graph.optimize();
  for (int id : graph.topological_order()) EXPECT_NE(op_name_of(graph, id), "Transpose");
}

}  // namespace
}  // namespace lumen
