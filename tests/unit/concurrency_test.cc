// One compiled model run from 8 threads at once gives bit-identical results to serial runs, and
// several models compile at once safely. The model is the shipped one (models/digits: two Conv +
// MaxPool blocks and two Gemms, on oneDNN), checked first against PyTorch's logits. Run under
// ThreadSanitizer by `./run.sh test` (label `concurrency`).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

constexpr int kThreads = 8;
constexpr int kRunsPerThread = 200;
constexpr int64_t kBatch = 4;

const std::string kDigits = std::string(LUMEN_SOURCE_DIR) + "/models/digits";

// The held-out images as batches of kBatch, each a tensor of its own.
std::vector<Tensor> digit_batches() {
  Tensor images = read_npy(kDigits + "/test_x.npy");
  std::vector<Tensor> batches;
  for (int64_t start = 0; start + kBatch <= images.shape()[0]; start += kBatch)
    batches.push_back(images.narrow(start, kBatch).clone());
  return batches;
}

Executable* compile_digits(Runtime& rt, int64_t batch) {
  OnnxLoadOptions options;
  options.input_shapes["image"] = Shape{batch, 1, 8, 8};
  Graph graph = load_onnx(kDigits + "/digits.onnx", options);
  graph.optimize();
  return graph.compile(&rt);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The same shape and dtype, and float32 values within 1e-5 of the largest |b|: the plans of a
// session's shape family may run other kernels than a plan compiled alone (Lumen's where a
// compile alone times Lumen's against oneDNN's), so their sums round differently.
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32 || a.shape() != b.shape())
    return false;
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float scale = 0.0f;
  for (int64_t i = 0; i < b.numel(); ++i) scale = std::max(scale, std::abs(y[i]));
  for (int64_t i = 0; i < b.numel(); ++i)
    if (!(std::abs(x[i] - y[i]) <= 1e-5f * scale)) return false;
  return true;
}

// Runs `work(thread, run)` from kThreads threads at once, each kRunsPerThread times after a
// common start, and returns how many runs returned false.
template <typename Work>
int run_concurrently(Work work, int runs = kRunsPerThread) {
  std::atomic<int> ready{0}, mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int r = 0; r < runs; ++r)
        if (!work(t, r)) mismatches.fetch_add(1);
    });
  for (auto& th : threads) th.join();
  return mismatches.load();
}

TEST(Concurrency, TheShippedModelMatchesPyTorch) {
  Tensor images = read_npy(kDigits + "/test_x.npy");
  Tensor want = read_npy(kDigits + "/reference_logits.npy");
  Runtime rt;
  Tensor got = compile_digits(rt, images.shape()[0])->execute({images}).at(0);
  test::expect_close(got, want.shape(), test::to_doubles(want), 1e-4, 1e-4);
}

TEST(Concurrency, EightThreadsOnOneExecutableMatchSerialRunsBitForBit) {
  Runtime rt;
  Executable* exe = compile_digits(rt, kBatch);
  std::vector<Tensor> batches = digit_batches();
  std::vector<Tensor> serial;
  for (const Tensor& b : batches) serial.push_back(exe->execute({b}).at(0));
  int mismatches = run_concurrently([&](int t, int r) {
    size_t k = static_cast<size_t>(t * 37 + r * 11) % batches.size();
    return same_bits(exe->execute({batches[k]}).at(0), serial[k]);
  });
  EXPECT_EQ(mismatches, 0) << "of " << kThreads * kRunsPerThread << " runs";
  std::printf("concurrency: %d threads x %d runs of digits (batch %lld): %d differ from serial\n",
              kThreads, kRunsPerThread, static_cast<long long>(kBatch), mismatches);
  // The arenas: at most one per thread that ran at once, none leaked into later runs.
  for (size_t k = 0; k < batches.size(); ++k)
    EXPECT_TRUE(same_bits(exe->execute({batches[k]}).at(0), serial[k])) << k;
}

// Every thread loads, optimizes and compiles its own copy (one shared Runtime), alternating the
// shipped model with an MLP built through the graph API, and checks it against a serial compile.
TEST(Concurrency, ModelsCompileInParallel) {
  Tensor x = test::random_tensor({3, 16}, 21);
  Tensor w = test::random_tensor({16, 8}, 22), b = test::random_tensor({8}, 23);
  auto compile_mlp = [&](Runtime& rt) {
    Graph g;
    Value* in = g.add_input("x", {3, 16});
    Value* h = g.add_op("MatMul", {in, g.add_constant("w", w)});
    g.mark_output(g.add_op("Relu", {g.add_op("Add", {h, g.add_constant("b", b)})}));
    g.optimize();
    return g.compile(&rt);
  };
  std::vector<Tensor> batches = digit_batches();
  Runtime serial_rt;
  Tensor want_digits = compile_digits(serial_rt, kBatch)->execute({batches[0]}).at(0);
  Tensor want_mlp = compile_mlp(serial_rt)->execute({x}).at(0);
  Runtime shared;
  int mismatches = run_concurrently(
      [&](int t, int r) {
        if ((t + r) % 2 == 0)
          return same_bits(compile_digits(shared, kBatch)->execute({batches[0]}).at(0),
                           want_digits);
        return same_bits(compile_mlp(shared)->execute({x}).at(0), want_mlp);
      },
      4);
  EXPECT_EQ(mismatches, 0);
}

// OnnxSession makes a plan per batch size on first use (from the shape family of batches of 2 and
// more); threads asking for new sizes at once must each get the right plan.
TEST(Concurrency, SessionPlansForNewShapesFromManyThreads) {
  Tensor images = read_npy(kDigits + "/test_x.npy");
  OnnxSession session(kDigits + "/digits.onnx");
  Runtime rt;
  std::vector<Tensor> inputs, serial;
  for (int64_t batch = 1; batch <= kThreads; ++batch) {
    inputs.push_back(images.narrow(batch * 10, batch).clone());
    serial.push_back(compile_digits(rt, batch)->execute({inputs.back()}).at(0));
  }
  int mismatches = run_concurrently(
      [&](int t, int r) {
        size_t k = static_cast<size_t>(t + r) % inputs.size();
        return same_values(session.run({{"image", inputs[k]}}).at(0), serial[k]);
      },
      20);
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(session.num_plans(), static_cast<size_t>(kThreads));
}

}  // namespace
}  // namespace lumen
