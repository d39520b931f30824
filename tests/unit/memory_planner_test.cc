// The memory planner (src/memory): arena placement checked by an independent overlap test and a
// brute-force lower bound; liveness, views and in-place merging on small step lists; and an
// Executable whose arena is reused across runs and threads without corrupting results.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "lumen/lumen.h"
#include "memory/liveness.h"
#include "memory/planner.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

constexpr size_t kAlign = 64;

size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

// Every pair of tensors alive at a common step must occupy disjoint bytes; offsets are aligned and
// inside the arena.
void expect_valid(const std::vector<TensorLifetime>& t, const ArenaPlan& plan) {
  ASSERT_EQ(plan.offsets.size(), t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % kAlign, 0u);
    EXPECT_LE(plan.offsets[i] + t[i].bytes, plan.arena_bytes);
    for (size_t j = i + 1; j < t.size(); ++j) {
      bool same_time = t[i].first <= t[j].last && t[j].first <= t[i].last;
      bool same_bytes = plan.offsets[i] < plan.offsets[j] + t[j].bytes &&
                        plan.offsets[j] < plan.offsets[i] + t[i].bytes;
      EXPECT_FALSE(same_time && same_bytes && t[i].bytes > 0 && t[j].bytes > 0)
          << "tensors " << i << " and " << j << " overlap";
    }
  }
}

// The most bytes alive at one step, step by step.
size_t brute_lower_bound(const std::vector<TensorLifetime>& t) {
  int last = 0;
  for (const auto& x : t) last = std::max(last, x.last);
  size_t best = 0;
  for (int s = 0; s <= last; ++s) {
    size_t alive = 0;
    for (const auto& x : t)
      if (x.first <= s && s <= x.last) alive += aligned(x.bytes);
    best = std::max(best, alive);
  }
  return best;
}

TEST(ArenaPlanner, RandomLifetimesNeverOverlapAndStayNearTheBound) {
  std::mt19937 rng(7);
  double ratio_sum = 0;
  const int kTrials = 40;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<TensorLifetime> t;
    int steps = 10 + static_cast<int>(rng() % 60);
    int n = 5 + static_cast<int>(rng() % 80);
    for (int i = 0; i < n; ++i) {
      int first = static_cast<int>(rng() % steps);
      int len = static_cast<int>(rng() % 8);
      t.push_back({1 + rng() % 100000, first, std::min(steps, first + len)});
    }
    ArenaPlan plan = plan_arena(t, kAlign);
    expect_valid(t, plan);
    size_t bound = brute_lower_bound(t);
    EXPECT_EQ(plan.lower_bound_bytes, bound);
    EXPECT_GE(plan.arena_bytes, bound);
    size_t total = 0;
    for (const auto& x : t) total += aligned(x.bytes);
    EXPECT_EQ(plan.no_reuse_bytes, total);
    EXPECT_LE(plan.arena_bytes, total);
    ratio_sum += static_cast<double>(plan.arena_bytes) / static_cast<double>(bound);
  }
  EXPECT_LT(ratio_sum / kTrials, 1.25);  // greedy by size stays close to the bound
}

TEST(ArenaPlanner, ChainNeedsTwoBuffers) {
  std::vector<TensorLifetime> t;
  for (int i = 0; i < 50; ++i) t.push_back({4096, i, i + 1});
  ArenaPlan plan = plan_arena(t, kAlign);
  expect_valid(t, plan);
  EXPECT_EQ(plan.arena_bytes, 2u * 4096);
  EXPECT_EQ(plan.lower_bound_bytes, 2u * 4096);
}

TEST(ArenaPlanner, EmptyAndZeroSized) {
  EXPECT_EQ(plan_arena({}, kAlign).arena_bytes, 0u);
  ArenaPlan plan = plan_arena({{0, 0, 3}, {128, 1, 2}}, kAlign);
  EXPECT_EQ(plan.arena_bytes, 128u);
}

// Slots: 0 input, 1..n intermediates. Steps of unary ops a -> b.
StepUses unary(int in, int out, int in_place = 0) {
  return {{in}, {out}, false, in_place};
}

TEST(Liveness, InPlaceWhenTheInputDies) {
  // 0 -> 1 -> 2 -> 3 (output): 1 and 2 are intermediates; step 1 may write 2 over 1.
  std::vector<StepUses> steps = {unary(0, 1, -1), unary(1, 2), unary(2, 3)};
  ArenaLayout l = plan_steps(steps, {400, 400, 400, 400}, {false, true, true, false}, {3}, kAlign);
  EXPECT_EQ(l.slot_offset[1], l.slot_offset[2]);
  EXPECT_EQ(l.in_place_steps, std::vector<int>{1});
  EXPECT_EQ(l.slot_offset[0], ArenaLayout::kNotInArena);
  EXPECT_EQ(l.slot_offset[3], ArenaLayout::kNotInArena);
  EXPECT_EQ(l.plan.arena_bytes, aligned(400));
  EXPECT_EQ(l.intermediate_bytes, 800u);
}

TEST(Liveness, NoInPlaceWhileTheInputIsStillRead) {
  // 1 is read by steps 1 and 2, so step 1 must not overwrite it.
  std::vector<StepUses> steps = {unary(0, 1, -1), unary(1, 2), {{1, 2}, {3}, false, -1}};
  ArenaLayout l = plan_steps(steps, {400, 400, 400, 400}, {false, true, true, false}, {3}, kAlign);
  EXPECT_NE(l.slot_offset[1], l.slot_offset[2]);
  EXPECT_TRUE(l.in_place_steps.empty());
}

TEST(Liveness, NoInPlaceWhenAnotherInputSharesTheMemory) {
  // Step 1 makes 2, a view of 1; step 2 reads 1 and 2 and may overwrite input 0 (slot 1).
  std::vector<StepUses> steps = {
      unary(0, 1, -1), {{1}, {2}, true, -1}, {{1, 2}, {3}, false, 0}, unary(3, 4, -1)};
  ArenaLayout l =
      plan_steps(steps, {400, 400, 400, 400, 400}, {false, true, true, true, false}, {4}, kAlign);
  EXPECT_NE(l.slot_offset[1], l.slot_offset[3]);
  EXPECT_EQ(l.slot_offset[2], ArenaLayout::kNotInArena);  // a view is not placed
}

TEST(Liveness, ViewsKeepTheirSourceAlive) {
  // 2 is a view of 1 read at step 3; 3 (made at step 2) must not take 1's place.
  std::vector<StepUses> steps = {
      unary(0, 1, -1), {{1}, {2}, true, -1}, unary(0, 3, -1), {{2, 3}, {4}, false, -1}};
  ArenaLayout l =
      plan_steps(steps, {400, 400, 400, 400, 400}, {false, true, true, true, false}, {4}, kAlign);
  EXPECT_NE(l.slot_offset[1], l.slot_offset[3]);
}

// A 20-layer MLP through the public API: y = relu(x W_i + b_i) ...
struct Mlp {
  Graph graph;
  std::vector<Tensor> weights, biases;
  Mlp(int64_t batch, int64_t width, int layers) {
    Value* x = graph.add_input("x", {batch, width});
    for (int i = 0; i < layers; ++i) {
      weights.push_back(test::random_tensor({width, width}, 100 + i, -0.15f, 0.15f));
      biases.push_back(test::random_tensor({width}, 200 + i, -0.1f, 0.1f));
      Value* w = graph.add_constant("w" + std::to_string(i), weights.back());
      Value* b = graph.add_constant("b" + std::to_string(i), biases.back());
      x = graph.add_op("Relu", {graph.add_op("Add", {graph.add_op("MatMul", {x, w}), b})});
    }
    graph.mark_output(x);
  }
  std::vector<double> reference(const Tensor& input) const {
    int64_t batch = input.shape()[0], width = input.shape()[1];
    std::vector<double> x = test::to_doubles(input);
    for (size_t l = 0; l < weights.size(); ++l) {
      std::vector<double> w = test::to_doubles(weights[l]), b = test::to_doubles(biases[l]);
      std::vector<double> y(x.size());
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t j = 0; j < width; ++j) {
          double acc = b[j];
          for (int64_t k = 0; k < width; ++k) acc += x[i * width + k] * w[k * width + j];
          y[i * width + j] = std::max(acc, 0.0);
        }
      x = std::move(y);
    }
    return x;
  }
};

TEST(ExecutableMemory, MlpArenaIsTwoActivationsAndRunsAllocateNothing) {
  Mlp mlp(8, 64, 20);
  Runtime rt;
  Executable* exe = mlp.graph.compile(&rt);
  MemoryReport r = exe->memory_report();
  EXPECT_LE(r.arena_bytes * 10, r.no_reuse_bytes);  // at most 10% of no reuse
  EXPECT_EQ(r.arena_bytes, r.lower_bound_bytes);
  EXPECT_GT(r.in_place_steps, 0u);

  Tensor x1 = test::random_tensor({8, 64}, 1), x2 = test::random_tensor({8, 64}, 2);
  std::vector<Tensor> y1 = exe->execute({x1});
  std::vector<Tensor> y2 = exe->execute({x2});
  // The caller keeps y1 and y2 while the next run makes its output: the pool's third block.
  y2 = exe->execute({x2});
  size_t before = rt.memory_stats().num_system_allocs;
  for (int i = 0; i < 5; ++i) y2 = exe->execute({x2});
  EXPECT_EQ(rt.memory_stats().num_system_allocs, before) << "a steady-state run allocated";
  // The first result is intact although later runs reused the arena.
  test::expect_close(y1[0], {8, 64}, mlp.reference(x1), 1e-4, 1e-4);
  test::expect_close(y2[0], {8, 64}, mlp.reference(x2), 1e-4, 1e-4);
}

TEST(ExecutableMemory, ConcurrentRunsUseSeparateArenas) {
  Mlp mlp(4, 32, 6);
  Runtime rt;
  Executable* exe = mlp.graph.compile(&rt);
  const int kThreads = 4;
  std::vector<Tensor> inputs;
  std::vector<std::vector<double>> want;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(test::random_tensor({4, 32}, 50 + t));
    want.push_back(mlp.reference(inputs.back()));
  }
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 30; ++r) {
        std::vector<double> got = test::to_doubles(exe->execute({inputs[t]})[0]);
        for (size_t i = 0; i < got.size(); ++i)
          if (std::abs(got[i] - want[t][i]) > 1e-4 + 1e-4 * std::abs(want[t][i])) ++wrong[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

TEST(ExecutableMemory, OutputThatIsAViewOfTheArenaIsCopied) {
  // The output is a Reshape (a view) of an intermediate that lives in the arena.
  Graph graph;
  Value* x = graph.add_input("x", {2, 6});
  Value* y = graph.add_op("Relu", {graph.add_op("Neg", {x})});
  Value* shape = graph.add_constant("shape", Tensor::from_vector<int64_t>({2}, {3, 4}));
  graph.mark_output(graph.add_op("Reshape", {y, shape}));
  Runtime rt;
  Executable* exe = graph.compile(&rt);
  Tensor a = test::random_tensor({2, 6}, 3), b = test::random_tensor({2, 6}, 4);
  Tensor ya = exe->execute({a})[0];
  exe->execute({b});
  std::vector<double> want;
  for (double v : test::to_doubles(a)) want.push_back(std::max(-v, 0.0));
  test::expect_close(ya, {3, 4}, want);
}

}  // namespace
}  // namespace lumen
