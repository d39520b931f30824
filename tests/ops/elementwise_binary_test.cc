// Tests of the broadcasting element-wise ops (arithmetic, Pow, comparisons, logic, Min/Max,
// Where) and of BroadcastPlan, against naive double references over many broadcast patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernel_registry.h"
#include "graph/op_kind.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::broadcast_source;
using test::constant;
using test::expect_close;
using test::expect_equal;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;
using test::unravel;

using Fn = std::function<double(const std::vector<double>&)>;

// Broadcast cases: input shapes and the output shape they make.
struct Case {
  std::vector<Shape> in;
  Shape out;
};

const std::vector<Case>& binary_cases() {
  static const std::vector<Case> cases = {
      {{{3, 4}, {3, 4}}, {3, 4}},                    // same shape
      {{{3, 4}, {}}, {3, 4}},                        // scalar right
      {{{}, {3, 4}}, {3, 4}},                        // scalar left
      {{{}, {}}, {}},                                // both scalars
      {{{2, 3, 4}, {4}}, {2, 3, 4}},                 // row
      {{{2, 3, 4}, {2, 3, 1}}, {2, 3, 4}},           // column
      {{{5, 1}, {1, 6}}, {5, 6}},                    // outer product
      {{{2, 1, 4, 1}, {3, 1, 5}}, {2, 3, 4, 5}},     // rank 4, both ways
      {{{1, 3, 1, 5}, {2, 1, 4, 1}}, {2, 3, 4, 5}},  // rank 4, alternating
      {{{1}, {1, 1, 1}}, {1, 1, 1}},                 // size-1 dims only
      {{{2, 0, 3}, {3}}, {2, 0, 3}},                 // empty
      {{{1, 0}, {4, 1}}, {4, 0}},                    // empty by broadcasting
      {{{64, 700}, {700}}, {64, 700}},               // large, short rows (threaded)
      {{{70001}, {70001}}, {70001}},                 // large, one long row (threaded)
      {{{2, 40000}, {2, 1}}, {2, 40000}},            // large column broadcast
      {{{3, 1, 40}, {1, 500, 40}}, {3, 500, 40}},    // large, both broadcast
  };
  return cases;
}

// The naive reference: every output element from its broadcast source elements.
std::vector<double> reference(const std::vector<Tensor>& ins, const Shape& out, const Fn& f) {
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ins) vals.push_back(to_doubles(t));
  std::vector<double> want;
  std::vector<double> args(ins.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, out);
    for (size_t k = 0; k < ins.size(); ++k)
      args[k] = vals[k][broadcast_source(idx, ins[k].shape())];
    want.push_back(f(args));
  }
  return want;
}

// Random float32 data for `shape`: uniform in [lo, hi), optionally kept at least `gap` from 0.
Tensor floats(const Shape& shape, uint64_t seed, float lo, float hi, float gap = 0) {
  Tensor t = random_tensor(shape, seed, lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::abs(p[i]) < gap) p[i] = p[i] < 0 ? -gap : gap;
  return t;
}

// Small integers as float32, so that comparisons see ties.
Tensor tied_floats(const Shape& shape, uint64_t seed) {
  std::vector<double> v = to_doubles(random_ints(shape, seed, -2, 2));
  return Tensor::from_vector<float>(shape, std::vector<float>(v.begin(), v.end()));
}

// Random integers in [lo, hi] without zero.
Tensor nonzero_ints(const Shape& shape, uint64_t seed, int64_t lo, int64_t hi, DType dt) {
  Tensor t = random_ints(shape, seed, lo, hi, dt);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.item_as_double(i) != 0) continue;
    if (dt == DType::kInt64)
      t.data<int64_t>()[i] = 3;
    else
      t.data<int32_t>()[i] = -3;
  }
  return t;
}

using Maker = std::function<Tensor(const Shape&, uint64_t)>;

// Runs `op` on every broadcast case with inputs from `make` (one per input) and checks it.
void check_binary(const std::string& op, const std::vector<Maker>& make, const Fn& f,
                  DType out_dtype, bool exact) {
  uint64_t seed = 100;
  for (const Case& c : binary_cases()) {
    std::string shapes;
    for (const Shape& s : c.in) shapes += s.to_string();
    SCOPED_TRACE(op + " " + shapes);
    std::vector<Tensor> ins;
    std::vector<test::OpInput> args;
    for (size_t k = 0; k < c.in.size(); ++k) {
      ins.push_back(make[k](c.in[k], seed++));
      args.emplace_back(ins.back());
    }
    Tensor got = run_op(op, args)[0];
    std::vector<double> want = reference(ins, c.out, f);
    if (exact) {
      expect_equal(got, out_dtype, c.out, want);
    } else {
      ASSERT_EQ(got.dtype(), out_dtype);
      expect_close(got, c.out, want);
    }
  }
}

Maker uniform(float lo, float hi, float gap = 0) {
  return [=](const Shape& s, uint64_t seed) { return floats(s, seed, lo, hi, gap); };
}
Maker ints(DType dt, int64_t lo, int64_t hi) {
  return [=](const Shape& s, uint64_t seed) { return random_ints(s, seed, lo, hi, dt); };
}

TEST(Binary, FloatArithmetic) {
  Maker u = uniform(-3, 3);
  check_binary(
      "Add", {u, u}, [](auto& v) { return v[0] + v[1]; }, DType::kFloat32, false);
  check_binary(
      "Sub", {u, u}, [](auto& v) { return v[0] - v[1]; }, DType::kFloat32, false);
  check_binary(
      "Mul", {u, u}, [](auto& v) { return v[0] * v[1]; }, DType::kFloat32, false);
  check_binary(
      "Div", {u, uniform(-3, 3, 0.2f)}, [](auto& v) { return v[0] / v[1]; }, DType::kFloat32,
      false);
  check_binary(
      "Min", {u, u}, [](auto& v) { return std::min(v[0], v[1]); }, DType::kFloat32, true);
  check_binary(
      "Max", {u, u}, [](auto& v) { return std::max(v[0], v[1]); }, DType::kFloat32, true);
}

TEST(Binary, IntArithmetic) {
  for (DType dt : {DType::kInt64, DType::kInt32}) {
    SCOPED_TRACE(dtype_name(dt));
    Maker a = ints(dt, -1000, 1000);
    Maker b = [dt](const Shape& s, uint64_t seed) { return nonzero_ints(s, seed, -9, 9, dt); };
    check_binary(
        "Add", {a, a}, [](auto& v) { return v[0] + v[1]; }, dt, true);
    check_binary(
        "Sub", {a, a}, [](auto& v) { return v[0] - v[1]; }, dt, true);
    check_binary(
        "Mul", {a, a}, [](auto& v) { return v[0] * v[1]; }, dt, true);
    check_binary(
        "Div", {a, b}, [](auto& v) { return std::trunc(v[0] / v[1]); }, dt, true);
    check_binary(
        "Min", {a, a}, [](auto& v) { return std::min(v[0], v[1]); }, dt, true);
    check_binary(
        "Max", {a, a}, [](auto& v) { return std::max(v[0], v[1]); }, dt, true);
  }
}

TEST(Binary, IntDivisionEdges) {
  // Truncation toward zero for every sign combination, and INT_MIN / -1 wrapping, not trapping.
  Tensor a = Tensor::from_vector<int64_t>({4}, {7, -7, 7, -7});
  Tensor b = Tensor::from_vector<int64_t>({4}, {2, 2, -2, -2});
  expect_equal(run_op("Div", {a, b})[0], DType::kInt64, {4}, {3, -3, -3, 3});
  const int32_t lowest = std::numeric_limits<int32_t>::min();
  Tensor c = Tensor::from_vector<int32_t>({2}, {lowest, 9});
  Tensor d = Tensor::from_vector<int32_t>({1}, {-1});
  expect_equal(run_op("Div", {c, d})[0], DType::kInt32, {2}, {double(lowest), -9});
}

TEST(Binary, Pow) {
  Maker base = uniform(0.1f, 2.5f);
  auto pow_ref = [](auto& v) { return std::pow(v[0], v[1]); };
  check_binary("Pow", {base, uniform(-2, 3)}, pow_ref, DType::kFloat32, false);
  check_binary("Pow", {base, ints(DType::kInt64, -3, 4)}, pow_ref, DType::kFloat32, false);
  check_binary("Pow", {base, ints(DType::kInt32, -3, 4)}, pow_ref, DType::kFloat32, false);
  // Single-valued exponents take the arithmetic fast paths; negative bases with integer powers.
  Tensor x = random_tensor({5, 300}, 7, -2, 2);
  for (float p : {1.f, 2.f, 3.f, -1.f, 0.f, 4.f}) {
    std::vector<double> want;
    for (double v : to_doubles(x)) want.push_back(std::pow(v, p));
    expect_close(run_op("Pow", {x, constant(Tensor::scalar(p))})[0], x.shape(), want, 1e-4);
    expect_close(run_op("Pow", {x, Tensor::from_vector<float>({1}, {p})})[0], x.shape(), want,
                 1e-4);
    expect_close(run_op("Pow", {x, Tensor::scalar<int64_t>(int64_t(p))})[0], x.shape(), want, 1e-4);
  }
  Tensor y = random_tensor({7, 3}, 8, 0, 4);
  std::vector<double> want;
  for (double v : to_doubles(y)) want.push_back(std::sqrt(v));
  expect_close(run_op("Pow", {y, Tensor::scalar(0.5f)})[0], y.shape(), want);
}

TEST(Binary, Comparisons) {
  auto eq = [](auto& v) { return double(v[0] == v[1]); };
  auto lt = [](auto& v) { return double(v[0] < v[1]); };
  auto gt = [](auto& v) { return double(v[0] > v[1]); };
  std::vector<Maker> makers = {tied_floats, ints(DType::kInt64, -2, 2), ints(DType::kInt32, -2, 2)};
  for (const Maker& m : makers) {
    check_binary("Equal", {m, m}, eq, DType::kBool, true);
    check_binary("Less", {m, m}, lt, DType::kBool, true);
    check_binary("Greater", {m, m}, gt, DType::kBool, true);
  }
  Maker b = ints(DType::kBool, 0, 1);
  check_binary("Equal", {b, b}, eq, DType::kBool, true);
}

TEST(Binary, Logic) {
  Maker b = ints(DType::kBool, 0, 1);
  check_binary(
      "And", {b, b}, [](auto& v) { return double(v[0] && v[1]); }, DType::kBool, true);
  check_binary(
      "Or", {b, b}, [](auto& v) { return double(v[0] || v[1]); }, DType::kBool, true);
}

TEST(Binary, NanPropagation) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::from_vector<float>({3}, {nan, 1.f, nan});
  Tensor b = Tensor::from_vector<float>({3}, {2.f, nan, nan});
  for (const char* op : {"Min", "Max", "Add"}) {
    std::vector<double> got = to_doubles(run_op(op, {a, b})[0]);
    for (double g : got) EXPECT_TRUE(std::isnan(g)) << op;
  }
}

TEST(Variadic, MinMax) {
  std::vector<std::vector<Shape>> shape_sets = {
      {{2, 3, 4}},                               // one input: a copy
      {{2, 3, 4}, {4}, {3, 1}},                  // three, broadcasting
      {{1}, {5, 1, 1}, {1, 6}, {5, 6, 1}},       // four, output larger than any input
      {{300, 200}, {200}, {300, 1}, {300, 200}}  // large
  };
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt32}) {
    for (const auto& shapes : shape_sets) {
      std::vector<Tensor> ins;
      std::vector<test::OpInput> args;
      uint64_t seed = 40;
      for (const Shape& s : shapes) {
        ins.push_back(dt == DType::kFloat32 ? random_tensor(s, seed++, -5, 5)
                                            : random_ints(s, seed++, -100, 100, dt));
        args.emplace_back(ins.back());
      }
      Shape out = run_op("Max", args)[0].shape();
      auto fold = [](bool is_max) {
        return [is_max](const std::vector<double>& v) {
          double r = v[0];
          for (double x : v) r = is_max ? std::max(r, x) : std::min(r, x);
          return r;
        };
      };
      expect_equal(run_op("Max", args)[0], dt, out, reference(ins, out, fold(true)));
      expect_equal(run_op("Min", args)[0], dt, out, reference(ins, out, fold(false)));
    }
  }
}

TEST(Where, ThreeWayBroadcast) {
  std::vector<Case> cases = {
      {{{2, 3}, {2, 3}, {2, 3}}, {2, 3}},
      {{{2, 1, 4}, {3, 1}, {}}, {2, 3, 4}},
      {{{4}, {3, 4}, {3, 1}}, {3, 4}},
      {{{}, {2, 2}, {2, 2}}, {2, 2}},
      {{{1, 5}, {0, 1}, {5}}, {0, 5}},
      {{{1, 200, 1}, {2, 1, 300}, {2, 200, 300}}, {2, 200, 300}},
      {{{50000}, {50000}, {1}}, {50000}},
  };
  auto choose = [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; };
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt32, DType::kBool}) {
    uint64_t seed = 70;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.out.to_string());
      std::vector<Tensor> ins = {random_ints(c.in[0], seed++, 0, 1, DType::kBool)};
      for (int k = 1; k < 3; ++k)
        ins.push_back(dt == DType::kFloat32 ? random_tensor(c.in[k], seed++, -5, 5)
                      : dt == DType::kBool  ? random_ints(c.in[k], seed++, 0, 1, dt)
                                            : random_ints(c.in[k], seed++, -1000, 1000, dt));
      expect_equal(run_op("Where", {ins[0], ins[1], ins[2]})[0], dt, c.out,
                   reference(ins, c.out, choose));
    }
  }
}

// Output written over input 0 (the memory planner's in-place case) for a broadcasting Add and a
// variadic Max.
TEST(Binary, InPlace) {
  for (const char* op : {"Add", "Max", "Div"}) {
    Graph g;
    Value* a = g.add_input("a", {200, 300});
    Value* b = g.add_input("b", {300});
    Value* out = g.add_op(op, {a, b});
    const Node& node = g.node(out->producer);
    auto kernel = cpu::find_kernel(node.op)->make(NodeContext(g, node));
    EXPECT_EQ(kernel->in_place_input(), 0);
    Tensor x = random_tensor({200, 300}, 21, -2, 2);
    Tensor y = floats({300}, 22, -2, 2, 0.3f);
    std::string name = op;
    std::vector<double> want = reference({x, y}, x.shape(), [&](const std::vector<double>& v) {
      return name == "Add" ? v[0] + v[1] : name == "Max" ? std::max(v[0], v[1]) : v[0] / v[1];
    });
    std::vector<Tensor> ins = {x, y}, outs = {x};
    KernelContext ctx{ins, outs, nullptr};
    kernel->run(ctx);
    expect_close(x, x.shape(), want);
  }
  // Not in place when the output is larger than input 0, or of another dtype.
  Graph g;
  Value* a = g.add_input("a", {300});
  Value* b = g.add_input("b", {2, 300});
  auto make = [&](const char* op) {
    const Node& n = g.node(g.add_op(op, {a, b})->producer);
    return cpu::find_kernel(n.op)->make(NodeContext(g, n));
  };
  EXPECT_EQ(make("Add")->in_place_input(), -1);
  EXPECT_EQ(make("Less")->in_place_input(), -1);
}

TEST(BroadcastPlan, MergesDimensions) {
  cpu::BroadcastPlan same({2, 3, 4, 5}, {{2, 3, 4, 5}, {2, 3, 4, 5}});
  EXPECT_EQ(same.dims(), (std::vector<int64_t>{120}));
  cpu::BroadcastPlan row({2, 3, 4, 5}, {{2, 3, 4, 5}, {1, 5}});
  EXPECT_EQ(row.dims(), (std::vector<int64_t>{24, 5}));
  EXPECT_EQ(row.strides(1), (std::vector<int64_t>{0, 1}));
  cpu::BroadcastPlan col({6, 7}, {{6, 7}, {6, 1}});
  EXPECT_EQ(col.inner_stride(1), 0);
  EXPECT_EQ(col.strides(1), (std::vector<int64_t>{1, 0}));
  cpu::BroadcastPlan both({2, 3, 4, 5}, {{2, 1, 4, 1}, {3, 1, 5}});
  EXPECT_EQ(both.dims(), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(both.strides(0), (std::vector<int64_t>{4, 0, 1, 0}));
  EXPECT_EQ(both.strides(1), (std::vector<int64_t>{0, 5, 0, 1}));
  cpu::BroadcastPlan empty({2, 0}, {{2, 1}});
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.rows(), 0);
  EXPECT_THROW(cpu::BroadcastPlan({2, 3}, {{3, 3}}), ShapeError);
  EXPECT_THROW(cpu::BroadcastPlan({3}, {{2, 3}}), ShapeError);
}

TEST(BinaryErrors, BadInput) {
  Tensor f = random_tensor({3, 4}, 1);
  Tensor i64 = random_ints({3, 4}, 1, 1, 5);
  Tensor flag = random_ints({3, 4}, 1, 0, 1, DType::kBool);
  EXPECT_THROW(run_op("Add", {f, i64}), ShapeError);
  EXPECT_THROW(run_op("Equal", {i64, random_ints({3, 4}, 2, 1, 5, DType::kInt32)}), ShapeError);
  EXPECT_THROW(run_op("Add", {f, random_tensor({5}, 2)}), ShapeError);
  EXPECT_THROW(run_op("Mul", {f, random_tensor({2, 3, 1, 2}, 2)}), ShapeError);
  EXPECT_THROW(run_op("Max", {f, f, random_tensor({2}, 2)}), ShapeError);
  EXPECT_THROW(run_op("Max", {f, i64}), ShapeError);
  EXPECT_THROW(run_op("And", {f, f}), ShapeError);
  EXPECT_THROW(run_op("Less", {flag, flag}), ShapeError);
  EXPECT_THROW(run_op("Where", {f, f, f}), ShapeError);
  EXPECT_THROW(run_op("Where", {flag, f, i64}), ShapeError);
  EXPECT_THROW(run_op("Where", {random_ints({2}, 1, 0, 1, DType::kBool), f, f}), ShapeError);
  EXPECT_THROW(run_op("Add", {f, f}, {{"axis", 1}}), InvalidModel);
  EXPECT_THROW(run_op("Min", {}), InvalidModel);
  EXPECT_THROW(run_op("Add", {f}), InvalidModel);
  Tensor i8 = random_ints({3, 4}, 1, 0, 3, DType::kInt8);
  EXPECT_THROW(run_op("Pow", {i8, i64}), UnsupportedOp);  // int8 base: no CPU kernel
}

TEST(BinaryErrors, IntDivisionByZero) {
  for (DType dt : {DType::kInt64, DType::kInt32}) {
    Tensor a = random_ints({4, 5}, 1, -9, 9, dt);
    Tensor b = random_ints({5}, 2, 1, 9, dt);
    if (dt == DType::kInt64)
      b.data<int64_t>()[3] = 0;
    else
      b.data<int32_t>()[3] = 0;
    EXPECT_THROW(run_op("Div", {a, b}), InvalidArgument);                      // at run time
    EXPECT_THROW(run_op("Div", {constant(a), constant(b)}), InvalidArgument);  // folded
  }
  // Float division by zero is IEEE: inf, not an error.
  Tensor z = run_op("Div", {Tensor::scalar(1.f), Tensor::scalar(0.f)})[0];
  EXPECT_TRUE(std::isinf(z.item_as_double()));
}

}  // namespace
}  // namespace lumen
