// Tests of the optimizer ops of ai.onnx.preview.training (Adagrad, Adam, Momentum in standard
// and Nesterov mode) and of TfIdfVectorizer against plain-loop references on random data, and of
// their refusals of bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::expect_close;
using test::expect_error;
using test::OpInput;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

// --- optimizers -------------------------------------------------------------------------------

// One optimized tensor's inputs by role (X, G, then the states) as doubles.
using Group = std::vector<std::vector<double>>;

// The optimizers' update rules of ONNX's spec, per element; out[role] for X_new and the states.
struct OptimizerRef {
  std::string op;
  Attributes attrs;

  // The attribute as the node stores it (float), or the spec's default.
  double attr(const char* name, float fallback) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? fallback : it->second.as_float();
  }

  std::vector<double> step(double r, int64_t t, const std::vector<double>& in) const {
    const double norm = attr("norm_coefficient", 0.0f);
    const double g = norm * in[0] + in[1];
    if (op == "Adagrad") {
      const double rate = r / (1.0 + t * attr("decay_factor", 0.0f));
      const double h = in[2] + g * g;
      return {in[0] - rate * g / (std::sqrt(h) + attr("epsilon", 1e-6f)), h};
    }
    if (op == "Adam") {
      const double alpha = attr("alpha", 0.9f), beta = attr("beta", 0.999f);
      const double v = alpha * in[2] + (1 - alpha) * g;
      const double h = beta * in[3] + (1 - beta) * g * g;
      double rate = r;
      if (t > 0) rate = r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t));
      const double x = in[0] - rate * v / (std::sqrt(h) + attr("epsilon", 1e-6f));
      return {(1 - attr("norm_coefficient_post", 0.0f)) * x, v, h};
    }
    const double alpha = attr("alpha", 0.0f);
    const double v = alpha * in[2] + (t > 0 ? attr("beta", 0.0f) : 1.0) * g;
    const bool nesterov = attrs.at("mode").as_string() == "nesterov";
    return {in[0] - r * (nesterov ? g + alpha * v : v), v};
  }
};

// Runs `op` over tensors of `shapes` (random X, G; non-negative states) at (r, t) and checks
// every output against OptimizerRef. `outputs` < 0 takes all the op's outputs.
void check_optimizer(const std::string& op, const Attributes& attrs,
                     const std::vector<Shape>& shapes, double r, int64_t t, DType dtype,
                     uint64_t seed, int outputs = -1) {
  const int roles_in = op == "Adam" ? 4 : 3, roles_out = op == "Adam" ? 3 : 2;
  const int n = static_cast<int>(shapes.size());
  std::vector<std::vector<Tensor>> by_role(roles_in);
  for (int role = 0; role < roles_in; ++role)
    for (int i = 0; i < n; ++i) {
      Tensor f = random_tensor(shapes[i], seed + 97 * role + i, role >= 2 ? 0.0f : -2.0f, 2.0f);
      if (dtype == DType::kFloat64) {
        std::vector<double> v = to_doubles(f);
        for (double& e : v) e += 1e-3 * std::sin(e * 1e3);  // use double's extra bits
        f = Tensor::from_vector<double>(shapes[i], v);
      }
      by_role[role].push_back(f);
    }
  std::vector<OpInput> inputs;
  if (dtype == DType::kFloat64)
    inputs.emplace_back(Tensor::scalar<double>(r));
  else
    inputs.emplace_back(Tensor::scalar<float>(static_cast<float>(r)));
  inputs.emplace_back(Tensor::scalar<int64_t>(t));
  for (const auto& tensors : by_role)
    for (const Tensor& x : tensors) inputs.emplace_back(x);
  if (outputs < 0) outputs = roles_out * n;
  std::vector<Tensor> got = run_op(op, inputs, attrs, outputs);
  ASSERT_EQ(static_cast<int>(got.size()), outputs);

  const double rr = dtype == DType::kFloat64 ? r : static_cast<double>(static_cast<float>(r));
  const OptimizerRef ref{op, attrs};
  for (int i = 0; i < n; ++i) {
    std::vector<std::vector<double>> in(roles_in);
    for (int role = 0; role < roles_in; ++role) in[role] = to_doubles(by_role[role][i]);
    std::vector<std::vector<double>> want(roles_out);
    for (size_t e = 0; e < in[0].size(); ++e) {
      std::vector<double> one(roles_in);
      for (int role = 0; role < roles_in; ++role) one[role] = in[role][e];
      std::vector<double> out = ref.step(rr, t, one);
      for (int role = 0; role < roles_out; ++role) want[role].push_back(out[role]);
    }
    for (int role = 0; role < roles_out; ++role) {
      const int o = role * n + i;
      if (o >= outputs) continue;
      SCOPED_TRACE(op + " output " + std::to_string(o));
      EXPECT_EQ(got[o].dtype(), dtype);
      if (dtype == DType::kFloat64)
        expect_close(got[o], shapes[i], want[role], 1e-12, 1e-12);
      else
        expect_close(got[o], shapes[i], want[role], 1e-5, 1e-5);
    }
  }
}

TEST(Adagrad, MatchesReferenceOnSeveralTensors) {
  const Attributes attrs = {{"norm_coefficient", 0.01}, {"epsilon", 1e-5}, {"decay_factor", 0.1}};
  check_optimizer("Adagrad", attrs, {Shape{3, 4}, Shape{70000}}, 0.2, 3, DType::kFloat32, 1);
  check_optimizer("Adagrad", attrs, {Shape{5}}, 0.1, 0, DType::kFloat32, 2);
  check_optimizer("Adagrad", {}, {Shape{2, 3}, Shape{4}}, 0.3, 7, DType::kFloat64, 3);
}

TEST(Adam, MatchesReferenceWithAndWithoutBiasCorrection) {
  const Attributes attrs = {{"norm_coefficient", 0.001},
                            {"alpha", 0.95},
                            {"beta", 0.85},
                            {"epsilon", 1e-2},
                            {"norm_coefficient_post", 0.05}};
  check_optimizer("Adam", attrs, {Shape{3, 4}, Shape{6}}, 0.1, 0, DType::kFloat32, 4);
  check_optimizer("Adam", attrs, {Shape{40000}, Shape{2, 2, 2}}, 0.1, 5, DType::kFloat32, 5);
  check_optimizer("Adam", {}, {Shape{7}}, 0.01, 2, DType::kFloat64, 6);
}

TEST(Adam, WritesOnlyTheOutputsTheNodeHas) {
  const Attributes attrs = {{"alpha", 0.9}, {"beta", 0.99}};
  check_optimizer("Adam", attrs, {Shape{3}, Shape{2, 2}}, 0.1, 1, DType::kFloat32, 7, 2);
  check_optimizer("Adam", attrs, {Shape{3}, Shape{2, 2}}, 0.1, 1, DType::kFloat32, 8, 3);
}

TEST(Momentum, StandardAndNesterov) {
  for (const char* mode : {"standard", "nesterov"}) {
    SCOPED_TRACE(mode);
    const Attributes attrs = {
        {"norm_coefficient", 0.01}, {"alpha", 0.95}, {"beta", 0.3}, {"mode", mode}};
    check_optimizer("Momentum", attrs, {Shape{3, 4}, Shape{5}}, 0.1, 0, DType::kFloat32, 9);
    check_optimizer("Momentum", attrs, {Shape{50000}}, 0.1, 4, DType::kFloat32, 10);
    check_optimizer("Momentum", attrs, {Shape{2, 3}}, 0.05, 2, DType::kFloat64, 11);
  }
}

TEST(Optimizers, RefuseBadInput) {
  const Tensor r = Tensor::scalar<float>(0.1f), t = Tensor::scalar<int64_t>(1);
  const Tensor x = random_tensor(Shape{3}, 1), g = random_tensor(Shape{3}, 2);
  const Tensor h = random_tensor(Shape{3}, 3, 0.0f, 1.0f), bad = random_tensor(Shape{4}, 4);
  const Attributes momentum = {
      {"norm_coefficient", 0.0}, {"alpha", 0.9}, {"beta", 1.0}, {"mode", "standard"}};
  // A gradient of another shape than X.
  expect_error<ShapeError>([&] { run_op("Adagrad", {r, t, x, bad, h}, {}, 2); }, "Adagrad");
  // Inputs that are not whole groups of X, G, V, H.
  expect_error<InvalidModel>([&] { run_op("Adam", {r, t, x, g, h, h, x}, {}, 3); }, "Adam");
  // More outputs than tensors to update.
  expect_error<InvalidModel>([&] { run_op("Momentum", {r, t, x, g, h}, momentum, 3); }, "Momentum");
  // T must be int64, R a floating-point scalar.
  expect_error<ShapeError>(
      [&] {
        run_op("Momentum", {r, Tensor::scalar<float>(1.0f), x, g, h}, momentum, 2);
      },
      "Momentum");
  expect_error<ShapeError>([&] { run_op("Adagrad", {x, t, x, g, h}, {}, 2); }, "Adagrad");
  // X of another dtype than float32 or float64.
  const Tensor xi = random_ints(Shape{3}, 5, 0, 3), gi = random_ints(Shape{3}, 6, 0, 3);
  expect_error<ShapeError>([&] { run_op("Adagrad", {r, t, xi, gi, xi}, {}, 2); }, "Adagrad");
  // Momentum's mode, and its required attributes.
  Attributes odd = momentum;
  odd["mode"] = "heavy-ball";
  expect_error<InvalidModel>([&] { run_op("Momentum", {r, t, x, g, h}, odd, 2); }, "Momentum");
  expect_error<InvalidModel>([&] { run_op("Momentum", {r, t, x, g, h}, {}, 2); }, "Momentum");
}

// --- TfIdfVectorizer ----------------------------------------------------------------------------

// A random pool: `per_size[k]` distinct (k+1)-grams over items 0..vocab-1.
struct Pool {
  std::vector<int64_t> items;   // pool_int64s
  std::vector<int64_t> starts;  // ngram_counts
  std::vector<std::vector<int64_t>> ngrams;
};

Pool random_pool(const std::vector<int>& per_size, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> item(0, vocab - 1);
  Pool p;
  for (size_t k = 0; k < per_size.size(); ++k) {
    p.starts.push_back(static_cast<int64_t>(p.items.size()));
    std::set<std::vector<int64_t>> seen;
    while (static_cast<int>(seen.size()) < per_size[k]) {
      std::vector<int64_t> g(k + 1);
      for (int64_t& v : g) v = item(rng);
      if (!seen.insert(g).second) continue;
      p.ngrams.push_back(g);
      p.items.insert(p.items.end(), g.begin(), g.end());
    }
  }
  return p;
}

// The counts of each pool n-gram of length in [min_n, max_n] in `row`, with items taken d apart
// for every d in 1..max_skip+1 (1-grams once), put on coordinates `indexes` and then weighted.
std::vector<double> ref_tfidf_row(const std::vector<int64_t>& row, const Pool& pool,
                                  const std::vector<int64_t>& indexes, int64_t width, int64_t min_n,
                                  int64_t max_n, int64_t max_skip, const std::string& mode,
                                  const std::vector<float>& weights) {
  std::vector<double> y(width, 0.0);
  const int64_t cols = static_cast<int64_t>(row.size());
  for (size_t k = 0; k < pool.ngrams.size(); ++k) {
    const std::vector<int64_t>& g = pool.ngrams[k];
    const int64_t n = static_cast<int64_t>(g.size());
    if (n < min_n || n > max_n) continue;
    int64_t count = 0;
    for (int64_t d = 1; d <= (n == 1 ? 1 : max_skip + 1); ++d)
      for (int64_t s = 0; s + (n - 1) * d < cols; ++s) {
        bool match = true;
        for (int64_t j = 0; j < n && match; ++j) match = row[s + j * d] == g[j];
        count += match ? 1 : 0;
      }
    y[indexes[k]] += static_cast<double>(count);
  }
  for (int64_t c = 0; c < width; ++c) {
    const double w = weights.empty() ? 1.0 : weights[c];
    if (mode == "IDF") y[c] = y[c] > 0 ? w : 0.0;
    if (mode == "TFIDF")
      y[c] = static_cast<double>(static_cast<float>(y[c]) * static_cast<float>(w));
  }
  return y;
}

void check_tfidf(const Shape& shape, DType dtype, const std::vector<int>& per_size, int64_t min_n,
                 int64_t max_n, int64_t max_skip, const std::string& mode, bool weighted,
                 uint64_t seed) {
  SCOPED_TRACE("tfidf seed " + std::to_string(seed) + " mode " + mode);
  const int64_t vocab = 4;
  const Pool pool = random_pool(per_size, vocab, seed);
  std::vector<int64_t> indexes(pool.ngrams.size());
  for (size_t k = 0; k < indexes.size(); ++k) indexes[k] = static_cast<int64_t>(k);
  std::shuffle(indexes.begin(), indexes.end(), std::mt19937_64(seed + 1));
  const int64_t width = static_cast<int64_t>(indexes.size());
  std::vector<float> weights;
  if (weighted) {
    std::mt19937_64 rng(seed + 2);
    std::uniform_real_distribution<float> w(0.1f, 3.0f);
    for (size_t k = 0; k < indexes.size(); ++k) weights.push_back(w(rng));
  }
  Attributes attrs = {{"mode", mode},
                      {"min_gram_length", min_n},
                      {"max_gram_length", max_n},
                      {"max_skip_count", max_skip},
                      {"ngram_counts", pool.starts},
                      {"ngram_indexes", indexes},
                      {"pool_int64s", pool.items}};
  if (weighted) attrs["weights"] = weights;
  // Items beyond the vocabulary are never in the pool.
  const Tensor x = random_ints(shape, seed + 3, 0, vocab, dtype);
  const Tensor y = run_op("TfIdfVectorizer", {x}, attrs)[0];

  const std::vector<double> xv = to_doubles(x);
  const int64_t rows = shape.rank() == 2 ? shape[0] : 1, cols = shape[-1];
  std::vector<double> want;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> row(cols);
    for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<int64_t>(xv[r * cols + c]);
    std::vector<double> part =
        ref_tfidf_row(row, pool, indexes, width, min_n, max_n, max_skip, mode, weights);
    want.insert(want.end(), part.begin(), part.end());
  }
  const Shape want_shape = shape.rank() == 2 ? Shape{rows, width} : Shape{width};
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  expect_close(y, want_shape, want, 0.0, 1e-6);
}

TEST(TfIdfVectorizer, CountsMatchReference) {
  check_tfidf(Shape{6, 15}, DType::kInt32, {3, 6}, 1, 2, 0, "TF", false, 21);
  check_tfidf(Shape{6, 15}, DType::kInt64, {3, 6}, 1, 2, 3, "TF", false, 22);
  check_tfidf(Shape{40}, DType::kInt64, {2, 5, 8}, 2, 3, 2, "TF", false, 23);
  check_tfidf(Shape{5, 30}, DType::kInt32, {4, 4, 6}, 1, 3, 4, "TF", false, 24);
  check_tfidf(Shape{3, 9}, DType::kInt32, {4, 4}, 1, 1, 2, "TF", false, 25);
  check_tfidf(Shape{300, 64}, DType::kInt64, {4, 10, 20}, 1, 3, 3, "TF", false, 26);
}

TEST(TfIdfVectorizer, IdfAndTfIdfWeights) {
  for (const char* mode : {"IDF", "TFIDF"})
    for (bool weighted : {false, true}) {
      check_tfidf(Shape{4, 20}, DType::kInt64, {3, 6, 5}, 1, 3, 2, mode, weighted, 31);
      check_tfidf(Shape{25}, DType::kInt32, {0, 6}, 2, 2, 1, mode, weighted, 32);
    }
}

TEST(TfIdfVectorizer, SpecExampleAndSparseIndexes) {
  // The spec's example: 2-grams with skip 2 of [94, 17, 36, 12, 28] are [94, 12] and [17, 28].
  const Tensor x = Tensor::from_vector<int64_t>(Shape{5}, {94, 17, 36, 12, 28});
  const Attributes attrs = {{"mode", "TF"},
                            {"min_gram_length", 2},
                            {"max_gram_length", 2},
                            {"max_skip_count", 2},
                            {"ngram_counts", {0, 0}},
                            {"ngram_indexes", {4, 1, 0}},
                            {"pool_int64s", {94, 12, 17, 28, 36, 28}}};
  const Tensor y = run_op("TfIdfVectorizer", {x}, attrs)[0];
  // [36, 28] is 2 apart (skip 1); coordinates 2 and 3 name no n-gram.
  expect_close(y, Shape{5}, {1, 1, 0, 0, 1}, 0.0, 0.0);
}

TEST(TfIdfVectorizer, RefusesBadInput) {
  const Tensor x = random_ints(Shape{2, 5}, 1, 0, 3, DType::kInt64);
  const Attributes good = {{"mode", "TF"},
                           {"min_gram_length", 1},
                           {"max_gram_length", 2},
                           {"max_skip_count", 0},
                           {"ngram_counts", {0, 2}},
                           {"ngram_indexes", {0, 1, 2}},
                           {"pool_int64s", {1, 2, 1, 2}}};
  EXPECT_NO_THROW(run_op("TfIdfVectorizer", {x}, good));
  // String pools and non-integer input are not supported.
  Attributes strings = good;
  strings.erase("pool_int64s");
  strings["pool_strings"] = std::vector<std::string>{"a", "b", "a", "b"};
  expect_error<UnsupportedOp>([&] { run_op("TfIdfVectorizer", {x}, strings); }, "TfIdfVectorizer");
  expect_error<UnsupportedOp>(
      [&] {
        run_op("TfIdfVectorizer", {random_tensor(Shape{2, 5}, 2)}, good);
      },
      "TfIdfVectorizer");
  // X of rank 3.
  expect_error<ShapeError>(
      [&] {
        run_op("TfIdfVectorizer", {random_ints(Shape{1, 2, 5}, 3, 0, 3)}, good);
      },
      "TfIdfVectorizer");
  // A bigram segment of 3 items, too few ngram_indexes, weights of the wrong length, a bad mode.
  Attributes odd = good;
  odd["pool_int64s"] = std::vector<int64_t>{1, 2, 1, 2, 3};
  expect_error<InvalidModel>([&] { run_op("TfIdfVectorizer", {x}, odd); }, "TfIdfVectorizer");
  odd = good;
  odd["ngram_indexes"] = std::vector<int64_t>{0, 1};
  expect_error<InvalidModel>([&] { run_op("TfIdfVectorizer", {x}, odd); }, "TfIdfVectorizer");
  odd = good;
  odd["mode"] = "TFIDF";
  odd["weights"] = std::vector<float>{1.0f, 2.0f};
  expect_error<InvalidModel>([&] { run_op("TfIdfVectorizer", {x}, odd); }, "TfIdfVectorizer");
  odd = good;
  odd["mode"] = "BM25";
  expect_error<InvalidModel>([&] { run_op("TfIdfVectorizer", {x}, odd); }, "TfIdfVectorizer");
  odd = good;
  odd["min_gram_length"] = 3;
  expect_error<InvalidModel>([&] { run_op("TfIdfVectorizer", {x}, odd); }, "TfIdfVectorizer");
}

}  // namespace
}  // namespace lumen
