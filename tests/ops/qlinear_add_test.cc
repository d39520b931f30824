// Tests of QLinearAdd (com.microsoft; cpu/quant_add.cc), of its fusion from DequantizeLinear ->
// Add [-> Relu] -> QuantizeLinear (passes/fuse_qdq.cc), and of quantized graphs kept channels-last
// (passes/channels_last.cc, QLinearConv with channels_last=1 on oneDNN and the reference loops).
// The kernel is checked against the spec's formula computed here in float32, element by element
// and exactly; fused graphs against the same graph unoptimized.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "graph/op_kind.h"
#include "ops/op_test_util.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

using test::constant;
using test::omitted;
using test::random_ints;
using test::random_tensor;
using test::run_op;

int32_t lo_of(DType t) {
  return t == DType::kUInt8 ? 0 : -128;
}

// x * y, kept a call so that no compiler contracts the sum of two products into an FMA (which
// rounds once where the spec's float32 steps round twice).
[[gnu::noinline]] float product(float x, float y) {
  return x * y;
}

// The spec's C for A and B broadcast to `out`: each step rounded to float32, ties to even.
std::vector<int32_t> reference_add(const Tensor& a, float as, int32_t az, const Tensor& b, float bs,
                                   int32_t bz, float cs, int32_t cz, const Shape& out) {
  std::vector<int32_t> c(static_cast<size_t>(out.numel()));
  const int32_t lo = lo_of(a.dtype()), hi = lo + 255;
  for (int64_t k = 0; k < out.numel(); ++k) {
    const std::vector<int64_t> index = test::unravel(k, out);
    const auto av =
        static_cast<int32_t>(a.item_as_double(test::broadcast_source(index, a.shape())));
    const auto bv =
        static_cast<int32_t>(b.item_as_double(test::broadcast_source(index, b.shape())));
    const float sum =
        product(static_cast<float>(av - az), as) + product(static_cast<float>(bv - bz), bs);
    const float q = std::nearbyint(sum / cs) + static_cast<float>(cz);
    c[k] = static_cast<int32_t>(std::clamp(q, static_cast<float>(lo), static_cast<float>(hi)));
  }
  return c;
}

void expect_equal(const Tensor& got, const std::vector<int32_t>& want, size_t min_distinct) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  std::map<int32_t, int> seen;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(static_cast<int32_t>(got.item_as_double(static_cast<int64_t>(i))), want[i])
        << "element " << i;
    ++seen[want[i]];
  }
  EXPECT_GE(seen.size(), min_distinct) << "outputs mostly saturated: pick other scales";
}

TEST(QLinearAdd, MatchesTheFormulaWithBroadcasting) {
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    const int32_t lo = lo_of(t);
    // Same shapes (one contiguous row), a per-channel operand, and a scalar one.
    for (const Shape& bshape : {Shape{2, 6, 5, 7}, Shape{1, 6, 1, 1}, Shape{7}, Shape{}}) {
      const Shape ashape{2, 6, 5, 7};
      const Tensor a = random_ints(ashape, 10, lo, lo + 255, t);
      const Tensor b = random_ints(bshape, 11, lo, lo + 255, t);
      const float as = 0.031f, bs = 0.017f, cs = 0.045f;
      const int32_t az = lo + 131, bz = lo + 97, cz = lo + 120;
      const Tensor got =
          run_op("QLinearAdd",
                 {a, constant(Tensor::scalar<float>(as)), constant(random_ints({}, 1, az, az, t)),
                  b, constant(Tensor::scalar<float>(bs)), constant(random_ints({}, 1, bz, bz, t)),
                  constant(Tensor::scalar<float>(cs)), constant(random_ints({}, 1, cz, cz, t))})[0];
      ASSERT_EQ(got.shape(), ashape);
      ASSERT_EQ(got.dtype(), t);
      expect_equal(got, reference_add(a, as, az, b, bs, bz, cs, cz, ashape), 100);
    }
  }
}

TEST(QLinearAdd, OmittedZeroPointsAreZero) {
  const Tensor a = random_ints({4, 33}, 20, 0, 255, DType::kUInt8);
  const Tensor b = random_ints({4, 33}, 21, 0, 255, DType::kUInt8);
  const Tensor got = run_op("QLinearAdd", {a, constant(Tensor::scalar<float>(0.02f)), omitted(), b,
                                           constant(Tensor::scalar<float>(0.03f)), omitted(),
                                           constant(Tensor::scalar<float>(0.07f))})[0];
  expect_equal(got, reference_add(a, 0.02f, 0, b, 0.03f, 0, 0.07f, 0, Shape{4, 33}), 50);
}

TEST(QLinearAdd, BadInputsNameTheOp) {
  const Tensor a = random_ints({2, 3}, 30, 0, 255, DType::kUInt8);
  const Tensor s = Tensor::scalar<float>(0.1f);
  const Tensor z = Tensor::zeros({}, DType::kUInt8);
  // Mixed 8-bit types, shapes that do not broadcast, a per-axis scale.
  const std::vector<std::pair<std::vector<test::OpInput>, std::string>> cases = {
      {{a, constant(s), constant(z), random_ints({2, 3}, 31, -5, 5, DType::kInt8), constant(s),
        omitted(), constant(s), constant(z)},
       "B is int8 but A is uint8"},
      {{a, constant(s), constant(z), random_ints({4}, 32, 0, 9, DType::kUInt8), constant(s),
        constant(z), constant(s), constant(z)},
       "cannot be broadcast"},
      {{a, constant(Tensor::from_vector<float>(Shape{3}, {0.1f, 0.2f, 0.3f})), constant(z), a,
        constant(s), constant(z), constant(s), constant(z)},
       "A_scale must be a scalar"},
  };
  for (const auto& [inputs, needle] : cases) {
    try {
      run_op("QLinearAdd", inputs);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("node 'node' (QLinearAdd)"), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  }
}

// Q -> DQ of float x, per tensor.
Value* quant_dequant(Graph& g, Value* x, float scale, int64_t zero, const std::string& n) {
  Value* s = g.add_constant(n + "_s", Tensor::scalar<float>(scale));
  Value* z = g.add_constant(n + "_z", random_ints({}, 1, zero, zero, DType::kUInt8));
  Value* q = g.add_op("QuantizeLinear", {x, s, z}, {}, n + "_q");
  return g.add_op("DequantizeLinear", {q, s, z}, {}, n + "_dq");
}

std::vector<Tensor> run_graph(Graph& graph, const std::vector<Tensor>& inputs) {
  Runtime rt;
  CompileOptions options;
  options.backends = {"cpu"};
  return graph.compile(&rt, options)->execute(inputs);
}

TEST(QLinearAdd, FusesDequantizeAddReluQuantizeExactly) {
  const Tensor x = random_tensor({2, 5, 9}, 40, -2.0f, 2.0f);
  const Tensor y = random_tensor({2, 5, 9}, 41, -1.0f, 3.0f);
  for (bool relu : {false, true}) {
    auto build = [&](Graph& g) {
      Value* a = quant_dequant(g, g.add_input("x", x.shape()), 4.0f / 255, 128, "a");
      Value* b = quant_dequant(g, g.add_input("y", y.shape()), 4.0f / 255, 64, "b");
      Value* sum = g.add_op("Add", {a, b}, {}, "add");
      if (relu) sum = g.add_op("Relu", {sum}, {}, "relu");
      Value* s = g.add_constant("c_s", Tensor::scalar<float>(5.0f / 255));
      Value* z =
          g.add_constant("c_z", random_ints({}, 1, relu ? 0 : 100, relu ? 0 : 100, DType::kUInt8));
      g.mark_output(g.add_op("QuantizeLinear", {sum, s, z}, {}, "c_q"));
    };
    Graph plain, fused;
    build(plain);
    build(fused);
    fused.optimize();
    std::map<std::string, int> ops = op_histogram(fused);
    EXPECT_EQ(ops["QLinearAdd"], 1) << "relu " << relu;
    EXPECT_EQ(ops["DequantizeLinear"] + ops["Add"] + ops["Relu"], 0) << "relu " << relu;
    const Tensor want = run_graph(plain, {x, y})[0], got = run_graph(fused, {x, y})[0];
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_EQ(got.item_as_double(i), want.item_as_double(i)) << "element " << i;
  }
}

// QuantizeLinear and DequantizeLinear without zero points (uint8, zero point 0): the fused
// QLinearAdd leaves its zero points omitted and still matches the three ops.
TEST(QLinearAdd, FusesWithOmittedZeroPoints) {
  const Tensor x = random_tensor({3, 17}, 45, 0.0f, 2.0f);
  auto build = [&](Graph& g) {
    Value* s = g.add_constant("s", Tensor::scalar<float>(2.0f / 255));
    Value* cs = g.add_constant("cs", Tensor::scalar<float>(3.0f / 255));
    Value* q = g.add_op("QuantizeLinear", {g.add_input("x", x.shape()), s}, {}, "q");
    Value* d = g.add_op("DequantizeLinear", {q, s}, {}, "dq");
    Value* sum = g.add_op("Add", {d, d}, {}, "add");
    g.mark_output(g.add_op("QuantizeLinear", {sum, cs}, {}, "c_q"));
  };
  Graph plain, fused;
  build(plain);
  build(fused);
  fused.optimize();
  EXPECT_EQ(op_histogram(fused)["QLinearAdd"], 1);
  const Tensor want = run_graph(plain, {x})[0], got = run_graph(fused, {x})[0];
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(got.item_as_double(i), want.item_as_double(i)) << "element " << i;
}

// A residual block as ONNX Runtime's quantizer writes it: Q -> DQ -> Conv 3x3 -> Relu -> Q -> DQ ->
// Conv 1x1 -> Q -> DQ, + the block's input (DQ) -> Relu -> Q -> DQ -> output. Optimized, it runs
// two channels-last QLinearConvs and a QLinearAdd between one Transpose in and one out.
TEST(QdqChannelsLast, ResidualBlockMatchesTheUnfusedGraph) {
  const int64_t c = 16;
  const Tensor x = random_tensor({2, c, 10, 9}, 50, -2.0f, 2.0f);
  const float x_scale = 4.0f / 255;
  auto weight = [](Graph& g, int64_t k, uint64_t seed, const std::string& n) {
    Value* w = g.add_constant(n + "_w", random_ints({c, c, k, k}, seed, -63, 63, DType::kInt8));
    Value* s = g.add_constant(n + "_ws", random_tensor({c}, seed + 1, 0.004f, 0.008f));
    Value* z = g.add_constant(n + "_wz", Tensor::zeros({c}, DType::kInt8));
    Attributes a;
    a["axis"] = int64_t{0};
    return g.add_op("DequantizeLinear", {w, s, z}, a, n + "_wdq");
  };
  auto build = [&](Graph& g) {
    Value* in = quant_dequant(g, g.add_input("x", x.shape()), x_scale, 128, "in");
    Attributes pad;
    pad["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    Value* h = g.add_op("Conv", {in, weight(g, 3, 60, "c1")}, pad, "conv1");
    h = quant_dequant(g, g.add_op("Relu", {h}, {}, "relu1"), 12.0f / 255, 0, "h");
    h = g.add_op("Conv", {h, weight(g, 1, 70, "c2")}, {}, "conv2");
    h = quant_dequant(g, h, 10.0f / 255, 128, "h2");
    Value* sum = g.add_op("Relu", {g.add_op("Add", {h, in}, {}, "add")}, {}, "relu2");
    g.mark_output(quant_dequant(g, sum, 8.0f / 255, 0, "out"));
  };
  Graph plain, fused;
  build(plain);
  build(fused);
  fused.optimize();
  std::map<std::string, int> ops = op_histogram(fused);
  EXPECT_EQ(ops["QLinearConv"], 2);
  EXPECT_EQ(ops["QLinearAdd"], 1);
  EXPECT_EQ(ops["Transpose"], 2);
  int channels_last = 0;
  for (int id = 0; id < fused.num_nodes(); ++id)
    if (const Node& n = fused.node(id); !n.removed && n.op == OpKind::kQLinearConv)
      channels_last += n.attrs.count("channels_last") && n.attrs.at("channels_last").as_int() == 1;
  EXPECT_EQ(channels_last, 2);
  const Tensor want = run_graph(plain, {x})[0], got = run_graph(fused, {x})[0];
  ASSERT_EQ(got.shape(), want.shape());
  // oneDNN requantizes in float32 where the unfused graph's Conv sums in float: one quantum of the
  // convolutions' outputs, carried through the Add, is the most either side may differ by.
  int off = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = std::fabs(got.item_as_double(i) - want.item_as_double(i));
    ASSERT_LE(d, 2 * 8.0 / 255 + 1e-6) << "element " << i;
    off += d > 0;
  }
  EXPECT_LE(off, want.numel() / 20) << "too many differences";
}

// QLinearConv channels-last, oneDNN (constant weights) against the reference loops (runtime
// weights), both reading (N, H, W, C).
TEST(QdqChannelsLast, DnnlConvMatchesReference) {
  const int64_t c = 8, m = 24;
  const Tensor x = random_ints({2, 7, 6, c}, 80, 0, 255, DType::kUInt8);
  const Tensor w = random_ints({m, c, 3, 3}, 81, -63, 63, DType::kInt8);
  const Tensor ws = random_tensor({m}, 82, 0.002f, 0.004f);
  const Tensor b = random_ints({m}, 83, -2000, 2000, DType::kInt32);
  Attributes attrs;
  attrs["pads"] = std::vector<int64_t>{1, 0, 1, 2};
  attrs["strides"] = std::vector<int64_t>{2, 1};
  attrs["channels_last"] = int64_t{1};
  auto run = [&](bool const_w) {
    return run_op("QLinearConv",
                  {x, constant(Tensor::scalar<float>(0.02f)),
                   constant(random_ints({}, 1, 110, 110, DType::kUInt8)), test::OpInput(w, const_w),
                   constant(ws), constant(Tensor::zeros({m}, DType::kInt8)),
                   constant(Tensor::scalar<float>(0.05f)),
                   constant(random_ints({}, 1, 90, 90, DType::kUInt8)), constant(b)},
                  attrs)[0];
  };
  const Tensor fast = run(true), ref = run(false);
  ASSERT_EQ(fast.shape(), (Shape{2, 4, 6, m})) << fast.shape().to_string();
  int off = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    ASSERT_LE(std::fabs(fast.item_as_double(i) - ref.item_as_double(i)), 1.0) << "element " << i;
    off += fast.item_as_double(i) != ref.item_as_double(i);
  }
  EXPECT_LE(off, ref.numel() / 50 + 1);
  // The reference loops against the same convolution in (N, C, H, W), transposed.
  attrs["channels_last"] = int64_t{0};
  Tensor xf = Tensor::empty({2, c, 7, 6}, DType::kUInt8);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t h = 0; h < 7; ++h)
        for (int64_t wi = 0; wi < 6; ++wi)
          xf.data<uint8_t>()[((n * c + ch) * 7 + h) * 6 + wi] =
              x.data<uint8_t>()[((n * 7 + h) * 6 + wi) * c + ch];
  const Tensor first = run_op(
      "QLinearConv",
      {xf, constant(Tensor::scalar<float>(0.02f)),
       constant(random_ints({}, 1, 110, 110, DType::kUInt8)), test::OpInput(w, false), constant(ws),
       constant(Tensor::zeros({m}, DType::kInt8)), constant(Tensor::scalar<float>(0.05f)),
       constant(random_ints({}, 1, 90, 90, DType::kUInt8)), constant(b)},
      attrs)[0];
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t p = 0; p < 24; ++p)
        ASSERT_EQ(first.data<uint8_t>()[(n * m + o) * 24 + p],
                  ref.data<uint8_t>()[(n * 24 + p) * m + o])
            << n << " " << o << " " << p;
}

}  // namespace
}  // namespace lumen
