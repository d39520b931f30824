// FusedConcat (the kernel, against a naive concatenate -> scale -> shift -> ReLU reference on
// random data) and the fuse-concat pass (DenseNet's Concat -> BatchNormalization -> ReLU, fused
// or left alone, with the same numbers as the graph as built).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "../ops/op_test_util.h"
#include "graph/op_kind.h"
#include "lumen/lumen.h"

namespace lumen {
namespace {

// relu?(concat(pieces, axis) * scale[c] + shift[c]), in double.
std::vector<double> reference(const std::vector<Tensor>& pieces, const Tensor& scale,
                              const Tensor& shift, int axis, bool relu, Shape* shape) {
  std::vector<int64_t> dims = pieces[0].shape().dims();
  dims[axis] = 0;
  for (const Tensor& p : pieces) dims[axis] += p.shape().dims()[axis];
  *shape = Shape(dims);
  const std::vector<double> s = test::to_doubles(scale), b = test::to_doubles(shift);
  std::vector<double> out;
  for (int64_t flat = 0; flat < shape->numel(); ++flat) {
    std::vector<int64_t> idx = test::unravel(flat, *shape);
    const int64_t c = idx[axis];
    int64_t local = c;
    size_t k = 0;
    while (local >= pieces[k].shape().dims()[axis]) local -= pieces[k++].shape().dims()[axis];
    idx[axis] = local;
    double v = test::to_doubles(pieces[k])[test::ravel(idx, pieces[k].shape())] * s[c] + b[c];
    out.push_back(relu ? std::max(v, 0.0) : v);
  }
  return out;
}

void check_kernel(const std::vector<Tensor>& pieces, int axis_attr, bool relu) {
  const int axis = axis_attr < 0 ? axis_attr + pieces[0].shape().rank() : axis_attr;
  int64_t channels = 0;
  for (const Tensor& p : pieces) channels += p.shape().dims()[axis];
  const Tensor scale = test::random_tensor({channels}, 50, 0.5f, 2.0f);
  const Tensor shift = test::random_tensor({channels}, 51);
  std::vector<test::OpInput> ins = {test::constant(scale), test::constant(shift)};
  ins.insert(ins.end(), pieces.begin(), pieces.end());
  Tensor got = test::run_op("FusedConcat", ins,
                            {{"axis", int64_t{axis_attr}}, {"activation", relu ? "Relu" : ""}})[0];
  Shape shape;
  std::vector<double> want = reference(pieces, scale, shift, axis, relu, &shape);
  test::expect_close(got, shape, want, 1e-6, 1e-6);
}

TEST(FusedConcatKernel, ChannelsLastAndChannelsFirst) {
  // (N, H, W, C) pieces of 64, 32 and 5 channels; a single piece; (N, C, H, W) pieces.
  check_kernel({test::random_tensor({1, 4, 5, 64}, 1), test::random_tensor({1, 4, 5, 32}, 2),
                test::random_tensor({1, 4, 5, 5}, 3)},
               3, true);
  check_kernel({test::random_tensor({2, 3, 3, 19}, 4)}, -1, false);
  check_kernel({test::random_tensor({2, 3, 4, 5}, 5), test::random_tensor({2, 7, 4, 5}, 6)}, 1,
               true);
  check_kernel({test::random_tensor({3, 2, 6}, 7), test::random_tensor({3, 1, 6}, 8)}, 1, false);
}

TEST(FusedConcatKernel, BadInputsAreErrors) {
  Tensor x = test::random_tensor({1, 4, 2, 2}, 9);
  Tensor four = test::random_tensor({4}, 10);
  auto attrs = Attributes{{"axis", int64_t{1}}};
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("FusedConcat",
                     {test::constant(test::random_tensor({3}, 11)), test::constant(four), x},
                     attrs);
      },
      "FusedConcat");  // 3 scales for 4 channels
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("FusedConcat",
                     {test::constant(four), test::constant(four),
                      test::random_tensor({1, 2, 2, 3}, 12), test::random_tensor({1, 2, 3, 3}, 13)},
                     attrs);
      },
      "FusedConcat");  // pieces differ off the axis
  test::expect_error<InvalidModel>(
      [&] {
        test::run_op("FusedConcat", {test::constant(four), test::constant(four), x},
                     {{"axis", int64_t{1}}, {"activation", "Tanh"}});
      },
      "FusedConcat");
  test::expect_error<InvalidModel>(
      [&] {
        test::run_op("FusedConcat", {test::constant(four), test::constant(four)}, attrs);
      },
      "FusedConcat");  // no piece
  test::expect_error<ShapeError>(
      [&] {
        test::run_op(
            "FusedConcat",
            {test::constant(four), test::constant(four), test::random_ints({1, 4, 2, 2}, 14, 0, 3)},
            attrs);
      },
      "FusedConcat");  // not float32
}

std::map<std::string, int> histogram(const Graph& graph) {
  std::map<std::string, int> ops;
  for (int id : graph.topological_order()) ++ops[op_name(graph.node(id).op)];
  return ops;
}

// Concat of x1 [1, 3, 4, 9] and x2 [1, 6, 4, 9] -> Mul(scale) -> Add(shift) -> `tail`: optimized,
// the op counts are `want_ops` and the outputs those of the graph as built.
using Tail = std::function<void(Graph&, Value* cat, Value* affine)>;
void check_pass(const Tensor& scale, const Tail& tail, const std::map<std::string, int>& want_ops) {
  auto build = [&] {
    Graph g;
    Value* x1 = g.add_input("x1", {1, 3, 4, 9});
    Value* x2 = g.add_input("x2", {1, 6, 4, 9});
    Value* cat = g.add_op("Concat", {x1, x2}, {{"axis", int64_t{1}}});
    Value* scaled = g.add_op("Mul", {g.add_constant("scale", scale), cat});
    Value* shifted =
        g.add_op("Add", {scaled, g.add_constant("shift", test::random_tensor({9, 1, 1}, 21))});
    tail(g, cat, shifted);
    return g;
  };
  Graph plain = build(), fused = build();
  fused.optimize();
  std::map<std::string, int> ops = histogram(fused);
  for (const auto& [op, count] : want_ops) EXPECT_EQ(ops[op], count) << op;
  std::vector<Tensor> in = {test::random_tensor({1, 3, 4, 9}, 22),
                            test::random_tensor({1, 6, 4, 9}, 23)};
  Runtime rt;
  std::vector<Tensor> want = plain.compile(&rt)->execute(in);
  std::vector<Tensor> got = fused.compile(&rt)->execute(in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    test::expect_close(got[i], want[i].shape(), test::to_doubles(want[i]), 1e-6, 1e-6);
}

TEST(FuseConcat, ConcatBatchNormReluIsOneNode) {
  const Tensor per_channel = test::random_tensor({9, 1, 1}, 20, 0.5f, 2.0f);
  Tail relu = [](Graph& g, Value*, Value* y) { g.mark_output(g.add_op("Relu", {y})); };
  check_pass(per_channel, relu,
             {{"FusedConcat", 1}, {"Concat", 0}, {"Relu", 0}, {"FusedElementwise", 0}});
  Tail plain = [](Graph& g, Value*, Value* y) { g.mark_output(y); };
  check_pass(per_channel, plain, {{"FusedConcat", 1}, {"Concat", 0}});
}

TEST(FuseConcat, OtherPatternsAreLeftAlone) {
  Tail relu = [](Graph& g, Value*, Value* y) { g.mark_output(g.add_op("Relu", {y})); };
  // A scale of one value per channel's count that varies along the width instead.
  check_pass(test::random_tensor({1, 1, 9}, 24), relu, {{"FusedConcat", 0}, {"Concat", 1}});
  // The concatenation is read by something else too.
  Tail shared = [](Graph& g, Value* cat, Value* y) {
    g.mark_output(g.add_op("Relu", {y}));
    g.mark_output(g.add_op("Neg", {cat}));
  };
  check_pass(test::random_tensor({9, 1, 1}, 25), shared, {{"FusedConcat", 0}, {"Concat", 1}});
}

}  // namespace
}  // namespace lumen
