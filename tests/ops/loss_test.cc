// Tests of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against naive double-precision
// references: every reduction, weights, ignore_index, higher ranks, int32/int64 targets, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::expect_close;
using test::omitted;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

// --- references -------------------------------------------------------------------------------

struct LossRef {
  Shape shape;  // of the loss
  std::vector<double> loss;
  std::vector<double> log_prob;  // SoftmaxCrossEntropyLoss only
};

// Scores x [N, C, d...], targets t [N, d...], weights w [C] (or none).
LossRef ref_loss(const Tensor& x, const Tensor& t, const Tensor* w, const std::string& reduction,
                 std::optional<int64_t> ignore_index, bool softmax) {
  const Shape& xs = x.shape();
  const int64_t n = xs.dims()[0], c = xs.dims()[1];
  int64_t inner = 1;
  for (int d = 2; d < xs.rank(); ++d) inner *= xs.dims()[d];
  std::vector<double> xv = to_doubles(x), tv = to_doubles(t);
  std::vector<double> wv = w ? to_doubles(*w) : std::vector<double>();
  LossRef r;
  // log_prob[n, c, d] = x - log(sum_c exp(x)), evaluated in double.
  std::vector<double> lp = xv;
  if (softmax) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t d = 0; d < inner; ++d) {
        double m = -INFINITY;
        for (int64_t k = 0; k < c; ++k) m = std::max(m, xv[(i * c + k) * inner + d]);
        double s = 0;
        for (int64_t k = 0; k < c; ++k) s += std::exp(xv[(i * c + k) * inner + d] - m);
        for (int64_t k = 0; k < c; ++k)
          lp[(i * c + k) * inner + d] = xv[(i * c + k) * inner + d] - m - std::log(s);
      }
    }
    r.log_prob = lp;
  }
  std::vector<double> per(static_cast<size_t>(n * inner));
  double total = 0, wsum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t d = 0; d < inner; ++d) {
      int64_t k = static_cast<int64_t>(tv[i * inner + d]);
      double v = 0, wk = 0;
      if (!(ignore_index && k == *ignore_index)) {
        wk = w ? wv[k] : 1.0;
        v = -lp[(i * c + k) * inner + d] * wk;
      }
      per[i * inner + d] = v;
      total += v;
      wsum += wk;
    }
  }
  if (reduction == "none") {
    r.shape = t.shape();
    r.loss = per;
  } else {
    r.shape = Shape{};
    r.loss = {reduction == "sum" ? total : total / wsum};
  }
  return r;
}

// Random class targets in [0, C) with about a quarter of them set to ignore_index (when given).
Tensor make_targets(const Shape& shape, int64_t c, uint64_t seed, DType dtype,
                    std::optional<int64_t> ignore_index) {
  Tensor t = random_ints(shape, seed, 0, c - 1, dtype);
  if (!ignore_index) return t;
  Tensor mask = random_ints(shape, seed + 1000, 0, 3, DType::kInt64);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (mask.data<int64_t>()[i] != 0) continue;
    if (dtype == DType::kInt64)
      t.data<int64_t>()[i] = *ignore_index;
    else
      t.data<int32_t>()[i] = static_cast<int32_t>(*ignore_index);
  }
  return t;
}

Attributes loss_attrs(const std::string& reduction, std::optional<int64_t> ignore_index) {
  Attributes a{{"reduction", reduction}};
  if (ignore_index) a["ignore_index"] = *ignore_index;
  return a;
}

struct Case {
  Shape x;
  bool weight;
  std::optional<int64_t> ignore_index;
  DType target_dtype;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<Shape> shapes = {
      {5, 4},    {1, 1},   {3, 7, 6},  {2, 3, 4, 5}, {2, 3, 1, 2, 3, 2},
      {4, 1, 3}, {3, 300}, {2, 5, 300}};
  int i = 0;
  for (const Shape& s : shapes)
    for (bool w : {false, true})
      for (std::optional<int64_t> ii : {std::optional<int64_t>(), std::optional<int64_t>(1),
                                        std::optional<int64_t>(-5), std::optional<int64_t>(99)})
        out.push_back({s, w, ii, (i++ % 2) ? DType::kInt32 : DType::kInt64});
  return out;
}

Shape target_shape(const Shape& x) {
  std::vector<int64_t> d = x.dims();
  d.erase(d.begin() + 1);
  return Shape(d);
}

void check_case(const Case& cs, const std::string& reduction, bool softmax, bool log_prob,
                uint64_t seed) {
  SCOPED_TRACE(cs.x.to_string() + " reduction=" + reduction +
               " weight=" + std::to_string(cs.weight) +
               " ii=" + (cs.ignore_index ? std::to_string(*cs.ignore_index) : "none"));
  const int64_t c = cs.x.dims()[1];
  Tensor x = random_tensor(cs.x, seed, softmax ? -4.0f : -1.0f, softmax ? 4.0f : 1.0f);
  Tensor t = make_targets(target_shape(cs.x), c, seed + 1, cs.target_dtype, cs.ignore_index);
  Tensor w = random_tensor(Shape{c}, seed + 2, 0.2f, 2.0f);
  LossRef ref = ref_loss(x, t, cs.weight ? &w : nullptr, reduction, cs.ignore_index, softmax);
  const char* op = softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
  std::vector<Tensor> out = run_op(op, {x, t, cs.weight ? test::OpInput(w) : omitted()},
                                   loss_attrs(reduction, cs.ignore_index), log_prob ? 2 : 1);
  // A mean with every target ignored is 0/0 = NaN in the reference too.
  expect_close(out[0], ref.shape, ref.loss, 1e-5, 1e-4);
  if (log_prob) expect_close(out[1], cs.x, ref.log_prob, 1e-5, 1e-4);
}

// --- NegativeLogLikelihoodLoss ----------------------------------------------------------------

TEST(NegativeLogLikelihoodLoss, EveryReductionWeightAndIgnoreIndex) {
  uint64_t seed = 1;
  for (const Case& cs : cases())
    for (const char* r : {"none", "sum", "mean"}) check_case(cs, r, false, false, seed += 7);
}

TEST(NegativeLogLikelihoodLoss, DefaultReductionIsMean) {
  Tensor x = random_tensor({6, 5, 3}, 11);
  Tensor t = make_targets({6, 3}, 5, 12, DType::kInt64, std::nullopt);
  LossRef ref = ref_loss(x, t, nullptr, "mean", std::nullopt, false);
  expect_close(run_op("NegativeLogLikelihoodLoss", {x, t})[0], Shape{}, ref.loss);
}

TEST(NegativeLogLikelihoodLoss, LargeParallel) {
  for (const Shape& s : {Shape{8192, 16}, Shape{16, 10, 1024}}) {
    Case cs{s, true, 3, DType::kInt64};
    for (const char* r : {"none", "sum", "mean"}) check_case(cs, r, false, false, 21);
  }
}

TEST(NegativeLogLikelihoodLoss, ConstantInputsFold) {
  Tensor x = random_tensor({3, 4}, 31);
  Tensor t = Tensor::from_vector<int64_t>({3}, {0, 3, 2});
  LossRef ref = ref_loss(x, t, nullptr, "sum", std::nullopt, false);
  expect_close(run_op("NegativeLogLikelihoodLoss", {test::constant(x), test::constant(t)},
                      {{"reduction", "sum"}})[0],
               Shape{}, ref.loss);
}

TEST(NegativeLogLikelihoodLoss, EmptyBatch) {
  Tensor x = random_tensor({0, 3, 2}, 41);
  Tensor t = Tensor::zeros({0, 2}, DType::kInt64);
  expect_close(run_op("NegativeLogLikelihoodLoss", {x, t}, {{"reduction", "none"}})[0], Shape{0, 2},
               {});
  expect_close(run_op("NegativeLogLikelihoodLoss", {x, t}, {{"reduction", "sum"}})[0], Shape{},
               {0.0});
  expect_close(run_op("NegativeLogLikelihoodLoss", {x, t}, {{"reduction", "mean"}})[0], Shape{},
               {NAN});
}

TEST(NegativeLogLikelihoodLoss, AllIgnoredMeanIsNaN) {
  Tensor x = random_tensor({2, 3}, 51);
  Tensor t = Tensor::from_vector<int64_t>({2}, {-1, -1});
  Tensor out = run_op("NegativeLogLikelihoodLoss", {x, t}, {{"ignore_index", -1}})[0];
  EXPECT_TRUE(std::isnan(out.item_as_double()));
}

// --- SoftmaxCrossEntropyLoss ------------------------------------------------------------------

TEST(SoftmaxCrossEntropyLoss, EveryReductionWeightAndIgnoreIndex) {
  uint64_t seed = 2;
  for (const Case& cs : cases())
    for (const char* r : {"none", "sum", "mean"}) check_case(cs, r, true, false, seed += 7);
}

TEST(SoftmaxCrossEntropyLoss, LogProbOutput) {
  uint64_t seed = 3;
  for (const Case& cs : cases())
    for (const char* r : {"none", "mean"}) check_case(cs, r, true, true, seed += 7);
}

TEST(SoftmaxCrossEntropyLoss, LargeParallel) {
  for (const Shape& s : {Shape{8192, 16}, Shape{16, 10, 1024}}) {
    Case cs{s, true, 3, DType::kInt32};
    for (const char* r : {"none", "mean"}) check_case(cs, r, true, true, 61);
    check_case(cs, "sum", true, false, 62);
  }
}

TEST(SoftmaxCrossEntropyLoss, StableForLargeScores) {
  // exp(1000) overflows float; the log-softmax must shift by the maximum first.
  Tensor x = Tensor::from_vector<float>({2, 3, 2}, {1000, -1000, 1001, 0, 999, 1000,  //
                                                    -50, 2000, -51, 2001, -52, 1999});
  Tensor t = Tensor::from_vector<int64_t>({2, 2}, {0, 2, 1, 1});
  LossRef ref = ref_loss(x, t, nullptr, "none", std::nullopt, true);
  std::vector<Tensor> out = run_op("SoftmaxCrossEntropyLoss", {x, t}, {{"reduction", "none"}}, 2);
  expect_close(out[0], Shape{2, 2}, ref.loss);
  expect_close(out[1], Shape{2, 3, 2}, ref.log_prob);
}

TEST(SoftmaxCrossEntropyLoss, EmptyBatch) {
  Tensor x = random_tensor({0, 4}, 71);
  Tensor t = Tensor::zeros({0}, DType::kInt32);
  std::vector<Tensor> out = run_op("SoftmaxCrossEntropyLoss", {x, t}, {{"reduction", "sum"}}, 2);
  expect_close(out[0], Shape{}, {0.0});
  expect_close(out[1], Shape{0, 4}, {});
}

// --- bad input ----------------------------------------------------------------------------------

class LossErrors : public ::testing::TestWithParam<const char*> {};

TEST_P(LossErrors, BadShapesDtypesAndAttributes) {
  const std::string op = GetParam();
  Tensor x = random_tensor({4, 3, 2}, 81);
  Tensor t = random_ints({4, 2}, 82, 0, 2);
  Tensor w = random_tensor({3}, 83);
  // Target shape does not match [N, d1, ...].
  EXPECT_THROW(run_op(op, {x, random_ints({4, 3}, 84, 0, 2)}), ShapeError);
  EXPECT_THROW(run_op(op, {x, random_ints({4}, 84, 0, 2)}), ShapeError);
  EXPECT_THROW(run_op(op, {x, random_ints({5, 2}, 84, 0, 2)}), ShapeError);
  // Weights of the wrong size, rank or dtype.
  EXPECT_THROW(run_op(op, {x, t, random_tensor({4}, 85)}), ShapeError);
  EXPECT_THROW(run_op(op, {x, t, random_tensor({1, 3}, 85)}), ShapeError);
  EXPECT_THROW(run_op(op, {x, t, random_ints({3}, 85, 0, 2)}), ShapeError);
  // Scores of rank 1, integer scores, float targets.
  EXPECT_THROW(run_op(op, {random_tensor({3}, 86), random_ints({}, 86, 0, 2)}), ShapeError);
  EXPECT_THROW(run_op(op, {random_ints({4, 3, 2}, 86, 0, 2), t}), ShapeError);
  EXPECT_THROW(run_op(op, {x, random_tensor({4, 2}, 86)}), ShapeError);
  // Bad attributes.
  EXPECT_THROW(run_op(op, {x, t}, {{"reduction", "max"}}), InvalidModel);
  EXPECT_THROW(run_op(op, {x, t}, {{"reduction", 1}}), InvalidModel);
  EXPECT_THROW(run_op(op, {x, t}, {{"axis", 1}}), InvalidModel);
  // float64 scores, which the CPU kernel takes only as float32, run between Casts.
  Tensor x64 = Tensor::from_vector<double>({2, 2}, {0.1, 0.2, 0.3, 0.4});
  EXPECT_EQ(run_op(op, {x64, random_ints({2}, 87, 0, 1)})[0].dtype(), DType::kFloat64);
  EXPECT_NO_THROW(run_op(op, {x, t, w}));
}

TEST_P(LossErrors, TargetOutOfRangeAtRunTime) {
  const std::string op = GetParam();
  Tensor x = random_tensor({3, 4}, 91);
  for (const char* r : {"none", "sum", "mean"}) {
    EXPECT_THROW(run_op(op, {x, Tensor::from_vector<int64_t>({3}, {0, 4, 1})}, {{"reduction", r}}),
                 InvalidArgument);
    EXPECT_THROW(run_op(op, {x, Tensor::from_vector<int32_t>({3}, {0, -1, 1})}, {{"reduction", r}}),
                 InvalidArgument);
    // -1 is fine once it is the ignore_index, but another negative value is not.
    EXPECT_NO_THROW(run_op(op, {x, Tensor::from_vector<int64_t>({3}, {0, -1, 1})},
                           {{"reduction", r}, {"ignore_index", -1}}));
    EXPECT_THROW(run_op(op, {x, Tensor::from_vector<int64_t>({3}, {0, -2, 1})},
                        {{"reduction", r}, {"ignore_index", -1}}),
                 InvalidArgument);
  }
  Tensor x3 = random_tensor({2, 3, 5}, 92);
  Tensor t3 = random_ints({2, 5}, 93, 0, 2);
  t3.data<int64_t>()[7] = 3;
  EXPECT_THROW(run_op(op, {x3, t3}), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Loss, LossErrors,
                         ::testing::Values("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"));

}  // namespace
}  // namespace lumen
