// The fuse-elementwise pass and the FusedElementwise kernel: the rewritten graphs hold the expected
// ops, every output element matches a scalar double-precision reference written here with std::
// maths (and the unfused graph's kernels within 1e-6 relative), and malformed programs fail with
// InvalidModel naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "graph/fused_elementwise.h"
#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using F1 = std::function<double(double)>;

std::map<std::string, int> ops_of(const Graph& graph) {
  std::map<std::string, int> ops;
  for (int id : graph.topological_order()) ++ops[op_name(graph.node(id).op)];
  return ops;
}

double sigmoid(double v) {
  return 1.0 / (1.0 + std::exp(-v));
}

double hard_sigmoid(double v, double alpha, double beta) {
  return std::min(std::max(alpha * v + beta, 0.0), 1.0);
}

// The reference value of `x` broadcast to `out` at flat output index `i`.
double at(const std::vector<double>& x, const Shape& shape, const Shape& out, int64_t i) {
  return x[static_cast<size_t>(test::broadcast_source(test::unravel(i, out), shape))];
}

// Runs `graph` (inputs bound in order) optimized and unoptimized: checks the optimized ops,
// every optimized output element against `want`, and the optimized output against the unfused
// kernels' within 1e-6 relative.
void check(const std::function<void(Graph&)>& build, const std::vector<Tensor>& inputs,
           const std::map<std::string, int>& want_ops, const Shape& want_shape,
           const std::vector<double>& want, double atol = 1e-5, double rtol = 1e-5) {
  Graph fused, plain;
  build(fused);
  build(plain);
  fused.optimize();
  EXPECT_EQ(ops_of(fused), want_ops);
  Runtime rt;
  Tensor got = fused.compile(&rt)->execute(inputs)[0];
  test::expect_close(got, want_shape, want, atol, rtol);
  Tensor base = plain.compile(&rt)->execute(inputs)[0];
  test::expect_close(got, want_shape, test::to_doubles(base), 1e-6, 1e-6);
}

Value* scalar(Graph& g, float v) {
  return g.add_constant(g.unique_name("c"), Tensor::scalar<float>(v));
}

TEST(FuseElementwise, ChainBecomesOneNode) {
  const Shape shape{2, 3, 5, 7};
  Tensor x = test::random_tensor(shape, 1, -3, 3);
  std::vector<double> xv = test::to_doubles(x), want;
  for (double v : xv) want.push_back(std::tanh(sigmoid(std::max(v * 0.5 + 1.0, 0.0))) - 0.25);
  check(
      [&](Graph& g) {
        Value* y = g.add_op("Mul", {g.add_input("x", shape), scalar(g, 0.5f)});
        y = g.add_op("Add", {y, scalar(g, 1.0f)});
        y = g.add_op("Tanh", {g.add_op("Sigmoid", {g.add_op("Relu", {y})})});
        g.mark_output(g.add_op("Sub", {y, scalar(g, 0.25f)}));
      },
      {x}, {{"FusedElementwise", 1}}, shape, want);
}

TEST(FuseElementwise, TreeWithTwoInputs) {
  const Shape shape{4, 33};
  Tensor a = test::random_tensor(shape, 2, -2, 2);
  Tensor b = test::random_tensor(shape, 3, 0.5f, 2);
  std::vector<double> av = test::to_doubles(a), bv = test::to_doubles(b), want;
  for (size_t i = 0; i < av.size(); ++i)
    want.push_back((std::exp(av[i]) + std::fabs(bv[i])) / (std::sqrt(bv[i]) + 2.0) - av[i] * bv[i]);
  check(
      [&](Graph& g) {
        Value* x = g.add_input("a", shape);
        Value* y = g.add_input("b", shape);
        Value* num = g.add_op("Add", {g.add_op("Exp", {x}), g.add_op("Abs", {y})});
        Value* den = g.add_op("Add", {g.add_op("Sqrt", {y}), scalar(g, 2.0f)});
        g.mark_output(g.add_op("Sub", {g.add_op("Div", {num, den}), g.add_op("Mul", {x, y})}));
      },
      {a, b}, {{"FusedElementwise", 1}}, shape, want);
}

TEST(FuseElementwise, BroadcastOperands) {
  // [N, C, H, W] with a per-channel [1, C, 1, 1] input, a [W] constant row and scalars.
  const Shape shape{2, 3, 5, 37}, cs{1, 3, 1, 1}, ws{37};
  Tensor x = test::random_tensor(shape, 4, -4, 4);
  Tensor s = test::random_tensor(cs, 5, 0.5f, 2);
  Tensor r = test::random_tensor(ws, 6, -1, 1);
  std::vector<double> xv = test::to_doubles(x), sv = test::to_doubles(s), rv = test::to_doubles(r);
  std::vector<double> want;
  for (int64_t i = 0; i < shape.numel(); ++i) {
    double v = xv[i] * at(sv, cs, shape, i) + at(rv, ws, shape, i);
    want.push_back(std::min(std::max(v + 0.1, 0.0), 6.0) * 2.0);
  }
  check(
      [&](Graph& g) {
        Value* y = g.add_op("Mul", {g.add_input("x", shape), g.add_input("s", cs)});
        y = g.add_op("Add", {g.add_op("Add", {y, g.add_constant("r", r)}), scalar(g, 0.1f)});
        y = g.add_op("Clip", {y, scalar(g, 0.0f), scalar(g, 6.0f)});
        g.mark_output(g.add_op("Mul", {scalar(g, 2.0f), y}));
      },
      {x, s}, {{"FusedElementwise", 1}}, shape, want);
}

TEST(FuseElementwise, SmallerIntermediateStaysOutside) {
  // Exp over the [C] operand would be recomputed for every output element inside the tree.
  const Shape shape{6, 40}, cs{40};
  Tensor x = test::random_tensor(shape, 7);
  Tensor c = test::random_tensor(cs, 8);
  std::vector<double> xv = test::to_doubles(x), cv = test::to_doubles(c), want;
  for (int64_t i = 0; i < shape.numel(); ++i)
    want.push_back(std::max(xv[i] + std::exp(at(cv, cs, shape, i)), 0.0) * 3.0);
  check(
      [&](Graph& g) {
        Value* e = g.add_op("Exp", {g.add_input("c", cs)});
        Value* y = g.add_op("Relu", {g.add_op("Add", {g.add_input("x", shape), e})});
        g.mark_output(g.add_op("Mul", {y, scalar(g, 3.0f)}));
      },
      {c, x}, {{"Exp", 1}, {"FusedElementwise", 1}}, shape, want);
}

TEST(FuseElementwise, ValueWithTwoReadersIsNotFusedAcross) {
  const Shape shape{3, 50};
  Tensor x = test::random_tensor(shape, 9, -2, 2);
  std::vector<double> xv = test::to_doubles(x);
  Graph g;
  Value* y = g.add_op("Add", {g.add_input("x", shape), scalar(g, 1.0f)});  // two readers
  Value* t = g.add_op("Tanh", {g.add_op("Mul", {y, scalar(g, 2.0f)})});
  Value* n = g.add_op("Neg", {g.add_op("Sigmoid", {y})});
  Value* e = g.add_op("Exp", {t});  // Exp's input is also a graph output: not fused across
  g.mark_output(t);
  g.mark_output(n);
  g.mark_output(g.add_op("Abs", {e}));
  g.optimize();
  EXPECT_EQ(ops_of(g), (std::map<std::string, int>{{"Add", 1}, {"FusedElementwise", 3}}));
  Runtime rt;
  std::vector<Tensor> out = g.compile(&rt)->execute({x});
  std::vector<double> wt, wn, we;
  for (double v : xv) {
    wt.push_back(std::tanh((v + 1) * 2));
    wn.push_back(-sigmoid(v + 1));
    we.push_back(std::exp(std::tanh((v + 1) * 2)));
  }
  test::expect_close(out[0], shape, wt);
  test::expect_close(out[1], shape, wn);
  test::expect_close(out[2], shape, we);
}

TEST(FuseElementwise, LoneOpsAndOtherDtypesStay) {
  Graph g;
  Value* x = g.add_input("x", {4, 4});
  g.mark_output(g.add_op("Relu", {x}));
  Value* i = g.add_input("i", {4, 4}, DType::kInt32);
  g.mark_output(g.add_op("Abs", {g.add_op("Neg", {i})}));
  g.optimize();
  EXPECT_EQ(ops_of(g), (std::map<std::string, int>{{"Abs", 1}, {"Neg", 1}, {"Relu", 1}}));
}

// The program's Swish instruction is x * sigmoid(x): a Swish op with another alpha stays whole.
TEST(FuseElementwise, SwishWithAnotherAlphaStays) {
  Graph g;
  Value* x = g.add_input("x", {4, 4});
  Value* s = g.add_op("Swish", {g.add_op("Exp", {x})}, {{"alpha", 0.5f}});
  g.mark_output(g.add_op("Relu", {s}));
  g.optimize();
  EXPECT_EQ(ops_of(g), (std::map<std::string, int>{{"Exp", 1}, {"Relu", 1}, {"Swish", 1}}));
}

TEST(FuseElementwise, AlsoForCuda) {
  // The CUDA backend runs FusedElementwise too (tests/cuda), so the pass runs for every target.
  Graph g;
  Value* x = g.add_input("x", {4, 4});
  g.mark_output(g.add_op("Exp", {g.add_op("Relu", {x})}));
  g.optimize({"cuda", "cpu"});
  EXPECT_EQ(ops_of(g), (std::map<std::string, int>{{"FusedElementwise", 1}}));
}

// Every op the pass fuses, each between a Mul and an Add so that it sits inside a tree.
struct OpCase {
  const char* op;
  Attributes attrs;
  std::vector<float> params;  // constant inputs after the first (Clip bounds, Pow exponent)
  F1 f;
  float lo = -3, hi = 3;
};

std::vector<OpCase> op_cases() {
  const double inf = std::numeric_limits<double>::infinity();
  auto pw = [](double p) { return [p](double v) { return std::pow(v, p); }; };
  return {
      {"Relu", {}, {}, [](double v) { return std::max(v, 0.0); }},
      {"Sigmoid", {}, {}, sigmoid},
      {"Tanh", {}, {}, [](double v) { return std::tanh(v); }},
      {"Exp", {}, {}, [](double v) { return std::exp(v); }},
      {"Log", {}, {}, [](double v) { return std::log(v); }, 0.1f, 4},
      {"Neg", {}, {}, [](double v) { return -v; }},
      {"Abs", {}, {}, [](double v) { return std::fabs(v); }},
      {"Sqrt", {}, {}, [](double v) { return std::sqrt(v); }, 0.1f, 4},
      {"Reciprocal", {}, {}, [](double v) { return 1.0 / v; }, 0.5f, 3},
      {"Erf", {}, {}, [](double v) { return std::erf(v); }},
      {"Clip", {}, {-0.5f, 1.25f}, [](double v) { return std::min(std::max(v, -0.5), 1.25); }},
      {"Clip", {}, {0.25f}, [=](double v) { return std::min(std::max(v, 0.25), inf); }},
      {"LeakyRelu", {{"alpha", 0.3f}}, {}, [](double v) { return v < 0 ? 0.3 * v : v; }},
      {"LeakyRelu", {}, {}, [](double v) { return v < 0 ? 0.01 * v : v; }},
      {"HardSigmoid",
       {{"alpha", 0.3f}, {"beta", 0.4f}},
       {},
       [](double v) { return hard_sigmoid(v, 0.3, 0.4); }},
      {"HardSwish", {}, {}, [](double v) { return v * hard_sigmoid(v, 1.0 / 6, 0.5); }},
      {"Swish", {}, {}, [](double v) { return v * sigmoid(v); }},
      {"Swish", {{"alpha", 1.0f}}, {}, [](double v) { return v * sigmoid(v); }},
      {"Softplus", {}, {}, [](double v) { return std::log1p(std::exp(v)); }, -20, 20},
      {"Gelu", {}, {}, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"Gelu",
       {{"approximate", "tanh"}},
       {},
       [](double v) {
         return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
       }},
      {"Pow", {}, {2.0f}, pw(2)},
      {"Pow", {}, {3.0f}, pw(3)},
      {"Pow", {}, {0.5f}, pw(0.5), 0.1f, 4},
      {"Pow", {}, {-1.0f}, pw(-1), 0.5f, 3},
      {"Pow", {}, {1.7f}, pw(1.7), 0.1f, 4},
  };
}

TEST(FuseElementwise, EveryUnaryOp) {
  const Shape shape{3, 171};
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.op);
    Tensor x = test::random_tensor(shape, 10, c.lo, c.hi);
    std::vector<double> want;
    for (double v : test::to_doubles(x)) want.push_back(c.f(v * 1.0) + 0.5);
    check(
        [&](Graph& g) {
          Value* y = g.add_op("Mul", {g.add_input("x", shape), scalar(g, 1.0f)});
          std::vector<Value*> in = {y};
          for (float p : c.params) in.push_back(scalar(g, p));
          g.mark_output(g.add_op("Add", {g.add_op(c.op, in, c.attrs), scalar(g, 0.5f)}));
        },
        {x}, {{"FusedElementwise", 1}}, shape, want, 1e-5, 1e-5);
  }
}

TEST(FuseElementwise, BinaryAndVariadicOps) {
  const Shape shape{5, 67};
  Tensor a = test::random_tensor(shape, 11, -2, 2);
  Tensor b = test::random_tensor(shape, 12, -2, 2);
  Tensor c = test::random_tensor({67}, 13, 0.5f, 2);
  std::vector<double> av = test::to_doubles(a), bv = test::to_doubles(b), cv = test::to_doubles(c);
  std::vector<double> want;
  for (int64_t i = 0; i < shape.numel(); ++i) {
    double cc = at(cv, Shape{67}, shape, i);
    double m = std::max(std::max(av[i], bv[i]), 0.25);
    double n = std::min(av[i], bv[i]);
    want.push_back((m - n) / cc * (1.5 - av[i]));
  }
  check(
      [&](Graph& g) {
        Value* x = g.add_input("a", shape);
        Value* y = g.add_input("b", shape);
        Value* m = g.add_op("Max", {x, y, scalar(g, 0.25f)});
        Value* d = g.add_op(
            "Div", {g.add_op("Sub", {m, g.add_op("Min", {x, y})}), g.add_constant("cols", c)});
        g.mark_output(g.add_op("Mul", {d, g.add_op("Sub", {scalar(g, 1.5f), x})}));
      },
      {a, b}, {{"FusedElementwise", 1}}, shape, want);
}

TEST(FuseElementwise, GatedProductsBecomeOneInstruction) {
  // Mul(x, Sigmoid(x)) is Swish; Mul(HardSigmoid(x) with alpha 1/6, beta 1/2, x) is HardSwish.
  const Shape shape{2, 300};
  Tensor x = test::random_tensor(shape, 14, -5, 5);
  struct Gate {
    const char* op;
    Attributes attrs;
    EwOp want;
    F1 f;
  };
  const std::vector<Gate> gates = {
      {"Sigmoid", {}, EwOp::kSwish, [](double v) { return v * sigmoid(v); }},
      {"HardSigmoid",
       {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}},
       EwOp::kHardSwish,
       [](double v) { return v * hard_sigmoid(v, 1.0 / 6, 0.5); }},
  };
  for (const Gate& gate : gates) {
    SCOPED_TRACE(gate.op);
    std::vector<double> want;
    for (double v : test::to_doubles(x)) want.push_back(gate.f(v) * 2.0);
    Graph g;
    Value* in = g.add_input("x", shape);
    Value* y = g.add_op("Mul", {g.add_op(gate.op, {in}, gate.attrs), in});
    g.mark_output(g.add_op("Mul", {y, scalar(g, 2.0f)}));
    g.optimize();
    EXPECT_EQ(ops_of(g), (std::map<std::string, int>{{"FusedElementwise", 1}}));
    for (int id : g.topological_order()) {
      const std::vector<int64_t>& code = g.node(id).attrs.at("code").as_ints();
      ASSERT_EQ(code.size(), 8u);
      EXPECT_EQ(code[0], static_cast<int64_t>(gate.want));
    }
    Runtime rt;
    test::expect_close(g.compile(&rt)->execute({x})[0], shape, want);
  }
}

TEST(FuseElementwise, OutputOverwritesDyingInput) {
  // softmax(sqrt(|x + 4 softmax(x)|)): the first Softmax's output dies at the fused node, which
  // writes over it although it is not the tree's first leaf (x, a graph input, is).
  const Shape shape{7, 129};
  Tensor x = test::random_tensor(shape, 15, -3, 3);
  auto softmax_rows = [](std::vector<double> v) {
    for (size_t r = 0; r < v.size() / 129; ++r) {
      double sum = 0;
      for (size_t k = 0; k < 129; ++k) sum += std::exp(v[r * 129 + k]);
      for (size_t k = 0; k < 129; ++k) v[r * 129 + k] = std::exp(v[r * 129 + k]) / sum;
    }
    return v;
  };
  std::vector<double> xv = test::to_doubles(x), want = softmax_rows(xv);
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::sqrt(std::fabs(xv[i] + want[i] * 4.0));
  want = softmax_rows(want);
  auto build = [&](Graph& g) {
    Value* in = g.add_input("x", shape);
    Value* s = g.add_op("Softmax", {in}, {{"axis", int64_t{-1}}});
    Value* y = g.add_op("Add", {in, g.add_op("Mul", {s, scalar(g, 4.0f)})});
    y = g.add_op("Sqrt", {g.add_op("Abs", {y})});
    g.mark_output(g.add_op("Softmax", {y}, {{"axis", int64_t{-1}}}));
  };
  check(build, {x}, {{"FusedElementwise", 1}, {"Softmax", 2}}, shape, want);
  Graph g;
  build(g);
  g.optimize();
  Runtime rt;
  // Softmax runs out of place, so the one in-place step is the fused node's.
  EXPECT_EQ(g.compile(&rt)->memory_report().in_place_steps, 1u);
}

// ---- the kernel directly ----

// A FusedElementwise node over `inputs` (runtime inputs) with a hand-written program.
Tensor run_program(const std::vector<Tensor>& inputs, const std::vector<int64_t>& code,
                   const std::vector<float>& consts) {
  std::vector<test::OpInput> in;
  for (const Tensor& t : inputs) in.emplace_back(t);
  return test::run_op("FusedElementwise", in, {{"code", code}, {"consts", consts}})[0];
}

int64_t op(EwOp o) {
  return static_cast<int64_t>(o);
}

TEST(FusedElementwiseKernel, OddSizesBroadcastAndThreads) {
  // Not multiples of the 512-element block; the last is large enough to run on several threads.
  for (const Shape& shape :
       {Shape{1}, Shape{511}, Shape{3, 517}, Shape{6, 7, 97}, Shape{4, 5, 3001}}) {
    SCOPED_TRACE(shape.to_string());
    const int rank = shape.rank();
    const Shape row{shape[-1]};
    const Shape col = rank >= 2 ? Shape{shape[-2], 1} : Shape{1};
    Tensor x = test::random_tensor(shape, 16, -2, 2);
    Tensor r = test::random_tensor(row, 17, -1, 1);
    Tensor c = test::random_tensor(col, 18, 0.5f, 1.5f);
    Tensor s = test::random_tensor({1}, 19, -1, 1);
    // r4 = (x * c + r), r5 = tanh(r4) * s, r4 = max(r5, 0.2 * x) (LeakyRelu-like), out = r4 - 1.5
    std::vector<int64_t> code = {op(EwOp::kMul),  4, 0, 2,  op(EwOp::kAdd), 4, 4, 1,
                                 op(EwOp::kTanh), 5, 4, 0,  op(EwOp::kMul), 5, 5, 3,
                                 op(EwOp::kMul),  6, 0, -1, op(EwOp::kMax), 4, 5, 6,
                                 op(EwOp::kSub),  7, 4, -2};
    Tensor got = run_program({x, r, c, s}, code, {0.2f, 1.5f});
    std::vector<double> xv = test::to_doubles(x), rv = test::to_doubles(r),
                        cv = test::to_doubles(c);
    const double sv = test::to_doubles(s)[0];
    std::vector<double> want;
    for (int64_t i = 0; i < shape.numel(); ++i) {
      double v = std::tanh(xv[i] * at(cv, col, shape, i) + at(rv, row, shape, i)) * sv;
      want.push_back(std::max(v, 0.2 * xv[i]) - 1.5);
    }
    test::expect_close(got, shape, want);
  }
}

TEST(FusedElementwiseKernel, MalformedProgramsAreInvalidModel) {
  Tensor x = test::random_tensor({8}, 20);
  const int64_t add = op(EwOp::kAdd), relu = op(EwOp::kRelu);
  const std::vector<std::vector<int64_t>> bad = {
      {},                // no instruction
      {add, 1, 0},       // not a multiple of four
      {99, 1, 0, 0},     // unknown opcode
      {-1, 1, 0, 0},     // negative opcode
      {relu, 1, 40, 0},  // register out of range
      {relu, 1, 2, 0},   // register never written
      {relu, 0, 0, 0},   // writes the input register
      {relu, 32, 0, 0},  // destination out of range
      {relu, 1, 0, 5},   // unary with b != 0
      {add, 1, 0, -3},   // immediate out of range
      {add, 1, -1, -1},  // two immediates
      {add, 1, 0, std::numeric_limits<int64_t>::min()},
      {op(EwOp::kPow), 1, 0, 0},    // exponent not an immediate
      {op(EwOp::kClip), 1, 0, -2},  // Clip needs two immediates from k = 1
      {relu, 1, 0, 0, add, 2, 1, std::numeric_limits<int64_t>::max()},
  };
  for (const auto& code : bad) {
    SCOPED_TRACE(::testing::PrintToString(code));
    test::expect_error<InvalidModel>(
        [&] {
          run_program({x}, code, {0.5f, 2.0f});
        },
        "FusedElementwise");
  }
  // Too many instructions.
  std::vector<int64_t> long_code;
  for (int i = 0; i <= kEwMaxInstructions; ++i)
    long_code.insert(long_code.end(), {relu, 1, i == 0 ? 0 : 1, 0});
  test::expect_error<InvalidModel>([&] { run_program({x}, long_code, {}); }, "FusedElementwise");
  // A missing `code`, and a non-float32 input.
  test::expect_error<InvalidModel>(
      [&] { test::run_op("FusedElementwise", {test::OpInput(x)}, {}); }, "FusedElementwise");
  test::expect_error<ShapeError>(
      [&] {
        test::run_op("FusedElementwise", {test::OpInput(test::random_ints({8}, 21, 0, 5))},
                     {{"code", std::vector<int64_t>{relu, 1, 0, 0}}});
      },
      "FusedElementwise");
}

}  // namespace
}  // namespace lumen
