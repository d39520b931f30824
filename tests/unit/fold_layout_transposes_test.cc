// AxisLayerNorm and FusedElementwise's `perms` (the kernels, against double-precision references
// written here on random data) and the fold-layout-transposes and fold-channels-last-mlp passes
// (ConvNeXt's block and its downsampling norm: no Transpose left where CUDA is among the
// backends, the MLP as two 1x1 convolutions, the same numbers as the graph as built, nothing
// folded for the CPU alone).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "graph/fused_elementwise.h"
#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

// The reference: x seen as [outer, C, inner], each column normalized over C (double), written in
// x's layout or [outer, inner, C].
std::vector<double> axis_norm_reference(const Tensor& x, int axis, const Tensor& scale,
                                        const Tensor* bias, float epsilon, bool axis_last) {
  const std::vector<int64_t>& d = x.shape().dims();
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; ++k) outer *= d[k];
  for (size_t k = axis + 1; k < d.size(); ++k) inner *= d[k];
  const int64_t c_n = d[axis];
  const std::vector<double> xv = test::to_doubles(x), sv = test::to_doubles(scale);
  const std::vector<double> bv = bias ? test::to_doubles(*bias) : std::vector<double>(c_n, 0.0);
  std::vector<double> y(xv.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < c_n; ++c) mean += xv[(o * c_n + c) * inner + i];
      mean /= static_cast<double>(c_n);
      for (int64_t c = 0; c < c_n; ++c) {
        const double e = xv[(o * c_n + c) * inner + i] - mean;
        var += e * e;
      }
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(c_n) + epsilon);
      for (int64_t c = 0; c < c_n; ++c) {
        const double v = (xv[(o * c_n + c) * inner + i] - mean) * inv * sv[c] + bv[c];
        y[axis_last ? (o * inner + i) * c_n + c : (o * c_n + c) * inner + i] = v;
      }
    }
  return y;
}

void check_axis_norm(const Shape& shape, int axis, bool axis_last, bool with_bias, uint64_t seed) {
  SCOPED_TRACE(shape.to_string() + " axis " + std::to_string(axis) +
               (axis_last ? " axis_last" : "") + (with_bias ? " bias" : ""));
  const int64_t c = shape[axis];
  Tensor x = test::random_tensor(shape, seed, -2, 3);
  Tensor scale = test::random_tensor({c}, seed + 1, 0.5f, 1.5f);
  Tensor bias = test::random_tensor({c}, seed + 2, -1, 1);
  std::vector<test::OpInput> in = {x, scale};
  if (with_bias) in.emplace_back(bias);
  const float eps = 1e-5f;
  Tensor got = test::run_op(
      "AxisLayerNorm", in,
      {{"axis", int64_t{axis}}, {"epsilon", eps}, {"axis_last", int64_t{axis_last ? 1 : 0}}})[0];
  std::vector<int64_t> dims = shape.dims();
  if (axis_last) {
    dims.erase(dims.begin() + axis);
    dims.push_back(c);
  }
  test::expect_close(
      got, Shape(dims),
      axis_norm_reference(x, axis, scale, with_bias ? &bias : nullptr, eps, axis_last), 1e-5, 1e-5);
}

TEST(AxisLayerNormKernel, EveryLayoutAgainstReference) {
  // ConvNeXt's shapes (channels of 7 x 7 and 14 x 14 planes: columns not a multiple of 8), a
  // middle axis of rank 3, the first axis, and more channels than one pass of 32 groups.
  check_axis_norm({1, 96, 7, 7}, 1, true, true, 1);
  check_axis_norm({1, 96, 7, 7}, 1, false, true, 2);
  check_axis_norm({2, 40, 14, 14}, 1, true, false, 3);
  check_axis_norm({2, 40, 5, 3}, 1, false, false, 4);
  check_axis_norm({3, 200, 9}, 1, true, true, 5);
  check_axis_norm({37, 11}, 0, true, true, 6);
  check_axis_norm({4, 5, 6, 70}, 2, false, true, 7);
  // Written in x's layout with 4 and 2 columns a block on CUDA (30 x 30 and 12 x 12 planes).
  check_axis_norm({1, 64, 30, 30}, 1, false, true, 20);
  check_axis_norm({1, 40, 12, 12}, 1, false, false, 30);
}

TEST(AxisLayerNormKernel, BadInputsAreErrors) {
  Tensor x = test::random_tensor({1, 8, 3, 3}, 10);
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("AxisLayerNorm", {x, test::random_tensor({9}, 11)}, {{"axis", int64_t{1}}});
      },
      "AxisLayerNorm");  // 9 scales for 8 channels
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("AxisLayerNorm", {x, test::random_tensor({8}, 12)}, {{"axis", int64_t{4}}});
      },
      "AxisLayerNorm");
  test::expect_error<InvalidModel>(
      [&] {
        test::run_op("AxisLayerNorm", {x, test::random_tensor({8}, 13)}, {});
      },
      "AxisLayerNorm");  // axis is required
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("AxisLayerNorm",
                     {test::random_ints({1, 8, 3}, 14, 0, 5), test::random_ints({8}, 15, 0, 5)},
                     {{"axis", int64_t{1}}});
      },
      "AxisLayerNorm");
}

int64_t op(EwOp o) {
  return static_cast<int64_t>(o);
}

TEST(FusedElementwisePerms, TransposedInputsReadInPlace) {
  // out = t * g + r, t = Transpose(y, [0, 3, 1, 2]) read through perms, g [C, 1, 1], r as out.
  // CUDA stages t in 32 x 32 tiles: two batches of small tiles, then partial tiles on both sides.
  for (const Shape& ys : {Shape{2, 5, 6, 7}, Shape{1, 9, 11, 40}}) {
    SCOPED_TRACE(ys.to_string());
    const int64_t n = ys[0], h = ys[1], w = ys[2], c = ys[3];
    Tensor y = test::random_tensor(ys, 20);  // (N, H, W, C)
    Tensor g = test::random_tensor({c, 1, 1}, 21);
    Tensor r = test::random_tensor({n, c, h, w}, 22);
    const std::vector<int64_t> code = {op(EwOp::kMul), 3, 0, 1, op(EwOp::kAdd), 4, 3, 2};
    const std::vector<int64_t> perms = {0, 3, 1, 2, 0, 1, 2, 0, 1, 2, 3};
    Tensor got = test::run_op("FusedElementwise", {y, g, r}, {{"code", code}, {"perms", perms}})[0];
    const Shape out{n, c, h, w};
    const std::vector<double> yv = test::to_doubles(y), gv = test::to_doubles(g),
                              rv = test::to_doubles(r);
    std::vector<double> want;
    for (int64_t i = 0; i < out.numel(); ++i) {
      const std::vector<int64_t> at = test::unravel(i, out);  // n, c, h, w
      const double t = yv[((at[0] * h + at[2]) * w + at[3]) * c + at[1]];
      want.push_back(t * gv[at[1]] + rv[i]);
    }
    test::expect_close(got, out, want);
  }
  // A permuted input that then broadcasts: [C, 1] read as [1, C], added to [4, C].
  Tensor col = test::random_tensor({7, 1}, 23);
  Tensor m = test::random_tensor({4, 7}, 24);
  Tensor got2 = test::run_op("FusedElementwise", {col, m},
                             {{"code", std::vector<int64_t>{op(EwOp::kAdd), 2, 0, 1}},
                              {"perms", std::vector<int64_t>{1, 0, 0, 1}}})[0];
  std::vector<double> want2;
  const std::vector<double> cv = test::to_doubles(col), mv = test::to_doubles(m);
  for (int64_t i = 0; i < 28; ++i) want2.push_back(cv[i % 7] + mv[i]);
  test::expect_close(got2, Shape{4, 7}, want2);
}

TEST(FusedElementwisePerms, MalformedPermsAreInvalidModel) {
  Tensor x = test::random_tensor({2, 3}, 30);
  const std::vector<int64_t> relu = {op(EwOp::kRelu), 1, 0, 0};
  for (const std::vector<int64_t>& perms :
       {std::vector<int64_t>{0}, std::vector<int64_t>{0, 0}, std::vector<int64_t>{0, 2},
        std::vector<int64_t>{-1, 0}, std::vector<int64_t>{1, 0, 2}}) {
    SCOPED_TRACE(::testing::PrintToString(perms));
    test::expect_error<InvalidModel>(
        [&] {
          test::run_op("FusedElementwise", {x}, {{"code", relu}, {"perms", perms}});
        },
        "FusedElementwise");
  }
}

std::map<std::string, int> histogram(const Graph& graph) {
  std::map<std::string, int> ops;
  for (int id : graph.topological_order()) ++ops[op_name(graph.node(id).op)];
  return ops;
}

// ConvNeXt's block on x (1, c, h, w), as torchvision exports it: depthwise 7x7 Conv ->
// Transpose(0,2,3,1) -> LayerNorm (decomposed) -> MatMul + bias -> Gelu (Erf form) -> MatMul +
// bias -> Transpose(0,3,1,2) -> Mul by the layer scale [c, 1, 1] -> Add x; then the downsampling
// norm, Transpose -> LayerNorm -> Transpose, and a 1x1 Conv.
Graph convnext_block(int64_t c, int64_t h, int64_t w) {
  Graph g;
  Value* x = g.add_input("x", {1, c, h, w});
  uint64_t seed = 100;
  auto weight = [&](const std::string& name, const Shape& shape, float lo = -0.3f,
                    float hi = 0.3f) {
    return g.add_constant(name, test::random_tensor(shape, seed++, lo, hi));
  };
  auto layer_norm = [&](Value* v, const std::string& p) {
    Value* mean = g.add_op("ReduceMean", {v}, {{"axes", std::vector<int64_t>{-1}}});
    Value* d = g.add_op("Sub", {v, mean});
    Value* var =
        g.add_op("ReduceMean",
                 {g.add_op("Pow", {d, g.add_constant(p + "two", Tensor::scalar<float>(2.0f))})},
                 {{"axes", std::vector<int64_t>{-1}}});
    Value* den = g.add_op(
        "Sqrt", {g.add_op("Add", {var, g.add_constant(p + "eps", Tensor::scalar<float>(1e-6f))})});
    return g.add_op("Add",
                    {g.add_op("Mul", {g.add_op("Div", {d, den}), weight(p + "s", {c}, 0.5f, 1.5f)}),
                     weight(p + "b", {c})});
  };
  Value* dw = g.add_op("Conv", {x, weight("dw", {c, 1, 7, 7}), weight("dwb", {c})},
                       {{"group", c}, {"pads", {3, 3, 3, 3}}});
  Value* t1 = g.add_op("Transpose", {dw}, {{"perm", {0, 2, 3, 1}}});
  Value* n1 = layer_norm(t1, "n1");
  Value* h1 =
      g.add_op("Add", {g.add_op("MatMul", {n1, weight("w1", {c, 4 * c})}), weight("b1", {4 * c})});
  Value* a = g.add_op("Gelu", {h1});
  Value* h2 =
      g.add_op("Add", {g.add_op("MatMul", {a, weight("w2", {4 * c, c})}), weight("b2", {c})});
  Value* t2 = g.add_op("Transpose", {h2}, {{"perm", {0, 3, 1, 2}}});
  Value* block = g.add_op("Add", {g.add_op("Mul", {weight("gamma", {c, 1, 1}), t2}), x});
  Value* t3 = g.add_op("Transpose", {block}, {{"perm", {0, 2, 3, 1}}});
  Value* t4 = g.add_op("Transpose", {layer_norm(t3, "n2")}, {{"perm", {0, 3, 1, 2}}});
  g.mark_output(g.add_op("Conv", {t4, weight("pw", {c, c, 1, 1})}));
  return g;
}

TEST(FoldLayoutTransposes, ConvNeXtBlockHasNoTransposeLeft) {
  const int64_t c = 16, h = 7, w = 9;
  Graph plain = convnext_block(c, h, w), folded = convnext_block(c, h, w);
  folded.optimize({"cuda", "cpu"});
  std::map<std::string, int> ops = histogram(folded);
  EXPECT_EQ(ops["Transpose"], 0);
  EXPECT_EQ(ops["AxisLayerNorm"], 2);
  EXPECT_EQ(ops["LayerNormalization"], 0);
  EXPECT_EQ(ops["MatMul"] + ops["FusedMatMul"], 0);
  EXPECT_EQ(ops["FusedElementwise"], 0);
  // fold-channels-last-mlp: the MLP as a 1x1 FusedConv with the Gelu, then a 1x1 FusedConv with
  // the layer scale in its weights and the residual Add as its fourth input.
  int with_gelu = 0, with_residual = 0;
  for (int id : folded.topological_order()) {
    const Node& n = folded.node(id);
    if (n.op == OpKind::kAxisLayerNorm) {
      EXPECT_EQ(n.attrs.at("axis").as_int(), 1);
      EXPECT_EQ(n.attrs.at("axis_last").as_int(), 0);
    }
    if (n.op != OpKind::kFusedConv) continue;
    auto act = n.attrs.find("activation");
    if (act != n.attrs.end() && act->second.as_string() == "GeluErf") ++with_gelu;
    if (n.inputs.size() > 3 && n.inputs[3] >= 0) ++with_residual;
  }
  EXPECT_EQ(with_gelu, 1);
  EXPECT_EQ(with_residual, 1);
  // The folded graph computes what the graph as built computes (here on the CPU's kernels).
  Tensor x = test::random_tensor({1, c, h, w}, 7);
  Runtime rt;
  std::vector<Tensor> want = plain.compile(&rt)->execute({x});
  std::vector<Tensor> got = folded.compile(&rt)->execute({x});
  ASSERT_EQ(got.size(), 1U);
  test::expect_close(got[0], want[0].shape(), test::to_doubles(want[0]), 1e-4, 1e-4);
}

TEST(FoldLayoutTransposes, CpuAloneKeepsItsPlan) {
  Graph g = convnext_block(8, 5, 5);
  g.optimize({"cpu"});
  EXPECT_EQ(histogram(g)["AxisLayerNorm"], 0);
  Graph v = convnext_block(8, 5, 5);
  v.optimize({"vulkan", "cpu"});
  EXPECT_EQ(histogram(v)["AxisLayerNorm"], 0);
}

}  // namespace
}  // namespace lumen
