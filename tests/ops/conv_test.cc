// Tests of Conv and ConvTranspose against naive double-precision loops written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;
using test::expect_close;
using test::omitted;
using test::OpInput;
using test::random_tensor;
using test::ravel;
using test::run_op;
using test::unravel;

// Explicit geometry the reference uses (pads resolved by hand in each test).
struct Geo {
  std::vector<int64_t> strides, dilations, pad_begin;
  int64_t group = 1;
};

Geo geo(int spatial, std::vector<int64_t> strides = {}, std::vector<int64_t> dilations = {},
        std::vector<int64_t> pad_begin = {}, int64_t group = 1) {
  Geo g{strides, dilations, pad_begin, group};
  if (g.strides.empty()) g.strides.assign(spatial, 1);
  if (g.dilations.empty()) g.dilations.assign(spatial, 1);
  if (g.pad_begin.empty()) g.pad_begin.assign(spatial, 0);
  return g;
}

// Direct convolution: y[n, m, o] = b[m] + sum_{c, k} x[n, g*C/G + c, o*s - p + k*d] w[m, c, k].
std::vector<double> ref_conv(const Tensor& x, const Tensor& w, const Tensor* b, const Geo& g,
                             const Shape& out) {
  std::vector<double> xs = test::to_doubles(x), ws = test::to_doubles(w), y(out.numel());
  int spatial = x.rank() - 2;
  int64_t cg = w.shape()[1], mg = out[1] / g.group;
  Shape kshape(std::vector<int64_t>(w.shape().dims().begin() + 2, w.shape().dims().end()));
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> o = unravel(i, out);
    int64_t n = o[0], m = o[1], grp = m / mg;
    double acc = b ? b->item_as_double(m) : 0.0;
    for (int64_t c = 0; c < cg; ++c) {
      for (int64_t k = 0; k < kshape.numel(); ++k) {
        std::vector<int64_t> kk = unravel(k, kshape);
        std::vector<int64_t> xi = {n, grp * cg + c};
        bool inside = true;
        for (int a = 0; a < spatial; ++a) {
          int64_t pos = o[2 + a] * g.strides[a] - g.pad_begin[a] + kk[a] * g.dilations[a];
          inside = inside && pos >= 0 && pos < x.shape()[2 + a];
          xi.push_back(pos);
        }
        if (!inside) continue;
        std::vector<int64_t> wi = {m, c};
        wi.insert(wi.end(), kk.begin(), kk.end());
        acc += xs[ravel(xi, x.shape())] * ws[ravel(wi, w.shape())];
      }
    }
    y[i] = acc;
  }
  return y;
}

// Transposed convolution as a scatter: every x[n, c, i] * w[c, m, k] lands on o = i*s - p + k*d.
std::vector<double> ref_conv_transpose(const Tensor& x, const Tensor& w, const Tensor* b,
                                       const Geo& g, const Shape& out) {
  std::vector<double> xs = test::to_doubles(x), ws = test::to_doubles(w), y(out.numel(), 0.0);
  int spatial = x.rank() - 2;
  int64_t cg = x.shape()[1] / g.group, mg = w.shape()[1];
  Shape kshape(std::vector<int64_t>(w.shape().dims().begin() + 2, w.shape().dims().end()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> xi = unravel(i, x.shape());
    int64_t n = xi[0], c = xi[1], grp = c / cg;
    for (int64_t ml = 0; ml < mg; ++ml) {
      for (int64_t k = 0; k < kshape.numel(); ++k) {
        std::vector<int64_t> kk = unravel(k, kshape);
        std::vector<int64_t> oi = {n, grp * mg + ml};
        bool inside = true;
        for (int a = 0; a < spatial; ++a) {
          int64_t pos = xi[2 + a] * g.strides[a] - g.pad_begin[a] + kk[a] * g.dilations[a];
          inside = inside && pos >= 0 && pos < out[2 + a];
          oi.push_back(pos);
        }
        if (!inside) continue;
        std::vector<int64_t> wi = {c, ml};
        wi.insert(wi.end(), kk.begin(), kk.end());
        y[ravel(oi, out)] += xs[i] * ws[ravel(wi, w.shape())];
      }
    }
  }
  if (b)
    for (int64_t i = 0; i < out.numel(); ++i) y[i] += b->item_as_double(unravel(i, out)[1]);
  return y;
}

struct Case {
  Shape x, w;
  bool bias;
  Attributes attrs;
  Geo g;
  Shape out;
  bool const_weights = true;
};

void check_conv(const Case& c, uint64_t seed) {
  Tensor x = random_tensor(c.x, seed);
  Tensor w = random_tensor(c.w, seed + 1);
  Tensor b = random_tensor(Shape{c.w[0]}, seed + 2);
  OpInput wi = c.const_weights ? constant(w) : OpInput(w);
  OpInput bi = c.bias ? (c.const_weights ? constant(b) : OpInput(b)) : omitted();
  std::vector<Tensor> y = run_op("Conv", {x, wi, bi}, c.attrs);
  expect_close(y[0], c.out, ref_conv(x, w, c.bias ? &b : nullptr, c.g, c.out), 1e-4, 1e-4);
}

void check_conv_transpose(const Case& c, uint64_t seed) {
  Tensor x = random_tensor(c.x, seed);
  Tensor w = random_tensor(c.w, seed + 1);
  Tensor b = random_tensor(Shape{c.out[1]}, seed + 2);
  OpInput wi = c.const_weights ? constant(w) : OpInput(w);
  OpInput bi = c.bias ? (c.const_weights ? constant(b) : OpInput(b)) : omitted();
  std::vector<Tensor> y = run_op("ConvTranspose", {x, wi, bi}, c.attrs);
  expect_close(y[0], c.out, ref_conv_transpose(x, w, c.bias ? &b : nullptr, c.g, c.out), 1e-4,
               1e-4);
}

TEST(Conv, Pointwise1x1) {
  check_conv({{1, 8, 5, 5}, {4, 8, 1, 1}, true, {}, geo(2), {1, 4, 5, 5}}, 1);
  check_conv({{2, 16, 3, 4}, {6, 16, 1, 1}, false, {}, geo(2), {2, 6, 3, 4}}, 2);
}

// One-pixel images (squeeze-and-excitation layers) run as a matrix-vector product per image;
// as a FusedConv with a residual and an activation the epilogue adds, then activates.
TEST(Conv, OnePixelImages) {
  check_conv({{1, 40, 1, 1}, {24, 40, 1, 1}, true, {}, geo(2), {1, 24, 1, 1}}, 3);
  check_conv({{3, 17, 1, 1}, {33, 17, 1, 1}, false, {}, geo(2), {3, 33, 1, 1}}, 4);
  check_conv({{2, 9, 1}, {5, 9, 1}, true, {}, geo(1), {2, 5, 1}}, 5);
  Tensor x = random_tensor({2, 20, 1, 1}, 6), w = random_tensor({12, 20, 1, 1}, 7);
  Tensor b = random_tensor({12}, 8), z = random_tensor({2, 12, 1, 1}, 9);
  for (const char* act : {"Sigmoid", "Relu"}) {
    Tensor y = run_op("FusedConv", {x, constant(w), constant(b), z}, {{"activation", act}})[0];
    std::vector<double> want = ref_conv(x, w, &b, geo(2), {2, 12, 1, 1});
    const std::vector<double> zs = test::to_doubles(z);
    for (size_t i = 0; i < want.size(); ++i) {
      const double v = want[i] + zs[i];
      want[i] = std::string(act) == "Relu" ? std::max(v, 0.0) : 1.0 / (1.0 + std::exp(-v));
    }
    expect_close(y, {2, 12, 1, 1}, want, 1e-5, 1e-4);
  }
}

// FusedConv with Gelu in both forms (fold-channels-last-mlp makes ConvNeXt's first MLP layer a
// 1x1 FusedConv with GeluErf): pointwise with a residual, and a 3x3 one without.
TEST(Conv, GeluActivations) {
  uint64_t seed = 40;
  for (const char* act : {"GeluErf", "GeluTanh"}) {
    SCOPED_TRACE(act);
    for (const bool pointwise : {true, false}) {
      const int64_t kk = pointwise ? 1 : 3;
      Tensor x = random_tensor({1, 12, 7, 9}, seed++), w = random_tensor({20, 12, kk, kk}, seed++);
      Tensor b = random_tensor({20}, seed++), z = random_tensor({1, 20, 7, 9}, seed++);
      Attributes attrs = {{"activation", act}};
      if (!pointwise) attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
      std::vector<OpInput> in = {x, constant(w), constant(b)};
      if (pointwise) in.emplace_back(z);
      Tensor y = run_op("FusedConv", in, attrs)[0];
      std::vector<double> want =
          ref_conv(x, w, &b, pointwise ? geo(2) : geo(2, {}, {}, {1, 1}), {1, 20, 7, 9});
      const std::vector<double> zs = test::to_doubles(z);
      for (size_t i = 0; i < want.size(); ++i) {
        const double v = want[i] + (pointwise ? zs[i] : 0.0);
        want[i] =
            std::string(act) == "GeluErf"
                ? 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))
                : 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      }
      expect_close(y, {1, 20, 7, 9}, want, 1e-5, 1e-4);
    }
  }
}

TEST(Conv, Stride2Pad1) {
  check_conv({{1, 3, 7, 7},
              {5, 3, 3, 3},
              true,
              {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}},
              geo(2, {2, 2}, {}, {1, 1}),
              {1, 5, 4, 4}},
             3);
}

TEST(Conv, Dilation2) {
  check_conv({{1, 2, 9, 9},
              {3, 2, 3, 3},
              false,
              {{"dilations", {2, 2}}},
              geo(2, {}, {2, 2}),
              {1, 3, 5, 5}},
             4);
  check_conv({{1, 2, 9, 8},
              {3, 2, 3, 2},
              true,
              {{"dilations", {2, 3}}, {"pads", {2, 1, 2, 1}}, {"strides", {1, 2}}},
              geo(2, {1, 2}, {2, 3}, {2, 1}),
              {1, 3, 9, 4}},
             5);
}

TEST(Conv, Groups) {
  check_conv({{2, 4, 6, 6},
              {6, 2, 3, 3},
              true,
              {{"group", 2}, {"pads", {1, 1, 1, 1}}},
              geo(2, {}, {}, {1, 1}, 2),
              {2, 6, 6, 6}},
             6);
}

TEST(Conv, Depthwise) {
  check_conv({{1, 8, 10, 10},
              {8, 1, 3, 3},
              true,
              {{"group", 8}, {"pads", {1, 1, 1, 1}}},
              geo(2, {}, {}, {1, 1}, 8),
              {1, 8, 10, 10}},
             7);
  // Channel multiplier 2, stride 2.
  check_conv({{2, 4, 9, 9},
              {8, 1, 3, 3},
              false,
              {{"group", 4}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}},
              geo(2, {2, 2}, {}, {1, 1}, 4),
              {2, 8, 5, 5}},
             8);
}

TEST(Conv, NonSquare) {
  // H: (7 + 1 + 0 - 3) / 2 + 1 = 3; W: (10 + 2 + 1 - 5) / 1 + 1 = 9.
  check_conv({{1, 3, 7, 10},
              {4, 3, 3, 5},
              true,
              {{"strides", {2, 1}}, {"pads", {1, 2, 0, 1}}, {"kernel_shape", {3, 5}}},
              geo(2, {2, 1}, {}, {1, 2}),
              {1, 4, 3, 9}},
             9);
}

TEST(Conv, OneD) {
  check_conv({{2, 3, 12},
              {4, 3, 5},
              true,
              {{"strides", {2}}, {"pads", {2, 1}}},
              geo(1, {2}, {}, {2}),
              {2, 4, 6}},
             10);
  check_conv({{1, 4, 11},
              {4, 2, 3},
              false,
              {{"group", 2}, {"dilations", {2}}},
              geo(1, {}, {2}, {}, 2),
              {1, 4, 7}},
             11);
}

TEST(Conv, ThreeD) {
  check_conv({{1, 2, 5, 6, 7},
              {3, 2, 3, 3, 3},
              true,
              {{"pads", {1, 1, 1, 1, 1, 1}}},
              geo(3, {}, {}, {1, 1, 1}),
              {1, 3, 5, 6, 7}},
             12);
}

TEST(Conv, AutoPad) {
  // out = ceil(7 / 2) = 4; total pad (4 - 1) * 2 + 4 - 7 = 3: UPPER 1 + 2, LOWER 2 + 1.
  check_conv({{1, 2, 7, 7},
              {3, 2, 4, 4},
              true,
              {{"auto_pad", "SAME_UPPER"}, {"strides", {2, 2}}},
              geo(2, {2, 2}, {}, {1, 1}),
              {1, 3, 4, 4}},
             13);
  check_conv({{1, 2, 7, 7},
              {3, 2, 4, 4},
              true,
              {{"auto_pad", "SAME_LOWER"}, {"strides", {2, 2}}},
              geo(2, {2, 2}, {}, {2, 2}),
              {1, 3, 4, 4}},
             14);
  check_conv({{1, 2, 7, 7},
              {3, 2, 4, 4},
              false,
              {{"auto_pad", "VALID"}, {"strides", {2, 2}}},
              geo(2, {2, 2}),
              {1, 3, 2, 2}},
             15);
  check_conv({{1, 2, 6, 5}, {3, 2, 3, 3}, false, {{"auto_pad", "NOTSET"}}, geo(2), {1, 3, 4, 3}},
             16);
  // SAME with stride 1: spatial size kept.
  check_conv(
      {{1, 3, 5}, {2, 3, 4}, true, {{"auto_pad", "SAME_LOWER"}}, geo(1, {}, {}, {2}), {1, 2, 5}},
      17);
}

TEST(Conv, RuntimeWeightsAndBias) {
  Case c{{2, 8, 9, 9},
         {12, 4, 3, 3},
         true,
         {{"group", 2}, {"pads", {1, 1, 1, 1}}},
         geo(2, {}, {}, {1, 1}, 2),
         {2, 12, 9, 9}};
  c.const_weights = false;
  check_conv(c, 18);
}

TEST(Conv, LargerParallel) {
  check_conv({{1, 32, 14, 14},
              {40, 32, 3, 3},
              true,
              {{"pads", {1, 1, 1, 1}}},
              geo(2, {}, {}, {1, 1}),
              {1, 40, 14, 14}},
             19);
  check_conv(
      {{1, 64, 14, 14}, {32, 64, 1, 1}, true, {{"strides", {2, 2}}}, geo(2, {2, 2}), {1, 32, 7, 7}},
      20);
}

TEST(Conv, ConcurrentExecute) {
  // One compiled Conv run from several threads at once (per-run scratchpads and reorders).
  Graph graph;
  Tensor w = random_tensor({16, 8, 3, 3}, 22);
  Tensor b = random_tensor({16}, 23);
  Value* x = graph.add_input("x", {2, 8, 12, 12});
  Value* y = graph.add_op("Conv", {x, graph.add_constant("w", w), graph.add_constant("b", b)},
                          {{"pads", {1, 1, 1, 1}}, {"strides", {1, 2}}});
  graph.mark_output(y);
  Runtime rt;
  Executable* exe = graph.compile(&rt);
  constexpr int kThreads = 4;
  std::vector<Tensor> inputs, outputs(kThreads);
  for (int t = 0; t < kThreads; ++t) inputs.push_back(random_tensor({2, 8, 12, 12}, 100 + t));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) outputs[t] = exe->execute({inputs[t]})[0];
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    expect_close(outputs[t], {2, 16, 12, 6},
                 ref_conv(inputs[t], w, &b, geo(2, {1, 2}, {}, {1, 1}), {2, 16, 12, 6}), 1e-4,
                 1e-4);
}

TEST(Conv, EmptyBatch) {
  Tensor x = Tensor::zeros({0, 3, 5, 5});
  Tensor w = random_tensor({4, 3, 3, 3}, 21);
  std::vector<Tensor> y = run_op("Conv", {x, constant(w)});
  EXPECT_EQ(y[0].shape(), (Shape{0, 4, 3, 3}));
}

TEST(Conv, BadInput) {
  Tensor x = random_tensor({1, 3, 5, 5}, 30);
  // Channel mismatch: W expects 2 input channels.
  EXPECT_THROW(run_op("Conv", {x, constant(random_tensor({4, 2, 3, 3}, 31))}), ShapeError);
  // group 2 does not divide 3 channels.
  EXPECT_THROW(run_op("Conv", {x, constant(random_tensor({4, 1, 3, 3}, 32))}, {{"group", 2}}),
               ShapeError);
  // group does not divide the output channels.
  EXPECT_THROW(
      run_op("Conv", {random_tensor({1, 4, 5, 5}, 33), constant(random_tensor({3, 2, 3, 3}, 34))},
             {{"group", 2}}),
      ShapeError);
  Tensor w = random_tensor({4, 3, 3, 3}, 35);
  EXPECT_THROW(run_op("Conv", {x, constant(w)}, {{"pads", {-1, 0, 0, 0}}}), InvalidModel);
  EXPECT_THROW(run_op("Conv", {x, constant(w)}, {{"strides", {0, 1}}}), InvalidModel);
  EXPECT_THROW(run_op("Conv", {x, constant(w)}, {{"dilations", {1}}}), InvalidModel);
  EXPECT_THROW(run_op("Conv", {x, constant(w)}, {{"group", 0}}), InvalidModel);
  EXPECT_THROW(run_op("Conv", {x, constant(w)}, {{"auto_pad", "SAME"}}), InvalidModel);
  EXPECT_THROW(run_op("Conv", {x, constant(w)}, {{"kernel_shape", {2, 2}}}), ShapeError);
  EXPECT_THROW(run_op("Conv", {x, constant(w)}, {{"bogus", 1}}), InvalidModel);
  // Kernel larger than the padded input.
  EXPECT_THROW(run_op("Conv", {random_tensor({1, 3, 2, 2}, 36), constant(w)}), ShapeError);
  EXPECT_NO_THROW(
      run_op("Conv", {random_tensor({1, 3, 2, 2}, 36), constant(w)}, {{"pads", {1, 1, 0, 0}}}));
  // Bias of the wrong size, weight of the wrong rank, integer input.
  EXPECT_THROW(run_op("Conv", {x, constant(w), constant(random_tensor({3}, 37))}), ShapeError);
  EXPECT_THROW(run_op("Conv", {x, constant(random_tensor({4, 3, 3}, 38))}), ShapeError);
  EXPECT_THROW(run_op("Conv", {test::random_ints({1, 3, 5, 5}, 39, 0, 3), constant(w)}),
               ShapeError);
  EXPECT_THROW(run_op("Conv", {random_tensor({3, 5, 5}, 40), constant(w)}), ShapeError);
  EXPECT_THROW(run_op("Conv", {x}), InvalidModel);
}

TEST(ConvTranspose, Stride2OutputPadding) {
  // out = 2 * (5 - 1) + 1 + 3 - 1 - 1 = 10.
  check_conv_transpose({{1, 4, 5, 5},
                        {4, 3, 3, 3},
                        true,
                        {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}},
                        geo(2, {2, 2}, {}, {1, 1}),
                        {1, 3, 10, 10}},
                       50);
  // No pads: the output_padding row and column receive only the bias.
  check_conv_transpose({{2, 3, 4, 4},
                        {3, 2, 3, 3},
                        true,
                        {{"strides", {2, 2}}, {"output_padding", {1, 0}}},
                        geo(2, {2, 2}),
                        {2, 2, 10, 9}},
                       51);
}

TEST(ConvTranspose, OutputShape) {
  // full = 2 * 3 + 3 = 9; output 8 -> total 1: NOTSET puts it first, SAME_UPPER last.
  check_conv_transpose({{1, 2, 4, 4},
                        {2, 3, 3, 3},
                        true,
                        {{"strides", {2, 2}}, {"output_shape", {8, 8}}},
                        geo(2, {2, 2}, {}, {1, 1}),
                        {1, 3, 8, 8}},
                       52);
  check_conv_transpose(
      {{1, 2, 4, 4},
       {2, 3, 3, 3},
       false,
       {{"strides", {2, 2}}, {"output_shape", {1, 3, 8, 7}}, {"auto_pad", "SAME_UPPER"}},
       geo(2, {2, 2}, {}, {0, 1}),
       {1, 3, 8, 7}},
      53);
  // output_shape reached only through output_padding.
  check_conv_transpose(
      {{1, 2, 4, 4},
       {2, 3, 3, 3},
       true,
       {{"strides", {2, 2}}, {"output_shape", {10, 10}}, {"output_padding", {1, 1}}},
       geo(2, {2, 2}),
       {1, 3, 10, 10}},
      54);
  // output_shape beyond the full = 3 * 2 + 3 = 9 and 2 * 2 + 3 = 7 positions the input reaches:
  // no padding, the trailing positions receive only the bias (as ONNX's reference computes it).
  check_conv_transpose({{1, 2, 3, 3},
                        {2, 3, 3, 3},
                        true,
                        {{"strides", {3, 2}}, {"output_shape", {10, 8}}},
                        geo(2, {3, 2}),
                        {1, 3, 10, 8}},
                       55);
}

TEST(ConvTranspose, GroupsDilationOneD) {
  // out = (5 - 1) + (3 - 1) * 2 + 1 = 9.
  check_conv_transpose({{2, 4, 5},
                        {4, 3, 3},
                        true,
                        {{"group", 2}, {"dilations", {2}}},
                        geo(1, {}, {2}, {}, 2),
                        {2, 6, 9}},
                       55);
  check_conv_transpose({{1, 6, 4, 5},
                        {6, 1, 3, 3},
                        false,
                        {{"group", 6}, {"strides", {2, 1}}, {"pads", {1, 0, 0, 1}}},
                        geo(2, {2, 1}, {}, {1, 0}, 6),
                        {1, 6, 8, 6}},
                       56);
}

TEST(ConvTranspose, AutoPad) {
  // out = 3 * 2 = 6; full 2 * 2 + 3 = 7 -> total 1: UPPER end, LOWER begin.
  check_conv_transpose({{1, 2, 3, 3},
                        {2, 2, 3, 3},
                        true,
                        {{"strides", {2, 2}}, {"auto_pad", "SAME_UPPER"}},
                        geo(2, {2, 2}),
                        {1, 2, 6, 6}},
                       57);
  check_conv_transpose({{1, 2, 3, 3},
                        {2, 2, 3, 3},
                        true,
                        {{"strides", {2, 2}}, {"auto_pad", "SAME_LOWER"}},
                        geo(2, {2, 2}, {}, {1, 1}),
                        {1, 2, 6, 6}},
                       58);
  // Kernel 1 stride 2: the input reaches only 5 of the 6 positions.
  check_conv_transpose({{1, 2, 3, 3},
                        {2, 2, 1, 1},
                        true,
                        {{"strides", {2, 2}}, {"auto_pad", "SAME_UPPER"}},
                        geo(2, {2, 2}),
                        {1, 2, 6, 6}},
                       59);
  check_conv_transpose(
      {{1, 2, 3}, {2, 3, 2}, false, {{"auto_pad", "VALID"}, {"pads", {1, 1}}}, geo(1), {1, 3, 4}},
      60);
}

TEST(ConvTranspose, RuntimeWeightsLarger) {
  Case c{{2, 16, 8, 8},
         {16, 8, 4, 4},
         true,
         {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}},
         geo(2, {2, 2}, {}, {1, 1}),
         {2, 8, 16, 16}};
  c.const_weights = false;
  check_conv_transpose(c, 61);
  c.const_weights = true;
  check_conv_transpose(c, 62);
}

TEST(ConvTranspose, BadInput) {
  Tensor x = random_tensor({1, 4, 5, 5}, 70);
  EXPECT_THROW(run_op("ConvTranspose", {x, constant(random_tensor({3, 2, 3, 3}, 71))}), ShapeError);
  EXPECT_THROW(
      run_op("ConvTranspose", {x, constant(random_tensor({4, 2, 3, 3}, 72))}, {{"group", 3}}),
      ShapeError);
  Tensor w = random_tensor({4, 2, 3, 3}, 73);
  EXPECT_THROW(run_op("ConvTranspose", {x, constant(w)}, {{"output_shape", {0, 20}}}),
               InvalidModel);
  EXPECT_THROW(run_op("ConvTranspose", {x, constant(w)}, {{"output_padding", {-1, 0}}}),
               InvalidModel);
  EXPECT_THROW(run_op("ConvTranspose", {x, constant(w)}, {{"strides", {0, 0}}}), InvalidModel);
  EXPECT_THROW(run_op("ConvTranspose", {x, constant(w)}, {{"pads", {5, 5, 5, 5}}}), ShapeError);
  EXPECT_THROW(run_op("ConvTranspose", {x, constant(w), constant(random_tensor({4}, 74))}),
               ShapeError);
}

}  // namespace
}  // namespace lumen
