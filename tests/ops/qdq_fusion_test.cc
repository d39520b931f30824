// Tests of the QDQ fusion (passes/fuse_qdq.cc) and the oneDNN int8 kernels (quant_dnnl.cc):
// random QDQ graphs as ONNX Runtime's quantizer writes them (Conv, MatMul, Gemm; per-channel s8
// weights; u8/s8 activations; float or DequantizeLinear'd int32 bias; Relu), run unoptimized
// (every DequantizeLinear and float op as written) and optimized (fused integer ops), compared
// element by element within one quantum; the fused graph keeps no weight DequantizeLinear; Relu
// and Clip absorbed only where exact.
// QLinearConv / QLinearMatMul with constant weights (oneDNN where exact) against the same op with
// runtime weights (the exact reference loops). Patterns that are not exact stay unfused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "ops/op_test_util.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

using test::constant;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

// Compiles `graph` (optimized or not) and runs it on `inputs`.
std::vector<Tensor> run_graph(Graph& graph, const std::vector<Tensor>& inputs) {
  Runtime rt;
  CompileOptions options;
  options.backends = {"cpu"};
  return graph.compile(&rt, options)->execute(inputs);
}

// Every element within `tol` units; at least `min_distinct` distinct values (not all saturated).
void expect_within(const Tensor& got, const Tensor& want, double tol, size_t min_distinct = 8) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = to_doubles(got), w = to_doubles(want);
  std::map<double, int> seen;
  int off = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_LE(std::fabs(g[i] - w[i]), tol) << "element " << i << ": " << g[i] << " vs " << w[i];
    off += g[i] != w[i];
    ++seen[w[i]];
  }
  EXPECT_GE(seen.size(), min_distinct) << "outputs mostly saturated: pick other scales";
  EXPECT_LE(off, static_cast<int>(g.size() / 50 + 1)) << "too many one-unit differences";
}

struct QdqSpec {
  DType act = DType::kUInt8;  // activations' type
  DType out = DType::kUInt8;  // y's type
  int weight_bits = 8;        // |w| <= 127 or (7) <= 63
  bool relu = false;
  int bias = 0;         // 0 none, 1 float constant, 2 DequantizeLinear'd int32 (ORT)
  int64_t y_zero = -1;  // -1: middle of the range for the output type (0 after Relu for u8)
};

int64_t lo_of(DType t) {
  return t == DType::kUInt8 ? 0 : -128;
}

// A y scale that spreads y = sum of `taps` products of x ~ U(-2, 2) and weights ~ U(-lim, lim) *
// w_base over about +-60 quanta (one standard deviation ~ 40 quanta).
float y_scale_for(int64_t taps, int bits, float w_base) {
  const float lim = bits == 8 ? 127.0f : 63.0f;
  return std::sqrt(static_cast<float>(taps)) * 1.15f * 0.58f * lim * w_base / 40.0f;
}

// Q -> DQ on float x with per-tensor scale and zero point.
Value* quant_dequant(Graph& g, Value* x, float scale, int64_t zero, DType t, const std::string& n) {
  Value* s = g.add_constant(n + "_s", Tensor::scalar<float>(scale));
  Value* z = g.add_constant(n + "_z", random_ints({}, 1, zero, zero, t));
  Value* q = g.add_op("QuantizeLinear", {x, s, z}, {}, n + "_q");
  return g.add_op("DequantizeLinear", {q, s, z}, {}, n + "_dq");
}

// DQ of a constant s8 weight of `shape`, per channel along `axis` with scales around `base`.
Value* weight(Graph& g, const Shape& shape, int axis, float base, int bits, uint64_t seed) {
  const int64_t lim = bits == 8 ? 127 : 63;
  Value* w = g.add_constant("w_q", random_ints(shape, seed, -lim, lim, DType::kInt8));
  const int64_t c = shape[axis];
  Value* s = g.add_constant("w_s", random_tensor({c}, seed + 1, base * 0.5f, base * 1.5f));
  Value* z = g.add_constant("w_z", Tensor::zeros({c}, DType::kInt8));
  Attributes a;
  a["axis"] = int64_t{axis};
  return g.add_op("DequantizeLinear", {w, s, z}, a, "w_dq");
}

// The tail: [Relu ->] Q(y_scale, y_zero) -> graph output.
void finish(Graph& g, Value* y, const QdqSpec& spec, float y_scale) {
  if (spec.relu) y = g.add_op("Relu", {y}, {}, "relu");
  int64_t zero = spec.y_zero;
  if (zero < 0) zero = spec.relu ? lo_of(spec.out) : lo_of(spec.out) + 128 + 3;
  Value* s = g.add_constant("y_s", Tensor::scalar<float>(y_scale));
  Value* z = g.add_constant("y_z", random_ints({}, 2, zero, zero, spec.out));
  g.mark_output(g.add_op("QuantizeLinear", {y, s, z}, {}, "y_q"));
}

// Runs `build` twice (unoptimized, optimized) and compares; returns the optimized op histogram.
template <typename Build>
std::map<std::string, int> compare(Build build, const Tensor& x) {
  Graph plain, fused;
  build(plain);
  build(fused);
  fused.optimize();
  const Tensor want = run_graph(plain, {x})[0];
  const Tensor got = run_graph(fused, {x})[0];
  expect_within(got, want, 1.0);
  return op_histogram(fused);
}

void conv_case(const QdqSpec& spec, int64_t group, int64_t stride, uint64_t seed) {
  const int64_t n = 2, c = 8 * group, m = 8 * group, h = 9, w = 7;
  const Tensor x = random_tensor({n, c, h, w}, seed, -2.0f, 2.0f);
  const float x_scale = 4.0f / 255.0f, w_base = 0.01f;
  auto build = [&](Graph& g) {
    Value* xin = g.add_input("x", x.shape());
    const int64_t xz = spec.act == DType::kUInt8 ? 128 : 0;
    Value* xd = quant_dequant(g, xin, x_scale, xz, spec.act, "x");
    Value* wd = weight(g, {m, c / group, 3, 3}, 0, w_base, spec.weight_bits, seed + 10);
    std::vector<Value*> ins = {xd, wd};
    if (spec.bias == 1) {
      ins.push_back(g.add_constant("b", random_tensor({m}, seed + 20, -0.5f, 0.5f)));
    } else if (spec.bias == 2) {
      // ORT: int32 bias with scale x_scale * w_scale[m], zero point 0, axis 0.
      const Tensor& ws = *g.value(g.find_value("w_s")->id).data;
      Tensor bs = Tensor::empty({m}, DType::kFloat32);
      for (int64_t k = 0; k < m; ++k) bs.data<float>()[k] = x_scale * ws.data<float>()[k];
      Value* bq = g.add_constant("b_q", random_ints({m}, seed + 21, -3000, 3000, DType::kInt32));
      Value* bsv = g.add_constant("b_s", bs);
      Value* bz = g.add_constant("b_z", Tensor::zeros({m}, DType::kInt32));
      Attributes a;
      a["axis"] = int64_t{0};
      ins.push_back(g.add_op("DequantizeLinear", {bq, bsv, bz}, a, "b_dq"));
    }
    Attributes attrs;
    attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    attrs["strides"] = std::vector<int64_t>{stride, stride};
    attrs["group"] = group;
    Value* y = g.add_op("Conv", ins, attrs, "conv");
    finish(g, y, spec, y_scale_for(9 * c / group, spec.weight_bits, w_base));
  };
  std::map<std::string, int> ops = compare(build, x);
  EXPECT_EQ(ops["QLinearConv"], 1);
  EXPECT_EQ(ops["Conv"], 0);
  EXPECT_EQ(ops["Relu"], 0);
  // Only the input's QuantizeLinear is left: no DequantizeLinear of weights, bias or x.
  EXPECT_EQ(ops["DequantizeLinear"], 0);
  EXPECT_EQ(ops["QuantizeLinear"], 1);
}

TEST(QdqFusion, ConvU8PerChannelFloatBias) {
  conv_case({.bias = 1}, 1, 1, 100);
}
TEST(QdqFusion, ConvU8SevenBitWeightsIntBiasRelu) {
  conv_case({.weight_bits = 7, .relu = true, .bias = 2}, 1, 1, 200);
}
TEST(QdqFusion, ConvS8ActivationsStridedGrouped) {
  conv_case({.act = DType::kInt8, .out = DType::kInt8, .weight_bits = 7, .bias = 2}, 2, 2, 300);
}
TEST(QdqFusion, DepthwiseConvRelu) {
  conv_case({.weight_bits = 7, .relu = true, .bias = 1}, 8, 1, 400);
}

void matmul_case(const QdqSpec& spec, bool gemm, bool trans_b, uint64_t seed) {
  const int64_t k = 48, n = 24;
  const Shape xs = gemm ? Shape{6, k} : Shape{2, 5, k};
  const Tensor x = random_tensor(xs, seed, -2.0f, 2.0f);
  const float x_scale = 4.0f / 255.0f, w_base = 0.01f;
  auto build = [&](Graph& g) {
    Value* xin = g.add_input("x", x.shape());
    const int64_t xz = spec.act == DType::kUInt8 ? 120 : -5;
    Value* xd = quant_dequant(g, xin, x_scale, xz, spec.act, "x");
    Value* wd = trans_b ? weight(g, {n, k}, 0, w_base, spec.weight_bits, seed + 10)
                        : weight(g, {k, n}, 1, w_base, spec.weight_bits, seed + 10);
    Attributes attrs;
    if (trans_b) attrs["transB"] = int64_t{1};
    std::vector<Value*> ins = {xd, wd};
    if (spec.bias == 1)
      ins.push_back(g.add_constant("c", random_tensor({n}, seed + 20, -0.5f, 0.5f)));
    Value* y = g.add_op(gemm ? "Gemm" : "MatMul", ins, attrs, "mm");
    finish(g, y, spec, y_scale_for(k, spec.weight_bits, w_base));
  };
  std::map<std::string, int> ops = compare(build, x);
  // A Gemm with a bias runs as a 1x1 QLinearConv between two Reshapes.
  EXPECT_EQ(ops[spec.bias ? "QLinearConv" : "QLinearMatMul"], 1);
  EXPECT_EQ(ops["Gemm"] + ops["MatMul"], 0);
  EXPECT_EQ(ops["DequantizeLinear"], 0);
}

TEST(QdqFusion, MatMulBatchedU8) {
  matmul_case({}, false, false, 500);
}
TEST(QdqFusion, MatMulSevenBitS8Relu) {
  matmul_case({.act = DType::kInt8, .out = DType::kInt8, .weight_bits = 7, .relu = true}, false,
              false, 600);
}
TEST(QdqFusion, GemmTransBSevenBit) {
  matmul_case({.weight_bits = 7}, true, true, 700);
}

TEST(QdqFusion, GemmWithBiasBothLayouts) {
  matmul_case({.weight_bits = 7, .relu = true, .bias = 1}, true, true, 710);
  matmul_case({.bias = 1}, true, false, 720);
}

TEST(QdqFusion, ReluWithZeroPointAboveRangeStaysFloat) {
  // After a Relu, y's zero point 10 (not 0) would need a clamp at 10: not exact, left as is.
  const Tensor x = random_tensor({1, 4, 5, 5}, 800, -2.0f, 2.0f);
  auto build = [&](Graph& g) {
    Value* xd = quant_dequant(g, g.add_input("x", x.shape()), 4.0f / 255, 128, DType::kUInt8, "x");
    Value* wd = weight(g, {4, 4, 3, 3}, 0, 0.01f, 8, 801);
    Value* y = g.add_op("Conv", {xd, wd}, {}, "conv");
    finish(g, y, {.relu = true, .y_zero = 10}, y_scale_for(36, 8, 0.01f));
  };
  std::map<std::string, int> ops = compare(build, x);
  EXPECT_EQ(ops["QLinearConv"], 0);
}

// Clip(0, hi) -> Q: absorbed when hi quantizes at or above the top of y's range (ReLU6 calibrated
// to [0, 6]), kept when it would clamp inside the range.
TEST(QdqFusion, ClipFusesOnlyWhenItsBoundsSaturate) {
  const Tensor x = random_tensor({1, 8, 6, 6}, 820, -2.0f, 2.0f);
  for (float hi : {6.0f, 0.3f}) {
    auto build = [&](Graph& g) {
      Value* xd =
          quant_dequant(g, g.add_input("x", x.shape()), 4.0f / 255, 128, DType::kUInt8, "x");
      Value* wd = weight(g, {8, 8, 3, 3}, 0, 0.01f, 7, 821);
      Value* y = g.add_op("Conv", {xd, wd}, {}, "conv");
      y = g.add_op("Clip",
                   {y, g.add_constant("lo", Tensor::scalar<float>(0.0f)),
                    g.add_constant("hi", Tensor::scalar<float>(hi))},
                   {}, "clip");
      Value* s = g.add_constant("y_s", Tensor::scalar<float>(6.0f / 255.0f));
      Value* z = g.add_constant("y_z", Tensor::zeros({}, DType::kUInt8));
      g.mark_output(g.add_op("QuantizeLinear", {y, s, z}, {}, "y_q"));
    };
    Graph plain, fused;
    build(plain);
    build(fused);
    fused.optimize();
    expect_within(run_graph(fused, {x})[0], run_graph(plain, {x})[0], 1.0, 2);
    EXPECT_EQ(op_histogram(fused)["QLinearConv"], hi == 6.0f ? 1 : 0) << "hi " << hi;
  }
}

// QLinearConv with constant s8 weights (oneDNN where exact) against runtime weights (the exact
// loops), per-channel scales, zero points on x and y, bias.
TEST(QdqKernels, DnnlConvMatchesReference) {
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    const int64_t c = 16, m = 32;
    Tensor x = random_ints({2, c, 10, 10}, 900, lo_of(t), lo_of(t) + 255, t);
    Tensor w = random_ints({m, c, 3, 3}, 901, -63, 63, DType::kInt8);
    Tensor ws = random_tensor({m}, 902, 0.002f, 0.004f);
    Tensor b = random_ints({m}, 903, -2000, 2000, DType::kInt32);
    Tensor xs = Tensor::scalar<float>(0.02f), ys = Tensor::scalar<float>(0.05f);
    Tensor xz = random_ints({}, 904, lo_of(t) + 100, lo_of(t) + 100, t);
    Tensor yz = random_ints({}, 905, lo_of(t) + 90, lo_of(t) + 90, t);
    Tensor wz = Tensor::zeros({m}, DType::kInt8);
    Attributes attrs;
    attrs["pads"] = std::vector<int64_t>{1, 0, 1, 2};
    auto run = [&](bool const_w) {
      return run_op("QLinearConv",
                    {x, constant(xs), constant(xz), test::OpInput(w, const_w), constant(ws),
                     constant(wz), constant(ys), constant(yz), constant(b)},
                    attrs)[0];
    };
    expect_within(run(true), run(false), 1.0);
  }
}

TEST(QdqKernels, DnnlMatMulMatchesReference) {
  Tensor a = random_ints({3, 7, 64}, 910, 0, 255, DType::kUInt8);
  Tensor b = random_ints({64, 40}, 911, -64, 64, DType::kInt8);
  Tensor bs = random_tensor({40}, 912, 0.002f, 0.004f);
  auto run = [&](bool const_b) {
    return run_op("QLinearMatMul", {a, constant(Tensor::scalar<float>(0.02f)),
                                    constant(random_ints({}, 913, 130, 130, DType::kUInt8)),
                                    test::OpInput(b, const_b), constant(bs),
                                    constant(Tensor::zeros({40}, DType::kInt8)),
                                    constant(Tensor::scalar<float>(0.03f)),
                                    constant(random_ints({}, 914, -7, -7, DType::kInt8))})[0];
  };
  expect_within(run(true), run(false), 1.0);
}

// Full-range weights (-128..127): on a CPU without VNNI oneDNN runs them split in two halves of
// at most 64 (quant_dnnl.cc, DnnlInt8SplitKernel), with VNNI directly; both layouts of the
// convolution and the matmul against the exact loops (runtime weights).
TEST(QdqKernels, FullRangeWeightsMatchReference) {
  const Tensor xs = Tensor::scalar<float>(0.02f), ys = Tensor::scalar<float>(0.05f);
  for (bool nhwc : {false, true}) {
    const int64_t c = 24, m = 40;
    const Shape x_shape = nhwc ? Shape{2, 9, 11, c} : Shape{2, c, 9, 11};
    Tensor x = random_ints(x_shape, 940, 0, 255, DType::kUInt8);
    Tensor w = random_ints({m, c, 3, 3}, 941, -128, 127, DType::kInt8);
    Tensor ws = random_tensor({m}, 942, 0.001f, 0.002f);
    Tensor b = random_ints({m}, 943, -3000, 3000, DType::kInt32);
    Tensor xz = random_ints({}, 944, 117, 117, DType::kUInt8);
    Tensor yz = random_ints({}, 945, 131, 131, DType::kUInt8);
    Attributes attrs;
    attrs["pads"] = std::vector<int64_t>{1, 1, 0, 1};
    attrs["strides"] = std::vector<int64_t>{2, 1};
    attrs["channels_last"] = int64_t{nhwc ? 1 : 0};
    auto run = [&](bool const_w) {
      return run_op(
          "QLinearConv",
          {x, constant(xs), constant(xz), test::OpInput(w, const_w), constant(ws),
           constant(Tensor::zeros({m}, DType::kInt8)), constant(ys), constant(yz), constant(b)},
          attrs)[0];
    };
    SCOPED_TRACE(nhwc ? "channels last" : "channels first");
    expect_within(run(true), run(false), 1.0, 40);
  }
  const Tensor a = random_ints({5, 13, 96}, 950, 0, 255, DType::kUInt8);
  const Tensor bw = random_ints({96, 72}, 951, -128, 127, DType::kInt8);
  const Tensor bs = random_tensor({72}, 952, 0.001f, 0.002f);
  auto run = [&](bool const_b) {
    return run_op(
        "QLinearMatMul",
        {a, constant(xs), constant(random_ints({}, 953, 121, 121, DType::kUInt8)),
         test::OpInput(bw, const_b), constant(bs), constant(Tensor::zeros({72}, DType::kInt8)),
         constant(ys), constant(random_ints({}, 954, 3, 3, DType::kInt8))})[0];
  };
  expect_within(run(true), run(false), 1.0, 40);
}

// Depthwise convolutions at the extremes that would saturate a pairwise int16 sum (x 255 with
// weights 127 and -128 side by side), both layouts, against the exact loops.
TEST(QdqKernels, DepthwiseExtremesMatchReference) {
  for (bool nhwc : {false, true}) {
    const int64_t c = 40;
    const Shape x_shape = nhwc ? Shape{1, 7, 9, c} : Shape{1, c, 7, 9};
    Tensor x = random_ints(x_shape, 960, 250, 255, DType::kUInt8);
    Tensor w = random_ints({c, 1, 3, 3}, 961, 120, 127, DType::kInt8);
    int8_t* wp = w.data<int8_t>();
    for (int64_t i = 0; i < w.numel(); ++i)
      if ((i / 9) % 2 == 1) wp[i] = static_cast<int8_t>(-128 + (i % 3));
    Tensor ws = random_tensor({c}, 962, 0.0001f, 0.0002f);
    Attributes attrs;
    attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    attrs["group"] = c;
    attrs["channels_last"] = int64_t{nhwc ? 1 : 0};
    auto run = [&](bool const_w) {
      return run_op("QLinearConv",
                    {x, constant(Tensor::scalar<float>(0.02f)),
                     constant(random_ints({}, 963, 0, 0, DType::kUInt8)), test::OpInput(w, const_w),
                     constant(ws), constant(Tensor::zeros({c}, DType::kInt8)),
                     constant(Tensor::scalar<float>(0.05f)),
                     constant(random_ints({}, 964, 128, 128, DType::kUInt8))},
                    attrs)[0];
    };
    SCOPED_TRACE(nhwc ? "channels last" : "channels first");
    expect_within(run(true), run(false), 1.0, 20);
  }
}

// QLinearMatMul of two activations (attention's Q.K^T and P.V): every combination of u8 and s8
// A and B, batched, against the integer formula computed here, element by element.
TEST(QdqKernels, ActivationMatMulMatchesTheFormula) {
  const int64_t batch = 3, m = 9, k = 40, n = 17;
  for (DType at : {DType::kUInt8, DType::kInt8})
    for (DType bt : {DType::kUInt8, DType::kInt8}) {
      const Tensor a = random_ints({1, batch, m, k}, 930, lo_of(at), lo_of(at) + 255, at);
      const Tensor b = random_ints({1, batch, k, n}, 931, lo_of(bt), lo_of(bt) + 255, bt);
      const int64_t az = lo_of(at) + 121, bz = lo_of(bt) + 140, yz = 7;
      const float as = 0.013f, bs = 0.021f, ys = 0.9f;
      const Tensor y =
          run_op("QLinearMatMul",
                 {a, constant(Tensor::scalar<float>(as)), constant(random_ints({}, 1, az, az, at)),
                  b, constant(Tensor::scalar<float>(bs)), constant(random_ints({}, 1, bz, bz, bt)),
                  constant(Tensor::scalar<float>(ys)),
                  constant(random_ints({}, 1, yz, yz, DType::kUInt8))})[0];
      ASSERT_EQ(y.shape(), (Shape{1, batch, m, n}));
      const std::vector<double> av = to_doubles(a), bv = to_doubles(b), got = to_doubles(y);
      std::map<double, int> seen;
      for (int64_t t = 0; t < batch; ++t)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            int64_t acc = 0;
            for (int64_t r = 0; r < k; ++r)
              acc += static_cast<int64_t>(av[(t * m + i) * k + r] - az) *
                     static_cast<int64_t>(bv[(t * k + r) * n + j] - bz);
            const float v = static_cast<float>(acc * (static_cast<double>(as) * bs / ys));
            const double want = std::clamp(std::nearbyint(v) + yz, 0.0f, 255.0f);
            const int64_t at_out = (t * m + i) * n + j;
            ASSERT_EQ(got[at_out], want) << "element " << at_out;
            ++seen[want];
          }
      EXPECT_GE(seen.size(), 20u);
    }
}

TEST(QdqKernels, BadWeightShapeNamesTheNode) {
  Tensor a = random_ints({3, 64}, 920, 0, 255, DType::kUInt8);
  Tensor b = random_ints({60, 40}, 921, -64, 64, DType::kInt8);
  test::expect_error<Error>(
      [&] {
        run_op(
            "QLinearMatMul",
            {a, constant(Tensor::scalar<float>(0.02f)), constant(Tensor::zeros({}, DType::kUInt8)),
             constant(b), constant(Tensor::scalar<float>(0.01f)),
             constant(Tensor::zeros({}, DType::kInt8)), constant(Tensor::scalar<float>(0.03f)),
             constant(Tensor::zeros({}, DType::kUInt8))});
      },
      "QLinearMatMul");
}

}  // namespace
}  // namespace lumen
