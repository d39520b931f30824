// The fuse-channel-scale pass and FusedConv's channel scale S: a squeeze-and-excitation's Mul
// before a pointwise convolution is folded into that convolution (no Mul left), and the result
// matches a naive double-precision conv -> relu -> scale -> 1x1 conv (+ residual) on random data,
// with S per image and shared by the batch; forms the pass must leave alone keep their Mul; a
// channel scale of the wrong shape is a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

int count(const Graph& graph, const std::string& op) {
  int n = 0;
  for (int id : graph.topological_order()) n += op_name(graph.node(id).op) == op ? 1 : 0;
  return n;
}

// The FusedConvs of `graph` that have a fifth input.
int scaled_convs(const Graph& graph) {
  int n = 0;
  for (int id : graph.topological_order()) {
    const Node& node = graph.node(id);
    n += node.op == OpKind::kFusedConv && node.inputs.size() > 4 && node.inputs[4] >= 0 ? 1 : 0;
  }
  return n;
}

struct Weights {
  Tensor wa, ba, wp, bp;
};

// x [N, C, H, W], s [Ns, C, 1, 1]: a = relu(conv3x3(x, wa) + ba) (padding 1), y = conv1x1(a * s,
// wp) + bp (+ a with `residual`). Returns y, [N, O, H, W], in double.
std::vector<double> reference(const Tensor& x, const Tensor& s, const Weights& w, bool residual) {
  const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  const int64_t o = w.wp.shape()[0];
  const std::vector<double> xv = test::to_doubles(x), sv = test::to_doubles(s);
  const std::vector<double> wa = test::to_doubles(w.wa), ba = test::to_doubles(w.ba);
  const std::vector<double> wp = test::to_doubles(w.wp), bp = test::to_doubles(w.bp);
  std::vector<double> a(static_cast<size_t>(n * c * h * wd));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < c; ++oc)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < wd; ++j) {
          double acc = ba[oc];
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t di = 0; di < 3; ++di)
              for (int64_t dj = 0; dj < 3; ++dj) {
                const int64_t ii = i + di - 1, jj = j + dj - 1;
                if (ii < 0 || ii >= h || jj < 0 || jj >= wd) continue;
                acc +=
                    xv[((b * c + ic) * h + ii) * wd + jj] * wa[((oc * c + ic) * 3 + di) * 3 + dj];
              }
          a[((b * c + oc) * h + i) * wd + j] = std::max(acc, 0.0);
        }
  const bool per_image = s.shape()[0] > 1;
  std::vector<double> y(static_cast<size_t>(n * o * h * wd));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t p = 0; p < h * wd; ++p) {
        double acc = bp[oc];
        for (int64_t ic = 0; ic < c; ++ic)
          acc += a[(b * c + ic) * h * wd + p] * sv[(per_image ? b * c : 0) + ic] * wp[oc * c + ic];
        if (residual) acc += a[(b * c + oc) * h * wd + p];
        y[(b * o + oc) * h * wd + p] = acc;
      }
  return y;
}

// The graph of `reference`; the Mul takes (a, s) or, with `s_first`, (s, a).
void build(Graph& g, const Shape& x, const Shape& s, const Weights& w, bool residual,
           bool s_first) {
  Value* xv = g.add_input("x", x);
  Value* sv = g.add_input("s", s);
  Value* a = g.add_op("Conv", {xv, g.add_constant("wa", w.wa), g.add_constant("ba", w.ba)},
                      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  a = g.add_op("Relu", {a});
  Value* m = s_first ? g.add_op("Mul", {sv, a}) : g.add_op("Mul", {a, sv});
  Value* y = g.add_op("Conv", {m, g.add_constant("wp", w.wp), g.add_constant("bp", w.bp)});
  if (residual) y = g.add_op("Add", {y, a});
  g.mark_output(y);
}

Weights random_weights(int64_t c, int64_t o, uint64_t seed) {
  return {test::random_tensor({c, c, 3, 3}, seed, -0.3f, 0.3f),
          test::random_tensor({c}, seed + 1, -0.5f, 0.5f),
          test::random_tensor({o, c, 1, 1}, seed + 2, -0.3f, 0.3f),
          test::random_tensor({o}, seed + 3, -0.5f, 0.5f)};
}

TEST(FuseChannelScale, SqueezeAndExcitationMulJoinsTheProjection) {
  struct Case {
    int64_t n, ns, c, o;
    bool residual, s_first;
  };
  // Channel counts that are not multiples of 8 or 16 (partial SIMD blocks when packing); S per
  // image and shared; the residual the projection also takes (fuse-residual).
  const Case cases[] = {{1, 1, 24, 40, false, false},
                        {2, 2, 19, 33, false, true},
                        {2, 1, 16, 16, true, false},
                        {3, 3, 37, 37, true, true}};
  for (const Case& k : cases) {
    SCOPED_TRACE("n " + std::to_string(k.n) + " ns " + std::to_string(k.ns) + " c " +
                 std::to_string(k.c) + " o " + std::to_string(k.o) +
                 (k.residual ? " residual" : "") + (k.s_first ? " s first" : ""));
    const Shape xs{k.n, k.c, 9, 11}, ss{k.ns, k.c, 1, 1};
    const Weights w = random_weights(k.c, k.o, 300 + k.c);
    Tensor x = test::random_tensor(xs, 310 + k.n, -1, 1);
    Tensor s = test::random_tensor(ss, 320 + k.ns, 0, 1);
    Graph g;
    build(g, xs, ss, w, k.residual, k.s_first);
    g.optimize({"cpu"});
    g.verify();
    EXPECT_EQ(count(g, "Mul"), 0) << g.to_text();
    EXPECT_EQ(scaled_convs(g), 1) << g.to_text();
    if (k.residual) EXPECT_EQ(count(g, "Add"), 0) << g.to_text();
    Runtime rt;
    Executable* exe = g.compile(&rt);
    for (int r = 0; r < 2; ++r)
      test::expect_close(exe->execute(std::vector<Tensor>{x, s})[0], {k.n, k.o, 9, 11},
                         reference(x, s, w, k.residual), 1e-5, 1e-4);
  }
}

TEST(FuseChannelScale, FormsThatKeepTheirMul) {
  const int64_t c = 16;
  const Weights w = random_weights(c, c, 400);
  // The scaled value also read elsewhere (a graph output): the Mul stays.
  {
    Graph g;
    Value* x = g.add_input("x", {1, c, 8, 8});
    Value* s = g.add_input("s", {1, c, 1, 1});
    Value* a = g.add_op("Conv", {x, g.add_constant("wa", w.wa), g.add_constant("ba", w.ba)},
                        {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Value* m = g.add_op("Mul", {a, s});
    g.mark_output(g.add_op("Conv", {m, g.add_constant("wp", w.wp), g.add_constant("bp", w.bp)}));
    g.mark_output(m);
    g.optimize({"cpu"});
    EXPECT_EQ(count(g, "Mul"), 1) << g.to_text();
    EXPECT_EQ(scaled_convs(g), 0);
  }
  // A scale per pixel, not per channel; and a 3x3 consumer: the Mul stays.
  for (bool per_pixel : {true, false}) {
    Graph g;
    Value* x = g.add_input("x", {1, c, 8, 8});
    Value* s = g.add_input("s", per_pixel ? Shape{1, c, 8, 8} : Shape{1, c, 1, 1});
    Value* a = g.add_op("Conv", {x, g.add_constant("wa", w.wa), g.add_constant("ba", w.ba)},
                        {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    Value* m = g.add_op("Mul", {a, s});
    Value* y = per_pixel
                   ? g.add_op("Conv", {m, g.add_constant("wp", w.wp), g.add_constant("bp", w.bp)})
                   : g.add_op("Conv", {m, g.add_constant("w3", w.wa), g.add_constant("b3", w.ba)},
                              {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    g.mark_output(y);
    g.optimize({"cpu"});
    EXPECT_EQ(count(g, "Mul"), 1) << (per_pixel ? "per pixel" : "3x3") << g.to_text();
    EXPECT_EQ(scaled_convs(g), 0);
  }
  // Off the CPU (CUDA among the backends) the pass does not run.
  Graph g;
  build(g, {1, c, 8, 8}, {1, c, 1, 1}, w, false, false);
  g.optimize({"cuda", "cpu"});
  EXPECT_EQ(count(g, "Mul"), 1) << g.to_text();
}

TEST(FuseChannelScale, ScaleOfTheWrongShapeIsAnError) {
  const int64_t c = 8;
  for (const Shape& bad : {Shape{1, 1, 1, c + 1}, Shape{2, 1, 1, c}, Shape{1, 1, c, 1}}) {
    Graph g;
    Value* x = g.add_input("x", {1, 4, 4, c});
    Value* s = g.add_input("s", bad);
    Value* w = g.add_constant("w", test::random_tensor({c, c, 1, 1}, 500));
    try {
      g.add_op("FusedConv", {x, w, nullptr, nullptr, s}, {{"channels_last", int64_t{1}}});
      ADD_FAILURE() << "no error for S " << bad.to_string();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("channel scale"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lumen
