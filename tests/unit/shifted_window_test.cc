// Swin's shifted-window forms (fuse_roll.cc, fold_reshaped_add.cc, identity.cc's full Slice):
// torch.roll's Slice + Concat, a full-extent Slice, and the shifted-window attention whose mask is
// added through a reshape, each built by hand, checked to take their fused form, and run against
// a naive double-precision reference on random data; what must stay is checked to stay. With
// --lumen-backends=cuda,cpu (the GPU machine) the attention block runs on those backends too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "lumen/lumen.h"
#include "ops/backend_check_util.h"
#include "ops/op_test_util.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

Value* ints(Graph& g, const std::vector<int64_t>& v) {
  return g.add_constant(g.unique_name("c"),
                        Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v));
}

Value* slice(Graph& g, Value* x, int64_t begin, int64_t end, int64_t axis) {
  return g.add_op("Slice", {x, ints(g, {begin}), ints(g, {end}), ints(g, {axis})});
}

Tensor run(Graph& graph, const std::vector<Tensor>& inputs) {
  Runtime rt;
  return graph.compile(&rt)->execute(inputs)[0];
}

// x [2, 5, 6, 3] rolled by `shift` along axis 1 (torch.roll's sign: element i moves to i + shift).
std::vector<double> roll_ref(const Tensor& x, int64_t shift) {
  const std::vector<double> in = test::to_doubles(x);
  std::vector<double> out(in.size());
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 18; ++j)
        out[(a * 5 + ((i + shift) % 5 + 5) % 5) * 18 + j] = in[(a * 5 + i) * 18 + j];
  return out;
}

TEST(FuseRollPass, SliceConcatBecomesOneGather) {
  // torch.roll(x, -2, 1) as exported: [2:] then [:2]; and roll by +1 with a negative start.
  for (auto [begin, end, shift] : {std::tuple<int64_t, int64_t, int64_t>{2, 2, -2}, {-1, 4, 1}}) {
    Graph g;
    Value* x = g.add_input("x", {2, 5, 6, 3});
    Value* hi = slice(g, x, begin, std::numeric_limits<int64_t>::max(), 1);
    Value* lo = slice(g, x, 0, end, -3);
    g.mark_output(g.add_op("Concat", {hi, lo}, {{"axis", int64_t{1}}}));
    const Tensor in = test::random_tensor({2, 5, 6, 3}, 11);
    const std::vector<double> want = roll_ref(in, shift);
    test::expect_close(run(g, {in}), {2, 5, 6, 3}, want);
    EXPECT_TRUE(make_fuse_roll_pass()->run(g));
    make_dead_code_pass()->run(g);
    g.verify();
    EXPECT_EQ(test::count_ops(g, "Gather"), 1) << g.to_text();
    EXPECT_EQ(test::count_ops(g, "Slice") + test::count_ops(g, "Concat"), 0) << g.to_text();
    test::expect_close(run(g, {in}), {2, 5, 6, 3}, want);
  }
}

TEST(FuseRollPass, LeavesConcatsThatAreNotRolls) {
  Graph g;
  Value* x = g.add_input("x", {2, 5, 6, 3});
  Value* y = g.add_input("y", {2, 5, 6, 3});
  // Parts of two tensors; a gap ([3:] and [:2]); one part twice.
  g.mark_output(
      g.add_op("Concat", {slice(g, x, 2, 5, 1), slice(g, y, 0, 2, 1)}, {{"axis", int64_t{1}}}));
  g.mark_output(
      g.add_op("Concat", {slice(g, x, 3, 5, 1), slice(g, x, 0, 2, 1)}, {{"axis", int64_t{1}}}));
  g.mark_output(
      g.add_op("Concat", {slice(g, x, 2, 5, 1), slice(g, x, 2, 5, 1)}, {{"axis", int64_t{1}}}));
  EXPECT_FALSE(make_fuse_roll_pass()->run(g));
  EXPECT_EQ(test::count_ops(g, "Gather"), 0);
}

TEST(IdentityPass, RemovesFullSlicesButNotReversals) {
  Graph g;
  Value* x = g.add_input("x", {3, 4});
  Value* full = slice(g, g.add_op("Relu", {x}), 0, 1000, 1);  // Swin's x[:, :H, :W]
  Value* reversed =
      g.add_op("Slice", {full, ints(g, {-1}), ints(g, {-1000}), ints(g, {0}), ints(g, {-1})});
  g.mark_output(reversed);
  EXPECT_TRUE(make_identity_pass()->run(g));
  make_dead_code_pass()->run(g);
  g.verify();
  EXPECT_EQ(test::count_ops(g, "Slice"), 1) << g.to_text();
  const Tensor in = test::random_tensor({3, 4}, 5);
  const std::vector<double> v = test::to_doubles(in);
  std::vector<double> want(12);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) want[i * 4 + j] = std::max(0.0, v[(2 - i) * 4 + j]);
  test::expect_close(run(g, {in}), {3, 4}, want);
}

// Shifted-window attention as torchvision's Swin exports it, over W windows of N tokens and H
// heads of D: scores (Q * scale) K^T [W, H, N, N], plus the relative position bias [H, N, N],
// reshaped to [1, W, H, N, N] to add the shift mask [1, W, 1, N, N], reshaped back, softmax, V.
constexpr int64_t kW = 4, kH = 3, kN = 9, kD = 32;

void build_shifted(Graph& g, const Tensor& bias, const Tensor& mask) {
  Value* q = g.add_input("q", {kW, kH, kN, kD});
  Value* k = g.add_input("k", {kW, kH, kN, kD});
  Value* v = g.add_input("v", {kW, kH, kN, kD});
  Value* scale = g.add_constant("scale", Tensor::from_vector<float>(Shape{}, {0.25f}));
  Value* kt = g.add_op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value* s = g.add_op("MatMul", {g.add_op("Mul", {q, scale}), kt});
  s = g.add_op("Add", {s, g.add_constant("bias", bias)});
  s = g.add_op("Reshape", {s, ints(g, {1, kW, kH, kN, kN})});
  s = g.add_op("Add", {s, g.add_constant("mask", mask)});
  s = g.add_op("Reshape", {s, ints(g, {-1, kH, kN, kN})});
  g.mark_output(g.add_op("MatMul", {g.add_op("Softmax", {s}, {{"axis", int64_t{-1}}}), v}));
}

std::vector<double> shifted_ref(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& bias, const Tensor& mask) {
  const std::vector<double> qd = test::to_doubles(q), kd = test::to_doubles(k),
                            vd = test::to_doubles(v), bd = test::to_doubles(bias),
                            md = test::to_doubles(mask);
  std::vector<double> y(qd.size());
  for (int64_t w = 0; w < kW; ++w)
    for (int64_t h = 0; h < kH; ++h) {
      const int64_t base = (w * kH + h) * kN * kD;
      for (int64_t i = 0; i < kN; ++i) {
        std::vector<double> s(kN);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < kN; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < kD; ++c)
            acc += 0.25 * qd[base + i * kD + c] * kd[base + j * kD + c];
          s[j] = acc + bd[(h * kN + i) * kN + j] + md[(w * kN + i) * kN + j];
          mx = std::max(mx, s[j]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t c = 0; c < kD; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < kN; ++j) acc += s[j] / sum * vd[base + j * kD + c];
          y[base + i * kD + c] = acc;
        }
      }
    }
  return y;
}

TEST(FoldReshapedAddPass, ShiftedWindowAttentionFuses) {
  const Tensor q = test::random_tensor({kW, kH, kN, kD}, 1),
               k = test::random_tensor({kW, kH, kN, kD}, 2),
               v = test::random_tensor({kW, kH, kN, kD}, 3);
  const Tensor bias = test::random_tensor({kH, kN, kN}, 4);
  // The shift mask: 0 or -100, as Swin's (random here, so every window differs).
  Tensor mask = test::random_tensor({1, kW, 1, kN, kN}, 5);
  for (int64_t i = 0; i < mask.numel(); ++i)
    mask.data<float>()[i] = mask.data<float>()[i] > 0.3f ? -100.f : 0.f;
  const std::vector<double> want = shifted_ref(q, k, v, bias, mask);
  Graph plain;
  build_shifted(plain, bias, mask);
  test::expect_close(run(plain, {q, k, v}), {kW, kH, kN, kD}, want, 1e-5, 1e-4);
  Graph g;
  build_shifted(g, bias, mask);
  g.optimize();
  EXPECT_EQ(test::count_ops(g, "Softmax") + test::count_ops(g, "Reshape"), 0) << g.to_text();
  EXPECT_EQ(test::count_ops(g, "FusedAttention") + test::count_ops(g, "StridedAttention"), 1)
      << g.to_text();
  test::expect_close(run(g, {q, k, v}), {kW, kH, kN, kD}, want, 1e-5, 1e-4);
  const std::vector<std::string>& backends = test::run_op_backends();
  if (backends == std::vector<std::string>{"cpu"} || !test::requested_backends_available()) return;
  // Optimized and compiled for --lumen-backends (cuda,cpu on the GPU machine): eagerly, recorded
  // and replayed.
  Graph device;
  build_shifted(device, bias, mask);
  device.optimize(backends);
  EXPECT_EQ(test::count_ops(device, "Softmax"), 0) << device.to_text();
  Runtime rt;
  CompileOptions options;
  options.backends = backends;
  Executable* exe = device.compile(&rt, options);
  for (int r = 0; r < 3; ++r)
    test::expect_close(exe->execute({q, k, v})[0], {kW, kH, kN, kD}, want, 1e-5, 1e-4);
}

TEST(FoldReshapedAddPass, LeavesReshapesThatDoNotReturn) {
  // The outer Reshape to another shape than Y's, and a mask that is an input, stay.
  Graph g;
  Value* y = g.add_input("y", {4, 6});
  Value* m = g.add_input("m", {2, 12});
  Value* a = g.add_op("Add", {g.add_op("Reshape", {y, ints(g, {2, 12})}),
                              g.add_constant("addend", test::random_tensor({2, 12}, 9))});
  g.mark_output(g.add_op("Reshape", {a, ints(g, {24})}));
  Value* b = g.add_op("Add", {g.add_op("Reshape", {y, ints(g, {2, 12})}), m});
  g.mark_output(g.add_op("Reshape", {b, ints(g, {4, 6})}));
  EXPECT_FALSE(make_fold_reshaped_add_pass()->run(g));
}

}  // namespace
}  // namespace lumen
