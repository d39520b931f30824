// Reductions on the CUDA backend's generic kernels: every Reduce* over any set of axes (leading,
// middle, several, all, none with noop_with_empty_axes), long reductions (a block per output) and
// short ones (a thread per output), float and integer types; ArgMax/ArgMin with ties, CumSum,
// Hardmax and LayerNormalization's Mean and InvStdDev outputs. Plain-loop references; with
// --lumen-backends=cuda,cpu each node must run on CUDA (skipped without a GPU).
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "ops/backend_check_util.h"

namespace lumen::test {
namespace {

class GenericReduce : public ::testing::Test {
 protected:
  void SetUp() override { LUMEN_SKIP_WITHOUT_BACKENDS(); }
};

struct ReduceRef {
  double init;
  std::function<double(double)> map;
  std::function<double(double, double)> combine;
  std::function<double(double, int64_t)> finish;
};

ReduceRef reduce_ref(const std::string& op) {
  auto sum = [](double a, double b) { return a + b; };
  auto id = [](double v) { return v; };
  auto keep = [](double a, int64_t) { return a; };
  if (op == "ReduceSum") return {0, id, sum, keep};
  if (op == "ReduceMean") return {0, id, sum, [](double a, int64_t n) { return a / n; }};
  if (op == "ReduceMax")
    return {-INFINITY, id, [](double a, double b) { return std::max(a, b); }, keep};
  if (op == "ReduceMin")
    return {INFINITY, id, [](double a, double b) { return std::min(a, b); }, keep};
  if (op == "ReduceProd") return {1, id, [](double a, double b) { return a * b; }, keep};
  if (op == "ReduceSumSquare") return {0, [](double v) { return v * v; }, sum, keep};
  if (op == "ReduceL1") return {0, [](double v) { return std::abs(v); }, sum, keep};
  if (op == "ReduceL2")
    return {0, [](double v) { return v * v; }, sum, [](double a, int64_t) { return std::sqrt(a); }};
  if (op == "ReduceLogSum") return {0, id, sum, [](double a, int64_t) { return std::log(a); }};
  // ReduceLogSumExp (no shift needed for the test's small values)
  return {0, [](double v) { return std::exp(v); }, sum,
          [](double a, int64_t) { return std::log(a); }};
}

// The reference of `op` over x reducing `axes` (empty: all, or none with noop).
std::vector<double> reduce_reference(const std::string& op, const Tensor& x,
                                     std::vector<int64_t> axes, bool keepdims, bool noop,
                                     Shape* out_shape) {
  const Shape& s = x.shape();
  std::vector<bool> red(s.rank(), axes.empty() && !noop);
  for (int64_t a : axes) red[a < 0 ? a + s.rank() : a] = true;
  std::vector<int64_t> dims;
  for (int k = 0; k < s.rank(); ++k)
    if (!red[k] || keepdims) dims.push_back(red[k] ? 1 : s[k]);
  *out_shape = Shape(dims);
  std::vector<int64_t> kept_dims;
  for (int k = 0; k < s.rank(); ++k) kept_dims.push_back(red[k] ? 1 : s[k]);
  const Shape kept(kept_dims);
  const ReduceRef r = reduce_ref(op);
  std::vector<double> acc(static_cast<size_t>(kept.numel()), r.init);
  std::vector<int64_t> count(acc.size(), 0);
  const std::vector<double> xv = to_doubles(x);
  for (int64_t i = 0; i < s.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, s);
    for (int k = 0; k < s.rank(); ++k)
      if (red[k]) idx[k] = 0;
    const int64_t o = ravel(idx, kept);
    acc[o] = r.combine(acc[o], r.map(xv[i]));
    ++count[o];
  }
  for (size_t o = 0; o < acc.size(); ++o) acc[o] = r.finish(acc[o], count[o]);
  return acc;
}

const char* const kReduceOps[] = {"ReduceSum",    "ReduceMean",      "ReduceMax", "ReduceMin",
                                  "ReduceProd",   "ReduceSumSquare", "ReduceL1",  "ReduceL2",
                                  "ReduceLogSum", "ReduceLogSumExp"};

TEST_F(GenericReduce, EveryOpOverAnyAxesFloat) {
  const std::vector<std::vector<int64_t>> axis_sets = {{0},    {1},    {2},       {-1},
                                                       {0, 2}, {1, 3}, {0, 1, 3}, {}};
  for (const char* op : kReduceOps) {
    const bool positive = std::string(op) == "ReduceLogSum" || std::string(op) == "ReduceProd";
    const Tensor x = random_tensor({3, 4, 5, 6}, 7, positive ? 0.5f : -1.f, positive ? 1.5f : 1.f);
    for (const auto& axes : axis_sets) {
      for (int keep : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " axes " + std::to_string(axes.size()) + " keep " +
                     std::to_string(keep));
        Shape shape;
        const std::vector<double> want = reduce_reference(op, x, axes, keep, false, &shape);
        std::vector<OpInput> inputs = {x};
        if (!axes.empty())
          inputs.push_back(constant(
              Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(axes.size())}, axes)));
        const Tensor got = run_checked(op, inputs, {{"keepdims", int64_t{keep}}})[0];
        expect_close(got, shape, want, 1e-5, 1e-4);
      }
    }
  }
}

TEST_F(GenericReduce, LongAndShortReductions) {
  // Long reductions over a middle axis and over a leading one (a block per output), and many
  // short ones (a thread per output).
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  const std::vector<Case> cases = {{{2, 700, 3}, {1}},
                                   {{513, 9}, {0}},
                                   {{40, 3, 50}, {0, 2}},
                                   {{3000, 4}, {1}},
                                   {{64, 33, 2}, {1}}};
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(op) + " " + c.shape.to_string());
      const Tensor x = random_tensor(c.shape, 17);
      Shape shape;
      const std::vector<double> want = reduce_reference(op, x, c.axes, true, false, &shape);
      const Tensor axes =
          Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(c.axes.size())}, c.axes);
      expect_close(run_checked(op, {x, constant(axes)})[0], shape, want, 1e-4, 1e-4);
    }
  }
}

TEST_F(GenericReduce, IntegerReductions) {
  for (DType dt : {DType::kInt32, DType::kInt64}) {
    const Tensor x = random_ints({4, 6, 5}, 27, -3, 3, dt);
    for (const char* op :
         {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"}) {
      for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0}, {1}, {0, 2}}) {
        SCOPED_TRACE(std::string(op) + " " + dtype_name(dt));
        Shape shape;
        const std::vector<double> want = reduce_reference(op, x, axes, false, false, &shape);
        const Tensor a =
            Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(axes.size())}, axes);
        expect_equal(run_checked(op, {x, constant(a)}, {{"keepdims", int64_t{0}}})[0], dt, shape,
                     want);
      }
    }
  }
}

TEST_F(GenericReduce, NoopWithEmptyAxesAppliesElementWise) {
  const Tensor x = random_tensor({3, 5, 7}, 37);
  for (const char* op : {"ReduceSum", "ReduceL2", "ReduceSumSquare"}) {
    SCOPED_TRACE(op);
    Shape shape;
    const std::vector<double> want = reduce_reference(op, x, {}, true, true, &shape);
    expect_close(run_checked(op, {x}, {{"noop_with_empty_axes", int64_t{1}}})[0], shape, want);
  }
}

TEST_F(GenericReduce, ArgMaxArgMinWithTies) {
  for (DType dt : {DType::kFloat32, DType::kInt32}) {
    const Tensor x = int_valued({4, 5, 6}, dt, 47, -2, 2);  // many ties
    const std::vector<double> xv = to_doubles(x);
    for (const char* op : {"ArgMax", "ArgMin"}) {
      const bool max = std::string(op) == "ArgMax";
      for (int axis = 0; axis < 3; ++axis) {
        for (int last : {0, 1}) {
          SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis) + " last " +
                       std::to_string(last) + " " + dtype_name(dt));
          std::vector<int64_t> dims = {4, 5, 6};
          const int64_t n = dims[axis];
          dims[axis] = 1;
          const Shape out(dims);
          std::vector<double> want;
          for (int64_t o = 0; o < out.numel(); ++o) {
            std::vector<int64_t> idx = unravel(o, out);
            int64_t best = 0;
            double best_v = xv[ravel(idx, x.shape())];
            for (int64_t j = 1; j < n; ++j) {
              idx[axis] = j;
              const double v = xv[ravel(idx, x.shape())];
              const bool better =
                  max ? (last ? v >= best_v : v > best_v) : (last ? v <= best_v : v < best_v);
              if (better) {
                best = j;
                best_v = v;
              }
            }
            want.push_back(static_cast<double>(best));
          }
          const Tensor got = run_checked(
              op, {x}, {{"axis", int64_t{axis}}, {"select_last_index", int64_t{last}}})[0];
          expect_equal(got, DType::kInt64, out, want);
        }
      }
    }
  }
}

TEST_F(GenericReduce, TopKLargestAndSmallestWithTies) {
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt32}) {
    const Tensor x = int_valued({3, 9, 4}, dt, 97, -4, 4);  // ties
    const std::vector<double> xv = to_doubles(x);
    for (int axis : {1, 2}) {
      for (int largest : {0, 1}) {
        const int64_t n = x.shape()[axis], k = axis == 1 ? 5 : 3;
        SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis) + " largest " +
                     std::to_string(largest));
        std::vector<int64_t> dims = {3, 9, 4};
        dims[axis] = k;
        const Shape out(dims);
        std::vector<double> vals(static_cast<size_t>(out.numel())), idx(vals.size());
        for (int64_t i = 0; i < out.numel(); ++i) {
          if (unravel(i, out)[axis] != 0) continue;
          std::vector<int64_t> at = unravel(i, out);
          std::vector<int64_t> order(static_cast<size_t>(n));
          std::iota(order.begin(), order.end(), int64_t{0});
          auto value = [&](int64_t c) {
            std::vector<int64_t> a = at;
            a[axis] = c;
            return xv[ravel(a, x.shape())];
          };
          std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            return largest ? value(a) > value(b) : value(a) < value(b);
          });
          for (int64_t r = 0; r < k; ++r) {
            at[axis] = r;
            vals[ravel(at, out)] = value(order[r]);
            idx[ravel(at, out)] = static_cast<double>(order[r]);
          }
        }
        const std::vector<Tensor> got =
            run_checked("TopK", {x, constant(Tensor::from_vector<int64_t>({1}, {k}))},
                        {{"axis", int64_t{axis}}, {"largest", int64_t{largest}}}, 2);
        expect_equal(got[0], dt, out, vals);
        expect_equal(got[1], DType::kInt64, out, idx);
      }
    }
  }
}

TEST_F(GenericReduce, CumSumEveryMode) {
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt32, DType::kFloat64}) {
    const Tensor x = int_valued({3, 7, 4}, dt, 57, -9, 9);
    const std::vector<double> xv = to_doubles(x);
    for (int axis = 0; axis < 3; ++axis) {
      for (int exclusive : {0, 1}) {
        for (int reverse : {0, 1}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis) +
                       (exclusive ? " exclusive" : "") + (reverse ? " reverse" : ""));
          std::vector<double> want(xv.size());
          for (int64_t i = 0; i < x.numel(); ++i) {
            std::vector<int64_t> idx = unravel(i, x.shape());
            const int64_t at = idx[axis];
            double s = 0;
            for (int64_t j = 0; j < x.shape()[axis]; ++j) {
              const bool take =
                  reverse ? (exclusive ? j > at : j >= at) : (exclusive ? j < at : j <= at);
              idx[axis] = j;
              if (take) s += xv[ravel(idx, x.shape())];
            }
            want[i] = s;
          }
          const Tensor got =
              run_checked("CumSum", {x, constant(Tensor::scalar<int64_t>(axis))},
                          {{"exclusive", int64_t{exclusive}}, {"reverse", int64_t{reverse}}})[0];
          expect_equal(got, dt, x.shape(), want);
        }
      }
    }
  }
}

TEST_F(GenericReduce, HardmaxAlongEachAxis) {
  const Tensor x = random_tensor({3, 4, 5}, 67);
  const std::vector<double> xv = to_doubles(x);
  for (int axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE(axis);
    std::vector<double> want(xv.size(), 0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      std::vector<int64_t> idx = unravel(i, x.shape());
      if (idx[axis] != 0) continue;
      int64_t best = 0;
      for (int64_t j = 1; j < x.shape()[axis]; ++j) {
        std::vector<int64_t> a = idx, b = idx;
        a[axis] = j;
        b[axis] = best;
        if (xv[ravel(a, x.shape())] > xv[ravel(b, x.shape())]) best = j;
      }
      idx[axis] = best;
      want[ravel(idx, x.shape())] = 1;
    }
    expect_close(run_checked("Hardmax", {x}, {{"axis", int64_t{axis}}})[0], x.shape(), want);
  }
}

TEST_F(GenericReduce, LayerNormalizationMeanAndInvStdDev) {
  for (int axis : {-1, 1}) {
    SCOPED_TRACE(axis);
    const Shape xs{4, 6, 10};
    const Tensor x = random_tensor(xs, 77, -2.f, 3.f);
    const int a = axis < 0 ? axis + 3 : axis;
    int64_t rows = 1, n = 1;
    std::vector<int64_t> ndims, stat_dims;
    for (int d = 0; d < 3; ++d) {
      (d < a ? rows : n) *= xs[d];
      if (d >= a) ndims.push_back(xs[d]);
      stat_dims.push_back(d < a ? xs[d] : 1);
    }
    const Tensor scale = random_tensor(Shape(ndims), 78), bias = random_tensor(Shape(ndims), 79);
    const std::vector<double> xv = to_doubles(x), sv = to_doubles(scale), bv = to_doubles(bias);
    std::vector<double> y(xv.size()), mean(rows), inv(rows);
    for (int64_t r = 0; r < rows; ++r) {
      double m = 0, v = 0;
      for (int64_t j = 0; j < n; ++j) m += xv[r * n + j];
      m /= n;
      for (int64_t j = 0; j < n; ++j) v += (xv[r * n + j] - m) * (xv[r * n + j] - m);
      const double is = 1 / std::sqrt(v / n + 1e-5);
      mean[r] = m;
      inv[r] = is;
      for (int64_t j = 0; j < n; ++j) y[r * n + j] = (xv[r * n + j] - m) * is * sv[j] + bv[j];
    }
    const std::vector<Tensor> got =
        run_checked("LayerNormalization", {x, scale, bias}, {{"axis", int64_t{axis}}}, 3);
    expect_close(got[0], xs, y, 1e-4, 1e-4);
    expect_close(got[1], Shape(stat_dims), mean, 1e-5, 1e-4);
    expect_close(got[2], Shape(stat_dims), inv, 1e-4, 1e-4);
  }
}

TEST_F(GenericReduce, InstanceNormalization) {
  const Shape xs{2, 3, 7, 9};
  const Tensor x = random_tensor(xs, 88, -2.f, 3.f);
  const Tensor scale = random_tensor({3}, 89), bias = random_tensor({3}, 90);
  const std::vector<double> xv = to_doubles(x), sv = to_doubles(scale), bv = to_doubles(bias);
  const int64_t n = 7 * 9;
  std::vector<double> want(xv.size());
  for (int64_t row = 0; row < 6; ++row) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < n; ++j) m += xv[row * n + j];
    m /= n;
    for (int64_t j = 0; j < n; ++j) v += (xv[row * n + j] - m) * (xv[row * n + j] - m);
    const double is = 1 / std::sqrt(v / n + 1e-3);
    for (int64_t j = 0; j < n; ++j)
      want[row * n + j] = (xv[row * n + j] - m) * is * sv[row % 3] + bv[row % 3];
  }
  expect_close(run_checked("InstanceNormalization", {x, scale, bias}, {{"epsilon", 1e-3f}})[0], xs,
               want, 1e-4, 1e-4);
}

TEST_F(GenericReduce, LossOpsEveryReduction) {
  const int64_t n = 3, c = 5, inner = 4;
  const Tensor x = random_tensor({n, c, 2, 2}, 101, -3.f, 1.f);
  const Tensor w = random_tensor({c}, 102, 0.5f, 2.f);
  Tensor target = random_ints({n, 2, 2}, 103, 0, c - 1);
  target.data<int64_t>()[5] = 2;  // ignore_index below
  const std::vector<double> xv = to_doubles(x), wv = to_doubles(w), tv = to_doubles(target);
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    const bool softmax = std::string(op) == "SoftmaxCrossEntropyLoss";
    // The scores each loss reads: x, or its log-softmax over the classes.
    std::vector<double> score = xv;
    if (softmax)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < inner; ++p) {
          double m = -INFINITY, sum = 0;
          for (int64_t k = 0; k < c; ++k) m = std::max(m, xv[(i * c + k) * inner + p]);
          for (int64_t k = 0; k < c; ++k) sum += std::exp(xv[(i * c + k) * inner + p] - m);
          for (int64_t k = 0; k < c; ++k)
            score[(i * c + k) * inner + p] = xv[(i * c + k) * inner + p] - m - std::log(sum);
        }
    for (const char* red : {"none", "sum", "mean"}) {
      for (int weighted : {0, 1}) {
        SCOPED_TRACE(std::string(op) + " " + red + (weighted ? " weighted" : ""));
        std::vector<double> loss;
        double total = 0, weights = 0;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t p = 0; p < inner; ++p) {
            const int64_t t = static_cast<int64_t>(tv[i * inner + p]);
            const double wt = t == 2 ? 0 : weighted ? wv[t] : 1;
            const double l = t == 2 ? 0 : -score[(i * c + t) * inner + p] * wt;
            loss.push_back(l);
            total += l;
            weights += wt;
          }
        // Constant targets (cuda_runtime_indices_test covers targets given at run time).
        std::vector<OpInput> inputs = {x, constant(target)};
        if (weighted) inputs.push_back(w);
        const Attributes attrs = {{"reduction", red}, {"ignore_index", int64_t{2}}};
        const std::vector<Tensor> got = run_checked(op, inputs, attrs, softmax ? 2 : 1);
        if (std::string(red) == "none")
          expect_close(got[0], Shape{n, 2, 2}, loss, 1e-5, 1e-4);
        else
          expect_close(got[0], Shape{}, {std::string(red) == "sum" ? total : total / weights}, 1e-4,
                       1e-4);
        if (softmax) expect_close(got[1], x.shape(), score, 1e-5, 1e-4);
      }
    }
  }
}

TEST_F(GenericReduce, BadAxesAreErrors) {
  const Tensor x = random_tensor({3, 4}, 87);
  expect_error<Error>(
      [&] {
        run_checked("ReduceSum", {x, constant(Tensor::from_vector<int64_t>({1}, {5}))});
      },
      "ReduceSum");
  expect_error<Error>([&] { run_checked("ArgMax", {x}, {{"axis", int64_t{2}}}); }, "ArgMax");
}

}  // namespace
}  // namespace lumen::test
