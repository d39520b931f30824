// The fuse-sibling-convs pass: SqueezeNet's fire module (a 1x1 and a 3x3 convolution of one input,
// each with a ReLU, concatenated) and its variants become one convolution where CUDA is among the
// backends, computing what the graph as built computes (here on the CPU's kernels, against the
// unmerged graph on random data); the forms it must leave alone stay as they are.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

std::map<std::string, int> histogram(const Graph& graph) {
  std::map<std::string, int> ops;
  for (int id : graph.topological_order()) ++ops[op_name(graph.node(id).op)];
  return ops;
}

// One sibling: its output channels, kernel size, padding and whether a ReLU follows.
struct Branch {
  int64_t out = 4, k = 1, pad = 0;
  bool relu = true;
};

// x [1, 8, 9, 9] (or `reuse` also read by a Sigmoid output) -> one convolution per branch ->
// Concat along the channels.
Graph siblings(const std::vector<Branch>& branches, int64_t stride = 1, bool extra_reader = false) {
  Graph g;
  Value* x = g.add_input("x", {1, 8, 9, 9});
  std::vector<Value*> parts;
  uint64_t seed = 40;
  for (const Branch& b : branches) {
    const std::string k = std::to_string(seed);
    Value* y =
        g.add_op("Conv",
                 {x, g.add_constant("w" + k, test::random_tensor({b.out, 8, b.k, b.k}, seed)),
                  g.add_constant("b" + k, test::random_tensor({b.out}, seed + 1))},
                 {{"pads", {b.pad, b.pad, b.pad, b.pad}}, {"strides", {stride, stride}}});
    seed += 2;
    parts.push_back(b.relu ? g.add_op("Relu", {y}) : y);
  }
  if (extra_reader) g.mark_output(g.add_op("Sigmoid", {parts[0]}));
  g.mark_output(g.add_op("Concat", parts, {{"axis", int64_t{1}}}));
  return g;
}

void check_merged(const std::function<Graph()>& build, bool merged) {
  Graph plain = build(), fused = build();
  fused.optimize({"cuda", "cpu"});
  std::map<std::string, int> ops = histogram(fused);
  EXPECT_EQ(ops["Concat"], merged ? 0 : 1);
  if (merged) EXPECT_EQ(ops["Conv"] + ops["FusedConv"], 1);
  Tensor x = test::random_tensor({1, 8, 9, 9}, 7);
  Runtime rt;
  std::vector<Tensor> want = plain.compile(&rt)->execute({x});
  std::vector<Tensor> got = fused.compile(&rt)->execute({x});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    test::expect_close(got[i], want[i].shape(), test::to_doubles(want[i]), 1e-5, 1e-5);
}

TEST(FuseSiblingConvs, FireModuleIsOneConvolution) {
  check_merged([] { return siblings({{5, 1, 0}, {6, 3, 1}}); }, true);
  // Stride 2, the larger kernel first, no activation.
  check_merged([] { return siblings({{6, 3, 1, false}, {5, 1, 0, false}}, 2); }, true);
  // Three kernel sizes (1.9x the multiply-adds).
  check_merged([] { return siblings({{5, 1, 0}, {6, 3, 1}, {7, 5, 2}}); }, true);
}

TEST(FuseSiblingConvs, OtherFormsAreLeftAlone) {
  // Different epilogues, a sibling read elsewhere too, more than twice the multiply-adds.
  check_merged([] { return siblings({{5, 1, 0, true}, {6, 3, 1, false}}); }, false);
  check_merged([] { return siblings({{5, 1, 0}, {6, 3, 1}}, 1, true); }, false);
  check_merged([] { return siblings({{20, 1, 0}, {2, 3, 1}}); }, false);
  // The CPU alone keeps the siblings (the extra multiply-adds cost it real time).
  Graph g = siblings({{5, 1, 0}, {6, 3, 1}});
  g.optimize({"cpu"});
  std::map<std::string, int> ops = histogram(g);
  EXPECT_EQ(ops["Conv"] + ops["FusedConv"], 2);
}

}  // namespace
}  // namespace lumen
