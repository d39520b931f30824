// The CUDA backend against the CPU backend on random data (every element), device copies, the
// caching allocator's steady state and CUDA-graph replay. Every test skips where this machine has
// no CUDA device.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "backends/cuda/depthwise_staged.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/pointwise_conv.h"
#include "core/device_ops.h"
#include "core/half.h"
#include "cuda/cuda_test_util.h"
#include "lumen/lumen.h"
#include "ops/backend_check_util.h"

namespace lumen::test {
namespace {

// One `op` node over `inputs`, compiled for `backends`, run once (or `runs` times).
std::vector<Tensor> run_on(const std::vector<std::string>& backends, const std::string& op,
                           const std::vector<OpInput>& inputs, const Attributes& attrs = {},
                           int runs = 1, int num_outputs = 1,
                           Precision precision = Precision::kFloat32) {
  Runtime rt;
  CompileOptions options;
  options.backends = backends;
  options.precision = precision;
  std::vector<Tensor> runtime_inputs;
  Executable* exe = compile_op(rt, op, inputs, attrs, num_outputs, options, &runtime_inputs);
  // {"cuda"} leaves what CUDA cannot run on the host: here the op itself must run on CUDA.
  if (backends == std::vector<std::string>{"cuda"})
    EXPECT_EQ(backend_of_step(exe->summary(), "node"), "cuda") << op << "\n" << exe->summary();
  std::vector<Tensor> result;
  for (int r = 0; r < runs; ++r) result = exe->execute(runtime_inputs);
  return result;
}

// The op on CUDA (run three times: eager, recorded, replayed) matches the CPU backend.
void expect_matches_cpu(const std::string& op, const std::vector<OpInput>& inputs,
                        const Attributes& attrs = {}, double atol = 1e-5, double rtol = 1e-4,
                        int num_outputs = 1) {
  std::vector<Tensor> want = run_on({"cpu"}, op, inputs, attrs, 1, num_outputs);
  std::vector<Tensor> got = run_on({"cuda"}, op, inputs, attrs, 3, num_outputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].device(), Device::cpu());
    expect_close(got[k], want[k].shape(), to_doubles(want[k]), atol, rtol);
  }
}

TEST(CudaBackend, AbsentDeviceIsNotAnError) {
  Runtime rt;
  std::vector<std::string> names = rt.backends();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names[0], "cpu");
  if (!have_cuda()) {
    EXPECT_THROW(Tensor::empty(Shape{4}, DType::kFloat32, Device::cuda()), DeviceError);
    Graph g;
    Value* x = g.add_input("x", Shape{4});
    g.mark_output(g.add_op("Relu", {x}, 1, {}, "node")[0]);
    CompileOptions options;
    options.backends = {"cuda"};
    EXPECT_THROW(g.compile(&rt, options), DeviceError);
  }
}

TEST(CudaBackend, CopiesRoundTrip) {
  SKIP_WITHOUT_CUDA();
  for (int64_t n : {1, 1000, 3 << 20}) {  // the last spans several staging chunks
    Tensor x = random_tensor(Shape{n}, 7);
    Tensor d = x.to(Device::cuda());
    EXPECT_EQ(d.device(), Device::cuda());
    Tensor d2 = d.clone();
    Tensor back = d2.to(Device::cpu());
    expect_close(back, x.shape(), to_doubles(x), 0, 0);
  }
  Tensor z = Tensor::zeros(Shape{3, 5}, DType::kFloat32, Device::cuda()).to(Device::cpu());
  expect_close(z, Shape{3, 5}, std::vector<double>(15, 0.0), 0, 0);
  EXPECT_THROW(Tensor::empty(Shape{2}, DType::kFloat32, Device::cuda()).data<float>(),
               InvalidArgument);
}

// A host input is staged in pinned memory chunk by chunk, by the process's threads above 1 MiB
// (async_copy.cc): every element must arrive, across chunk and thread-block boundaries and a
// ragged end, whatever the thread count.
TEST(CudaBackend, HostInputsArriveWholeThroughChunkedStaging) {
  SKIP_WITHOUT_CUDA();
  const int before = num_threads();
  // Inputs and outputs below the threads' staging (128 KB), a 224x224 image staged by the threads
  // (or the driver on one), and several 2 MB chunks (both halves of the receiving buffer reused).
  for (int64_t n : {int64_t{1000}, int64_t{3 * 224 * 224 + 3}, int64_t{(5 << 20) / 4 + 3}}) {
    Graph g;
    Value* x = g.add_input("x", Shape{n});
    g.mark_output(g.add_op("Neg", {x}, 1, {}, "neg")[0]);
    Runtime rt;
    CompileOptions options;
    options.backends = {"cuda"};
    Executable* exe = g.compile(&rt, options);
    for (int threads : {1, 3, 16}) {
      set_num_threads(threads);
      Tensor in = random_tensor(Shape{n}, 40 + threads);
      std::vector<double> want = to_doubles(in);
      for (double& v : want) v = -v;
      std::vector<Tensor> got = exe->execute({in});
      expect_close(got[0], Shape{n}, want, 0, 0);
    }
  }
  set_num_threads(before);
}

TEST(CudaBackend, AllocatorSteadyState) {
  SKIP_WITHOUT_CUDA();
  Graph g;
  Value* x = g.add_input("x", Shape{8, 64});
  Value* w = g.add_constant("w", random_tensor(Shape{64, 32}, 3));
  Value* h = g.add_op("MatMul", {x, w}, 1, {}, "mm")[0];
  Value* r = g.add_op("Relu", {h}, 1, {}, "relu")[0];
  g.mark_output(g.add_op("Softmax", {r}, 1, {{"axis", 1}}, "sm")[0]);
  Runtime rt;
  CompileOptions options;
  options.backends = {"cuda"};
  Executable* exe = g.compile(&rt, options);
  Tensor in = random_tensor(Shape{8, 64}, 4);
  exe->execute({in});
  exe->execute({in});
  MemoryStats warm = rt.memory_stats(Device::cuda());
  for (int i = 0; i < 20; ++i) exe->execute({in});
  MemoryStats after = rt.memory_stats(Device::cuda());
  EXPECT_EQ(after.num_system_allocs, warm.num_system_allocs) << "cudaMalloc in steady state";
  // The same graph given its input on the device.
  std::vector<Tensor> a = exe->execute({in});
  std::vector<Tensor> b = exe->execute({in.to(Device::cuda())});
  expect_close(b[0], a[0].shape(), to_doubles(a[0]), 0, 0);
}

// A graph made twice by `build`, compiled for the CPU alone (the reference) and for CUDA with the
// CPU beside it (what CUDA lacks runs there).
struct CpuAndMixed {
  Graph on_cpu, on_both;
  Executable* reference = nullptr;
  Executable* mixed = nullptr;
  CpuAndMixed(Runtime& rt, const std::function<void(Graph&)>& build) {
    build(on_cpu);
    build(on_both);
    CompileOptions cpu;
    cpu.backends = {"cpu"};
    CompileOptions both;
    both.backends = {"cuda", "cpu"};
    reference = on_cpu.compile(&rt, cpu);
    mixed = on_both.compile(&rt, both);
  }
};

TEST(CudaBackend, MixedPlacementCopies) {
  SKIP_WITHOUT_CUDA();
  // Relu and Sigmoid run on CUDA, a Det of 80 x 80 matrices (above the CUDA kernel's 64 x 64)
  // only on the CPU: values cross devices both ways.
  auto build = [](Graph& g) {
    Value* x = g.add_input("x", Shape{2, 80, 80});
    Value* a = g.add_op("Relu", {x}, 1, {}, "relu")[0];
    Value* c = g.add_op("Det", {a}, 1, {}, "det")[0];
    g.mark_output(g.add_op("Sigmoid", {c}, 1, {}, "sig")[0]);
  };
  Runtime rt;
  CpuAndMixed graphs(rt, build);
  const Tensor in = near_identity(2, 80, 9, 0.02f);
  std::vector<Tensor> want = graphs.reference->execute({in});
  Executable* exe = graphs.mixed;
  EXPECT_NE(exe->summary().find("copy"), std::string::npos) << exe->summary();
  EXPECT_EQ(backend_of_step(exe->summary(), "det"), "cpu") << exe->summary();
  EXPECT_EQ(backend_of_step(exe->summary(), "sig"), "cuda") << exe->summary();
  for (int i = 0; i < 3; ++i) {
    std::vector<Tensor> got = exe->execute({i == 2 ? in.to(Device::cuda()) : in});
    expect_close(got[0], want[0].shape(), to_doubles(want[0]));
  }
}

// Values cross devices while the device has later work queued: relu's output goes to the host
// (a Det of 256 x 256 matrices, above the CUDA kernel's 64 x 64) while the matmuls after it run,
// and its output goes back up with them still queued. Every run, with fresh inputs, against the
// CPU alone.
TEST(CudaBackend, CopiesOverlapQueuedDeviceWork) {
  SKIP_WITHOUT_CUDA();
  auto build = [](Graph& g) {
    Value* x = g.add_input("x", Shape{256, 512});
    Value* w1 = g.add_constant("w1", random_tensor(Shape{512, 512}, 21, -0.05f, 0.05f));
    Value* w2 = g.add_constant("w2", random_tensor(Shape{512, 512}, 22, -0.05f, 0.05f));
    Value* a = g.add_op("Relu", {x}, 1, {}, "relu")[0];
    Value* h = g.add_op("Tanh", {g.add_op("MatMul", {a, w1}, 1, {}, "mm1")[0]}, 1, {}, "tanh")[0];
    Value* d = g.add_op("MatMul", {h, w2}, 1, {}, "mm2")[0];
    Value* square =
        g.add_op("Reshape",
                 {a, g.add_constant("dims", Tensor::from_vector<int64_t>(Shape{3}, {2, 256, 256}))},
                 1, {}, "square")[0];
    Value* c = g.add_op("Det", {square}, 1, {}, "det")[0];
    Value* s = g.add_op("Sigmoid", {c}, 1, {}, "sig")[0];
    Value* mean = g.add_op("ReduceMean", {s}, 1, {{"keepdims", int64_t{0}}}, "mean")[0];
    g.mark_output(g.add_op("Add", {d, mean}, 1, {}, "add")[0]);
    g.mark_output(s);
  };
  Runtime rt;
  CpuAndMixed graphs(rt, build);
  Executable* reference = graphs.reference;
  Executable* exe = graphs.mixed;
  EXPECT_NE(exe->summary().find("copy"), std::string::npos) << exe->summary();
  EXPECT_EQ(backend_of_step(exe->summary(), "det"), "cpu") << exe->summary();
  EXPECT_EQ(backend_of_step(exe->summary(), "mm2"), "cuda") << exe->summary();
  for (int i = 0; i < 4; ++i) {
    Tensor in = random_tensor(Shape{256, 512}, 30 + i);
    std::vector<Tensor> want = reference->execute({in});
    std::vector<Tensor> got = exe->execute({i == 3 ? in.to(Device::cuda()) : in});
    ASSERT_EQ(got.size(), 2u);
    expect_close(got[0], want[0].shape(), to_doubles(want[0]), 1e-4, 1e-4);
    expect_close(got[1], want[1].shape(), to_doubles(want[1]), 1e-4, 1e-4);
  }
}

TEST(CudaKernels, Unary) {
  SKIP_WITHOUT_CUDA();
  Tensor x = random_tensor(Shape{3, 5, 7}, 11, -4.f, 4.f);
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "HardSwish",
                         "Floor", "Ceil", "Sin", "Cos", "Softplus"})
    expect_matches_cpu(op, {x});
  expect_matches_cpu("LeakyRelu", {x}, {{"alpha", 0.2f}});
  expect_matches_cpu("Elu", {x}, {{"alpha", 0.7f}});
  expect_matches_cpu("HardSigmoid", {x}, {{"alpha", 0.3f}, {"beta", 0.4f}});
  expect_matches_cpu("Gelu", {x});
  Tensor pos = random_tensor(Shape{4, 9}, 12, 0.1f, 3.f);
  for (const char* op : {"Log", "Sqrt", "Reciprocal"}) expect_matches_cpu(op, {pos});
  expect_matches_cpu("Clip", {x, constant(Tensor::scalar(-1.5f)), constant(Tensor::scalar(2.f))});
}

TEST(CudaKernels, BinaryBroadcast) {
  SKIP_WITHOUT_CUDA();
  Tensor a = random_tensor(Shape{2, 3, 4, 5}, 21);
  Tensor b = random_tensor(Shape{3, 1, 5}, 22, 0.5f, 2.f);
  Tensor c = random_tensor(Shape{2, 3, 4, 5}, 23, 0.5f, 2.f);
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Min", "Max"}) {
    expect_matches_cpu(op, {a, b});
    expect_matches_cpu(op, {b, a});
    expect_matches_cpu(op, {a, c});
    expect_matches_cpu(op, {a, constant(random_tensor(Shape{5}, 24))});
  }
  expect_matches_cpu("Pow", {c, b});
}

TEST(CudaKernels, Gemm) {
  SKIP_WITHOUT_CUDA();
  Tensor x = random_tensor(Shape{7, 33}, 31);
  Tensor w = random_tensor(Shape{33, 19}, 32);
  Tensor wt = random_tensor(Shape{19, 33}, 33);
  expect_matches_cpu("MatMul", {x, constant(w)});
  expect_matches_cpu("MatMul", {random_tensor(Shape{2, 3, 7, 33}, 34), w});
  expect_matches_cpu("MatMul",
                     {random_tensor(Shape{4, 7, 33}, 35), random_tensor(Shape{4, 33, 6}, 36)});
  expect_matches_cpu("Gemm", {x, constant(w), constant(random_tensor(Shape{19}, 37))});
  expect_matches_cpu("Gemm", {x, constant(wt), constant(random_tensor(Shape{1, 19}, 38))},
                     {{"transB", 1}});
  expect_matches_cpu("Gemm", {random_tensor(Shape{33, 7}, 39), w, random_tensor(Shape{7, 19}, 40)},
                     {{"transA", 1}, {"alpha", 0.5f}, {"beta", 2.f}});
  expect_matches_cpu("Gemm", {x, w});
}

TEST(CudaKernels, FusedMatMul) {
  SKIP_WITHOUT_CUDA();
  Tensor bias = random_tensor(Shape{11}, 51);
  // Batched A times one B, bias and exact Gelu: one GEMM over all rows.
  expect_matches_cpu("FusedMatMul",
                     {random_tensor(Shape{2, 3, 7, 9}, 52),
                      constant(random_tensor(Shape{9, 11}, 53)), constant(bias)},
                     {{"activation", "GeluErf"}});
  // Both transposed, same batch, Swish, no bias.
  expect_matches_cpu("FusedMatMul",
                     {random_tensor(Shape{2, 3, 9, 7}, 54), random_tensor(Shape{2, 3, 11, 9}, 55)},
                     {{"trans_a", 1}, {"trans_b", 1}, {"activation", "Swish"}});
  // A transposed over one B (B broadcast with a zero batch stride), LeakyRelu.
  expect_matches_cpu("FusedMatMul",
                     {random_tensor(Shape{4, 9, 7}, 56), constant(random_tensor(Shape{9, 11}, 57)),
                      constant(bias)},
                     {{"trans_a", 1}, {"activation", "LeakyRelu"}, {"activation_alpha", 0.1f}});
  // One A broadcast over B's batch, Clip, GeluTanh.
  expect_matches_cpu(
      "FusedMatMul", {random_tensor(Shape{7, 9}, 58), random_tensor(Shape{4, 9, 11}, 59)},
      {{"activation", "Clip"}, {"activation_alpha", -0.5f}, {"activation_beta", 0.6f}});
  expect_matches_cpu("FusedMatMul",
                     {random_tensor(Shape{1, 7, 9}, 60), random_tensor(Shape{3, 9, 11}, 61), bias},
                     {{"activation", "GeluTanh"}});
  // A residual Z (cuBLASLt's C, beta 1) added before the activation: with a bias over all rows of
  // a batched A, without one over per-batch products, and under transposes.
  expect_matches_cpu("FusedMatMul", {random_tensor(Shape{2, 3, 7, 9}, 62),
                                     constant(random_tensor(Shape{9, 11}, 63)), constant(bias),
                                     random_tensor(Shape{2, 3, 7, 11}, 64)});
  expect_matches_cpu("FusedMatMul",
                     {random_tensor(Shape{4, 7, 9}, 65), random_tensor(Shape{4, 9, 11}, 66),
                      omitted(), random_tensor(Shape{4, 7, 11}, 67)},
                     {{"activation", "Relu"}});
  expect_matches_cpu("FusedMatMul",
                     {random_tensor(Shape{9, 7}, 68), constant(random_tensor(Shape{11, 9}, 69)),
                      constant(bias), random_tensor(Shape{7, 11}, 70)},
                     {{"trans_a", 1}, {"trans_b", 1}});
  // Few rows and a long K (BERT's feed-forward products), where K may run in slices summed with
  // the epilogue (SlicedMatmul) if measured faster: exact GELU with a bias, and a residual under
  // a transposed W. Sums of 768 and 1536 products of values in [-1, 1] reach about 20 and cancel
  // to near 0: float32's rounding in another order leaves up to about 1e-4 absolute.
  expect_matches_cpu(
      "FusedMatMul",
      {random_tensor(Shape{1, 128, 768}, 71), constant(random_tensor(Shape{768, 1024}, 72)),
       constant(random_tensor(Shape{1024}, 73))},
      {{"activation", "GeluErf"}}, 2e-4, 2e-4);
  expect_matches_cpu(
      "FusedMatMul",
      {random_tensor(Shape{96, 1536}, 74), constant(random_tensor(Shape{384, 1536}, 75)),
       constant(random_tensor(Shape{384}, 76)), random_tensor(Shape{96, 384}, 77)},
      {{"trans_b", 1}, {"activation", "Relu"}}, 2e-4, 2e-4);
  // A norm epilogue (inputs 4 and 5): BERT's post-LN output projection and linear2, where K may
  // run in slices summed and normalized in one launch; rows of 30 (not a multiple of 4); a batched
  // product (LayerNormalization's launch after the product); an activation before the norm.
  expect_matches_cpu(
      "FusedMatMul",
      {random_tensor(Shape{128, 3072}, 78), constant(random_tensor(Shape{3072, 768}, 79)),
       constant(random_tensor(Shape{768}, 80)), random_tensor(Shape{128, 768}, 81),
       constant(random_tensor(Shape{768}, 82, 0.5f, 1.5f)),
       constant(random_tensor(Shape{768}, 83))},
      {{"norm_epsilon", 1e-12f}}, 2e-4, 2e-4);
  expect_matches_cpu(
      "FusedMatMul",
      {random_tensor(Shape{128, 768}, 84), constant(random_tensor(Shape{768, 768}, 85)),
       constant(random_tensor(Shape{768}, 86)), random_tensor(Shape{128, 768}, 87),
       constant(random_tensor(Shape{768}, 88, 0.5f, 1.5f)),
       constant(random_tensor(Shape{768}, 89))},
      {{"norm_epsilon", 1e-5f}}, 2e-4, 2e-4);
  expect_matches_cpu(
      "FusedMatMul",
      {random_tensor(Shape{64, 512}, 90), constant(random_tensor(Shape{512, 30}, 91)),
       constant(random_tensor(Shape{30}, 92)), omitted(),
       constant(random_tensor(Shape{30}, 93, 0.5f, 1.5f))},
      {{"activation", "Relu"}}, 2e-4, 2e-4);
  expect_matches_cpu(
      "FusedMatMul",
      {random_tensor(Shape{3, 7, 9}, 94), random_tensor(Shape{3, 9, 11}, 95), omitted(), omitted(),
       constant(random_tensor(Shape{11}, 96, 0.5f, 1.5f)), constant(random_tensor(Shape{11}, 97))},
      {{"activation", "Tanh"}, {"norm_epsilon", 1e-3f}});
}

// The sum of a product's K slices with its epilogue (launch_slice_sum), four elements a thread
// (elements a multiple of 4) and one (not), against a double reference.
TEST(CudaKernels, SliceSum) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 80;
  for (const auto& [outer, channels, inner] : {std::array<int64_t, 3>{4, 6, 8}, {3, 5, 7}}) {
    const int slices = 3;
    const int64_t n = outer * channels * inner;
    Tensor parts = random_tensor(Shape{slices, n}, seed++);
    Tensor b = random_tensor(Shape{channels}, seed++), z = random_tensor(Shape{n}, seed++);
    Tensor pd = parts.to(Device::cuda()), bd = b.to(Device::cuda()), zd = z.to(Device::cuda());
    Tensor y = Tensor::empty(Shape{n}, DType::kFloat32, Device::cuda());
    cuda::launch_slice_sum(
        static_cast<const float*>(pd.raw_data()), slices, static_cast<float*>(y.raw_data()), outer,
        channels, inner,
        cuda::ConvEpilogue{bd.raw_data(), zd.raw_data(), cuda::UnaryOp::kLeakyRelu, 0.1f, 0.f},
        nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<double> pv = to_doubles(parts), bv = to_doubles(b), zv = to_doubles(z), want(n);
    for (int64_t i = 0; i < n; ++i) {
      double v = bv[(i / inner) % channels] + zv[i];
      for (int s = 0; s < slices; ++s) v += pv[s * n + i];
      want[i] = v > 0 ? v : 0.1 * v;
    }
    expect_close(y.to(Device::cpu()), {n}, want, 1e-6, 1e-5);
  }
}

// The sum of K slices with the epilogue and a LayerNormalization of each row
// (launch_slice_sum_norm): rows of 768 and 1000 four elements a lane, 30 and 1024 one, against a
// double reference.
TEST(CudaKernels, SliceSumNorm) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 180;
  for (const auto& [rows, n] : {std::array<int64_t, 2>{5, 768}, {3, 1000}, {4, 30}, {2, 1023}}) {
    SCOPED_TRACE(::testing::Message() << rows << " x " << n);
    const int slices = 4;
    Tensor parts = random_tensor(Shape{slices, rows, n}, seed++);
    Tensor b = random_tensor(Shape{n}, seed++), z = random_tensor(Shape{rows, n}, seed++);
    Tensor scale = random_tensor(Shape{n}, seed++, 0.5f, 1.5f),
           shift = random_tensor(Shape{n}, seed++);
    Tensor pd = parts.to(Device::cuda()), bd = b.to(Device::cuda()), zd = z.to(Device::cuda());
    Tensor sd = scale.to(Device::cuda()), hd = shift.to(Device::cuda());
    Tensor y = Tensor::empty(Shape{rows, n}, DType::kFloat32, Device::cuda());
    cuda::launch_slice_sum_norm(
        static_cast<const float*>(pd.raw_data()), slices, static_cast<float*>(y.raw_data()), rows,
        n, cuda::ConvEpilogue{bd.raw_data(), zd.raw_data(), cuda::UnaryOp::kRelu, 0.f, 0.f},
        cuda::RowNorm{sd.raw_data(), hd.raw_data(), 1e-5f}, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<double> pv = to_doubles(parts), bv = to_doubles(b), zv = to_doubles(z);
    std::vector<double> sv = to_doubles(scale), hv = to_doubles(shift), want(rows * n);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < n; ++j) {
        double v = bv[j] + zv[r * n + j];
        for (int s = 0; s < slices; ++s) v += pv[(s * rows + r) * n + j];
        want[r * n + j] = v > 0 ? v : 0;
        mean += want[r * n + j] / static_cast<double>(n);
      }
      for (int64_t j = 0; j < n; ++j)
        var += (want[r * n + j] - mean) * (want[r * n + j] - mean) / static_cast<double>(n);
      for (int64_t j = 0; j < n; ++j)
        want[r * n + j] = (want[r * n + j] - mean) / std::sqrt(var + 1e-5) * sv[j] + hv[j];
    }
    expect_close(y.to(Device::cpu()), {rows, n}, want, 1e-5, 1e-4);
  }
}

// Pointwise convolutions in one launch with the epilogue (pointwise_conv.h), both tile shapes, over
// partial tiles, several images and a cin past two staged chunks, against a double reference.
TEST(CudaKernels, PointwiseConv) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 190;
  for (const auto& [batch, cout, cin, hw] :
       {std::array<int64_t, 4>{2, 40, 70, 49}, {1, 96, 16, 300}, {1, 5, 3, 7}, {3, 130, 33, 196}})
    for (cuda::PointwiseTile tile : {cuda::PointwiseTile::kWide, cuda::PointwiseTile::kTall}) {
      SCOPED_TRACE(::testing::Message()
                   << batch << "x" << cout << "x" << cin << "x" << hw
                   << (tile == cuda::PointwiseTile::kWide ? " wide" : " tall"));
      Tensor x = random_tensor(Shape{batch, cin, hw}, seed++);
      Tensor w = random_tensor(Shape{cout, cin}, seed++);
      Tensor b = random_tensor(Shape{cout}, seed++);
      Tensor z = random_tensor(Shape{batch, cout, hw}, seed++);
      Tensor xd = x.to(Device::cuda()), wd = w.to(Device::cuda()), bd = b.to(Device::cuda());
      Tensor zd = z.to(Device::cuda());
      Tensor y = Tensor::empty(Shape{batch, cout, hw}, DType::kFloat32, Device::cuda());
      cuda::launch_pointwise_conv(
          tile, static_cast<const float*>(xd.raw_data()), static_cast<const float*>(wd.raw_data()),
          static_cast<float*>(y.raw_data()), batch, cout, cin, hw,
          cuda::ConvEpilogue{bd.raw_data(), zd.raw_data(), cuda::UnaryOp::kClip, 0.f, 1.5f},
          nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<double> xv = to_doubles(x), wv = to_doubles(w), bv = to_doubles(b);
      std::vector<double> zv = to_doubles(z), want(batch * cout * hw);
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t c = 0; c < cout; ++c)
          for (int64_t p = 0; p < hw; ++p) {
            double v = bv[c] + zv[(i * cout + c) * hw + p];
            for (int64_t k = 0; k < cin; ++k) v += wv[c * cin + k] * xv[(i * cin + k) * hw + p];
            want[(i * cout + c) * hw + p] = std::min(std::max(v, 0.0), 1.5);
          }
      expect_close(y.to(Device::cpu()), {batch, cout, hw}, want, 1e-5, 1e-5);
    }
}

// Row copies in one launch per 32 (row_copy.cu): 40 copies of rows with their own pitches, wide
// (16-byte) and byte-wise, some zeroing, against the same copies done on the host.
TEST(CudaKernels, RowCopies) {
  SKIP_WITHOUT_CUDA();
  const int64_t bytes = 1 << 16;
  Tensor src = Tensor::empty(Shape{bytes}, DType::kUInt8);
  for (int64_t i = 0; i < bytes; ++i) src.data<uint8_t>()[i] = static_cast<uint8_t>(i * 7 + 3);
  Tensor dst0 = Tensor::empty(Shape{bytes}, DType::kUInt8);
  for (int64_t i = 0; i < bytes; ++i) dst0.data<uint8_t>()[i] = static_cast<uint8_t>(i * 13 + 1);
  Tensor sd = src.to(Device::cuda()), dd = dst0.to(Device::cuda());
  std::vector<cuda::RowCopyDesc> copies;
  std::vector<uint8_t> want(dst0.data<uint8_t>(), dst0.data<uint8_t>() + bytes);
  for (int k = 0; k < 40; ++k) {
    const bool wide = k % 2 == 0;
    cuda::RowCopyDesc c;
    const size_t dst_at = 1024 * static_cast<size_t>(k) + (wide ? 0 : 3);
    const size_t src_at = 512 * static_cast<size_t>(k) + (wide ? 16 : 5);
    c.dst = static_cast<uint8_t*>(dd.raw_data()) + dst_at;
    c.src = k % 5 == 0 ? nullptr : static_cast<const uint8_t*>(sd.raw_data()) + src_at;
    c.dst_pitch = wide ? 128 : 100;
    c.src_pitch = wide ? 64 : 70;
    c.width = wide ? 48 : 37;
    c.rows = 3 + k % 4;
    for (size_t r = 0; r < c.rows; ++r)
      for (size_t b = 0; b < c.width; ++b)
        want[dst_at + r * c.dst_pitch + b] =
            c.src == nullptr ? 0 : src.data<uint8_t>()[src_at + r * c.src_pitch + b];
    copies.push_back(c);
  }
  cuda::launch_copy_rows(copies.data(), copies.size(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Tensor got = dd.to(Device::cpu());
  for (int64_t i = 0; i < bytes; ++i)
    ASSERT_EQ(got.data<uint8_t>()[i], want[static_cast<size_t>(i)]) << "byte " << i;
}

// The greedy choice on the device (row_argmax.cu) against std::max_element, row by row of a
// strided [5, 3, 50257] block (the last position of each): random rows, one whose maximum occurs
// twice (the first wins), one of -inf only (index 0), and one holding a NaN (flagged).
TEST(CudaKernels, RowArgmax) {
  SKIP_WITHOUT_CUDA();
  const int64_t rows = 5, positions = 3, cols = 50257;
  Tensor logits = random_tensor(Shape{rows, positions, cols}, 801, -5.f, 5.f);
  float* at = logits.data<float>();
  auto last = [&](int64_t r) { return at + (r * positions + positions - 1) * cols; };
  last(1)[40000] = 9.f;
  last(1)[123] = 9.f;
  for (int64_t j = 0; j < cols; ++j) last(2)[j] = -std::numeric_limits<float>::infinity();
  last(3)[7] = std::numeric_limits<float>::quiet_NaN();
  Tensor dev_logits = logits.to(Device::cuda());
  Tensor index = Tensor::empty(Shape{rows}, DType::kInt64, Device::cuda());
  Tensor nan = Tensor::empty(Shape{rows}, DType::kInt32, Device::cuda());
  Tensor scratch =
      Tensor::empty(Shape{static_cast<int64_t>(cuda::row_argmax_scratch_bytes(rows, cols))},
                    DType::kUInt8, Device::cuda());
  cuda::launch_row_argmax(static_cast<const float*>(dev_logits.raw_data()) + (positions - 1) * cols,
                          rows, cols, positions * cols, static_cast<int64_t*>(index.raw_data()),
                          static_cast<int*>(nan.raw_data()), scratch.raw_data(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Tensor got = index.to(Device::cpu()), flags = nan.to(Device::cpu());
  for (int64_t r = 0; r < rows; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    EXPECT_EQ(flags.data<int32_t>()[r], r == 3 ? 1 : 0);
    if (r != 3)
      EXPECT_EQ(got.data<int64_t>()[r], std::max_element(last(r), last(r) + cols) - last(r));
  }
  EXPECT_EQ(got.data<int64_t>()[1], 123);
  EXPECT_EQ(got.data<int64_t>()[2], 0);
}

// The choice kept on the device (DeviceOps::argmax_rows_into, what greedy decoding on CUDA feeds
// back as the next ids) is std::max_element's, NaNs included: a row holding a NaN after its first
// value passes over it, a row starting with one gives 0. The ids come out as int64 and as int32,
// and copy_to_host_after reads the choices at a mark.
TEST(CudaKernels, RowArgmaxKeptOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  const int64_t rows = 6;
  const Device cuda = Device::cuda();
  const DeviceOps& ops = device_ops(cuda);
  ASSERT_NE(ops.argmax_rows_into, nullptr);
  // Rows of many parts (the first launch's blocks) and of one.
  for (int64_t cols : {int64_t{32000}, int64_t{1000}}) {
    Tensor logits = random_tensor(Shape{rows, cols}, 802, -5.f, 5.f);
    float* at = logits.data<float>();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    at[1 * cols + 7] = nan;
    at[2 * cols + 0] = nan;
    at[3 * cols + 500] = 9.f;
    at[3 * cols + 20] = 9.f;
    for (int64_t j = 0; j < cols; ++j) at[4 * cols + j] = -std::numeric_limits<float>::infinity();
    Tensor dev = logits.to(cuda);
    for (bool ids32 : {false, true}) {
      SCOPED_TRACE(std::to_string(cols) + (ids32 ? " columns, int32 ids" : " columns, int64 ids"));
      Tensor ids = Tensor::empty(Shape{rows}, ids32 ? DType::kInt32 : DType::kInt64, cuda);
      Tensor chosen = Tensor::empty(Shape{rows}, DType::kInt64, cuda);
      ops.argmax_rows_into(static_cast<const float*>(dev.raw_data()), rows, cols, cols, cuda,
                           ids.raw_data(), ids32, static_cast<int64_t*>(chosen.raw_data()));
      const uint64_t mark = ops.mark(cuda);
      std::vector<int64_t> host(rows, -1);
      ops.copy_to_host_after(host.data(), chosen.raw_data(), rows * sizeof(int64_t), cuda, mark);
      Tensor id_host = ids.to(Device::cpu());
      for (int64_t r = 0; r < rows; ++r) {
        SCOPED_TRACE("row " + std::to_string(r));
        const float* row = at + r * cols;
        const int64_t want = std::max_element(row, row + cols) - row;
        EXPECT_EQ(host[r], want);
        EXPECT_EQ(ids32 ? id_host.data<int32_t>()[r] : id_host.data<int64_t>()[r], want);
      }
      EXPECT_EQ(host[2], 0);
      EXPECT_EQ(host[3], 20);
      EXPECT_EQ(host[4], 0);
    }
  }
}

// Skinny products (gemv.cu: up to eight rows, decoding): GPT-2's layer shapes at one token (K split
// over many blocks, the last block of each column range adding the partials), two and three rows
// through a batch dim, a bias with GeluTanh and with Relu in the epilogue, a Gemm's bias row, a K
// too short to split, and shapes it leaves to cuBLASLt (N not a multiple of 4, nine rows). Each
// runs three times (eager, recorded, replayed): the column counters must be back at zero after
// every launch.
TEST(CudaKernels, SkinnyProducts) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 700;
  auto weights = [&](int64_t k, int64_t n) { return constant(random_tensor(Shape{k, n}, seed++)); };
  expect_matches_cpu("MatMul", {random_tensor(Shape{1, 1, 768}, seed++), weights(768, 2304)});
  expect_matches_cpu("FusedMatMul",
                     {random_tensor(Shape{1, 1, 768}, seed++), weights(768, 3072),
                      constant(random_tensor(Shape{3072}, seed++))},
                     {{"activation", "GeluTanh"}});
  expect_matches_cpu("FusedMatMul",
                     {random_tensor(Shape{2, 1, 3072}, seed++), weights(3072, 768),
                      constant(random_tensor(Shape{768}, seed++))},
                     {{"activation", "Relu"}});
  expect_matches_cpu("MatMul", {random_tensor(Shape{3, 20}, seed++), weights(20, 36)});
  // Gemm with a bias row (alpha 1, nothing transposed) takes the same kernel.
  expect_matches_cpu("Gemm", {random_tensor(Shape{3, 64}, seed++), weights(64, 48),
                              constant(random_tensor(Shape{48}, seed++))});
  expect_matches_cpu("MatMul", {random_tensor(Shape{4, 100}, seed++), weights(100, 260)});
  expect_matches_cpu("MatMul", {random_tensor(Shape{1, 64}, seed++), weights(64, 50)});
  expect_matches_cpu("MatMul", {random_tensor(Shape{1, 64}, seed++), weights(64, 1001)}, {}, 1e-5);
  expect_matches_cpu("MatMul", {random_tensor(Shape{8, 1, 768}, seed++), weights(768, 2304)});
  expect_matches_cpu("MatMul", {random_tensor(Shape{6, 64}, seed++), weights(64, 48)});
  expect_matches_cpu("MatMul", {random_tensor(Shape{9, 64}, seed++), weights(64, 48)});
  // A residual Z added in the epilogue (GPT-2's attention and MLP output projections), with and
  // without a bias, and one too long for the kernel (cuBLASLt's C). Sums of 768 or 3072 products
  // (about 16 or 32 in size) plus Z may cancel to near zero: the absolute tolerance is that of the
  // sums, whose order differs from the CPU's.
  expect_matches_cpu(
      "FusedMatMul",
      {random_tensor(Shape{1, 1, 768}, seed++), weights(768, 768),
       constant(random_tensor(Shape{768}, seed++)), random_tensor(Shape{1, 1, 768}, seed++)},
      {}, 1e-4);
  expect_matches_cpu("FusedMatMul",
                     {random_tensor(Shape{3, 1, 3072}, seed++), weights(3072, 768), omitted(),
                      random_tensor(Shape{3, 1, 768}, seed++)},
                     {{"activation", "GeluTanh"}}, 1e-4);
  expect_matches_cpu("FusedMatMul", {random_tensor(Shape{9, 64}, seed++), weights(64, 48),
                                     constant(random_tensor(Shape{48}, seed++)),
                                     random_tensor(Shape{9, 48}, seed++)});
}

// The skinny kernel above eight rows (groups of eight, one grid layer each: BERT-tiny's 32-token
// products), with bias, residual, an activation and the LayerNormalization epilogue (with and
// without its bias), K split over blocks and not, a last group of fewer rows; launched twice, so
// the counters must be back at zero. Every output against a double reference.
TEST(CudaKernels, SkinnyProductsWide) {
  SKIP_WITHOUT_CUDA();
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  struct Case {
    int64_t m, n, k;
    cuda::UnaryOp act;
    bool residual, norm, norm_bias;
  };
  uint64_t seed = 900;
  for (const Case& c : {Case{32, 256, 1024, cuda::UnaryOp::kIdentity, true, true, true},
                        Case{32, 768, 256, cuda::UnaryOp::kIdentity, false, false, false},
                        Case{20, 256, 256, cuda::UnaryOp::kGelu, false, false, false},
                        Case{13, 132, 40, cuda::UnaryOp::kRelu, true, true, false},
                        Case{9, 64, 2048, cuda::UnaryOp::kIdentity, true, true, true}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k));
    const cuda::GemvPlan plan = cuda::gemv_plan(c.m, c.n, c.k, sms);
    ASSERT_GT(plan.splits, 0);
    EXPECT_EQ(plan.groups, (c.m + 7) / 8);
    Tensor x = random_tensor(Shape{c.m, c.k}, seed++), w = random_tensor(Shape{c.k, c.n}, seed++);
    Tensor b = random_tensor(Shape{c.n}, seed++), z = random_tensor(Shape{c.m, c.n}, seed++);
    Tensor g = random_tensor(Shape{c.n}, seed++, 0.5f, 1.5f),
           gb = random_tensor(Shape{c.n}, seed++);
    Tensor xd = x.to(Device::cuda()), wd = w.to(Device::cuda()), bd = b.to(Device::cuda());
    Tensor zd = z.to(Device::cuda()), gd = g.to(Device::cuda()), gbd = gb.to(Device::cuda());
    Tensor y = Tensor::empty(Shape{c.m, c.n}, DType::kFloat32, Device::cuda());
    Tensor scratch =
        Tensor::empty(Shape{static_cast<int64_t>(cuda::gemv_scratch_bytes(plan, c.m) / 4 + 1)},
                      DType::kFloat32, Device::cuda());
    Tensor counters = Tensor::zeros(Shape{static_cast<int64_t>(cuda::gemv_counters(plan))},
                                    DType::kInt32, Device::cuda());
    const cuda::GemvLayerNorm ln{c.norm ? static_cast<const float*>(gd.raw_data()) : nullptr,
                                 c.norm_bias ? static_cast<const float*>(gbd.raw_data()) : nullptr,
                                 1e-5f};
    for (int launch = 0; launch < 2; ++launch)
      cuda::launch_gemv(
          plan, c.m, c.n, c.k, static_cast<const float*>(xd.raw_data()),
          static_cast<const float*>(wd.raw_data()), static_cast<const float*>(bd.raw_data()),
          c.residual ? static_cast<const float*>(zd.raw_data()) : nullptr, c.act, 0.f, 0.f,
          static_cast<float*>(y.raw_data()), static_cast<float*>(scratch.raw_data()),
          static_cast<unsigned*>(counters.raw_data()), nullptr, ln);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<double> xv = to_doubles(x), wv = to_doubles(w), bv = to_doubles(b);
    const std::vector<double> zv = to_doubles(z), gv = to_doubles(g), gbv = to_doubles(gb);
    std::vector<double> want(static_cast<size_t>(c.m * c.n));
    for (int64_t r = 0; r < c.m; ++r) {
      double* row = &want[static_cast<size_t>(r * c.n)];
      for (int64_t j = 0; j < c.n; ++j) {
        double v = bv[j] + (c.residual ? zv[r * c.n + j] : 0.0);
        for (int64_t i = 0; i < c.k; ++i) v += xv[r * c.k + i] * wv[i * c.n + j];
        if (c.act == cuda::UnaryOp::kRelu) v = std::max(v, 0.0);
        if (c.act == cuda::UnaryOp::kGelu) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
        row[j] = v;
      }
      if (!c.norm) continue;
      double mean = 0, var = 0;
      for (int64_t j = 0; j < c.n; ++j) mean += row[j];
      mean /= static_cast<double>(c.n);
      for (int64_t j = 0; j < c.n; ++j) var += (row[j] - mean) * (row[j] - mean);
      const double rstd = 1.0 / std::sqrt(var / static_cast<double>(c.n) + 1e-5);
      for (int64_t j = 0; j < c.n; ++j)
        row[j] = (row[j] - mean) * rstd * gv[j] + (c.norm_bias ? gbv[j] : 0.0);
    }
    expect_close(y.to(Device::cpu()), {c.m, c.n}, want, 2e-4, 2e-4);
  }
}

// Every opcode of a FusedElementwise program, each after a prologue that reads the four kinds of
// input (same shape, a row, a scalar, a strided column).
TEST(CudaKernels, FusedElementwise) {
  SKIP_WITHOUT_CUDA();
  Tensor x = random_tensor(Shape{2, 3, 4, 5}, 71, -2.f, 2.f);
  Tensor row = random_tensor(Shape{5}, 72, 0.5f, 1.5f);
  Tensor s = random_tensor(Shape{1}, 73);
  Tensor col = random_tensor(Shape{3, 1, 1}, 74);
  const std::vector<float> consts = {0.25f, -0.6f, 0.7f};  // k = 0, then parameters at k = 1, 2
  const std::vector<std::pair<const char*, int>> ops = {
      {"Add", 0},         {"Sub", 1},       {"Mul", 2},    {"Div", 3},        {"Max", 4},
      {"Min", 5},         {"Pow", 6},       {"Relu", 7},   {"Sigmoid", 8},    {"Tanh", 9},
      {"Exp", 10},        {"Log", 11},      {"Neg", 12},   {"Abs", 13},       {"Sqrt", 14},
      {"Reciprocal", 15}, {"Erf", 16},      {"Clip", 17},  {"LeakyRelu", 18}, {"HardSigmoid", 19},
      {"HardSwish", 20},  {"Softplus", 21}, {"Swish", 22}, {"GeluErf", 23},   {"GeluTanh", 24}};
  ASSERT_EQ(ops.size(), 25u);
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    // r4 = x * row; r5 = r4 + col; r6 = r5 - s; then op over r6 (|r6| + 0.25 where the domain
    // needs positive values).
    std::vector<int64_t> code = {2, 4, 0, 1, 0, 5, 4, 3, 1, 6, 5, 2};
    int src = 6;
    const bool positive = op == 6 || op == 11 || op == 14;
    if (positive) {
      code.insert(code.end(), {13, 7, 6, 0, 0, 8, 7, -1});
      src = 8;
    }
    const int dst = src + 1;
    if (op <= 5)
      code.insert(code.end(), {op, dst, src, 1});  // with the row
    else if (op == 6)
      code.insert(code.end(), {op, dst, src, -3});  // ^ 0.7
    else if (op == 17 || op == 19)
      code.insert(code.end(), {op, dst, src, -2});  // (-0.6, 0.7)
    else if (op == 18)
      code.insert(code.end(), {op, dst, src, -2});
    else
      code.insert(code.end(), {op, dst, src, 0});
    expect_matches_cpu("FusedElementwise", {x, row, s, col}, {{"code", code}, {"consts", consts}});
  }
}

TEST(CudaKernels, FusedAttention) {
  SKIP_WITHOUT_CUDA();
  // K^T as exporters give it, a key-padding mask with -inf, several query blocks and key chunks.
  Tensor mask = random_tensor(Shape{2, 1, 1, 45}, 81);
  for (int j = 40; j < 45; ++j) mask.data<float>()[j] = -std::numeric_limits<float>::infinity();
  expect_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{2, 3, 17, 64}, 82), random_tensor(Shape{2, 3, 64, 45}, 83),
       random_tensor(Shape{2, 3, 45, 64}, 84), mask},
      {{"scale", 0.158f}, {"k_transposed", 1}});
  // K as is, a causal [Sq, Sk] mask, head sizes that are not multiples of 32, no batch dims.
  Tensor causal = Tensor::empty(Shape{33, 70});
  for (int i = 0; i < 33; ++i)
    for (int j = 0; j < 70; ++j) causal.data<float>()[i * 70 + j] = j > i + 37 ? -1e9f : 0.f;
  expect_matches_cpu("FusedAttention",
                     {random_tensor(Shape{33, 72}, 85), random_tensor(Shape{70, 72}, 86),
                      random_tensor(Shape{70, 100}, 87), constant(causal)},
                     {{"scale", 0.12f}});
  // Head size 32, and 40 with values of 24.
  expect_matches_cpu("FusedAttention",
                     {random_tensor(Shape{4, 6, 32}, 91), random_tensor(Shape{4, 33, 32}, 92),
                      random_tensor(Shape{4, 33, 32}, 93)},
                     {{"scale", 0.2f}});
  expect_matches_cpu("FusedAttention",
                     {random_tensor(Shape{2, 5, 40}, 94), random_tensor(Shape{2, 40, 9}, 95),
                      random_tensor(Shape{2, 9, 24}, 96)},
                     {{"scale", 0.3f}, {"k_transposed", 1}});
  // No mask, one head of 128.
  expect_matches_cpu("FusedAttention",
                     {random_tensor(Shape{1, 9, 128}, 88), random_tensor(Shape{1, 31, 128}, 89),
                      random_tensor(Shape{1, 31, 128}, 90)},
                     {{"scale", 0.088f}});
}

// The op compiled for CUDA with Precision::kFloat16 and then kBFloat16 (float32 values cast to
// 16 bits at the edges, constants converted at compile time, every kernel on 16-bit storage) stays
// within that format's rounding of the CPU's float32 (atol and rtol are float16's; bfloat16, with 3
// fewer mantissa bits, gets 8 times both), and its outputs are float32 again. Run three times
// (eager, recorded, replayed).
void expect_half_matches_cpu(const std::string& op, const std::vector<OpInput>& inputs,
                             const Attributes& attrs = {}, double atol = 2e-2, double rtol = 1e-2,
                             int num_outputs = 1) {
  std::vector<Tensor> want = run_on({"cpu"}, op, inputs, attrs, 1, num_outputs);
  for (const Precision p : {Precision::kFloat16, Precision::kBFloat16}) {
    const bool bf16 = p == Precision::kBFloat16;
    SCOPED_TRACE(op + (bf16 ? " in bfloat16" : " in float16"));
    std::vector<Tensor> got = run_on({"cuda"}, op, inputs, attrs, 3, num_outputs, p);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].dtype(), want[k].dtype());
      expect_close(got[k], want[k].shape(), to_doubles(want[k]), bf16 ? 8 * atol : atol,
                   bf16 ? 8 * rtol : rtol);
    }
  }
}

TEST(CudaKernels, OnnxAttention) {
  SKIP_WITHOUT_CUDA();
  // 4-D, grouped heads, causal with an additive mask, several query blocks and key chunks.
  expect_matches_cpu(
      "Attention",
      {random_tensor(Shape{2, 6, 19, 64}, 301), random_tensor(Shape{2, 2, 45, 64}, 302),
       random_tensor(Shape{2, 2, 45, 64}, 303), random_tensor(Shape{19, 45}, 304)},
      {{"is_causal", 1}});
  // 3-D with head counts, a boolean mask, past and present, head sizes 40 (K) and 24 (V).
  expect_matches_cpu(
      "Attention",
      {random_tensor(Shape{2, 7, 4 * 40}, 305), random_tensor(Shape{2, 7, 2 * 40}, 306),
       random_tensor(Shape{2, 7, 2 * 24}, 307),
       random_ints(Shape{2, 1, 7, 40}, 308, 0, 1, DType::kBool),
       random_tensor(Shape{2, 2, 33, 40}, 309), random_tensor(Shape{2, 2, 33, 24}, 310)},
      {{"q_num_heads", 4}, {"kv_num_heads", 2}, {"is_causal", 1}}, 1e-5, 1e-4, 3);
  // Decoding against a padded cache (nonpad_kv_seqlen), multi-query, softcap, a sliding window.
  expect_matches_cpu(
      "Attention",
      {random_tensor(Shape{3, 8, 1, 128}, 311), random_tensor(Shape{3, 1, 70, 128}, 312),
       random_tensor(Shape{3, 1, 70, 128}, 313), omitted(), omitted(), omitted(),
       Tensor::from_vector<int64_t>({3}, {70, 12, 41})},
      {{"is_causal", 1}, {"softcap", 2.5f}, {"left_window_size", 20}});
  // float16 and bfloat16 storage.
  expect_half_matches_cpu(
      "Attention",
      {random_tensor(Shape{1, 4, 9, 32}, 314), random_tensor(Shape{1, 4, 12, 32}, 315),
       random_tensor(Shape{1, 4, 12, 32}, 316)},
      {{"is_causal", 1}});
}

TEST(CudaHalfPrecision, ElementwiseAndProducts) {
  SKIP_WITHOUT_CUDA();
  Tensor x = random_tensor(Shape{2, 3, 4, 5}, 201, -2.f, 2.f);
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Gelu", "Exp", "Neg", "HardSwish"})
    expect_half_matches_cpu(op, {x});
  expect_half_matches_cpu(
      "Clip", {x, constant(Tensor::scalar<float>(-0.5f)), constant(Tensor::scalar<float>(1.25f))});
  expect_half_matches_cpu("Add", {x, random_tensor(Shape{4, 1}, 202)});
  expect_half_matches_cpu("Mul", {x, constant(random_tensor(Shape{5}, 203))});
  expect_half_matches_cpu("Div", {x, random_tensor(Shape{2, 3, 4, 5}, 204, 0.5f, 2.f)});
  // r4 = x * row; r5 = r4 + col; r6 = r5 - s; r7 = GeluTanh(r6)
  expect_half_matches_cpu(
      "FusedElementwise",
      {x, random_tensor(Shape{5}, 205), random_tensor(Shape{1}, 206),
       random_tensor(Shape{3, 1, 1}, 207)},
      {{"code", std::vector<int64_t>{2, 4, 0, 1, 0, 5, 4, 3, 1, 6, 5, 2, 24, 7, 6, 0}},
       {"consts", std::vector<float>{0.25f}}});
  Tensor a = random_tensor(Shape{48, 256}, 208), b = random_tensor(Shape{256, 40}, 209);
  // Sums of 256 products of values in [-1, 1] (about 9 in size), each input rounded to 11 bits.
  expect_half_matches_cpu("MatMul", {a, constant(b)}, {}, 5e-2, 1e-2);
  expect_half_matches_cpu(
      "MatMul", {random_tensor(Shape{3, 7, 64}, 210), random_tensor(Shape{3, 64, 9}, 211)}, {},
      5e-2, 1e-2);
  expect_half_matches_cpu(
      "Gemm",
      {a, constant(random_tensor(Shape{40, 256}, 212)), constant(random_tensor(Shape{40}, 213))},
      {{"transB", 1}}, 5e-2, 1e-2);
  expect_half_matches_cpu(
      "FusedMatMul",
      {random_tensor(Shape{2, 16, 64}, 214), constant(random_tensor(Shape{64, 24}, 215)),
       constant(random_tensor(Shape{24}, 216))},
      {{"activation", "GeluErf"}}, 5e-2, 1e-2);
  expect_half_matches_cpu(
      "FusedMatMul",
      {random_tensor(Shape{2, 16, 64}, 217), constant(random_tensor(Shape{64, 24}, 218)),
       constant(random_tensor(Shape{24}, 219)), random_tensor(Shape{2, 16, 24}, 220)},
      {}, 5e-2, 1e-2);
}

TEST(CudaHalfPrecision, ConvNormPoolAttention) {
  SKIP_WITHOUT_CUDA();
  Tensor x = random_tensor(Shape{1, 8, 15, 13}, 221);
  Tensor w = random_tensor(Shape{16, 8, 3, 3}, 222);
  Tensor b = random_tensor(Shape{16}, 223);
  expect_half_matches_cpu("Conv", {x, constant(w), constant(b)}, {{"pads", {1, 1, 1, 1}}}, 5e-2);
  expect_half_matches_cpu("FusedConv",
                          {x, constant(w), constant(b), random_tensor(Shape{1, 16, 15, 13}, 224)},
                          {{"pads", {1, 1, 1, 1}}, {"activation", "Relu"}}, 5e-2);
  expect_half_matches_cpu(
      "Conv",
      {x, constant(random_tensor(Shape{8, 1, 3, 3}, 225)), constant(random_tensor(Shape{8}, 226))},
      {{"group", 8}, {"pads", {1, 1, 1, 1}}});
  expect_half_matches_cpu(
      "FusedConv",
      {random_tensor(Shape{2, 96, 5, 6}, 227), constant(random_tensor(Shape{40, 96, 1, 1}, 228))},
      {{"activation", "Clip"}, {"activation_alpha", 0.f}, {"activation_beta", 6.f}}, 5e-2);
  // Shapes whose fused cuDNN call refuses float16 (ViT's patch embedding, RegNet's grouped
  // convolutions): the other ways run them.
  expect_half_matches_cpu(
      "Conv",
      {random_tensor(Shape{1, 3, 64, 64}, 246), constant(random_tensor(Shape{24, 3, 16, 16}, 247)),
       constant(random_tensor(Shape{24}, 248))},
      {{"strides", {16, 16}}}, 0.2, 2e-2);
  expect_half_matches_cpu(
      "FusedConv",
      {random_tensor(Shape{1, 16, 14, 14}, 249), constant(random_tensor(Shape{16, 2, 3, 3}, 250)),
       constant(random_tensor(Shape{16}, 251))},
      {{"group", 8}, {"pads", {1, 1, 1, 1}}, {"activation", "Relu"}});
  expect_half_matches_cpu(
      "BatchNormalization",
      {x, constant(random_tensor(Shape{8}, 229)), constant(random_tensor(Shape{8}, 230)),
       constant(random_tensor(Shape{8}, 231)), constant(random_tensor(Shape{8}, 232, 0.5f, 2.f))});
  expect_half_matches_cpu("MaxPool", {x},
                          {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  expect_half_matches_cpu("AveragePool", {x}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}});
  expect_half_matches_cpu("GlobalAveragePool", {x});
  expect_half_matches_cpu("Softmax", {x}, {}, 1e-3, 1e-2);
  expect_half_matches_cpu("Softmax", {x}, {{"axis", 1}}, 1e-3, 1e-2);
  Tensor y = random_tensor(Shape{3, 5, 64}, 233);
  expect_half_matches_cpu("LayerNormalization", {y, constant(random_tensor(Shape{64}, 234)),
                                                 constant(random_tensor(Shape{64}, 235))});
  expect_half_matches_cpu("ReduceMean", {y}, {{"axes", {2}}, {"keepdims", 1}}, 1e-3);
  expect_half_matches_cpu("Transpose", {x}, {{"perm", {0, 2, 3, 1}}});
  expect_half_matches_cpu("Concat", {x, random_tensor(Shape{1, 2, 15, 13}, 236)}, {{"axis", 1}});
  expect_half_matches_cpu("Gather",
                          {random_tensor(Shape{10, 6}, 237), random_ints(Shape{2, 3}, 238, 0, 9)});
  Tensor mask = random_tensor(Shape{2, 1, 1, 45}, 239);
  for (int j = 40; j < 45; ++j) mask.data<float>()[j] = -std::numeric_limits<float>::infinity();
  expect_half_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{2, 3, 17, 64}, 240), random_tensor(Shape{2, 3, 64, 45}, 241),
       random_tensor(Shape{2, 3, 45, 64}, 242), mask},
      {{"scale", 0.125f}, {"k_transposed", 1}}, 1e-2);
  expect_half_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{4, 6, 32}, 243), random_tensor(Shape{4, 33, 32}, 244),
       random_tensor(Shape{4, 33, 32}, 245)},
      {{"scale", 0.2f}}, 1e-2);
  // K as is, heads of 64 and 128: the tensor-core kernel (flash_attention.cu), with and without a
  // key-padding mask.
  expect_half_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{2, 3, 70, 64}, 260), random_tensor(Shape{2, 3, 90, 64}, 261),
       random_tensor(Shape{2, 3, 90, 64}, 262), random_tensor(Shape{2, 1, 1, 90}, 263)},
      {{"scale", 0.125f}}, 1e-2);
  expect_half_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{5, 20, 128}, 264), random_tensor(Shape{5, 65, 128}, 265),
       random_tensor(Shape{5, 65, 128}, 266)},
      {{"scale", 0.088f}}, 1e-2);
}

// A graph half on CUDA and half on the CPU (an op CUDA lacks): float16 values are cast back to
// float32 for the CPU node and graph outputs, float32 ones cast to float16 for CUDA nodes; a
// float16 input runs on CUDA as it is.
TEST(CudaHalfPrecision, MixedPlacementAndHalfModels) {
  SKIP_WITHOUT_CUDA();
  Tensor xv = random_tensor(Shape{4, 33}, 251, -3.f, 3.f);
  Graph g;
  Value* x = g.add_input("x", xv.shape());
  Value* r = g.add_op("Relu", {x});
  Value* sum = g.add_op("Add", {r, g.add_op("LpNormalization", {r})});  // CPU only
  Value* y =
      g.add_op("MatMul", {sum, g.add_constant("w", random_tensor(Shape{33, 8}, 252))}, {}, "y");
  g.mark_output(y);
  g.mark_output(r);
  const std::string y_name = y->name;
  Runtime rt;
  CompileOptions cpu;
  cpu.backends = {"cpu"};
  std::vector<Tensor> want = g.compile(&rt, cpu)->execute({xv});
  CompileOptions half;
  half.backends = {"cuda", "cpu"};
  half.precision = Precision::kFloat16;
  Executable* exe = g.compile(&rt, half);
  ASSERT_EQ(exe->outputs().size(), 2u);
  EXPECT_EQ(exe->outputs()[0].name, y_name);
  EXPECT_EQ(exe->outputs()[0].type.dtype, DType::kFloat32);
  EXPECT_EQ(exe->outputs()[1].type.dtype, DType::kFloat32);
  for (int run = 0; run < 2; ++run) {
    std::vector<Tensor> got = exe->execute({xv});
    expect_close(got[0], want[0].shape(), to_doubles(want[0]), 5e-2, 1e-2);
    expect_close(got[1], want[1].shape(), to_doubles(want[1]), 2e-3, 1e-3);
  }
  // A model that is float16 already (no precision option): its kernels run on half storage.
  Tensor hv = Tensor::empty(Shape{3, 40}, DType::kFloat16);
  std::vector<double> src = to_doubles(random_tensor(Shape{3, 40}, 253, -2.f, 2.f));
  Graph g3;
  Value* h = g3.add_input("h", hv.shape(), DType::kFloat16);
  g3.mark_output(g3.add_op("Softmax", {g3.add_op("Sigmoid", {h})}));
  for (size_t i = 0; i < src.size(); ++i)
    static_cast<uint16_t*>(hv.raw_data())[i] = float_to_half(static_cast<float>(src[i]));
  CompileOptions on_cuda;
  on_cuda.backends = {"cuda"};
  Tensor got = g3.compile(&rt, on_cuda)->execute({hv})[0];
  EXPECT_EQ(got.dtype(), DType::kFloat16);
  std::vector<double> want_soft(src.size());
  for (int row = 0; row < 3; ++row) {
    double sum_e = 0;
    for (int j = 0; j < 40; ++j) sum_e += std::exp(1 / (1 + std::exp(-src[row * 40 + j])));
    for (int j = 0; j < 40; ++j)
      want_soft[row * 40 + j] = std::exp(1 / (1 + std::exp(-src[row * 40 + j]))) / sum_e;
  }
  expect_close(got, hv.shape(), want_soft, 1e-4, 5e-3);
}

// CompileOptions::precision = kTF32: products and convolutions on TF32 tensor cores stay within
// TF32's rounding (inputs keep 10 mantissa bits) of the CPU's float32.
TEST(CudaKernels, Tf32Precision) {
  SKIP_WITHOUT_CUDA();
  Tensor x = random_tensor(Shape{1, 16, 20, 20}, 111);
  Tensor w = random_tensor(Shape{32, 16, 3, 3}, 112);
  Tensor a = random_tensor(Shape{48, 256}, 113), b = random_tensor(Shape{256, 40}, 114);
  for (const bool conv : {true, false}) {
    SCOPED_TRACE(conv ? "Conv" : "MatMul");
    Graph g;
    Value* in = g.add_input("in", conv ? x.shape() : a.shape());
    Value* y = conv ? g.add_op("Conv", {in, g.add_constant("w", w)}, {{"pads", {1, 1, 1, 1}}})
                    : g.add_op("MatMul", {in, g.add_constant("b", b)});
    g.mark_output(y);
    Runtime rt;
    CompileOptions cpu;
    cpu.backends = {"cpu"};
    Tensor want = g.compile(&rt, cpu)->execute({conv ? x : a})[0];
    CompileOptions tf32;
    tf32.backends = {"cuda"};
    tf32.precision = Precision::kTF32;
    Executable* exe = g.compile(&rt, tf32);
    for (int r = 0; r < 2; ++r) {
      Tensor got = exe->execute({conv ? x : a})[0];
      // Sums of 144 (conv) or 256 products of values in [-1, 1], each input rounded to 11 bits.
      expect_close(got, want.shape(), to_doubles(want), 2e-2, 1e-2);
    }
  }
}

TEST(CudaKernels, Conv) {
  SKIP_WITHOUT_CUDA();
  Tensor x = random_tensor(Shape{1, 8, 15, 13}, 41);
  Tensor w = random_tensor(Shape{16, 8, 3, 3}, 42);
  Tensor b = random_tensor(Shape{16}, 43);
  expect_matches_cpu("Conv", {x, constant(w), constant(b)}, {{"pads", {1, 1, 1, 1}}}, 1e-4);
  expect_matches_cpu("Conv", {x, constant(w)}, {{"strides", {2, 2}}}, 1e-4);
  // Grouped (not depthwise), two images: cuDNN or one GEMM per image batched over the groups.
  expect_matches_cpu(
      "Conv",
      {random_tensor(Shape{2, 12, 9, 9}, 47), constant(random_tensor(Shape{18, 4, 3, 3}, 48)),
       constant(random_tensor(Shape{18}, 40))},
      {{"group", 3}, {"pads", {1, 1, 1, 1}}}, 1e-4);
  Tensor dw = random_tensor(Shape{8, 1, 3, 3}, 44);
  expect_matches_cpu("Conv", {x, constant(dw), constant(random_tensor(Shape{8}, 45))},
                     {{"group", 8}, {"pads", {1, 1, 1, 1}}, {"dilations", {2, 2}}}, 1e-4);
  for (const char* act : {"Relu", "Clip", "HardSwish", "Sigmoid", "LeakyRelu"})
    expect_matches_cpu("FusedConv", {x, constant(w), constant(b)},
                       {{"pads", {1, 1, 1, 1}},
                        {"activation", act},
                        {"activation_alpha", std::string(act) == "Clip" ? 0.f : 0.1f},
                        {"activation_beta", 6.f}},
                       1e-4);
  expect_matches_cpu("FusedConv", {x, constant(w)}, {{"activation", "Relu"}}, 1e-4);
  // A residual input, added before the activation (ResNet's conv -> Add -> Relu), with and
  // without bias and activation; and a depthwise convolution with every epilogue part.
  Tensor z = random_tensor(Shape{1, 16, 15, 13}, 46);
  for (const char* act : {"Relu", ""}) {
    expect_matches_cpu("FusedConv", {x, constant(w), constant(b), z},
                       {{"pads", {1, 1, 1, 1}}, {"activation", act}}, 1e-4);
    expect_matches_cpu("FusedConv", {x, constant(w), omitted(), z},
                       {{"pads", {1, 1, 1, 1}}, {"activation", act}}, 1e-4);
  }
  // Pointwise convolutions over two images (the GEMM way, where it is the fastest), with bias,
  // residual and ReLU, and bare.
  Tensor px = random_tensor(Shape{2, 96, 5, 6}, 49);
  Tensor pw = random_tensor(Shape{40, 96, 1, 1}, 50);
  expect_matches_cpu("FusedConv",
                     {px, constant(pw), constant(random_tensor(Shape{40}, 51)),
                      random_tensor(Shape{2, 40, 5, 6}, 52)},
                     {{"activation", "Relu"}}, 1e-4);
  expect_matches_cpu("Conv", {px, constant(pw)}, {}, 1e-4);
  // MobileNet-V2's last 7x7 pointwise convolutions at batch 1, 960 -> 160 with a bias (a long K:
  // possibly in slices summed with the epilogue) and 160 -> 960 with ReLU6 (possibly our kernel).
  // Sums of 960 products of values in [-1, 1]: up to about 2e-4 apart in another order.
  expect_matches_cpu(
      "FusedConv",
      {random_tensor(Shape{1, 960, 7, 7}, 53), constant(random_tensor(Shape{160, 960, 1, 1}, 54)),
       constant(random_tensor(Shape{160}, 55)), random_tensor(Shape{1, 160, 7, 7}, 56)},
      {}, 2e-4, 2e-4);
  expect_matches_cpu(
      "FusedConv",
      {random_tensor(Shape{1, 160, 7, 7}, 57), constant(random_tensor(Shape{960, 160, 1, 1}, 58)),
       constant(random_tensor(Shape{960}, 59))},
      {{"activation", "Clip"}, {"activation_alpha", 0.f}, {"activation_beta", 6.f}}, 1e-4);
  Tensor dz = random_tensor(Shape{1, 8, 8, 7}, 47);
  expect_matches_cpu("FusedConv", {x, constant(dw), constant(random_tensor(Shape{8}, 48)), dz},
                     {{"group", 8},
                      {"strides", {2, 2}},
                      {"pads", {1, 1, 1, 1}},
                      {"activation", "Clip"},
                      {"activation_alpha", 0.f},
                      {"activation_beta", 6.f}},
                     1e-4);
}

// A device tensor's float data.
float* dev(const Tensor& t) {
  return static_cast<float*>(t.raw_data());
}

// Depthwise convolution in double: x (N, C, H, W), w (C*m, 1, kh, kw), symmetric padding.
std::vector<double> depthwise_reference(const Tensor& x, const Tensor& w, const Tensor& b,
                                        const Tensor& z, int64_t stride, int64_t pad, int64_t dil,
                                        double lo, double hi) {
  const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  const int64_t oc_n = w.shape()[0], kh = w.shape()[2], kw = w.shape()[3], m = oc_n / c;
  const int64_t oh_n = (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1;
  const int64_t ow_n = (wd + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
  std::vector<double> xv = to_doubles(x), wv = to_doubles(w), bv = to_doubles(b),
                      zv = to_doubles(z);
  std::vector<double> y(static_cast<size_t>(n * oc_n * oh_n * ow_n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t oc = 0; oc < oc_n; ++oc)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          double acc = bv[oc];
          for (int64_t r = 0; r < kh; ++r)
            for (int64_t q = 0; q < kw; ++q) {
              int64_t ih = oh * stride - pad + r * dil, iw = ow * stride - pad + q * dil;
              if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
              acc += xv[((i * c + oc / m) * h + ih) * wd + iw] * wv[(oc * kh + r) * kw + q];
            }
          size_t k = static_cast<size_t>(((i * oc_n + oc) * oh_n + oh) * ow_n + ow);
          y[k] = std::min(std::max(acc + zv[k], lo), hi);
        }
  return y;
}

// The depthwise, im2col and epilogue kernels, launched directly (the conv kernel picks
// among cuDNN and these by timing, so the graph-level tests may not reach them): every kernel
// size it specialises (3x3, 5x5) and the general one, strides, dilation, a channel multiplier,
// and planes wider and taller than one tile of the tiled 3x3 and 5x5 kernel; and the kernel that
// stages its input in shared memory (depthwise_staged.h) on every case it takes (3x3, 5x5, 7x7 at
// stride 1), among them a 7x7 plane of several tiles each way.
TEST(CudaKernels, ConvLaunchers) {
  SKIP_WITHOUT_CUDA();
  struct Case {
    int64_t c, m, h, w, k_h, k_w, stride, pad, dil;
  };
  const Case cases[] = {
      {6, 1, 11, 9, 3, 3, 1, 1, 1},  {6, 2, 11, 9, 3, 3, 2, 1, 2},  {4, 1, 13, 12, 5, 5, 2, 2, 1},
      {3, 3, 9, 10, 7, 7, 1, 3, 1},  {5, 1, 8, 6, 2, 2, 1, 0, 1},   {5, 1, 37, 70, 3, 3, 1, 1, 1},
      {4, 1, 40, 33, 3, 3, 2, 1, 1}, {3, 2, 21, 50, 5, 5, 1, 2, 1}, {7, 1, 7, 7, 3, 3, 1, 1, 1},
      {3, 1, 45, 70, 7, 7, 1, 3, 1}, {5, 1, 6, 5, 7, 7, 1, 2, 1}};
  uint64_t seed = 60;
  for (const Case& t : cases) {
    SCOPED_TRACE(std::to_string(t.k_h) + "x" + std::to_string(t.k_w) + " stride " +
                 std::to_string(t.stride) + " multiplier " + std::to_string(t.m));
    Tensor x = random_tensor(Shape{2, t.c, t.h, t.w}, seed++);
    Tensor w = random_tensor(Shape{t.c * t.m, 1, t.k_h, t.k_w}, seed++);
    Tensor b = random_tensor(Shape{t.c * t.m}, seed++);
    const int64_t oh = (t.h + 2 * t.pad - t.dil * (t.k_h - 1) - 1) / t.stride + 1;
    const int64_t ow = (t.w + 2 * t.pad - t.dil * (t.k_w - 1) - 1) / t.stride + 1;
    Tensor z = random_tensor(Shape{2, t.c * t.m, oh, ow}, seed++);
    cuda::Conv2dDesc d;
    d.batch = 2;
    d.in_channels = t.c;
    d.multiplier = t.m;
    d.in_h = t.h;
    d.in_w = t.w;
    d.out_h = oh;
    d.out_w = ow;
    d.k_h = static_cast<int>(t.k_h);
    d.k_w = static_cast<int>(t.k_w);
    d.stride_h = d.stride_w = static_cast<int>(t.stride);
    d.pad_h = d.pad_w = static_cast<int>(t.pad);
    d.dil_h = d.dil_w = static_cast<int>(t.dil);
    Tensor xd = x.to(Device::cuda()), wdv = w.to(Device::cuda()), bd = b.to(Device::cuda()),
           zd = z.to(Device::cuda());
    Tensor y = Tensor::empty(z.shape(), DType::kFloat32, Device::cuda());
    cuda::ConvEpilogue e{dev(bd), dev(zd), cuda::UnaryOp::kClip, -0.5f, 0.75f};
    cuda::launch_depthwise_conv(cuda::Storage::kFloat32, d, dev(xd), dev(wdv), dev(y), e, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<double> want =
        depthwise_reference(x, w, b, z, t.stride, t.pad, t.dil, -0.5, 0.75);
    expect_close(y.to(Device::cpu()), z.shape(), want, 1e-5, 1e-4);
    if (cuda::depthwise_staged_supports(d)) {
      SCOPED_TRACE("staged in shared memory");
      Tensor ys = Tensor::empty(z.shape(), DType::kFloat32, Device::cuda());
      cuda::launch_depthwise_staged(cuda::Storage::kFloat32, d, dev(xd), dev(wdv), dev(ys), e,
                                    nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_close(ys.to(Device::cpu()), z.shape(), want, 1e-5, 1e-4);
    }
    // The same geometry's patches as columns (im2col), against a direct gather.
    d.multiplier = 1;
    const int64_t rows = t.c * t.k_h * t.k_w, cols = oh * ow;
    Tensor col = Tensor::empty(Shape{2, rows, cols}, DType::kFloat32, Device::cuda());
    cuda::launch_im2col(cuda::Storage::kFloat32, d, dev(xd), dev(col), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<double> xv = to_doubles(x), want_col;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t c = 0; c < t.c; ++c)
        for (int64_t r = 0; r < t.k_h; ++r)
          for (int64_t q = 0; q < t.k_w; ++q)
            for (int64_t p = 0; p < cols; ++p) {
              int64_t ih = (p / ow) * t.stride - t.pad + r * t.dil;
              int64_t iw = (p % ow) * t.stride - t.pad + q * t.dil;
              bool in = ih >= 0 && ih < t.h && iw >= 0 && iw < t.w;
              want_col.push_back(in ? xv[((i * t.c + c) * t.h + ih) * t.w + iw] : 0.0);
            }
    expect_close(col.to(Device::cpu()), {2, rows, cols}, want_col, 0.0, 0.0);
  }
  // The epilogue alone: y = LeakyRelu(y + bias[c] + z) over (3, 5, 7).
  Tensor y0 = random_tensor(Shape{3, 5, 7}, seed++);
  Tensor b = random_tensor(Shape{5}, seed++), z = random_tensor(Shape{3, 5, 7}, seed++);
  Tensor yd = y0.to(Device::cuda()), bd = b.to(Device::cuda()), zd = z.to(Device::cuda());
  cuda::launch_conv_epilogue(
      cuda::Storage::kFloat32, dev(yd), 3, 5, 7,
      cuda::ConvEpilogue{dev(bd), dev(zd), cuda::UnaryOp::kLeakyRelu, 0.1f, 0.f}, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<double> want = to_doubles(y0), bv = to_doubles(b), zv = to_doubles(z);
  for (size_t i = 0; i < want.size(); ++i) {
    double v = want[i] + bv[(i / 7) % 5] + zv[i];
    want[i] = v > 0 ? v : 0.1 * v;
  }
  expect_close(yd.to(Device::cpu()), {3, 5, 7}, want, 1e-6, 1e-5);
}

// Both ways of FusedAttention launched directly, whichever a node would choose: the fused kernel
// against the CPU backend, and the plain way's softmax step against a double reference.
TEST(CudaKernels, AttentionLaunchers) {
  SKIP_WITHOUT_CUDA();
  const int64_t sq = 17, sk = 45, depth = 64;
  Tensor q = random_tensor(Shape{2, 3, sq, depth}, 101),
         kt = random_tensor(Shape{2, 3, depth, sk}, 102);
  Tensor v = random_tensor(Shape{2, 3, sk, depth}, 103),
         mask = random_tensor(Shape{2, 1, 1, sk}, 104);
  cuda::AttentionDesc d;
  d.batch = 6;
  d.sq = sq;
  d.sk = sk;
  d.depth = d.depth_v = depth;
  d.scale = 0.3f;
  d.k_transposed = true;
  d.lead_rank = 2;
  d.lead_dims[0] = 2;
  d.lead_dims[1] = 3;
  d.mask_lead_strides[0] = sk;  // mask [2, 1, 1, sk]: the heads and rows broadcast
  d.mask_k_stride = 1;
  Tensor qd = q.to(Device::cuda()), kd = kt.to(Device::cuda()), vd = v.to(Device::cuda()),
         md = mask.to(Device::cuda());
  Tensor y = Tensor::empty(Shape{2, 3, sq, depth}, DType::kFloat32, Device::cuda());
  cuda::launch_attention(cuda::Storage::kFloat32, d, dev(qd), dev(kd), dev(vd), dev(md), dev(y),
                         nullptr, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Tensor want = run_on({"cpu"}, "FusedAttention", {q, kt, v, mask},
                       {{"scale", 0.3f}, {"k_transposed", 1}})[0];
  expect_close(y.to(Device::cpu()), want.shape(), to_doubles(want), 1e-5, 1e-4);

  Tensor scores = random_tensor(Shape{2, 3, sq, sk}, 105, -3.f, 3.f);
  Tensor sd = scores.to(Device::cuda());
  cuda::launch_attention_softmax(cuda::Storage::kFloat32, d, dev(sd), dev(md), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<double> s = to_doubles(scores), m = to_doubles(mask), p(s.size());
  for (int64_t r = 0; r < 6 * sq; ++r) {
    const int64_t b = r / (3 * sq);
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < sk; ++j) mx = std::max(mx, 0.3 * s[r * sk + j] + m[b * sk + j]);
    for (int64_t j = 0; j < sk; ++j) sum += std::exp(0.3 * s[r * sk + j] + m[b * sk + j] - mx);
    for (int64_t j = 0; j < sk; ++j)
      p[r * sk + j] = std::exp(0.3 * s[r * sk + j] + m[b * sk + j] - mx) / sum;
  }
  expect_close(sd.to(Device::cpu()), scores.shape(), p, 1e-6, 1e-4);
}

// The split-key form (at most kAttentionSplitMaxRows query rows per head, as in decoding),
// launched directly against the CPU backend: one tile, one split per tile, and more tiles than
// splits (several tiles per warp); K as is and as K^T; head sizes 64, 128, and 40 with values of
// 24; a per-head mask with -inf that leaves keys 32-63 (a whole tile, so a whole split) masked out.
TEST(CudaKernels, AttentionSplitKeys) {
  SKIP_WITHOUT_CUDA();
  struct Case {
    int64_t heads, sq, sk, dk, dv;
    bool kt;
  };
  const Case cases[] = {{12, 1, 257, 64, 64, false},
                        {3, 4, 20, 64, 64, true},
                        {5, 2, 5000, 128, 128, false},
                        {2, 3, 300, 40, 24, true},
                        {8, 1, 64, 64, 64, true}};
  uint64_t seed = 400;
  for (const Case& c : cases) {
    SCOPED_TRACE("heads " + std::to_string(c.heads) + ", sq " + std::to_string(c.sq) + ", sk " +
                 std::to_string(c.sk) + ", depth " + std::to_string(c.dk) + "/" +
                 std::to_string(c.dv) + (c.kt ? ", K^T" : ""));
    Tensor q = random_tensor(Shape{c.heads, c.sq, c.dk}, seed++);
    Tensor k =
        random_tensor(c.kt ? Shape{c.heads, c.dk, c.sk} : Shape{c.heads, c.sk, c.dk}, seed++);
    Tensor v = random_tensor(Shape{c.heads, c.sk, c.dv}, seed++);
    Tensor mask = random_tensor(Shape{c.heads, 1, c.sk}, seed++);
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t j = 32; j < std::min<int64_t>(64, c.sk - 1); ++j)
        mask.data<float>()[h * c.sk + j] = -std::numeric_limits<float>::infinity();
    cuda::AttentionDesc d;
    d.batch = c.heads;
    d.sq = c.sq;
    d.sk = c.sk;
    d.depth = c.dk;
    d.depth_v = c.dv;
    d.scale = 1.f / std::sqrt(static_cast<float>(c.dk));
    d.k_transposed = c.kt;
    d.lead_rank = 1;
    d.lead_dims[0] = c.heads;
    d.mask_lead_strides[0] = c.sk;  // the query rows broadcast
    d.mask_k_stride = 1;
    const size_t bytes = cuda::attention_scratch_bytes(d);
    Tensor scratch =
        Tensor::empty(Shape{static_cast<int64_t>(bytes / 4 + 1)}, DType::kFloat32, Device::cuda());
    Tensor qd = q.to(Device::cuda()), kd = k.to(Device::cuda()), vd = v.to(Device::cuda()),
           md = mask.to(Device::cuda());
    Tensor y = Tensor::empty(Shape{c.heads, c.sq, c.dv}, DType::kFloat32, Device::cuda());
    cuda::launch_attention(cuda::Storage::kFloat32, d, dev(qd), dev(kd), dev(vd), dev(md), dev(y),
                           dev(scratch), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    Tensor want = run_on({"cpu"}, "FusedAttention", {q, k, v, mask},
                         {{"scale", d.scale}, {"k_transposed", c.kt ? 1 : 0}})[0];
    expect_close(y.to(Device::cpu()), want.shape(), to_doubles(want), 1e-5, 1e-4);
  }
  // Through the node (its partial results in the backend's workspace): GPT-2's decoding step,
  // one token over a cache of 256 and a [1, 1, 1, 257] mask; in float32 and 16-bit storage.
  Tensor mask = random_tensor(Shape{1, 1, 1, 257}, seed++);
  for (int j = 100; j < 256; ++j) mask.data<float>()[j] = -std::numeric_limits<float>::infinity();
  const std::vector<OpInput> step = {random_tensor(Shape{1, 12, 1, 64}, seed),
                                     random_tensor(Shape{1, 12, 257, 64}, seed + 1),
                                     random_tensor(Shape{1, 12, 257, 64}, seed + 2), mask};
  expect_matches_cpu("FusedAttention", step, {{"scale", 0.125f}});
  expect_half_matches_cpu("FusedAttention", step, {{"scale", 0.125f}}, 1e-2);
}

TEST(CudaKernels, NormPoolSoftmax) {
  SKIP_WITHOUT_CUDA();
  // RMSNormalization and LayerNormalization: a decoding step's one row (a block per row, values
  // kept in registers), many short rows (RMS: a warp per row), and a row too long to keep.
  for (const Shape& shape : {Shape{1, 1, 1024}, Shape{1100, 64}, Shape{3, 5000}}) {
    SCOPED_TRACE(shape.to_string());
    const int64_t n = shape[-1];
    Tensor rx = random_tensor(shape, 56, -2.f, 3.f);
    Tensor scale = random_tensor(Shape{n}, 57, 0.5f, 1.5f);
    expect_matches_cpu("RMSNormalization", {rx, constant(scale)}, {{"epsilon", 1e-6f}});
    expect_matches_cpu("LayerNormalization",
                       {rx, constant(scale), constant(random_tensor(Shape{n}, 58))});
  }
  Tensor x = random_tensor(Shape{2, 4, 9, 11}, 51);
  expect_matches_cpu(
      "BatchNormalization",
      {x, constant(random_tensor(Shape{4}, 52)), constant(random_tensor(Shape{4}, 53)),
       constant(random_tensor(Shape{4}, 54)), constant(random_tensor(Shape{4}, 55, 0.5f, 2.f))});
  expect_matches_cpu("MaxPool", {x},
                     {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  expect_matches_cpu("MaxPool", {x},
                     {{"kernel_shape", {2, 2}}, {"ceil_mode", 1}, {"strides", {2, 2}}});
  expect_matches_cpu("AveragePool", {x}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}});
  expect_matches_cpu("AveragePool", {x},
                     {{"kernel_shape", {3, 2}}, {"pads", {1, 0, 1, 1}}, {"count_include_pad", 1}});
  expect_matches_cpu("GlobalAveragePool", {x});
  expect_matches_cpu("GlobalMaxPool", {x});
  expect_matches_cpu("Softmax", {x});
  expect_matches_cpu("Softmax", {x}, {{"axis", 1}});
  expect_matches_cpu("LogSoftmax", {x}, {{"axis", 2}});
  Tensor y = random_tensor(Shape{3, 5, 32}, 56);
  expect_matches_cpu(
      "LayerNormalization",
      {y, constant(random_tensor(Shape{32}, 57)), constant(random_tensor(Shape{32}, 58))},
      {{"epsilon", 1e-5f}}, 1e-4);
  // Rows of 100, 768 and 1000 values (a warp per row, 8, 24 and 32 values a lane; one row as in
  // decoding, and 37) and of 2000 (a block per row).
  for (const Shape& shape : {Shape{1, 1, 768}, Shape{37, 100}, Shape{5, 1000}, Shape{3, 2000}}) {
    SCOPED_TRACE(shape.to_string());
    const int64_t n = shape[-1];
    expect_matches_cpu("LayerNormalization",
                       {random_tensor(shape, 59, -3.f, 3.f), constant(random_tensor(Shape{n}, 60)),
                        constant(random_tensor(Shape{n}, 61))},
                       {{"epsilon", 1e-5f}}, 1e-4);
  }
  expect_matches_cpu("ReduceMean", {y}, {{"axes", {2}}, {"keepdims", 1}});
  expect_matches_cpu("ReduceMean", {x}, {{"axes", {2, 3}}, {"keepdims", 0}});
}

TEST(CudaKernels, Movement) {
  SKIP_WITHOUT_CUDA();
  Tensor x = random_tensor(Shape{2, 3, 4, 5}, 61);
  expect_matches_cpu("Transpose", {x}, {{"perm", {0, 2, 3, 1}}});
  expect_matches_cpu("Transpose", {x});
  expect_matches_cpu("Concat", {x, random_tensor(Shape{2, 2, 4, 5}, 62)}, {{"axis", 1}});
  expect_matches_cpu("Concat", {x, random_tensor(Shape{2, 3, 4, 1}, 63)}, {{"axis", -1}});
  // One known index on the outermost axis (a Q/K/V split): a view, no copy.
  expect_matches_cpu("Gather", {x, constant(Tensor::scalar<int64_t>(1))});
  expect_matches_cpu("Gather", {x, constant(Tensor::from_vector<int64_t>(Shape{1}, {-2}))});
  expect_matches_cpu("Gather", {x, constant(Tensor::from_vector<int64_t>(Shape{3}, {2, -1, 0}))},
                     {{"axis", 2}});
  expect_matches_cpu("Gather",
                     {random_tensor(Shape{10, 6}, 64), random_ints(Shape{2, 3}, 65, 0, 9)});
  expect_matches_cpu("Reshape", {x, constant(Tensor::from_vector<int64_t>(Shape{2}, {6, 20}))});
  expect_matches_cpu("Flatten", {x}, {{"axis", 2}});
  expect_matches_cpu("Unsqueeze", {x, constant(Tensor::from_vector<int64_t>(Shape{1}, {1}))});
  auto ints = [](std::vector<int64_t> v) {
    return constant(Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v));
  };
  // Slice: two axes, a step of 2, a negative step, ends past the end.
  expect_matches_cpu("Slice", {x, ints({1, 4}), ints({3, 1}), ints({1, 3}), ints({1, -2})});
  expect_matches_cpu("Slice", {x, ints({0, 1}), ints({99, 4}), ints({0, 2}), ints({2, 2})});
  expect_matches_cpu("Split", {x, ints({1, 2})}, {{"axis", 1}}, 1e-5, 1e-4, 2);
  expect_matches_cpu("Split", {x}, {{"axis", -1}, {"num_outputs", 5}}, 1e-5, 1e-4, 5);
  // Split and Concat are one launch of row copies: a decoder's Q/K/V split of one row, a cache's
  // past and new slot (a wide block per head, 16-byte items), many narrow rows (byte items: 3
  // floats at an odd offset), and more than one launch's batch of inputs (40).
  expect_matches_cpu("Split", {random_tensor(Shape{1, 1, 2304}, 66)},
                     {{"axis", -1}, {"num_outputs", 3}}, 1e-5, 1e-4, 3);
  expect_matches_cpu("Split", {random_tensor(Shape{1, 10}, 71)}, {{"axis", 1}, {"num_outputs", 5}},
                     1e-5, 1e-4, 5);
  expect_matches_cpu(
      "Concat", {random_tensor(Shape{1, 12, 255, 64}, 67), random_tensor(Shape{1, 12, 1, 64}, 68)},
      {{"axis", 2}});
  expect_matches_cpu("Concat",
                     {random_tensor(Shape{4000, 3}, 69), random_tensor(Shape{4000, 5}, 70)},
                     {{"axis", 1}});
  std::vector<OpInput> many;
  for (int i = 0; i < 40; ++i) many.push_back(random_tensor(Shape{3, 1 + i % 3, 4}, 100 + i));
  expect_matches_cpu("Concat", many, {{"axis", 1}});
}

TEST(CudaKernels, WithoutAKernelTheHostRunsIt) {
  SKIP_WITHOUT_CUDA();
  // A Det of matrices above the CUDA kernel's 64 x 64: with only "cuda" asked for, the host runs
  // it and says why.
  Graph graph;
  Value* x = graph.add_input("x", Shape{3, 72, 72});
  graph.mark_output(graph.add_op("Det", {x}, 1, {}, "node")[0]);
  Runtime rt;
  CompileOptions options;
  options.backends = {"cuda"};
  Executable* exe = graph.compile(&rt, options);
  EXPECT_EQ(backend_of_step(exe->summary(), "node"), "cpu");
  EXPECT_NE(exe->summary().find("(on the host: cuda: "), std::string::npos) << exe->summary();
  const Tensor in = near_identity(3, 72, 71, 0.01f);
  const std::vector<Tensor> got = exe->execute({in});
  const std::vector<Tensor> want = run_on({"cpu"}, "Det", {in}, {});
  expect_close(got[0], want[0].shape(), to_doubles(want[0]), 1e-5, 1e-4);
}

}  // namespace
}  // namespace lumen::test
