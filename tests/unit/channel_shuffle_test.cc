// ChannelShuffle (the kernel, against a naive Concat -> shuffle -> split reference on random
// data) and the fuse-channel-shuffle pass (ShuffleNet's Concat -> Reshape -> Transpose -> Reshape
// -> Slices, and its variants, fused or left alone, with the same numbers as the graph as built).
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "../ops/op_test_util.h"
#include "graph/op_kind.h"
#include "lumen/lumen.h"

namespace lumen {
namespace {

// The naive reference: concatenate along `axis`, output channel j of the whole tensor reads
// concatenated channel (j % groups) * (C / groups) + j / groups, cut into `parts` equal outputs.
std::vector<std::vector<double>> shuffle_reference(const std::vector<Tensor>& inputs, int axis,
                                                   int64_t groups, int64_t parts,
                                                   Shape* part_shape) {
  std::vector<int64_t> dims = inputs[0].shape().dims();
  int64_t channels = 0;
  for (const Tensor& t : inputs) channels += t.shape().dims()[axis];
  dims[axis] = channels / parts;
  *part_shape = Shape(dims);
  std::vector<std::vector<double>> out(static_cast<size_t>(parts));
  for (int64_t o = 0; o < parts; ++o) {
    for (int64_t flat = 0; flat < part_shape->numel(); ++flat) {
      std::vector<int64_t> idx = test::unravel(flat, *part_shape);
      const int64_t j = o * dims[axis] + idx[axis];
      int64_t c = (j % groups) * (channels / groups) + j / groups;
      size_t k = 0;
      while (c >= inputs[k].shape().dims()[axis]) c -= inputs[k++].shape().dims()[axis];
      idx[axis] = c;
      out[o].push_back(test::to_doubles(inputs[k])[test::ravel(idx, inputs[k].shape())]);
    }
  }
  return out;
}

void check_kernel(const std::vector<Tensor>& inputs, int axis, int64_t groups, int64_t parts) {
  std::vector<test::OpInput> ins(inputs.begin(), inputs.end());
  std::vector<Tensor> got =
      test::run_op("ChannelShuffle", ins, {{"axis", int64_t{axis}}, {"groups", groups}},
                   static_cast<int>(parts));
  Shape part_shape;
  std::vector<std::vector<double>> want =
      shuffle_reference(inputs, axis, groups, parts, &part_shape);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    if (inputs[0].dtype() == DType::kFloat32)
      test::expect_close(got[o], part_shape, want[o], 0, 0);
    else
      test::expect_equal(got[o], inputs[0].dtype(), part_shape, want[o]);
  }
}

TEST(ChannelShuffleKernel, ChannelsLastTwoGroupsInterleaveInRegisters) {
  // ShuffleNet's block: two inputs of 24 channels, two outputs (runs of 12: one 8-wide step and
  // a scalar tail each), and one output with the whole tensor.
  std::vector<Tensor> in = {test::random_tensor({2, 3, 5, 24}, 1),
                            test::random_tensor({2, 3, 5, 24}, 2)};
  check_kernel(in, 3, 2, 2);
  check_kernel(in, 3, 2, 1);
  check_kernel({test::random_tensor({1, 4, 4, 40}, 3), test::random_tensor({1, 4, 4, 40}, 4)}, 3, 2,
               4);
}

TEST(ChannelShuffleKernel, PlanarAndOddSplits) {
  // (N, C, H, W): each channel moves as a block of H * W elements.
  check_kernel({test::random_tensor({2, 6, 3, 4}, 5), test::random_tensor({2, 6, 3, 4}, 6)}, 1, 2,
               2);
  // Unequal inputs (runs cross from one input to the next), three and four groups, one input.
  check_kernel({test::random_tensor({1, 5, 2, 3}, 7), test::random_tensor({1, 7, 2, 3}, 8)}, 1, 2,
               3);
  check_kernel({test::random_tensor({1, 3, 3, 12}, 9)}, 3, 3, 1);
  check_kernel({test::random_tensor({2, 2, 16}, 10), test::random_tensor({2, 2, 8}, 11)}, 2, 4, 2);
  check_kernel({test::random_tensor({1, 2, 2, 9}, 12), test::random_tensor({1, 2, 2, 9}, 13)}, 3, 2,
               3);  // parts of 6 channels: runs that stop at each output's end
  // Other element sizes go through the generic copy.
  check_kernel(
      {test::random_ints({1, 3, 3, 8}, 14, -50, 50), test::random_ints({1, 3, 3, 8}, 15, -50, 50)},
      3, 2, 2);
}

TEST(ChannelShuffleKernel, BadInputsAreErrors) {
  Tensor a = test::random_tensor({1, 4, 3, 3}, 20);
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("ChannelShuffle", {a}, {{"axis", int64_t{1}}, {"groups", int64_t{3}}});
      },
      "ChannelShuffle");  // 3 groups of 4 channels
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("ChannelShuffle", {a}, {{"axis", int64_t{1}}, {"groups", int64_t{2}}}, 3);
      },
      "ChannelShuffle");  // 3 outputs of 4 channels
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("ChannelShuffle", {a, test::random_tensor({1, 4, 3, 2}, 21)},
                     {{"axis", int64_t{1}}, {"groups", int64_t{2}}});
      },
      "ChannelShuffle");  // dims off the axis differ
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("ChannelShuffle", {a, test::random_ints({1, 4, 3, 3}, 22, 0, 5)},
                     {{"axis", int64_t{1}}, {"groups", int64_t{2}}});
      },
      "ChannelShuffle");  // dtypes differ
  test::expect_error<InvalidModel>(
      [&] {
        test::run_op("ChannelShuffle", {a}, {{"axis", int64_t{4}}, {"groups", int64_t{2}}});
      },
      "ChannelShuffle");
  test::expect_error<InvalidModel>(
      [&] {
        test::run_op("ChannelShuffle", {a}, {{"axis", int64_t{1}}});
      },
      "ChannelShuffle");
}

std::map<std::string, int> histogram(const Graph& graph) {
  std::map<std::string, int> ops;
  for (int id : graph.topological_order()) ++ops[op_name(graph.node(id).op)];
  return ops;
}

Tensor int64s(std::vector<int64_t> v) {
  Tensor t = Tensor::empty(Shape{static_cast<int64_t>(v.size())}, DType::kInt64);
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

// ShuffleNet's shuffle as exporters write it, on x1 and x2 ([1, c, h, w] each): Concat ->
// Reshape [1, 2, c, h, w] -> Transpose `perm` -> Reshape [1, 2c, h, w], then `cut` applied to it.
using Cut = std::function<std::vector<Value*>(Graph&, Value*)>;
Graph shuffle_graph(int64_t c, const std::vector<int64_t>& perm, const Cut& cut) {
  const int64_t h = 3, w = 4;
  Graph g;
  Value* x1 = g.add_input("x1", {1, c, h, w});
  Value* x2 = g.add_input("x2", {1, c, h, w});
  Value* cat = g.add_op("Concat", {x1, x2}, {{"axis", int64_t{1}}});
  Value* r1 = g.add_op("Reshape", {cat, g.add_constant("s1", int64s({1, 2, c, h, w}))});
  Value* t = g.add_op("Transpose", {r1}, {{"perm", perm}});
  Value* r2 = g.add_op("Reshape", {t, g.add_constant("s2", int64s({1, 2 * c, h, w}))});
  for (Value* v : cut(g, r2)) g.mark_output(v);
  return g;
}

Value* channel_slice(Graph& g, Value* x, int64_t begin, int64_t end) {
  static int n = 0;
  const std::string k = std::to_string(n++);
  return g.add_op(
      "Slice", {x, g.add_constant("b" + k, int64s({begin})), g.add_constant("e" + k, int64s({end})),
                g.add_constant("a" + k, int64s({1}))});
}

// Optimizes a copy of the graph, checks its op histogram, and that it computes what the graph as
// built computes (the unoptimized graph runs Concat, Reshape, Transpose and Slice kernels).
void check_pass(const std::function<Graph()>& build, const std::map<std::string, int>& want_ops,
                double tolerance = 0) {
  Graph plain = build(), fused = build();
  fused.optimize();
  std::map<std::string, int> ops = histogram(fused);
  for (const auto& [op, count] : want_ops) EXPECT_EQ(ops[op], count) << op;
  const int64_t c = plain.value(plain.inputs()[0]).type.shape.dims()[1];
  std::vector<Tensor> in = {test::random_tensor({1, c, 3, 4}, 30),
                            test::random_tensor({1, c, 3, 4}, 31)};
  Runtime rt;
  std::vector<Tensor> want = plain.compile(&rt)->execute(in);
  std::vector<Tensor> got = fused.compile(&rt)->execute(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    test::expect_close(got[i], want[i].shape(), test::to_doubles(want[i]), tolerance, tolerance);
}

TEST(FuseChannelShuffle, ShuffleThenEqualSlicesIsOneNode) {
  Cut halves = [](Graph& g, Value* y) {
    return std::vector<Value*>{channel_slice(g, y, 4, 8), channel_slice(g, y, 0, 4)};
  };
  check_pass(
      [&] {
        return shuffle_graph(4, {0, 2, 1, 3, 4}, halves);
      },
      {{"ChannelShuffle", 1}, {"Slice", 0}, {"Transpose", 0}, {"Reshape", 0}, {"Concat", 0}});
  Cut split = [](Graph& g, Value* y) {
    return g.add_op("Split", {y, g.add_constant("parts", int64s({2, 2, 2, 2}))}, 4,
                    {{"axis", int64_t{-3}}});
  };
  check_pass(
      [&] {
        return shuffle_graph(4, {0, 2, 1, 3, 4}, split);
      },
      {{"ChannelShuffle", 1}, {"Split", 0}, {"Transpose", 0}});
  Cut whole = [](Graph& g, Value* y) { return std::vector<Value*>{g.add_op("Relu", {y})}; };
  check_pass(
      [&] {
        return shuffle_graph(6, {0, 2, 1, 3, 4}, whole);
      },
      {{"ChannelShuffle", 1}, {"Relu", 1}, {"Transpose", 0}});
  Cut output = [](Graph&, Value* y) { return std::vector<Value*>{y}; };
  check_pass(
      [&] {
        return shuffle_graph(6, {0, 2, 1, 3, 4}, output);
      },
      {{"ChannelShuffle", 1}, {"Transpose", 0}});
}

TEST(FuseChannelShuffle, OtherPatternsAreLeftAlone) {
  // A Transpose that is no shuffle of the split axis.
  Cut output = [](Graph&, Value* y) { return std::vector<Value*>{y}; };
  check_pass(
      [&] {
        return shuffle_graph(4, {0, 1, 2, 4, 3}, output);
      },
      {{"ChannelShuffle", 0}, {"Transpose", 1}});
  // Unequal slices: the shuffle fuses, the Slices stay.
  Cut unequal = [](Graph& g, Value* y) {
    return std::vector<Value*>{channel_slice(g, y, 0, 3), channel_slice(g, y, 3, 8)};
  };
  check_pass(
      [&] {
        return shuffle_graph(4, {0, 2, 1, 3, 4}, unequal);
      },
      {{"ChannelShuffle", 1}, {"Slice", 2}});
  // A Slice that also cuts another axis.
  Cut rows = [](Graph& g, Value* y) {
    Value* half = g.add_op(
        "Slice", {y, g.add_constant("rb", int64s({0, 0})), g.add_constant("re", int64s({4, 2})),
                  g.add_constant("ra", int64s({1, 2}))});
    return std::vector<Value*>{half, channel_slice(g, y, 4, 8)};
  };
  check_pass(
      [&] {
        return shuffle_graph(4, {0, 2, 1, 3, 4}, rows);
      },
      {{"ChannelShuffle", 1}, {"Slice", 2}});
}

// The pass runs where every backend of the compile has a ChannelShuffle kernel (the CPU and
// CUDA), and not where one lacks it (Vulkan).
TEST(FuseChannelShuffle, RunsWhereEveryBackendHasTheKernel) {
  Cut halves = [](Graph& g, Value* y) {
    return std::vector<Value*>{channel_slice(g, y, 0, 4), channel_slice(g, y, 4, 8)};
  };
  Graph cuda = shuffle_graph(4, {0, 2, 1, 3, 4}, halves);
  cuda.optimize({"cuda", "cpu"});
  std::map<std::string, int> ops = histogram(cuda);
  EXPECT_EQ(ops["ChannelShuffle"], 1);
  EXPECT_EQ(ops["Slice"] + ops["Transpose"] + ops["Concat"], 0);
  Graph vulkan = shuffle_graph(4, {0, 2, 1, 3, 4}, halves);
  vulkan.optimize({"vulkan", "cpu"});
  ops = histogram(vulkan);
  EXPECT_EQ(ops["ChannelShuffle"], 0);
  EXPECT_EQ(ops["Transpose"], 1);
}

// Between two convolutions the shuffle joins their channels-last region: no Transpose but the
// region's way in and out, and the numbers of the graph as built.
TEST(FuseChannelShuffle, JoinsChannelsLastRegion) {
  auto build = [] {
    const int64_t c = 8;
    Graph g;
    Value* x = g.add_input("x1", {1, c, 3, 4});
    Value* x2 = g.add_input("x2", {1, c, 3, 4});
    Value* a = g.add_op(
        "Relu",
        {g.add_op("Conv", {x, g.add_constant("w1", test::random_tensor({c, c, 1, 1}, 40))})});
    Value* b = g.add_op(
        "Relu",
        {g.add_op("Conv", {x2, g.add_constant("w2", test::random_tensor({c, c, 1, 1}, 41))})});
    Value* cat = g.add_op("Concat", {a, b}, {{"axis", int64_t{1}}});
    Value* r1 = g.add_op("Reshape", {cat, g.add_constant("s1", int64s({1, 2, c, 3, 4}))});
    Value* t = g.add_op("Transpose", {r1}, {{"perm", {0, 2, 1, 3, 4}}});
    Value* r2 = g.add_op("Reshape", {t, g.add_constant("s2", int64s({1, 2 * c, 3, 4}))});
    Value* lo = channel_slice(g, r2, 0, c);
    Value* hi = channel_slice(g, r2, c, 2 * c);
    Value* y = g.add_op("Conv", {hi, g.add_constant("w3", test::random_tensor({c, c, 3, 3}, 42))},
                        {{"pads", {1, 1, 1, 1}}});
    g.mark_output(g.add_op("Concat", {lo, y}, {{"axis", int64_t{1}}}));
    return g;
  };
  check_pass(build, {{"ChannelShuffle", 1}, {"Transpose", 3}, {"Slice", 0}}, 1e-5);
  Graph g = build();
  g.optimize();
  for (int id : g.topological_order())
    if (g.node(id).op == OpKind::kChannelShuffle)
      EXPECT_EQ(g.node(id).attrs.at("axis").as_int(), 3);
}

}  // namespace
}  // namespace lumen
