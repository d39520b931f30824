// Executable::bind: a replay that reads a device input in place (a decoder's cache) gives what an
// ordinary run gives, follows new values written into the bound tensor, and leaves the plan's own
// runs alone. CUDA tests skip where this machine has no CUDA device.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/cuda_test_util.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen::test {
namespace {

constexpr int64_t kRows = 3, kInner = 8, kCols = 5;

// y = past @ w + x, z = relu(past).
Executable* compile_step(Runtime& rt, Graph& g, const Tensor& w, const std::string& backend) {
  Value* past = g.add_input("past", Shape{kRows, kInner});
  Value* x = g.add_input("x", Shape{kRows, kCols});
  Value* mm = g.add_op("MatMul", {past, g.add_constant("w", w)}, 1, {}, "mm")[0];
  g.mark_output(g.add_op("Add", {mm, x}, 1, {}, "add")[0]);
  g.mark_output(g.add_op("Relu", {past}, 1, {}, "relu")[0]);
  CompileOptions options;
  options.backends = {backend};
  return g.compile(&rt, options);
}

void expect_step(const std::vector<Tensor>& outs, const Tensor& past, const Tensor& w,
                 const Tensor& x) {
  ASSERT_EQ(outs.size(), 2u);
  std::vector<double> y(kRows * kCols), z(kRows * kInner);
  for (int64_t i = 0; i < kRows; ++i) {
    for (int64_t j = 0; j < kCols; ++j) {
      double acc = x.item_as_double(i * kCols + j);
      for (int64_t k = 0; k < kInner; ++k)
        acc += past.item_as_double(i * kInner + k) * w.item_as_double(k * kCols + j);
      y[i * kCols + j] = acc;
    }
    for (int64_t k = 0; k < kInner; ++k)
      z[i * kInner + k] = std::max(0.0, past.item_as_double(i * kInner + k));
  }
  expect_close(outs[0].to(Device::cpu()), {kRows, kCols}, y, 1e-5, 1e-5);
  expect_close(outs[1].to(Device::cpu()), {kRows, kInner}, z, 0, 0);
}

// Writes host tensor `from` over device tensor `into` in place.
void overwrite(const Tensor& into, const Tensor& from) {
  ASSERT_EQ(cudaMemcpy(into.raw_data(), from.raw_data(), from.nbytes(), cudaMemcpyHostToDevice),
            cudaSuccess);
}

TEST(BoundReplay, ReadsTheBoundTensorInPlace) {
  SKIP_WITHOUT_CUDA();
  Runtime rt;
  Graph g;
  const Tensor w = random_tensor({kInner, kCols}, 1);
  Executable* exe = compile_step(rt, g, w, "cuda");
  Tensor past = random_tensor({kRows, kInner}, 2);
  const Tensor cache = past.to(Device::cuda());
  Tensor x = random_tensor({kRows, kCols}, 3);
  // Before any run there is no recording to bind to.
  EXPECT_EQ(exe->bind({{"past", cache}}), nullptr);
  expect_step(exe->execute({{"past", cache}, {"x", x}}, OutputPlace::kDevice), past, w, x);
  std::unique_ptr<BoundReplay> step = exe->bind({{"past", cache}});
  ASSERT_NE(step, nullptr) << exe->summary();
  for (int round = 0; round < 4; ++round) {
    past = random_tensor({kRows, kInner}, 10 + round);
    overwrite(cache, past);
    x = random_tensor({kRows, kCols}, 20 + round);
    std::vector<Tensor> outs = step->run({{"x", x}});
    EXPECT_NE(outs[0].device().type, DeviceType::kCPU);
    expect_step(outs, past, w, x);
    // The plan's ordinary runs with another past neither see nor change the bound tensor.
    const Tensor other = random_tensor({kRows, kInner}, 30 + round);
    expect_step(exe->execute({{"past", other.to(Device::cuda())}, {"x", x}}), other, w, x);
    expect_close(cache.to(Device::cpu()), {kRows, kInner}, to_doubles(past), 0, 0);
  }
  EXPECT_THROW(step->run({{"x", x}, {"past", cache}}), InvalidArgument);
  EXPECT_THROW(step->run({}), InvalidArgument);
  EXPECT_THROW(step->run({{"x", x}, {"y", x}}), InvalidArgument);
  EXPECT_THROW(step->run({{"x", random_tensor({kRows, kCols + 1}, 4)}}), ShapeError);
  EXPECT_THROW(exe->bind({{"nope", cache}}), InvalidArgument);
  // A host tensor, or a device tensor of another shape, cannot be bound.
  EXPECT_EQ(exe->bind({{"past", past}}), nullptr);
  EXPECT_EQ(exe->bind({{"past",
                        Tensor::zeros(Shape{kRows, kInner + 1}, DType::kFloat32, Device::cuda())}}),
            nullptr);
}

TEST(BoundReplay, OutlivesItsExecutable) {
  SKIP_WITHOUT_CUDA();
  const Tensor w = random_tensor({kInner, kCols}, 5);
  const Tensor past = random_tensor({kRows, kInner}, 6);
  const Tensor cache = past.to(Device::cuda());
  const Tensor x = random_tensor({kRows, kCols}, 7);
  std::unique_ptr<BoundReplay> step;
  {
    Runtime rt;
    Graph g;
    Executable* exe = compile_step(rt, g, w, "cuda");
    exe->execute({{"past", cache}, {"x", x}});
    step = exe->bind({{"past", cache}});
    ASSERT_NE(step, nullptr);
  }
  expect_step(step->run({{"x", x}}), past, w, x);
}

// A graph input written in place (Graph::mark_input_written) by a CUDA TensorScatter: the
// caller's cache holds each step's new slot after the first run (which runs step by step, then
// records and replays), after a replay of the plan's own recording (whose copy of the input is
// written back), through a bound replay (which writes the bound tensor itself), and when the cache
// is a host tensor (written back to the host).
TEST(BoundReplay, WritesAWrittenInputInPlace) {
  SKIP_WITHOUT_CUDA();
  constexpr int64_t kB = 2, kH = 3, kSlots = 8, kD = 4;
  Runtime rt;
  Graph g;
  Value* cache_in = g.add_input("cache", Shape{kB, kH, kSlots, kD});
  Value* update_in = g.add_input("update", Shape{kB, kH, 1, kD});
  Value* index_in = g.add_input("index", Shape{kB}, DType::kInt64);
  Value* s = g.add_op("TensorScatter", {cache_in, update_in, index_in}, 1, {{"axis", int64_t{2}}},
                      "scatter")[0];
  g.mark_output(g.add_op("Mul", {s, s}, 1, {}, "square")[0]);
  g.mark_input_written(cache_in);
  CompileOptions options;
  options.backends = {"cuda"};
  Executable* exe = g.compile(&rt, options);
  const Tensor start = random_tensor({kB, kH, kSlots, kD}, 40);
  std::vector<double> want = to_doubles(start);
  const Tensor device_cache = start.to(Device::cuda());
  const Tensor host_cache = start.clone();
  std::vector<double> want_host = want;
  std::unique_ptr<BoundReplay> bound;
  for (int64_t round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const Tensor update = random_tensor({kB, kH, 1, kD}, 50 + round);
    Tensor index = Tensor::empty(Shape{kB}, DType::kInt64);
    index.data<int64_t>()[0] = round;
    index.data<int64_t>()[1] = kSlots - 1 - round;
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t h = 0; h < kH; ++h)
        for (int64_t d = 0; d < kD; ++d)
          want[((b * kH + h) * kSlots + index.data<int64_t>()[b]) * kD + d] =
              update.data<float>()[(b * kH + h) * kD + d];
    std::vector<Tensor> outs;
    if (round < 3) {
      outs = exe->execute({{"cache", device_cache}, {"update", update}, {"index", index}});
    } else {
      if (!bound) bound = exe->bind({{"cache", device_cache}});
      ASSERT_NE(bound, nullptr);
      outs = bound->run({{"update", update}, {"index", index}});
    }
    expect_close(device_cache.to(Device::cpu()), {kB, kH, kSlots, kD}, want, 0, 0);
    std::vector<double> squares = want;
    for (double& v : squares) v *= v;
    expect_close(outs[0].to(Device::cpu()), {kB, kH, kSlots, kD}, squares, 1e-6, 1e-6);
    // The same step on a host cache.
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t h = 0; h < kH; ++h)
        for (int64_t d = 0; d < kD; ++d)
          want_host[((b * kH + h) * kSlots + index.data<int64_t>()[b]) * kD + d] =
              update.data<float>()[(b * kH + h) * kD + d];
    exe->execute({{"cache", host_cache}, {"update", update}, {"index", index}});
    expect_close(host_cache, {kB, kH, kSlots, kD}, want_host, 0, 0);
  }
}

TEST(BoundReplay, HostPlansDoNotBind) {
  Runtime rt;
  Graph g;
  const Tensor w = random_tensor({kInner, kCols}, 8);
  Executable* exe = compile_step(rt, g, w, "cpu");
  const Tensor past = random_tensor({kRows, kInner}, 9);
  const Tensor x = random_tensor({kRows, kCols}, 10);
  expect_step(exe->execute({{"past", past}, {"x", x}}, OutputPlace::kDevice), past, w, x);
  EXPECT_EQ(exe->bind({{"past", past}}), nullptr);
  EXPECT_THROW(exe->bind({{"nope", past}}), InvalidArgument);
}

}  // namespace
}  // namespace lumen::test
