// The transformer fusions (fuse-layer-norm, fuse-gelu, fuse-attention): each pattern, in the
// operand orders exporters emit, is built by hand, checked to become one fused node, and run
// against a naive double-precision reference on random data (the unfused graph is checked against
// the same reference). Negative cases check what must stay unfused; FusedAttention's schema
// rejects bad inputs with clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

using Builder = std::function<void(Graph&)>;

int live_nodes(const Graph& graph) {
  int n = 0;
  for (const auto& [op, k] : op_histogram(graph)) n += k;
  return n;
}

Tensor run(Graph& graph, const std::vector<Tensor>& inputs) {
  Runtime rt;
  return graph.compile(&rt)->execute(inputs)[0];
}

Value* scalar(Graph& g, float v) {
  return g.add_constant(g.unique_name("c"), Tensor::scalar<float>(v));
}

// Builds the graph twice; optimizes one. Checks that the optimized graph has `fused` nodes of
// `op` and `nodes` live nodes in all, and that both graphs match `want` on `inputs`.
void check_fusion(const Builder& build, const std::string& op, int fused, int nodes,
                  const std::vector<Tensor>& inputs, const std::vector<double>& want,
                  double atol = 1e-5, double rtol = 1e-4) {
  Graph plain, optimized;
  build(plain);
  build(optimized);
  optimized.optimize();
  optimized.verify();
  EXPECT_EQ(test::count_ops(optimized, op), fused) << optimized.to_text();
  EXPECT_EQ(live_nodes(optimized), nodes) << optimized.to_text();
  const Shape shape = plain.value(plain.outputs()[0]).type.shape;
  test::expect_close(run(plain, inputs), shape, want, atol, rtol);
  test::expect_close(run(optimized, inputs), shape, want, atol, rtol);
}

// ---- LayerNormalization ----

// Naive layer norm over the last `n` elements of each row, in double.
std::vector<double> layer_norm_ref(const Tensor& x, int64_t n, const std::vector<double>& gamma,
                                   const std::vector<double>& beta, double eps) {
  std::vector<double> v = test::to_doubles(x), out(v.size());
  for (size_t r = 0; r < v.size() / n; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += v[r * n + i];
    mean /= n;
    for (int64_t i = 0; i < n; ++i) var += (v[r * n + i] - mean) * (v[r * n + i] - mean);
    var /= n;
    for (int64_t i = 0; i < n; ++i)
      out[r * n + i] =
          (v[r * n + i] - mean) / std::sqrt(var + eps) * (gamma.empty() ? 1.0 : gamma[i]) +
          (beta.empty() ? 0.0 : beta[i]);
  }
  return out;
}

struct LayerNormForm {
  const char* name;
  std::vector<int64_t> axes;
  bool square_by_mul;  // Mul(d, d) instead of Pow(d, 2)
  bool swap;           // constants first in Mul, Add
  bool affine;         // Mul gamma, Add beta
};

TEST(FuseLayerNorm, DecomposedFormsBecomeOneLayerNormalization) {
  const Shape shape{2, 5, 4, 6};
  Tensor x = test::random_tensor(shape, 11, -3, 5);  // rows far from zero mean
  for (const LayerNormForm& f : {LayerNormForm{"torch", {-1}, false, false, true},
                                 LayerNormForm{"mul-square-swapped", {3}, true, true, true},
                                 LayerNormForm{"two-axes", {-2, -1}, false, false, true},
                                 LayerNormForm{"no-affine", {-1}, false, false, false}}) {
    SCOPED_TRACE(f.name);
    const int64_t n = f.axes.size() == 2 ? 24 : 6;
    const Shape pshape = f.axes.size() == 2 ? Shape{4, 6} : Shape{6};
    Tensor gamma = test::random_tensor(pshape, 12, 0.5f, 1.5f);
    Tensor beta = test::random_tensor(pshape, 13);
    const float eps = 1e-5f;
    auto build = [&](Graph& g) {
      Value* in = g.add_input("x", shape);
      Attributes axes{{"axes", f.axes}};
      Value* m = g.add_op("ReduceMean", {in}, axes);
      Value* d = g.add_op("Sub", {in, m});
      Value* p = f.square_by_mul ? g.add_op("Mul", {d, d}) : g.add_op("Pow", {d, scalar(g, 2)});
      Value* v = g.add_op("ReduceMean", {p}, axes);
      Value* ve =
          f.swap ? g.add_op("Add", {scalar(g, eps), v}) : g.add_op("Add", {v, scalar(g, eps)});
      Value* y = g.add_op("Div", {d, g.add_op("Sqrt", {ve})});
      if (f.affine) {
        Value* gm = g.add_constant("gamma", gamma);
        Value* bt = g.add_constant("beta", beta);
        y = f.swap ? g.add_op("Mul", {gm, y}) : g.add_op("Mul", {y, gm});
        y = f.swap ? g.add_op("Add", {bt, y}) : g.add_op("Add", {y, bt});
      }
      g.mark_output(g.add_op("Relu", {y}));  // a reader after the pattern
    };
    std::vector<double> want =
        layer_norm_ref(x, n, f.affine ? test::to_doubles(gamma) : std::vector<double>{},
                       f.affine ? test::to_doubles(beta) : std::vector<double>{}, eps);
    for (double& w : want) w = std::max(w, 0.0);
    check_fusion(build, "LayerNormalization", 1, 2, {x}, want);
  }
}

// The RMS form (Llama's RMSNorm as torch exports it: no mean subtracted, no beta) becomes one
// RMSNormalization: the reciprocal written as Div(1, s) then Mul (torch's export), as Reciprocal,
// or a plain Div(x, s); the square as Pow or Mul; with and without gamma.
TEST(FuseLayerNorm, RmsFormsBecomeOneRmsNormalization) {
  const Shape shape{3, 2, 16};
  Tensor x = test::random_tensor(shape, 15, -2, 3);
  Tensor gamma = test::random_tensor({16}, 16, 0.5f, 1.5f);
  enum class Inverse { kDivOne, kReciprocal, kDivX };
  struct Form {
    const char* name;
    Inverse inverse;
    bool square_by_mul, swap, affine;
  };
  for (const Form& f : {Form{"torch", Inverse::kDivOne, false, false, true},
                        Form{"reciprocal-swapped", Inverse::kReciprocal, true, true, true},
                        Form{"div-no-gamma", Inverse::kDivX, false, false, false}}) {
    SCOPED_TRACE(f.name);
    const float eps = 1e-6f;
    auto build = [&](Graph& g) {
      Value* in = g.add_input("x", shape);
      Value* p = f.square_by_mul ? g.add_op("Mul", {in, in}) : g.add_op("Pow", {in, scalar(g, 2)});
      Value* m = g.add_op("ReduceMean", {p}, {{"axes", std::vector<int64_t>{-1}}});
      Value* sq = g.add_op("Sqrt", {g.add_op("Add", {m, scalar(g, eps)})});
      Value* y = nullptr;
      if (f.inverse == Inverse::kDivX) {
        y = g.add_op("Div", {in, sq});
      } else {
        Value* r = f.inverse == Inverse::kReciprocal ? g.add_op("Reciprocal", {sq})
                                                     : g.add_op("Div", {scalar(g, 1), sq});
        y = f.swap ? g.add_op("Mul", {r, in}) : g.add_op("Mul", {in, r});
      }
      if (f.affine) {
        Value* gm = g.add_constant("gamma", gamma);
        y = f.swap ? g.add_op("Mul", {gm, y}) : g.add_op("Mul", {y, gm});
      }
      g.mark_output(g.add_op("Relu", {y}));
    };
    std::vector<double> v = test::to_doubles(x), want(v.size());
    const std::vector<double> gs = test::to_doubles(gamma);
    for (size_t r = 0; r < v.size() / 16; ++r) {
      double ss = 0;
      for (int i = 0; i < 16; ++i) ss += v[r * 16 + i] * v[r * 16 + i];
      const double inv = 1.0 / std::sqrt(ss / 16 + eps);
      for (int i = 0; i < 16; ++i)
        want[r * 16 + i] = std::max(0.0, v[r * 16 + i] * inv * (f.affine ? gs[i] : 1.0));
    }
    check_fusion(build, "RMSNormalization", 1, 2, {x}, want);
  }
}

TEST(FuseLayerNorm, PatternAsGraphOutputKeepsItsName) {
  Tensor x = test::random_tensor({3, 8}, 14);
  auto build = [&](Graph& g) {
    Value* in = g.add_input("x", {3, 8});
    Attributes axes{{"axes", std::vector<int64_t>{-1}}};
    Value* d = g.add_op("Sub", {in, g.add_op("ReduceMean", {in}, axes)});
    Value* v = g.add_op("ReduceMean", {g.add_op("Pow", {d, scalar(g, 2)})}, axes);
    Value* y = g.add_op("Div", {d, g.add_op("Sqrt", {g.add_op("Add", {v, scalar(g, 1e-3f)})})});
    g.rename(y, "normed");
    g.mark_output(y);
  };
  Graph g;
  build(g);
  g.optimize();
  EXPECT_EQ(test::count_ops(g, "LayerNormalization"), 1);
  EXPECT_EQ(live_nodes(g), 1);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "normed");
  test::expect_close(run(g, {x}), {3, 8}, layer_norm_ref(x, 8, {}, {}, 1e-3));
}

TEST(FuseLayerNorm, LeavesNonMatchingGraphsAlone) {
  Tensor x = test::random_tensor({2, 4, 6}, 15);
  // Reduction over a middle axis, and the centred value read outside the pattern.
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant);
    Graph g;
    Value* in = g.add_input("x", {2, 4, 6});
    Attributes axes{{"axes", std::vector<int64_t>{variant == 0 ? 1 : -1}}};
    Value* d = g.add_op("Sub", {in, g.add_op("ReduceMean", {in}, axes)});
    Value* v = g.add_op("ReduceMean", {g.add_op("Pow", {d, scalar(g, 2)})}, axes);
    Value* y = g.add_op("Div", {d, g.add_op("Sqrt", {g.add_op("Add", {v, scalar(g, 1e-5f)})})});
    g.mark_output(y);
    if (variant == 1) g.mark_output(d);
    g.optimize();
    EXPECT_EQ(test::count_ops(g, "LayerNormalization"), 0);
    // With the centred value read outside, what follows it is an RMS norm of it, and fuses so.
    EXPECT_EQ(test::count_ops(g, "RMSNormalization"), variant == 0 ? 0 : 1);
    EXPECT_EQ(test::count_ops(g, "ReduceMean"), variant == 0 ? 2 : 1);
  }
}

// ---- Rotary embeddings ----

// Llama's rotate_half form as torch exports it, for Q and K sharing the angles: each becomes one
// RotaryEmbedding, against a double-precision reference; operand orders swapped in one variant.
TEST(FuseRotary, RotateHalfFormBecomesRotaryEmbedding) {
  const int64_t b = 2, heads = 3, kv_heads = 1, s = 5, hd = 8, h = hd / 2;
  Tensor q = test::random_tensor({b, heads, s, hd}, 31, -2, 2);
  Tensor k = test::random_tensor({b, kv_heads, s, hd}, 32, -2, 2);
  Tensor angles = test::random_tensor({b, s, h}, 33, -3, 3);
  for (bool swap : {false, true}) {
    SCOPED_TRACE(swap ? "operands swapped" : "torch's order");
    auto ints = [](Graph& g, int64_t v) {
      return g.add_constant(g.unique_name("i"), Tensor::from_vector<int64_t>({1}, {v}));
    };
    auto build = [&](Graph& g) {
      Value* qv = g.add_input("q", q.shape());
      Value* kv = g.add_input("k", k.shape());
      Value* a = g.add_input("angles", angles.shape());
      Value* u =
          g.add_op("Unsqueeze", {g.add_op("Concat", {a, a}, {{"axis", int64_t{-1}}}), ints(g, 1)});
      Value* cos = g.add_op("Cos", {u});
      Value* sin = g.add_op("Sin", {u});
      auto rotate = [&](Value* x) {
        Value* hi = g.add_op(
            "Slice", {x, ints(g, h), ints(g, std::numeric_limits<int64_t>::max()), ints(g, -1)});
        Value* lo = g.add_op("Slice", {x, ints(g, 0), ints(g, h), ints(g, 3)});
        Value* r = g.add_op("Concat", {g.add_op("Neg", {hi}), lo}, {{"axis", int64_t{3}}});
        Value* xc = swap ? g.add_op("Mul", {cos, x}) : g.add_op("Mul", {x, cos});
        Value* rs = swap ? g.add_op("Mul", {sin, r}) : g.add_op("Mul", {r, sin});
        return swap ? g.add_op("Add", {rs, xc}) : g.add_op("Add", {xc, rs});
      };
      g.mark_output(rotate(qv));
      g.mark_output(rotate(kv));
    };
    Graph plain, optimized, for_vulkan;
    build(plain);
    build(optimized);
    build(for_vulkan);
    optimized.optimize();
    optimized.verify();
    EXPECT_EQ(test::count_ops(optimized, "RotaryEmbedding"), 2) << optimized.to_text();
    // Vulkan has no RotaryEmbedding kernel: there the decomposed ops stay.
    for_vulkan.optimize({"vulkan", "cpu"});
    EXPECT_EQ(test::count_ops(for_vulkan, "RotaryEmbedding"), 0);
    EXPECT_EQ(test::count_ops(optimized, "Neg") + test::count_ops(optimized, "Slice"), 0)
        << optimized.to_text();
    const std::vector<double> av = test::to_doubles(angles);
    auto reference = [&](const Tensor& x, int64_t nh) {
      std::vector<double> xv = test::to_doubles(x), out(xv.size());
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t hh = 0; hh < nh; ++hh)
          for (int64_t si = 0; si < s; ++si)
            for (int64_t j = 0; j < hd; ++j) {
              const size_t at = ((bi * nh + hh) * s + si) * hd;
              const double ang = av[(bi * s + si) * h + j % h];
              const double rot = j < h ? -xv[at + j + h] : xv[at + j - h];
              out[at + j] = xv[at + j] * std::cos(ang) + rot * std::sin(ang);
            }
      return out;
    };
    for (Graph* g : {&plain, &optimized}) {
      Runtime rt;
      std::vector<Tensor> got = g->compile(&rt)->execute(std::vector<Tensor>{q, k, angles});
      test::expect_close(got[0], q.shape(), reference(q, heads), 1e-5, 1e-4);
      test::expect_close(got[1], k.shape(), reference(k, kv_heads), 1e-5, 1e-4);
    }
  }
}

// ---- GELU ----

double gelu_erf(double v) {
  return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
}
double gelu_tanh(double v) {
  return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
}

// How the final product x * 0.5 * a is associated.
enum class Product { kXaHalf, kXHalfA, kHalfXA };

Value* gelu_product(Graph& g, Value* x, Value* a, Product p) {
  switch (p) {
    case Product::kXaHalf:  // (x * a) * 0.5, torch's erf GELU
      return g.add_op("Mul", {g.add_op("Mul", {x, a}), scalar(g, 0.5f)});
    case Product::kXHalfA:  // x * (a * 0.5)
      return g.add_op("Mul", {x, g.add_op("Mul", {scalar(g, 0.5f), a})});
    case Product::kHalfXA:  // (0.5 * x) * a, gpt2's NewGELU
      return g.add_op("Mul", {g.add_op("Mul", {scalar(g, 0.5f), x}), a});
  }
  return nullptr;
}

TEST(FuseGelu, ErfFormsBecomeOneGelu) {
  const Shape shape{3, 7, 10};
  Tensor x = test::random_tensor(shape, 21, -5, 5);
  std::vector<double> want = test::to_doubles(x);
  for (double& w : want) w = gelu_erf(w + 1.0);
  for (Product p : {Product::kXaHalf, Product::kXHalfA, Product::kHalfXA}) {
    for (bool by_mul : {false, true}) {
      SCOPED_TRACE(static_cast<int>(p) * 2 + by_mul);
      auto build = [&](Graph& g) {
        Value* in = g.add_input("x", shape);
        Value* h = g.add_op("Add", {in, scalar(g, 1.0f)});  // x is computed, and read twice
        Value* u = by_mul ? g.add_op("Mul", {scalar(g, 0.70710678f), h})
                          : g.add_op("Div", {h, scalar(g, 1.41421354f)});
        Value* e = g.add_op("Erf", {u});
        Value* a =
            by_mul ? g.add_op("Add", {scalar(g, 1.0f), e}) : g.add_op("Add", {e, scalar(g, 1.0f)});
        g.mark_output(gelu_product(g, h, a, p));
        g.mark_output(h);  // so that fuse-elementwise leaves Add and Gelu apart
      };
      check_fusion(build, "Gelu", 1, 2, {x}, want);
    }
  }
}

TEST(FuseGelu, TanhFormsBecomeOneGeluTanh) {
  const Shape shape{4, 33};
  Tensor x = test::random_tensor(shape, 22, -6, 6);
  std::vector<double> want = test::to_doubles(x);
  for (double& w : want) w = gelu_tanh(w);
  for (Product p : {Product::kHalfXA, Product::kXaHalf}) {
    for (bool cube_by_mul : {false, true}) {
      SCOPED_TRACE(static_cast<int>(p) * 2 + cube_by_mul);
      auto build = [&](Graph& g) {
        Value* in = g.add_input("x", shape);
        Value* cube = cube_by_mul ? g.add_op("Mul", {g.add_op("Mul", {in, in}), in})
                                  : g.add_op("Pow", {in, scalar(g, 3.0f)});
        Value* inner = g.add_op("Add", {in, g.add_op("Mul", {scalar(g, 0.044715f), cube})});
        Value* t = g.add_op("Tanh", {g.add_op("Mul", {scalar(g, 0.7978845608f), inner})});
        g.mark_output(gelu_product(g, in, g.add_op("Add", {scalar(g, 1.0f), t}), p));
      };
      check_fusion(build, "Gelu", 1, 1, {x}, want);
      Graph g;
      build(g);
      g.optimize();
      for (int id : g.topological_order())
        EXPECT_EQ(g.node(id).attrs.at("approximate").as_string(), "tanh");
    }
  }
}

TEST(FuseGelu, LeavesNonMatchingGraphsAlone) {
  // A wrong constant, and the Erf read twice.
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant);
    Graph g;
    Value* in = g.add_input("x", {5, 6});
    Value* e =
        g.add_op("Erf", {g.add_op("Div", {in, scalar(g, variant == 0 ? 1.3f : 1.41421354f)})});
    g.mark_output(gelu_product(g, in, g.add_op("Add", {e, scalar(g, 1.0f)}), Product::kXaHalf));
    if (variant == 1) g.mark_output(e);
    PassManager passes;  // fuse-gelu alone: fuse-elementwise would take the Erf in
    passes.add(make_constant_fold_pass());
    passes.add(make_fuse_gelu_pass());
    passes.add(make_dead_code_pass());
    passes.run(g);
    EXPECT_EQ(test::count_ops(g, "Gelu"), 0);
    EXPECT_EQ(test::count_ops(g, "Erf"), 1);
  }
}

// ---- attention ----

// softmax(scale * q @ k^T + mask) @ v in double; q [n, sq, d], k [n, sk, d], v [n, sk, dv]; the
// mask function gives the additive mask of (batch index, row, column).
std::vector<double> attention_ref(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                  const std::function<double(int64_t, int64_t, int64_t)>& mask) {
  const Shape& qs = q.shape();
  const int r = qs.rank();
  const int64_t sq = qs[r - 2], d = qs[r - 1], sk = k.shape()[r - 2], dv = v.shape()[r - 1];
  const int64_t n = q.numel() / (sq * d);
  std::vector<double> qd = test::to_doubles(q), kd = test::to_doubles(k), vd = test::to_doubles(v);
  std::vector<double> out(static_cast<size_t>(n * sq * dv), 0.0), s(static_cast<size_t>(sk));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < sq; ++i) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < sk; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < d; ++c) acc += qd[(b * sq + i) * d + c] * kd[(b * sk + j) * d + c];
        s[j] = acc * scale + mask(b, i, j);
        mx = std::max(mx, s[j]);
      }
      for (int64_t j = 0; j < sk; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int64_t j = 0; j < sk; ++j)
        for (int64_t c = 0; c < dv; ++c)
          out[(b * sq + i) * dv + c] += s[j] / sum * vd[(b * sk + j) * dv + c];
    }
  return out;
}

TEST(FuseAttention, Torch13MultiheadFormWithCausalMask) {
  // [N = B*H, S, D] as torch exports nn.MultiheadAttention: Q / sqrt(D), K^T from a Transpose,
  // a Mul by 1 after the MatMul, an additive [S, S] mask with -inf above the diagonal.
  const int64_t n = 6, s = 37, d = 16;  // 37 rows: a partial row block and a partial panel
  Tensor q = test::random_tensor({n, s, d}, 31, -2, 2);
  Tensor k = test::random_tensor({n, s, d}, 32, -2, 2);
  Tensor v = test::random_tensor({n, s, d}, 33);
  Tensor mask = Tensor::empty({s, s});
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < s; ++j)
      mask.data<float>()[i * s + j] = j > i ? -std::numeric_limits<float>::infinity() : 0.0f;
  auto build = [&](Graph& g) {
    Value* qi = g.add_input("q", q.shape());
    Value* ki = g.add_input("k", k.shape());
    Value* vi = g.add_input("v", v.shape());
    Value* kt = g.add_op("Transpose", {ki}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
    Value* scores = g.add_op("MatMul", {g.add_op("Div", {qi, scalar(g, 4.0f)}), kt});
    scores = g.add_op("Mul", {scores, scalar(g, 1.0f)});
    scores = g.add_op("Add", {scores, g.add_constant("mask", mask)});
    g.mark_output(g.add_op("MatMul", {g.add_op("Softmax", {scores}, {{"axis", int64_t{-1}}}), vi}));
  };
  std::vector<double> want = attention_ref(
      q, k, v, 0.25, [](int64_t, int64_t i, int64_t j) { return j > i ? -INFINITY : 0.0; });
  // The fused node reads K itself (k_transposed = 0); its Transpose goes.
  check_fusion(build, "FusedAttention", 1, 1, {q, k, v}, want);
  Graph g;
  build(g);
  g.optimize();
  for (int id : g.topological_order())
    if (g.node(id).op == OpKind::kFusedAttention)
      EXPECT_EQ(g.node(id).attrs.at("k_transposed").as_int(), 0);
}

TEST(FuseAttention, Torch2FormScalesQAndKTransposed) {
  // torch 2.x's scaled_dot_product_attention export: Q and K^T each multiplied by the root of the
  // scale (K^T's factor first in its Mul), K^T from a Transpose of K.
  const int64_t n = 4, s = 19, d = 16;
  Tensor q = test::random_tensor({n, s, d}, 34, -2, 2);
  Tensor k = test::random_tensor({n, s, d}, 35, -2, 2);
  Tensor v = test::random_tensor({n, s, d}, 36);
  auto build = [&](Graph& g) {
    Value* qi = g.add_input("q", q.shape());
    Value* ki = g.add_input("k", k.shape());
    Value* vi = g.add_input("v", v.shape());
    Value* kt = g.add_op("Transpose", {ki}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
    Value* scores = g.add_op(
        "MatMul", {g.add_op("Mul", {qi, scalar(g, 0.5f)}), g.add_op("Mul", {scalar(g, 0.5f), kt})});
    g.mark_output(g.add_op("MatMul", {g.add_op("Softmax", {scores}, {{"axis", int64_t{-1}}}), vi}));
  };
  std::vector<double> want =
      attention_ref(q, k, v, 0.25, [](int64_t, int64_t, int64_t) { return 0.0; });
  check_fusion(build, "FusedAttention", 1, 1, {q, k, v}, want);
}

TEST(FuseAttention, FourDimsWithPaddingMaskAndScaledScores) {
  // [B, H, Sq, D] with Sk != Sq and Dv != D, the scale after the MatMul (scores * 0.3, constant
  // first), the mask [B, 1, 1, Sk] first in the Add, and a K^T input given directly.
  const int64_t b = 2, h = 3, sq = 9, sk = 21, d = 8, dv = 20;
  Tensor q = test::random_tensor({b, h, sq, d}, 41, -2, 2);
  Tensor kt = test::random_tensor({b, h, d, sk}, 42, -2, 2);
  Tensor v = test::random_tensor({b, h, sk, dv}, 43);
  Tensor mask = test::random_tensor({b, 1, 1, sk}, 44, -3, 0);
  Tensor k = Tensor::empty({b, h, sk, d});  // the reference takes K, not K^T
  for (int64_t n = 0; n < b * h; ++n)
    for (int64_t j = 0; j < sk; ++j)
      for (int64_t c = 0; c < d; ++c)
        k.data<float>()[(n * sk + j) * d + c] = kt.data<float>()[(n * d + c) * sk + j];
  auto build = [&](Graph& g) {
    Value* qi = g.add_input("q", q.shape());
    Value* kti = g.add_input("kt", kt.shape());
    Value* vi = g.add_input("v", v.shape());
    Value* mi = g.add_input("mask", mask.shape());
    Value* scores = g.add_op("Mul", {scalar(g, 0.3f), g.add_op("MatMul", {qi, kti})});
    scores = g.add_op("Add", {mi, scores});
    g.mark_output(g.add_op("MatMul", {g.add_op("Softmax", {scores}), vi}));
  };
  const std::vector<double> md = test::to_doubles(mask);
  std::vector<double> want = attention_ref(
      q, k, v, 0.3, [&](int64_t n, int64_t, int64_t j) { return md[(n / h) * sk + j]; });
  check_fusion(build, "FusedAttention", 1, 1, {q, kt, v, mask}, want);
}

TEST(FuseAttention, FusedOpTakesKInEitherLayout) {
  // FusedAttention itself with k_transposed = 0: K [N, Sk, D], no mask, wide head (D = 70).
  Tensor q = test::random_tensor({3, 50, 70}, 51);
  Tensor k = test::random_tensor({3, 40, 70}, 52);
  Tensor v = test::random_tensor({3, 40, 5}, 53);
  std::vector<double> want =
      attention_ref(q, k, v, 0.125, [](int64_t, int64_t, int64_t) { return 0.0; });
  Tensor got = test::run_op("FusedAttention", {q, k, v},
                            {{"scale", 0.125f}, {"k_transposed", int64_t{0}}})[0];
  test::expect_close(got, {3, 50, 5}, want);
}

TEST(FuseAttention, MaskOfMinusInfinityGivesZeroWeightAndAFullRowNaN) {
  // An additive mask with -inf scattered (weight exactly 0) and one query row all -inf: Softmax of
  // that row is NaN (no finite shift), so its output is NaN, as the unfused graph gives. 19 keys:
  // the exponentials end on a partial vector.
  const int64_t sq = 9, sk = 19, d = 8, dv = 6, dead_row = 3;
  Tensor q = test::random_tensor({2, sq, d}, 61, -2, 2);
  Tensor k = test::random_tensor({2, sk, d}, 62, -2, 2);
  Tensor v = test::random_tensor({2, sk, dv}, 63, -2, 2);
  Tensor mask = test::random_tensor({sq, sk}, 64, -1, 1);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j)
      if (i == dead_row || (i + 2 * j) % 5 == 0) mask.data<float>()[i * sk + j] = -inf;
  const std::vector<double> md = test::to_doubles(mask);
  const std::vector<double> want =
      attention_ref(q, k, v, 0.4, [&](int64_t, int64_t i, int64_t j) { return md[i * sk + j]; });
  const Tensor got = test::run_op("FusedAttention", {q, k, v, mask},
                                  {{"scale", 0.4f}, {"k_transposed", int64_t{0}}})[0];
  ASSERT_EQ(got.shape(), Shape({2, sq, dv}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t c = 0; c < dv; ++c) {
        const int64_t at = (b * sq + i) * dv + c;
        const float y = got.data<float>()[at];
        if (i == dead_row) {
          EXPECT_TRUE(std::isnan(y)) << "row " << i << " col " << c;
        } else {
          EXPECT_NEAR(y, want[at], 1e-5 + 1e-4 * std::fabs(want[at]))
              << "row " << i << " col " << c;
        }
      }
}

TEST(FuseAttention, LeavesNonMatchingGraphsAlone) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    Graph g;
    Value* q = g.add_input("q", {2, 4, 8});
    Value* kt = g.add_input("kt", {2, 8, 4});
    Value* v = g.add_input("v", {2, 4, 8});
    Value* scores = g.add_op("MatMul", {q, kt});
    // 0: softmax over the rows; 1: the scores also a graph output; 2: V broadcast over the batch.
    Value* p = g.add_op("Softmax", {scores}, {{"axis", int64_t{variant == 0 ? 1 : -1}}});
    Value* vv = variant == 2 ? g.add_input("v1", {4, 8}) : v;
    g.mark_output(g.add_op("MatMul", {p, vv}));
    if (variant == 1) g.mark_output(scores);
    g.optimize();
    EXPECT_EQ(test::count_ops(g, "FusedAttention"), 0);
    EXPECT_EQ(test::count_ops(g, "Softmax"), 1);
  }
}

TEST(FuseAttention, SchemaRejectsBadInputs) {
  Tensor q = test::random_tensor({2, 4, 8}, 61);
  Tensor k = test::random_tensor({2, 4, 8}, 62);
  Tensor v = test::random_tensor({2, 4, 6}, 63);
  const Attributes attrs{{"scale", 0.5f}};
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("FusedAttention", {q, test::random_tensor({2, 5, 8}, 64), v}, attrs);
      },
      "FusedAttention");  // K's length differs from V's
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("FusedAttention", {q, k, test::random_tensor({3, 4, 6}, 65)}, attrs);
      },
      "FusedAttention");  // leading dims differ
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("FusedAttention", {q, k, v, test::random_tensor({3, 4}, 66)}, attrs);
      },
      "FusedAttention");  // the mask does not broadcast
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("FusedAttention", {q, test::random_ints({2, 4, 8}, 67, 0, 3), v}, attrs);
      },
      "FusedAttention");  // not float32
  test::expect_error<InvalidModel>(
      [&] {
        test::run_op("FusedAttention", {q, k, v});
      },
      "FusedAttention");  // scale is required
}

}  // namespace
}  // namespace lumen
