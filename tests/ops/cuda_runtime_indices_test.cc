// Gathers, scatters and loss ops whose indices (targets) come at run time: every output element
// against a plain-loop reference over several runs of one executable (on CUDA: eager, recorded,
// replayed), out-of-range indices (positive and negative) raise InvalidArgument naming the node
// on every path (the first run, a replay, a profiled step-by-step run), and the executable stays
// usable. Run with --lumen-backends=cuda,cpu on a GPU machine, where each node must be placed on
// CUDA and recorded as a CUDA graph; with the default backends it checks the host's kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/backend_check_util.h"

namespace lumen::test {
namespace {

bool on_cuda() {
  return run_op_backends().front() == "cuda";
}

Tensor ids(const Shape& shape, const std::vector<int64_t>& v, DType dtype = DType::kInt64) {
  if (dtype == DType::kInt32)
    return Tensor::from_vector<int32_t>(shape, std::vector<int32_t>(v.begin(), v.end()));
  return Tensor::from_vector<int64_t>(shape, v);
}

// Uniform random indices in [-n, n) (or [0, n) without `negative`).
std::vector<int64_t> random_indices(int64_t count, int64_t n, uint64_t seed, bool negative = true) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(negative ? -n : 0, n - 1);
  std::vector<int64_t> v(static_cast<size_t>(count));
  for (int64_t& x : v) x = dist(rng);
  return v;
}

int64_t wrap(int64_t i, int64_t n) {
  return i < 0 ? i + n : i;
}

// `count` distinct indices of [0, n), each written negative (from the end) at random.
std::vector<int64_t> distinct_indices(int64_t count, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) all[k] = k;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(count));
  for (int64_t& x : all)
    if (rng() % 2) x -= n;
  return all;
}

// A bad input set: the inputs, and the value and range the error must name.
struct BadRun {
  std::vector<Tensor> inputs;
  int64_t value = 0;
  int64_t lo = 0, hi = 0;
};

struct Case {
  std::string op;
  Attributes attrs;
  std::function<std::vector<Tensor>(uint64_t seed)> make;  // every input given at run time
  std::function<std::vector<double>(const std::vector<Tensor>&)> reference;
  std::function<std::vector<BadRun>()> bad;
  double atol = 1e-6, rtol = 1e-5;
};

// The range an error message must name: "out of range [lo, hi)" on CUDA; the host's Gather words
// it differently ("out of range for axis 0 of size 50"), so there only "out of range".
std::string range_text(int64_t lo, int64_t hi) {
  if (!on_cuda()) return "out of range";
  return "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

// Runs `exe` on `bad` and checks the error: InvalidArgument naming the node, the value and range.
void expect_bad(Executable* exe, const std::string& op, const BadRun& bad,
                RunProfile* profile = nullptr) {
  try {
    if (profile != nullptr)
      exe->execute(bad.inputs, profile);
    else
      exe->execute(bad.inputs);
    ADD_FAILURE() << op << ": no error for index " << bad.value;
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("node 'node' (" + op + ")"), std::string::npos) << what;
    EXPECT_NE(what.find(" " + std::to_string(bad.value) + " "), std::string::npos) << what;
    EXPECT_NE(what.find(range_text(bad.lo, bad.hi)), std::string::npos) << what;
  }
}

Executable* compile_case(Runtime& rt, const Case& c, const std::vector<Tensor>& inputs) {
  CompileOptions options;
  options.backends = run_op_backends();
  std::vector<OpInput> op_inputs(inputs.begin(), inputs.end());
  std::vector<Tensor> unused;
  Executable* exe = compile_op(rt, c.op, op_inputs, c.attrs, 1, options, &unused);
  if (on_cuda())
    EXPECT_EQ(backend_of_step(exe->summary(), "node"), "cuda") << c.op << "\n" << exe->summary();
  return exe;
}

void check_run(Executable* exe, const Case& c, uint64_t seed) {
  const std::vector<Tensor> inputs = c.make(seed);
  const std::vector<Tensor> got = exe->execute(inputs);
  ASSERT_EQ(got.size(), 1u);
  const std::vector<double> want = c.reference(inputs);
  ASSERT_EQ(static_cast<size_t>(got[0].numel()), want.size()) << c.op;
  expect_close(got[0], got[0].shape(), want, c.atol, c.rtol);
}

void run_case(const Case& c) {
  LUMEN_SKIP_WITHOUT_BACKENDS();
  const std::vector<BadRun> bad = c.bad();
  ASSERT_FALSE(bad.empty());
  {
    // Good runs with new indices each time (on CUDA: eager warm-up, recorded, replays), then
    // bad ones, each followed by a good run.
    Runtime rt;
    Executable* exe = compile_case(rt, c, c.make(1));
    for (uint64_t seed = 1; seed <= 4; ++seed) check_run(exe, c, seed);
    if (on_cuda())
      EXPECT_NE(exe->summary().find("recorded as one device graph"), std::string::npos)
          << exe->summary();
    uint64_t seed = 10;
    for (const BadRun& b : bad) {
      expect_bad(exe, c.op, b);
      check_run(exe, c, seed++);
    }
    // A profiled run goes step by step and raises at the failing step.
    RunProfile profile;
    expect_bad(exe, c.op, bad.front(), &profile);
    check_run(exe, c, seed++);
  }
  {
    // The very first run is a bad one (on CUDA the warm-up run before recording).
    Runtime rt;
    Executable* exe = compile_case(rt, c, c.make(1));
    expect_bad(exe, c.op, bad.back());
    check_run(exe, c, 20);
    check_run(exe, c, 21);
  }
}

// ---- Gather ----

Case gather_case(int axis, DType index_dtype) {
  const Shape data{5, 7, 3};
  const Shape idx{2, 4};
  Case c;
  c.op = "Gather";
  c.attrs = {{"axis", axis}};
  const int64_t n = data[axis];
  c.make = [=](uint64_t seed) {
    return std::vector<Tensor>{random_tensor(data, seed),
                               ids(idx, random_indices(idx.numel(), n, seed + 100), index_dtype)};
  };
  c.reference = [=](const std::vector<Tensor>& in) {
    const std::vector<double> x = to_doubles(in[0]), k = to_doubles(in[1]);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= data[d];
    for (int d = axis + 1; d < data.rank(); ++d) inner *= data[d];
    std::vector<double> y;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < idx.numel(); ++j)
        for (int64_t i = 0; i < inner; ++i)
          y.push_back(x[(o * n + wrap(static_cast<int64_t>(k[j]), n)) * inner + i]);
    return y;
  };
  c.bad = [=] {
    std::vector<BadRun> runs;
    for (int64_t v : {n, -n - 1, int64_t{50300}}) {
      std::vector<int64_t> k = random_indices(idx.numel(), n, 7);
      k[5] = v;
      runs.push_back({{random_tensor(data, 3), ids(idx, k, index_dtype)}, v, -n, n});
    }
    return runs;
  };
  return c;
}

TEST(CudaRuntimeIndices, GatherAxis0Int64) {
  run_case(gather_case(0, DType::kInt64));
}

TEST(CudaRuntimeIndices, GatherAxis1Int32) {
  run_case(gather_case(1, DType::kInt32));
}

TEST(CudaRuntimeIndices, GatherAxis2Int64) {
  run_case(gather_case(2, DType::kInt64));
}

// ---- GatherElements ----

Case gather_elements_case(int axis, DType index_dtype) {
  const Shape data{4, 5, 6};
  Shape idx = data;
  idx.dims()[axis] = 3;
  Case c;
  c.op = "GatherElements";
  c.attrs = {{"axis", axis}};
  const int64_t n = data[axis];
  c.make = [=](uint64_t seed) {
    return std::vector<Tensor>{random_tensor(data, seed),
                               ids(idx, random_indices(idx.numel(), n, seed + 200), index_dtype)};
  };
  c.reference = [=](const std::vector<Tensor>& in) {
    const std::vector<double> x = to_doubles(in[0]), k = to_doubles(in[1]);
    std::vector<double> y;
    for (int64_t j = 0; j < idx.numel(); ++j) {
      std::vector<int64_t> at = unravel(j, idx);
      at[axis] = wrap(static_cast<int64_t>(k[j]), n);
      y.push_back(x[ravel(at, data)]);
    }
    return y;
  };
  c.bad = [=] {
    std::vector<BadRun> runs;
    for (int64_t v : {n + 2, -n - 1}) {
      std::vector<int64_t> k = random_indices(idx.numel(), n, 8);
      k[idx.numel() - 1] = v;
      runs.push_back({{random_tensor(data, 4), ids(idx, k, index_dtype)}, v, -n, n});
    }
    return runs;
  };
  return c;
}

TEST(CudaRuntimeIndices, GatherElementsAxis1Int64) {
  run_case(gather_elements_case(1, DType::kInt64));
}

TEST(CudaRuntimeIndices, GatherElementsAxis2Int32) {
  run_case(gather_elements_case(2, DType::kInt32));
}

// ---- GatherND (batch_dims 1): data [2, 3, 4, 5], indices [2, 6, 2] -> [2, 6, 5] ----

TEST(CudaRuntimeIndices, GatherNDBatchDims1) {
  const Shape data{2, 3, 4, 5};
  const Shape idx{2, 6, 2};
  Case c;
  c.op = "GatherND";
  c.attrs = {{"batch_dims", 1}};
  auto tuples = [=](uint64_t seed) {
    std::vector<int64_t> a = random_indices(12, 3, seed), b = random_indices(12, 4, seed + 1);
    std::vector<int64_t> v;
    for (int t = 0; t < 12; ++t) {
      v.push_back(a[t]);
      v.push_back(b[t]);
    }
    return v;
  };
  c.make = [=](uint64_t seed) {
    return std::vector<Tensor>{random_tensor(data, seed), ids(idx, tuples(seed + 300))};
  };
  c.reference = [=](const std::vector<Tensor>& in) {
    const std::vector<double> x = to_doubles(in[0]), k = to_doubles(in[1]);
    std::vector<double> y;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t m = 0; m < 6; ++m) {
        const int64_t i0 = wrap(static_cast<int64_t>(k[(b * 6 + m) * 2]), 3);
        const int64_t i1 = wrap(static_cast<int64_t>(k[(b * 6 + m) * 2 + 1]), 4);
        for (int64_t s = 0; s < 5; ++s) y.push_back(x[ravel({b, i0, i1, s}, data)]);
      }
    return y;
  };
  c.bad = [=] {
    std::vector<int64_t> k = tuples(9);
    k[7] = 4;  // the second index of a tuple: range [-4, 4)
    std::vector<int64_t> k2 = tuples(9);
    k2[10] = -4;  // the first index: range [-3, 3)
    return std::vector<BadRun>{{{random_tensor(data, 5), ids(idx, k)}, 4, -4, 4},
                               {{random_tensor(data, 5), ids(idx, k2)}, -4, -3, 3}};
  };
  run_case(c);
}

// ---- ScatterElements ----

// data [4, 6], indices and updates [4, 3] along axis 1: distinct indices per row without a
// reduction (the result is then defined), repeats with one.
Case scatter_elements_case(const std::string& reduction, DType index_dtype) {
  const Shape data{4, 6};
  const Shape idx{4, 3};
  Case c;
  c.op = "ScatterElements";
  c.attrs = {{"axis", 1}, {"reduction", reduction}};
  auto indices = [=](uint64_t seed) {
    if (reduction != "none") return random_indices(idx.numel(), 6, seed);
    std::vector<int64_t> v;
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t x : distinct_indices(3, 6, seed + r)) v.push_back(x);
    return v;
  };
  c.make = [=](uint64_t seed) {
    return std::vector<Tensor>{random_tensor(data, seed),
                               ids(idx, indices(seed + 400), index_dtype),
                               random_tensor(idx, seed + 1)};
  };
  c.reference = [=](const std::vector<Tensor>& in) {
    std::vector<double> y = to_doubles(in[0]);
    const std::vector<double> k = to_doubles(in[1]), u = to_doubles(in[2]);
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t j = 0; j < 3; ++j) {
        double& at = y[r * 6 + wrap(static_cast<int64_t>(k[r * 3 + j]), 6)];
        const double v = u[r * 3 + j];
        at = reduction == "add" ? at + v : reduction == "mul" ? at * v : v;
      }
    return y;
  };
  c.bad = [=] {
    std::vector<BadRun> runs;
    for (int64_t v : {6, -7}) {
      std::vector<int64_t> k = indices(11);
      k[4] = v;
      runs.push_back(
          {{random_tensor(data, 6), ids(idx, k, index_dtype), random_tensor(idx, 7)}, v, -6, 6});
    }
    return runs;
  };
  c.atol = 1e-5;
  return c;
}

TEST(CudaRuntimeIndices, ScatterElementsNoneInt64) {
  run_case(scatter_elements_case("none", DType::kInt64));
}

TEST(CudaRuntimeIndices, ScatterElementsAddInt32) {
  run_case(scatter_elements_case("add", DType::kInt32));
}

// ---- ScatterND: data [5, 4, 3], indices [U, 1], updates [U, 4, 3] ----

Case scatter_nd_case(const std::string& reduction) {
  const Shape data{5, 4, 3};
  const int64_t u = reduction == "none" ? 3 : 6;
  const Shape idx{u, 1};
  const Shape upd{u, 4, 3};
  Case c;
  c.op = "ScatterND";
  c.attrs = {{"reduction", reduction}};
  auto indices = [=](uint64_t seed) {
    return reduction == "none" ? distinct_indices(u, 5, seed) : random_indices(u, 5, seed);
  };
  c.make = [=](uint64_t seed) {
    return std::vector<Tensor>{random_tensor(data, seed), ids(idx, indices(seed + 500)),
                               random_tensor(upd, seed + 1)};
  };
  c.reference = [=](const std::vector<Tensor>& in) {
    std::vector<double> y = to_doubles(in[0]);
    const std::vector<double> k = to_doubles(in[1]), v = to_doubles(in[2]);
    for (int64_t j = 0; j < u; ++j) {
      const int64_t row = wrap(static_cast<int64_t>(k[j]), 5);
      for (int64_t s = 0; s < 12; ++s) {
        double& at = y[row * 12 + s];
        const double w = v[j * 12 + s];
        at = reduction == "add" ? at + w : reduction == "mul" ? at * w : w;
      }
    }
    return y;
  };
  c.bad = [=] {
    std::vector<BadRun> runs;
    for (int64_t v : {5, -6}) {
      std::vector<int64_t> k = indices(12);
      k[u - 1] = v;
      runs.push_back({{random_tensor(data, 8), ids(idx, k), random_tensor(upd, 9)}, v, -5, 5});
    }
    return runs;
  };
  c.atol = 1e-5;
  return c;
}

TEST(CudaRuntimeIndices, ScatterNDNone) {
  run_case(scatter_nd_case("none"));
}

TEST(CudaRuntimeIndices, ScatterNDMul) {
  run_case(scatter_nd_case("mul"));
}

// ---- The loss ops: targets in [0, C), or the ignore_index ----

// NegativeLogLikelihoodLoss over x [3, 5, 2], targets [3, 2], reduction none.
TEST(CudaRuntimeIndices, NegativeLogLikelihoodLossNone) {
  const Shape x{3, 5, 2};
  const Shape t{3, 2};
  Case c;
  c.op = "NegativeLogLikelihoodLoss";
  c.attrs = {{"reduction", "none"}};
  c.make = [=](uint64_t seed) {
    return std::vector<Tensor>{random_tensor(x, seed), ids(t, random_indices(6, 5, seed, false))};
  };
  c.reference = [=](const std::vector<Tensor>& in) {
    const std::vector<double> v = to_doubles(in[0]), k = to_doubles(in[1]);
    std::vector<double> y;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t d = 0; d < 2; ++d)
        y.push_back(-v[ravel({n, static_cast<int64_t>(k[n * 2 + d]), d}, x)]);
    return y;
  };
  c.bad = [=] {
    std::vector<BadRun> runs;
    for (int64_t v : {5, -1}) {
      std::vector<int64_t> k = random_indices(6, 5, 13, false);
      k[3] = v;
      runs.push_back({{random_tensor(x, 10), ids(t, k)}, v, 0, 5});
    }
    return runs;
  };
  run_case(c);
}

// SoftmaxCrossEntropyLoss over x [6, 4], int32 targets [6] with ignore_index -1, reduction mean.
TEST(CudaRuntimeIndices, SoftmaxCrossEntropyLossMeanIgnored) {
  const Shape x{6, 4};
  const Shape t{6};
  Case c;
  c.op = "SoftmaxCrossEntropyLoss";
  c.attrs = {{"reduction", "mean"}, {"ignore_index", -1}};
  auto targets = [=](uint64_t seed) {
    std::vector<int64_t> k = random_indices(6, 4, seed, false);
    k[seed % 6] = -1;
    return k;
  };
  c.make = [=](uint64_t seed) {
    return std::vector<Tensor>{random_tensor(x, seed), ids(t, targets(seed), DType::kInt32)};
  };
  c.reference = [=](const std::vector<Tensor>& in) {
    const std::vector<double> v = to_doubles(in[0]), k = to_doubles(in[1]);
    double total = 0, count = 0;
    for (int64_t n = 0; n < 6; ++n) {
      if (k[n] == -1) continue;
      double sum = 0;
      for (int64_t j = 0; j < 4; ++j) sum += std::exp(v[n * 4 + j]);
      total -= v[n * 4 + static_cast<int64_t>(k[n])] - std::log(sum);
      count += 1;
    }
    return std::vector<double>{total / count};
  };
  c.bad = [=] {
    std::vector<BadRun> runs;
    for (int64_t v : {4, -2}) {
      std::vector<int64_t> k = targets(14);
      k[(14 + 1) % 6] = v;
      runs.push_back({{random_tensor(x, 11), ids(t, k, DType::kInt32)}, v, 0, 4});
    }
    return runs;
  };
  c.atol = 1e-5;
  run_case(c);
}

// ---- A decoder's first step: two Gathers (token and position embeddings) and a MatMul ----

struct Embedder {
  static constexpr int64_t kVocab = 50, kPositions = 8, kDim = 16, kOut = 12;
  static constexpr int64_t kBatch = 2, kSeq = 8;
  Tensor token_table = random_tensor({kVocab, kDim}, 31);
  Tensor position_table = random_tensor({kPositions, kDim}, 32);
  Tensor proj = random_tensor({kDim, kOut}, 33);

  Graph graph() const {
    Graph g;
    Value* input_ids = g.add_input("input_ids", Shape{kBatch, kSeq}, DType::kInt64);
    Value* position_ids = g.add_input("position_ids", Shape{kBatch, kSeq}, DType::kInt64);
    Value* tokens = g.add_op("Gather", {g.add_constant("wte", token_table), input_ids}, {}, "emb");
    Value* positions =
        g.add_op("Gather", {g.add_constant("wpe", position_table), position_ids}, {}, "pos");
    Value* sum = g.add_op("Add", {tokens, positions}, {}, "add");
    g.mark_output(g.add_op("MatMul", {sum, g.add_constant("proj", proj)}, {}, "proj"));
    return g;
  }

  std::vector<Tensor> inputs(uint64_t seed) const {
    return {ids({kBatch, kSeq}, random_indices(kBatch * kSeq, kVocab, seed)),
            ids({kBatch, kSeq}, random_indices(kBatch * kSeq, kPositions, seed + 1))};
  }

  std::vector<double> reference(const std::vector<Tensor>& in) const {
    const std::vector<double> tok = to_doubles(token_table), pos = to_doubles(position_table),
                              w = to_doubles(proj), a = to_doubles(in[0]), b = to_doubles(in[1]);
    std::vector<double> y;
    for (int64_t r = 0; r < kBatch * kSeq; ++r) {
      const int64_t t = wrap(static_cast<int64_t>(a[r]), kVocab);
      const int64_t p = wrap(static_cast<int64_t>(b[r]), kPositions);
      for (int64_t o = 0; o < kOut; ++o) {
        double acc = 0;
        for (int64_t d = 0; d < kDim; ++d)
          acc += (tok[t * kDim + d] + pos[p * kDim + d]) * w[d * kOut + o];
        y.push_back(acc);
      }
    }
    return y;
  }
};

TEST(CudaRuntimeIndices, TwoGathersAndMatMulAllOnCudaAndRecorded) {
  LUMEN_SKIP_WITHOUT_BACKENDS();
  Embedder m;
  Graph g = m.graph();
  Runtime rt;
  CompileOptions options;
  options.backends = run_op_backends();
  Executable* exe = g.compile(&rt, options);
  if (on_cuda()) {
    const std::string summary = exe->summary();
    EXPECT_EQ(backend_of_step(summary, "emb"), "cuda") << summary;
    EXPECT_EQ(backend_of_step(summary, "pos"), "cuda") << summary;
    EXPECT_EQ(summary.find("@cpu"), std::string::npos) << summary;
    EXPECT_NE(summary.find("to be recorded as one device graph"), std::string::npos) << summary;
  }
  auto check = [&](uint64_t seed) {
    const std::vector<Tensor> in = m.inputs(seed);
    const std::vector<Tensor> got = exe->execute(in);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], {Embedder::kBatch, Embedder::kSeq, Embedder::kOut}, m.reference(in), 1e-4,
                 1e-4);
  };
  for (uint64_t seed = 1; seed <= 4; ++seed) check(seed);
  if (on_cuda())
    EXPECT_NE(exe->summary().find("recorded as one device graph that every run replays"),
              std::string::npos)
        << exe->summary();
  // A token id past the vocabulary, then a position id below -8: each names its node, and the
  // next run (a replay) is right.
  const std::vector<std::pair<int, int64_t>> bad = {{0, 50300}, {1, -9}, {0, -51}};
  uint64_t seed = 10;
  for (const auto& [input, value] : bad) {
    std::vector<Tensor> in = m.inputs(seed++);
    in[input].data<int64_t>()[3] = value;
    const std::string node = input == 0 ? "node 'emb' (Gather)" : "node 'pos' (Gather)";
    const int64_t n = input == 0 ? Embedder::kVocab : Embedder::kPositions;
    try {
      exe->execute(in);
      ADD_FAILURE() << "no error for " << value;
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(node), std::string::npos) << what;
      EXPECT_NE(what.find(" " + std::to_string(value) + " "), std::string::npos) << what;
      EXPECT_NE(what.find(range_text(-n, n)), std::string::npos) << what;
    }
    check(seed++);
  }
}

// Per-run time of the two-Gather model (host inputs to host output; on CUDA a replayed graph),
// printed for comparison with a build without the device-side checks (the test asserts nothing
// about it, so it runs on any build that has the public API).
TEST(CudaRuntimeIndices, TimingTwoGathersAndMatMul) {
  LUMEN_SKIP_WITHOUT_BACKENDS();
  Embedder m;
  Graph g = m.graph();
  Runtime rt;
  CompileOptions options;
  options.backends = run_op_backends();
  Executable* exe = g.compile(&rt, options);
  const std::vector<Tensor> in = m.inputs(1);
  for (int w = 0; w < 20; ++w) exe->execute(in);
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    constexpr int kRuns = 500;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < kRuns; ++r) exe->execute(in);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, us / kRuns);
  }
  std::printf("two Gathers + MatMul on %s: %.2f us per run (best of 5 rounds of 500)\n",
              run_op_backends().front().c_str(), best);
}

}  // namespace
}  // namespace lumen::test
