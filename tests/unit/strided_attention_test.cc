// StridedAttention and the attention-views pass: torch's nn.MultiheadAttention form (one
// projection sliced into Q, K and V, reshaped and transposed heads-first, the result transposed
// back and reshaped) is built by hand, checked to lose its Slices and Transposes, and run against
// a naive double-precision reference on random data; the op itself is run on hand-made views
// (K stored either way round, Y written transposed); its schema rejects views that do not fit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "lumen/lumen.h"
#include "ops/backend_check_util.h"
#include "ops/op_test_util.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

Tensor run(Graph& graph, const std::vector<Tensor>& inputs) {
  Runtime rt;
  return graph.compile(&rt)->execute(inputs)[0];
}

// One head's softmax(scale * q @ k^T + mask) @ v in double, reading q, k, v and writing y through
// accessor functions of (row, column).
void attention_head(int64_t sq, int64_t sk, int64_t d, int64_t dv, double scale,
                    const std::function<double(int64_t, int64_t)>& q,
                    const std::function<double(int64_t, int64_t)>& k,
                    const std::function<double(int64_t, int64_t)>& v,
                    const std::function<double(int64_t, int64_t)>& mask,
                    const std::function<void(int64_t, int64_t, double)>& y) {
  std::vector<double> s(static_cast<size_t>(sk));
  for (int64_t i = 0; i < sq; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < sk; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < d; ++c) acc += q(i, c) * k(j, c);
      s[j] = acc * scale + mask(i, j);
      mx = std::max(mx, s[j]);
    }
    for (int64_t j = 0; j < sk; ++j) sum += (s[j] = std::exp(s[j] - mx));
    for (int64_t c = 0; c < dv; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < sk; ++j) acc += s[j] / sum * v(j, c);
      y(i, c, acc);
    }
  }
}

// nn.MultiheadAttention as torch 1.13 exports it, on x [S, N, E] with H heads: x @ w [E, 3E],
// Slices into Q, K, V [S, N, E], Reshape [S, N*H, D], Transpose heads-first (K to [N*H, D, S]),
// Q / sqrt(D), [an additive causal mask,] attention, Transpose back, Reshape [S*N, E]. With
// `unbind`, as torch 2.x exports it: Q, K and V are Gathers 0, 1, 2 of the projection reshaped to
// [S, N, 3, E], unsqueezed, transposed to [3, S, N, 1, E] and squeezed.
void build_mha(Graph& g, const Tensor& w, int64_t s, int64_t n, int64_t h, int64_t e, bool causal,
               bool unbind = false) {
  const int64_t d = e / h;
  Value* x = g.add_input("x", {s, n, e});
  Value* qkv = g.add_op("MatMul", {x, g.add_constant("w", w)});
  Value* unbound = nullptr;
  if (unbind) {
    auto ints = [&](std::vector<int64_t> v) {
      return g.add_constant(g.unique_name("c"),
                            Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v));
    };
    Value* r = g.add_op("Reshape", {qkv, ints({s, n, 3, e})});
    Value* u = g.add_op("Unsqueeze", {r, ints({0})});
    Value* t = g.add_op("Transpose", {u}, {{"perm", std::vector<int64_t>{3, 1, 2, 0, 4}}});
    unbound = g.add_op("Squeeze", {t, ints({3})});
  }
  auto part = [&](int64_t i) {
    if (unbind) {
      Value* index = g.add_constant(g.unique_name("i"), Tensor::scalar<int64_t>(i));
      Value* shape = g.add_constant(g.unique_name("sh"),
                                    Tensor::from_vector<int64_t>(Shape{3}, {s, n * h, d}));
      return g.add_op("Reshape", {g.add_op("Gather", {unbound, index}), shape});
    }
    Value* starts =
        g.add_constant(g.unique_name("st"), Tensor::from_vector<int64_t>(Shape{1}, {i * e}));
    Value* ends =
        g.add_constant(g.unique_name("en"), Tensor::from_vector<int64_t>(Shape{1}, {(i + 1) * e}));
    Value* axes = g.add_constant(g.unique_name("ax"), Tensor::from_vector<int64_t>(Shape{1}, {2}));
    Value* shape =
        g.add_constant(g.unique_name("sh"), Tensor::from_vector<int64_t>(Shape{3}, {s, n * h, d}));
    return g.add_op("Reshape", {g.add_op("Slice", {qkv, starts, ends, axes}), shape});
  };
  Value* q = g.add_op("Transpose", {part(0)}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value* kt = g.add_op("Transpose", {part(1)}, {{"perm", std::vector<int64_t>{1, 2, 0}}});
  Value* v = g.add_op("Transpose", {part(2)}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value* root = g.add_constant("root", Tensor::scalar<float>(std::sqrt(static_cast<float>(d))));
  Value* scores = g.add_op("MatMul", {g.add_op("Div", {q, root}), kt});
  if (causal) {
    Tensor mask = Tensor::empty({s, s});
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j)
        mask.data<float>()[i * s + j] = j > i ? -std::numeric_limits<float>::infinity() : 0.0f;
    scores = g.add_op("Add", {scores, g.add_constant("mask", mask)});
  }
  Value* y = g.add_op("MatMul", {g.add_op("Softmax", {scores}, {{"axis", int64_t{-1}}}), v});
  y = g.add_op("Transpose", {y}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  Value* flat = g.add_constant("flat", Tensor::from_vector<int64_t>(Shape{2}, {s * n, e}));
  g.mark_output(g.add_op("Reshape", {y, flat}));
}

// The reference of build_mha: [S * N, E].
std::vector<double> mha_ref(const Tensor& x, const Tensor& w, int64_t s, int64_t n, int64_t h,
                            int64_t e, bool causal) {
  const int64_t d = e / h;
  const std::vector<double> xd = test::to_doubles(x), wd = test::to_doubles(w);
  std::vector<double> qkv(static_cast<size_t>(s * n * 3 * e), 0.0);
  for (int64_t r = 0; r < s * n; ++r)
    for (int64_t c = 0; c < 3 * e; ++c)
      for (int64_t i = 0; i < e; ++i) qkv[r * 3 * e + c] += xd[r * e + i] * wd[i * 3 * e + c];
  std::vector<double> out(static_cast<size_t>(s * n * e));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t head = 0; head < h; ++head) {
      auto at = [&](int64_t part) {
        return [&, part](int64_t row, int64_t c) {
          return qkv[(row * n + b) * 3 * e + part * e + head * d + c];
        };
      };
      attention_head(
          s, s, d, d, 1.0 / std::sqrt(static_cast<double>(d)), at(0), at(1), at(2),
          [&](int64_t i, int64_t j) { return causal && j > i ? -INFINITY : 0.0; },
          [&](int64_t row, int64_t c, double val) { out[(row * n + b) * e + head * d + c] = val; });
    }
  return out;
}

TEST(AttentionViews, MultiheadFormReadsAndWritesInPlace) {
  // N = 1 (the zoo's exports): every Slice, Reshape and Transpose is a view. N = 2: the Reshape
  // [S, N, E] -> [S, N*H, D] of a slice merges dims that are not contiguous, so the Slices stay
  // and only the Transposes go. 37 rows: partial row blocks and a sequence not a multiple of 8.
  // With unbind (torch 2.x) the Gathers of one constant index are views too; at N = 2 the
  // Reshape of a Gather merges dims that are not contiguous in the projection, so the Transpose
  // before the Gathers stays (one copy).
  for (bool unbind : {false, true})
    for (int64_t n : {1, 2})
      for (bool causal : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + (causal ? " causal" : "") + (unbind ? " unbind" : ""));
        const int64_t s = 37, h = 3, e = 48;
        Tensor x = test::random_tensor({s, n, e}, 71 + n, -1, 1);
        Tensor w = test::random_tensor({e, 3 * e}, 73, -0.5, 0.5);
        Graph plain, optimized;
        build_mha(plain, w, s, n, h, e, causal, unbind);
        build_mha(optimized, w, s, n, h, e, causal, unbind);
        optimized.optimize({"cpu"});
        optimized.verify();
        EXPECT_EQ(test::count_ops(optimized, "StridedAttention"), 1) << optimized.to_text();
        EXPECT_EQ(test::count_ops(optimized, "FusedAttention"), 0);
        EXPECT_EQ(test::count_ops(optimized, "Transpose"), unbind && n == 2 ? 1 : 0)
            << optimized.to_text();
        EXPECT_EQ(test::count_ops(optimized, "Slice"), n == 1 || unbind ? 0 : 3)
            << optimized.to_text();
        EXPECT_EQ(test::count_ops(optimized, "Gather"), 0) << optimized.to_text();
        const std::vector<double> want = mha_ref(x, w, s, n, h, e, causal);
        test::expect_close(run(plain, {x}), {s * n, e}, want, 1e-5, 1e-4);
        test::expect_close(run(optimized, {x}), {s * n, e}, want, 1e-5, 1e-4);
        const std::vector<std::string>& backends = test::run_op_backends();
        if (backends == std::vector<std::string>{"cpu"} || !test::requested_backends_available())
          continue;
        // The same form optimized and compiled for --lumen-backends (cuda,cpu on the GPU
        // machine): the StridedAttention runs there, eagerly, recorded and replayed.
        Graph device;
        build_mha(device, w, s, n, h, e, causal, unbind);
        device.optimize(backends);
        EXPECT_EQ(test::count_ops(device, "StridedAttention"), 1) << device.to_text();
        Runtime rt;
        CompileOptions options;
        options.backends = backends;
        Executable* exe = device.compile(&rt, options);
        EXPECT_EQ(exe->summary().find("(StridedAttention) @cpu"), std::string::npos)
            << exe->summary();
        for (int r = 0; r < 3; ++r)
          test::expect_close(exe->execute({x})[0], {s * n, e}, want, 1e-5, 1e-4);
      }
}

// At 16 bits on CUDA (--lumen-backends with cuda, on the GPU machine) the views feed the
// tensor-core kernel: heads of 64 read in place from the projection. 100 rows: the fused kernel is
// there too and the faster is measured; 150: past the fused kernel's keys, the kernel or the
// products. Eagerly, recorded and replayed, against the float32 reference within the 16-bit
// formats' rounding (the projection included).
TEST(StridedAttention, SixteenBitsOnCuda) {
  const std::vector<std::string>& backends = test::run_op_backends();
  if (backends == std::vector<std::string>{"cpu"} || !test::requested_backends_available() ||
      std::find(backends.begin(), backends.end(), "cuda") == backends.end())
    GTEST_SKIP() << "16-bit storage is CUDA's: run with --lumen-backends=cuda,cpu";
  const int64_t h = 2, e = 128;
  for (int64_t s : {100, 150})
    for (Precision p : {Precision::kFloat16, Precision::kBFloat16}) {
      const bool bf16 = p == Precision::kBFloat16;
      SCOPED_TRACE(std::to_string(s) + (bf16 ? " rows, bfloat16" : " rows, float16"));
      Tensor x = test::random_tensor({s, 1, e}, 91 + s, -1, 1);
      Tensor w = test::random_tensor({e, 3 * e}, 93, -0.3f, 0.3f);
      const std::vector<double> want = mha_ref(x, w, s, 1, h, e, false);
      Graph g;
      build_mha(g, w, s, 1, h, e, false);
      g.optimize(backends);
      Runtime rt;
      CompileOptions options;
      options.backends = backends;
      options.precision = p;
      Executable* exe = g.compile(&rt, options);
      EXPECT_NE(exe->summary().find("(StridedAttention) @cuda"), std::string::npos)
          << exe->summary();
      for (int r = 0; r < 3; ++r)
        test::expect_close(exe->execute({x})[0], {s, e}, want, bf16 ? 8e-2 : 1e-2,
                           bf16 ? 8e-2 : 1e-2);
    }
}

// Batch-first multi-head attention as 4-D tensors: x [B, S, E] projected to [B, S, 3E], each part
// sliced, reshaped to [B, S, H, D] and transposed heads-first ([B, H, S, D], K to [B, H, D, S]).
void build_batched_mha(Graph& g, int64_t b, int64_t s, int64_t h, int64_t e) {
  const int64_t d = e / h;
  Value* x = g.add_input("x", {b, s, e});
  Value* qkv = g.add_op("MatMul", {x, g.add_constant("w", test::random_tensor({e, 3 * e}, 5))});
  auto ints = [&](std::vector<int64_t> v) {
    return g.add_constant(g.unique_name("c"),
                          Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v));
  };
  auto part = [&](int64_t i, std::vector<int64_t> perm) {
    Value* slice = g.add_op("Slice", {qkv, ints({i * e}), ints({(i + 1) * e}), ints({2})});
    return g.add_op("Transpose", {g.add_op("Reshape", {slice, ints({b, s, h, d})})},
                    {{"perm", std::move(perm)}});
  };
  Value* q = part(0, {0, 2, 1, 3});
  Value* kt = part(1, {0, 2, 3, 1});
  Value* v = part(2, {0, 2, 1, 3});
  Value* root = g.add_constant("root", Tensor::scalar<float>(std::sqrt(static_cast<float>(d))));
  Value* scores = g.add_op("MatMul", {g.add_op("Div", {q, root}), kt});
  Value* y = g.add_op("MatMul", {g.add_op("Softmax", {scores}, {{"axis", int64_t{-1}}}), v});
  y = g.add_op("Transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  g.mark_output(g.add_op("Reshape", {y, ints({b * s, e})}));
}

// With CUDA among the backends the pass rewrites one sequence with more than a decoding step's
// rows, or a batch of them that CUDA's fused kernel takes in one launch (heads of 32, 64 or 128,
// at most 128 keys): otherwise CUDA's StridedAttention is a pair of products per batch index, and
// a few rows run faster on FusedAttention's split-key kernel. The CPU takes every form.
TEST(AttentionViews, WithCudaOneSequenceOfSeveralRowsOrAFusedBatch) {
  struct Case {
    int64_t batch, seq, heads, embed;
    bool cuda_rewrites;
  };
  for (const Case& c :
       {Case{1, 37, 4, 32, true}, Case{2, 37, 4, 32, false}, Case{1, 1, 4, 32, false},
        Case{1, 4, 4, 32, false}, Case{1, 5, 4, 32, true}, Case{3, 37, 2, 64, true},
        Case{3, 129, 2, 64, false}, Case{3, 4, 2, 64, false}}) {
    SCOPED_TRACE("batch " + std::to_string(c.batch) + ", seq " + std::to_string(c.seq) +
                 ", depth " + std::to_string(c.embed / c.heads));
    for (bool cuda : {false, true}) {
      Graph g;
      build_batched_mha(g, c.batch, c.seq, c.heads, c.embed);
      g.optimize(std::vector<std::string>{cuda ? "cuda" : "cpu"});
      g.verify();
      const bool rewritten = cuda ? c.cuda_rewrites : true;
      EXPECT_EQ(test::count_ops(g, "StridedAttention"), rewritten ? 1 : 0)
          << (cuda ? "cuda" : "cpu");
      EXPECT_EQ(test::count_ops(g, "FusedAttention"), rewritten ? 0 : 1) << (cuda ? "cuda" : "cpu");
    }
    // With --lumen-backends=cuda,cpu (the GPU machine): the rewritten form runs there (a batch in
    // one launch of the fused kernel), eagerly, recorded and replayed, against the graph as built
    // run on the CPU.
    const std::vector<std::string>& backends = test::run_op_backends();
    if (!c.cuda_rewrites || std::find(backends.begin(), backends.end(), "cuda") == backends.end() ||
        !test::requested_backends_available())
      continue;
    const Tensor x = test::random_tensor({c.batch, c.seq, c.embed}, 91);
    Graph plain;
    build_batched_mha(plain, c.batch, c.seq, c.heads, c.embed);
    const Tensor want = run(plain, {x});
    Graph device;
    build_batched_mha(device, c.batch, c.seq, c.heads, c.embed);
    device.optimize(backends);
    Runtime rt;
    CompileOptions options;
    options.backends = backends;
    Executable* exe = device.compile(&rt, options);
    EXPECT_EQ(exe->summary().find("(StridedAttention) @cpu"), std::string::npos) << exe->summary();
    for (int r = 0; r < 3; ++r)
      test::expect_close(exe->execute({x})[0], want.shape(), test::to_doubles(want), 1e-5, 1e-4);
  }
}

TEST(AttentionViews, KeepsWhatIsNotAView) {
  // Q stored [N, D, S] and transposed: its depth is not contiguous, so that Transpose stays; K^T
  // read by a second node keeps its Transpose too (fuse-attention reads K in place regardless), so
  // no view is left to absorb and the node stays a FusedAttention.
  Graph g;
  Value* qt = g.add_input("qt", {2, 8, 5});
  Value* k = g.add_input("k", {2, 5, 8});
  Value* v = g.add_input("v", {2, 5, 8});
  Value* q = g.add_op("Transpose", {qt}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Value* kt = g.add_op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  Value* p = g.add_op("Softmax", {g.add_op("MatMul", {q, kt})}, {{"axis", int64_t{-1}}});
  g.mark_output(g.add_op("MatMul", {p, v}));
  g.mark_output(g.add_op("Relu", {kt}));
  g.optimize({"cpu"});
  EXPECT_EQ(test::count_ops(g, "FusedAttention"), 1) << g.to_text();
  EXPECT_EQ(test::count_ops(g, "Transpose"), 2) << g.to_text();
  Tensor qtv = test::random_tensor({2, 8, 5}, 81, -2, 2);
  Tensor kv = test::random_tensor({2, 5, 8}, 82, -2, 2);
  Tensor vv = test::random_tensor({2, 5, 8}, 83);
  std::vector<double> want(80);  // [2, 5, 8]
  const std::vector<double> qd = test::to_doubles(qtv), kd = test::to_doubles(kv),
                            vd = test::to_doubles(vv);
  for (int64_t b = 0; b < 2; ++b)
    attention_head(
        5, 5, 8, 8, 1.0, [&](int64_t i, int64_t c) { return qd[(b * 8 + c) * 5 + i]; },
        [&](int64_t j, int64_t c) { return kd[(b * 5 + j) * 8 + c]; },
        [&](int64_t j, int64_t c) { return vd[(b * 5 + j) * 8 + c]; },
        [](int64_t, int64_t) { return 0.0; },
        [&](int64_t i, int64_t c, double val) { want[(b * 5 + i) * 8 + c] = val; });
  Runtime rt;
  std::vector<Tensor> got = g.compile(&rt)->execute({qtv, kv, vv});
  test::expect_close(got[0], {2, 5, 8}, want, 1e-5, 1e-4);
}

// Hand-made views over one packed tensor P [2 heads, 23 rows, 50]: per head and row, Q at
// columns [0, 12), V at [12, 19), K at [19, 31) (depth-contiguous) or, with k_rows, K^T stored
// as [12, 23] at column 31 + ... of a separate tensor. Y [23, 2, 7] is written heads-second.
TEST(StridedAttention, RunsOnHandMadeViews) {
  const int64_t heads = 2, s = 23, d = 12, dv = 7, width = 50;
  Tensor p = test::random_tensor({heads, s, width}, 91, -2, 2);
  Tensor kt = test::random_tensor({heads, d, s}, 92, -2, 2);
  const std::vector<double> pd = test::to_doubles(p), ktd = test::to_doubles(kt);
  for (bool k_rows : {false, true}) {
    SCOPED_TRACE(k_rows ? "K^T stored" : "K stored");
    Attributes attrs{{"scale", 0.2f},
                     {"q_shape", std::vector<int64_t>{heads, s, d}},
                     {"k_shape", std::vector<int64_t>{heads, s, d}},
                     {"v_shape", std::vector<int64_t>{heads, s, dv}},
                     {"q_view", std::vector<int64_t>{0, s * width, width, 1}},
                     {"v_view", std::vector<int64_t>{12, s * width, width, 1}},
                     {"y_view", std::vector<int64_t>{0, dv, heads * dv, 1}},
                     {"output_shape", std::vector<int64_t>{s, heads, dv}}};
    attrs["k_view"] = k_rows ? std::vector<int64_t>{0, d * s, 1, s}
                             : std::vector<int64_t>{19, s * width, width, 1};
    std::vector<double> want(static_cast<size_t>(s * heads * dv));
    for (int64_t b = 0; b < heads; ++b)
      attention_head(
          s, s, d, dv, 0.2, [&](int64_t i, int64_t c) { return pd[(b * s + i) * width + c]; },
          [&](int64_t j, int64_t c) {
            return k_rows ? ktd[(b * d + c) * s + j] : pd[(b * s + j) * width + 19 + c];
          },
          [&](int64_t j, int64_t c) { return pd[(b * s + j) * width + 12 + c]; },
          [](int64_t, int64_t) { return 0.0; },
          [&](int64_t i, int64_t c, double val) { want[(i * heads + b) * dv + c] = val; });
    Tensor got = test::run_op("StridedAttention", {p, k_rows ? kt : p, p}, attrs)[0];
    test::expect_close(got, {s, heads, dv}, want, 1e-5, 1e-4);
  }
}

// StridedAttention over Q, K and V packed side by side in rows of `width` values per head ([heads,
// s, width]: Q at column 0, K at d, V at 2d), each [heads, s, d], written through `y_view` as
// `output_shape`.
Attributes packed_qkv_attrs(int64_t heads, int64_t s, int64_t d, int64_t width, float scale,
                            std::vector<int64_t> y_view, std::vector<int64_t> output_shape) {
  return {{"scale", scale},
          {"q_shape", std::vector<int64_t>{heads, s, d}},
          {"k_shape", std::vector<int64_t>{heads, s, d}},
          {"v_shape", std::vector<int64_t>{heads, s, d}},
          {"q_view", std::vector<int64_t>{0, s * width, width, 1}},
          {"k_view", std::vector<int64_t>{d, s * width, width, 1}},
          {"v_view", std::vector<int64_t>{2 * d, s * width, width, 1}},
          {"y_view", std::move(y_view)},
          {"output_shape", std::move(output_shape)}};
}

// Heads of 32, 64 and 128 over up to 128 keys (CUDA's fused kernel; the products beyond), with an
// additive mask of random -inf entries (never a whole row) broadcast over the heads: views over
// one packed tensor P [heads, S, 3 D + 5] (Q, K, V side by side, rows not 16-byte aligned), Y
// written heads-second.
TEST(StridedAttention, HeadSizesOfTheFusedKernelWithMask) {
  const int64_t heads = 3;
  for (int64_t d : {32, 64, 128})
    for (int64_t s : {1, 37, 128, 129}) {
      SCOPED_TRACE("depth " + std::to_string(d) + ", " + std::to_string(s) + " rows");
      const int64_t width = 3 * d + 5;
      Tensor p = test::random_tensor({heads, s, width}, 95 + d + s, -1, 1);
      Tensor mask = test::random_tensor({s, s}, 96 + s, -1, 1);
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j)
          if (j != i && (i * 7 + j * 3) % 5 == 0)
            mask.data<float>()[i * s + j] = -std::numeric_limits<float>::infinity();
      const std::vector<double> pd = test::to_doubles(p), md = test::to_doubles(mask);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      const Attributes attrs =
          packed_qkv_attrs(heads, s, d, width, scale, {0, d, heads * d, 1}, {s, heads, d});
      std::vector<double> want(static_cast<size_t>(s * heads * d));
      for (int64_t b = 0; b < heads; ++b)
        attention_head(
            s, s, d, d, scale, [&](int64_t i, int64_t c) { return pd[(b * s + i) * width + c]; },
            [&](int64_t j, int64_t c) { return pd[(b * s + j) * width + d + c]; },
            [&](int64_t j, int64_t c) { return pd[(b * s + j) * width + 2 * d + c]; },
            [&](int64_t i, int64_t j) { return md[i * s + j]; },
            [&](int64_t i, int64_t c, double val) { want[(i * heads + b) * d + c] = val; });
      Tensor got = test::run_op("StridedAttention", {p, p, p, mask}, attrs)[0];
      test::expect_close(got, {s, heads, d}, want, 1e-5, 1e-4);
    }
}

// The fused kernel over a batch of two: one launch per batch index, the mask [B, 1, S, S] read
// per batch index and broadcast over the heads.
TEST(StridedAttention, FusedKernelOverABatch) {
  const int64_t batch = 2, heads = 2, s = 37, d = 64, width = 3 * d;
  Tensor p = test::random_tensor({batch, heads, s, width}, 97, -1, 1);
  Tensor mask = test::random_tensor({batch, 1, s, s}, 98, -3, 3);
  const std::vector<double> pd = test::to_doubles(p), md = test::to_doubles(mask);
  const int64_t hs = s * width, bs = heads * hs;
  Attributes attrs{{"scale", 0.125f},
                   {"q_shape", std::vector<int64_t>{batch, heads, s, d}},
                   {"k_shape", std::vector<int64_t>{batch, heads, s, d}},
                   {"v_shape", std::vector<int64_t>{batch, heads, s, d}},
                   {"q_view", std::vector<int64_t>{0, bs, hs, width, 1}},
                   {"k_view", std::vector<int64_t>{d, bs, hs, width, 1}},
                   {"v_view", std::vector<int64_t>{2 * d, bs, hs, width, 1}},
                   {"y_view", std::vector<int64_t>{0, s * heads * d, d, heads * d, 1}},
                   {"output_shape", std::vector<int64_t>{batch, s, heads, d}}};
  std::vector<double> want(static_cast<size_t>(batch * s * heads * d));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t b = 0; b < heads; ++b) {
      const int64_t base = n * bs + b * hs;
      attention_head(
          s, s, d, d, 0.125, [&](int64_t i, int64_t c) { return pd[base + i * width + c]; },
          [&](int64_t j, int64_t c) { return pd[base + j * width + d + c]; },
          [&](int64_t j, int64_t c) { return pd[base + j * width + 2 * d + c]; },
          [&](int64_t i, int64_t j) { return md[(n * s + i) * s + j]; },
          [&](int64_t i, int64_t c, double val) { want[((n * s + i) * heads + b) * d + c] = val; });
    }
  Tensor got = test::run_op("StridedAttention", {p, p, p, mask}, attrs)[0];
  test::expect_close(got, {batch, s, heads, d}, want, 1e-5, 1e-4);
}

// Plans built one after another for fewer keys: the plan for 128 keys, built first, still runs
// after one for 9 keys (on CUDA the fused kernel's shared-memory limit is one for all key counts).
TEST(StridedAttention, LongerPlanRunsAfterAShorterOneIsBuilt) {
  const int64_t heads = 2, d = 64, width = 3 * d;
  struct Plan {
    int64_t s;
    Tensor p;
    std::vector<double> want;
    Executable* exe;
  };
  Runtime rt;
  std::vector<Plan> plans;
  Graph graphs[2];
  for (int64_t s : {128, 9}) {
    Graph& g = graphs[plans.size()];
    Value* p = g.add_input("p", {heads, s, width});
    g.mark_output(
        g.add_op("StridedAttention", {p, p, p},
                 packed_qkv_attrs(heads, s, d, width, 0.125f, {0, s * d, d, 1}, {heads, s, d})));
    CompileOptions options;
    options.backends = test::run_op_backends();
    Plan plan{s, test::random_tensor({heads, s, width}, 99 + s, -1, 1), {}, nullptr};
    const std::vector<double> pd = test::to_doubles(plan.p);
    plan.want.resize(static_cast<size_t>(heads * s * d));
    for (int64_t b = 0; b < heads; ++b)
      attention_head(
          s, s, d, d, 0.125, [&](int64_t i, int64_t c) { return pd[(b * s + i) * width + c]; },
          [&](int64_t j, int64_t c) { return pd[(b * s + j) * width + d + c]; },
          [&](int64_t j, int64_t c) { return pd[(b * s + j) * width + 2 * d + c]; },
          [](int64_t, int64_t) { return 0.0; },
          [&](int64_t i, int64_t c, double val) { plan.want[(b * s + i) * d + c] = val; });
    plan.exe = g.compile(&rt, options);
    plans.push_back(std::move(plan));
  }
  for (int round = 0; round < 2; ++round)
    for (const Plan& plan : plans) {
      SCOPED_TRACE(std::to_string(plan.s) + " keys, round " + std::to_string(round));
      test::expect_close(plan.exe->execute({plan.p})[0], {heads, plan.s, d}, plan.want, 1e-5, 1e-4);
    }
}

TEST(StridedAttention, SchemaRejectsViewsThatDoNotFit) {
  Tensor p = test::random_tensor({2, 6, 20}, 95);
  const Attributes good{{"scale", 0.5f},
                        {"q_shape", std::vector<int64_t>{2, 6, 4}},
                        {"k_shape", std::vector<int64_t>{2, 6, 4}},
                        {"v_shape", std::vector<int64_t>{2, 6, 4}},
                        {"q_view", std::vector<int64_t>{0, 120, 20, 1}},
                        {"k_view", std::vector<int64_t>{4, 120, 20, 1}},
                        {"v_view", std::vector<int64_t>{8, 120, 20, 1}},
                        {"y_view", std::vector<int64_t>{0, 24, 4, 1}},
                        {"output_shape", std::vector<int64_t>{2, 6, 4}}};
  EXPECT_NO_THROW(test::run_op("StridedAttention", {p, p, p}, good));
  auto with = [&](const std::string& name, std::vector<int64_t> value) {
    Attributes a = good;
    a[name] = std::move(value);
    return a;
  };
  // Each error names the node and says what does not fit.
  auto expect = [&](auto error, const Attributes& attrs, const std::vector<test::OpInput>& inputs,
                    const std::string& says) {
    try {
      test::run_op("StridedAttention", inputs, attrs);
      ADD_FAILURE() << "no error; wanted: " << says;
    } catch (const decltype(error)& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("node 'node' (StridedAttention)"), std::string::npos) << what;
      EXPECT_NE(what.find(says), std::string::npos) << what;
    }
  };
  expect(ShapeError(""), with("v_view", {17, 120, 20, 1}), {p, p, p}, "runs past");
  expect(InvalidModel(""), with("q_view", {0, 120, 1, 20}), {p, p, p}, "contiguous last dim");
  expect(InvalidModel(""), with("output_shape", {2, 6, 5}), {p, p, p}, "does not hold Y");
  expect(InvalidModel(""), with("k_shape", {2, 7, 4}), {p, p, p}, "do not fit together");
  expect(InvalidModel(""), with("y_view", {0, 24, 4}), {p, p, p}, "an offset and 3 strides");
  expect(ShapeError(""), with("k_view", {-1, 120, 20, 1}), {p, p, p}, "runs past");
  expect(ShapeError(""), good, {p, p, p, test::random_tensor({3, 6}, 96)}, "does not broadcast");
  expect(ShapeError(""), good, {p, test::random_ints({2, 6, 20}, 97, 0, 3), p}, "float32");
}

}  // namespace
}  // namespace lumen
