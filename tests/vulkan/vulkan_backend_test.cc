// The Vulkan backend against the CPU backend on random data (every element): device discovery,
// copies through the pool at every size class, each kernel family (run eagerly, recorded and
// replayed), a small model end to end, and what `auto` does with a device that is the host's
// CPU. Every test skips where this machine has no Vulkan device (CI runs them on Mesa's
// lavapipe).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "backends/backend.h"
#include "backends/stream.h"
#include "lumen/lumen.h"
#include "ops/backend_check_util.h"

namespace lumen::test {
namespace {

Backend* vulkan() {
  return find_backend("vulkan");
}

#define SKIP_WITHOUT_VULKAN()                                       \
  if (vulkan() == nullptr)                                          \
  GTEST_SKIP() << "no Vulkan device on this machine: Vulkan tests " \
                  "skipped"

// One `op` node over `inputs`, compiled for `backends`, run `runs` times (the executor records
// the steps on the first run and replays them after).
std::vector<Tensor> run_on(const std::vector<std::string>& backends, const std::string& op,
                           const std::vector<OpInput>& inputs, const Attributes& attrs = {},
                           int runs = 1, Precision precision = Precision::kFloat32) {
  Runtime rt;
  CompileOptions options;
  options.backends = backends;
  options.precision = precision;
  std::vector<Tensor> runtime_inputs;
  Executable* exe = compile_op(rt, op, inputs, attrs, 1, options, &runtime_inputs);
  if (backends == std::vector<std::string>{"vulkan"})
    EXPECT_EQ(backend_of_step(exe->summary(), "node"), "vulkan") << op << "\n" << exe->summary();
  std::vector<Tensor> result;
  for (int r = 0; r < runs; ++r) result = exe->execute(runtime_inputs);
  return result;
}

void expect_matches_cpu(const std::string& op, const std::vector<OpInput>& inputs,
                        const Attributes& attrs = {}, double atol = 1e-5, double rtol = 1e-4) {
  SCOPED_TRACE(op);
  std::vector<Tensor> want = run_on({"cpu"}, op, inputs, attrs);
  std::vector<Tensor> got = run_on({"vulkan"}, op, inputs, attrs, 3);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].device(), Device::cpu());
    expect_close(got[k], want[k].shape(), to_doubles(want[k]), atol, rtol);
  }
}

TEST(VulkanBackend, DiscoveryNamesTheDevice) {
  SKIP_WITHOUT_VULKAN();
  Backend* b = vulkan();
  EXPECT_EQ(b->name(), "vulkan");
  EXPECT_EQ(b->device(), Device::vulkan(0));
  EXPECT_NE(b->device_name().find("(Vulkan)"), std::string::npos) << b->device_name();
  EXPECT_EQ(b->device().to_string(), "vulkan:0");
  // The host's CPU under Vulkan (lavapipe) is never among auto's candidates; a GPU that CUDA also
  // drives is not either.
  std::vector<Backend*> autos = auto_backends();
  if (!b->in_auto()) EXPECT_EQ(std::count(autos.begin(), autos.end(), b), 0);
}

// Timing events take the device's clock (lavapipe's queue has timestamps too): the time between
// two is non-negative and finite; events of another kind are refused. A profiled run times each
// step on the device, with no wait per step, and still gives the right numbers.
TEST(VulkanBackend, ProfilesStepsWithDeviceTimestamps) {
  SKIP_WITHOUT_VULKAN();
  Stream& stream = vulkan()->default_stream();
  std::unique_ptr<Event> start = stream.create_timing_event();
  ASSERT_NE(start, nullptr);
  std::unique_ptr<Event> end = stream.create_timing_event();
  start->record(stream);
  Tensor x = random_tensor(Shape{64, 64}, 120, -1, 1).to(Device::vulkan(0));
  end->record(stream);
  const double us = start->elapsed_us(*end);
  EXPECT_GE(us, 0.0);
  EXPECT_TRUE(std::isfinite(us));
  std::unique_ptr<Event> plain = stream.create_event();
  plain->record(stream);
  EXPECT_THROW(start->elapsed_us(*plain), DeviceError);

  Runtime rt;
  CompileOptions options;
  options.backends = {"vulkan"};
  std::vector<Tensor> inputs;
  const Tensor a = random_tensor(Shape{3, 40, 24}, 121, -1, 1);
  const Tensor b = random_tensor(Shape{24, 16}, 122, -1, 1);
  Executable* exe = compile_op(rt, "MatMul", {a, constant(b)}, {}, 1, options, &inputs);
  RunProfile profile;
  const std::vector<Tensor> got = exe->execute(inputs, &profile);
  ASSERT_FALSE(profile.steps.empty());
  for (const RunProfile::Step& step : profile.steps) {
    EXPECT_GE(step.duration_us, 0.0) << step.node;
    EXPECT_GE(step.start_us, 0.0) << step.node;
    EXPECT_TRUE(std::isfinite(step.duration_us)) << step.node;
  }
  const std::vector<Tensor> want = run_on({"cpu"}, "MatMul", {a, constant(b)});
  expect_close(got[0], want[0].shape(), to_doubles(want[0]), 1e-5, 1e-4);
}

TEST(VulkanBackend, CopiesRoundTripAtEverySize) {
  SKIP_WITHOUT_VULKAN();
  // Slab-carved blocks, a block of its own (above 1 MiB), odd byte counts.
  for (int64_t n : {1, 3, 63, 64, 1000, 65537, 300000, 1000003}) {
    Tensor x = random_tensor(Shape{n}, static_cast<uint32_t>(n), -3, 3);
    Tensor d = x.to(Device::vulkan());
    EXPECT_EQ(d.device(), Device::vulkan());
    Tensor back = d.to(Device::cpu());
    expect_close(back, x.shape(), to_doubles(x), 0, 0);
    Tensor z = Tensor::zeros(Shape{n}, DType::kFloat32, Device::vulkan()).to(Device::cpu());
    expect_close(z, Shape{n}, std::vector<double>(static_cast<size_t>(n), 0.0), 0, 0);
  }
  // Device to device, and an int64 tensor (any dtype moves).
  Tensor ints = Tensor::from_vector<int64_t>({5}, {1, -2, 3, 1LL << 40, -5});
  Tensor twice = ints.to(Device::vulkan()).clone().to(Device::cpu());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(twice.data<int64_t>()[i], ints.data<int64_t>()[i]);
}

TEST(VulkanBackend, PoolReusesFreedBlocks) {
  SKIP_WITHOUT_VULKAN();
  Allocator& pool = vulkan()->allocator();
  { Tensor warm = Tensor::empty(Shape{4096}, DType::kFloat32, Device::vulkan()); }
  const size_t before = pool.stats().num_system_allocs;
  for (int i = 0; i < 20; ++i)
    Tensor t = Tensor::empty(Shape{4096}, DType::kFloat32, Device::vulkan());
  EXPECT_EQ(pool.stats().num_system_allocs, before);
}

// The op compiled for Vulkan with Precision::kFloat16 (float32 values cast to float16 at the
// edges on the device, constants converted at compile time, every kernel's float16 form) stays
// within float16's rounding of the CPU's float32, and its outputs are float32 again. Run three
// times (eager, recorded, replayed).
void expect_half_matches_cpu(const std::string& op, const std::vector<OpInput>& inputs,
                             const Attributes& attrs = {}, double atol = 2e-2, double rtol = 1e-2) {
  SCOPED_TRACE(op + " in float16");
  std::vector<Tensor> want = run_on({"cpu"}, op, inputs, attrs);
  std::vector<Tensor> got = run_on({"vulkan"}, op, inputs, attrs, 3, Precision::kFloat16);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].dtype(), DType::kFloat32);
    expect_close(got[k], want[k].shape(), to_doubles(want[k]), atol, rtol);
  }
}

TEST(VulkanBackend, UnaryAndActivations) {
  SKIP_WITHOUT_VULKAN();
  Tensor x = random_tensor(Shape{3, 5, 37}, 1, -4, 4);
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Floor", "Ceil", "Erf",
                         "Softplus", "Softsign", "HardSwish", "Elu", "Selu"})
    expect_matches_cpu(op, {x}, {}, 1e-5, 1e-4);
  expect_matches_cpu("LeakyRelu", {x}, {{"alpha", 0.3f}});
  expect_matches_cpu("HardSigmoid", {x}, {{"alpha", 0.3f}, {"beta", 0.4f}});
  expect_matches_cpu("Gelu", {x});
  expect_matches_cpu("Gelu", {x}, {{"approximate", std::string("tanh")}});
  expect_matches_cpu("Clip", {x, constant(Tensor::scalar(-1.5f)), constant(Tensor::scalar(2.f))});
  Tensor pos = random_tensor(Shape{7, 9}, 2, 0.1f, 9);
  for (const char* op : {"Log", "Sqrt", "Reciprocal"}) expect_matches_cpu(op, {pos});
}

TEST(VulkanBackend, BinaryBroadcasts) {
  SKIP_WITHOUT_VULKAN();
  Tensor a = random_tensor(Shape{2, 3, 4, 5}, 3, -2, 2);
  for (const Shape& bs :
       {Shape{2, 3, 4, 5}, Shape{5}, Shape{3, 1, 5}, Shape{2, 1, 4, 1}, Shape{}}) {
    Tensor b = random_tensor(bs, 4, 0.5f, 2);
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
      expect_matches_cpu(op, {a, b});
    expect_matches_cpu("Pow", {random_tensor(Shape{2, 3, 4, 5}, 5, 0.1f, 3), b}, {}, 1e-5, 1e-4);
  }
}

TEST(VulkanBackend, Products) {
  SKIP_WITHOUT_VULKAN();
  // Short (decoding), medium and large tiles, odd edges, batches shared and not.
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{1, 64, 96},
                                                            {7, 33, 17},
                                                            {70, 45, 129},
                                                            {520, 70, 530},
                                                            {200, 68, 196},
                                                            {130, 256, 132}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    Tensor a = random_tensor(Shape{m, k}, 6, -1, 1);
    Tensor b = random_tensor(Shape{k, n}, 7, -1, 1);
    expect_matches_cpu("MatMul", {a, constant(b)}, {}, 1e-4, 1e-4);
  }
  Tensor a3 = random_tensor(Shape{3, 9, 20}, 8, -1, 1);
  Tensor b3 = random_tensor(Shape{3, 20, 11}, 9, -1, 1);
  expect_matches_cpu("MatMul", {a3, b3}, {}, 1e-4, 1e-4);
  expect_matches_cpu("MatMul", {a3, random_tensor(Shape{20, 11}, 10, -1, 1)}, {}, 1e-4, 1e-4);
  expect_matches_cpu("MatMul", {random_tensor(Shape{9, 20}, 11, -1, 1), b3}, {}, 1e-4, 1e-4);
  expect_matches_cpu("MatMul", {random_tensor(Shape{20}, 12, -1, 1), b3}, {}, 1e-4, 1e-4);
  // Batched both ways through the 128x128 tiles, and FusedMatMul's epilogue there and in the
  // generic form: bias, activation, residual.
  expect_matches_cpu(
      "MatMul",
      {random_tensor(Shape{3, 100, 64}, 27, -1, 1), random_tensor(Shape{3, 64, 80}, 28, -1, 1)}, {},
      1e-4, 1e-4);
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{150, 64, 132}, {5, 30, 7}}) {
    Tensor a = random_tensor(Shape{m, k}, 29, -1, 1);
    Tensor b = random_tensor(Shape{k, n}, 30, -1, 1);
    Tensor bias = random_tensor(Shape{n}, 31, -1, 1);
    Tensor z = random_tensor(Shape{m, n}, 32, -1, 1);
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    expect_matches_cpu("FusedMatMul", {a, constant(b), constant(bias)},
                       {{"activation", std::string("Relu")}}, 1e-4, 1e-4);
    SCOPED_TRACE("residual");
    expect_matches_cpu("FusedMatMul", {a, constant(b), constant(bias), z},
                       {{"activation", std::string("GeluTanh")}}, 1e-4, 1e-4);
    SCOPED_TRACE("trans_b");
    expect_matches_cpu("FusedMatMul", {a, random_tensor(Shape{n, k}, 33, -1, 1)},
                       {{"trans_b", int64_t{1}}, {"activation", std::string("Sigmoid")}}, 1e-4,
                       1e-4);
  }
  // The generic shader's larger tiles (64 and 128 wide), taken when they still leave 128
  // workgroups: transposed operands keep these products off the vec4 form.
  for (int64_t mn : {1100, 1500}) {
    SCOPED_TRACE(mn);
    expect_matches_cpu("FusedMatMul",
                       {random_tensor(Shape{mn, 8}, 34, -1, 1), random_tensor(Shape{mn, 8}, 35)},
                       {{"trans_b", int64_t{1}}}, 1e-4, 1e-4);
  }
  // Gemm with every transpose, alpha, beta and a broadcast C.
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Tensor a = random_tensor(ta ? Shape{13, 6} : Shape{6, 13}, 13, -1, 1);
      Tensor b = random_tensor(tb ? Shape{10, 13} : Shape{13, 10}, 14, -1, 1);
      for (const Shape& cs : {Shape{6, 10}, Shape{10}, Shape{6, 1}})
        expect_matches_cpu(
            "Gemm", {a, b, random_tensor(cs, 15, -1, 1)},
            {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", 0.7f}, {"beta", 1.3f}},
            1e-4, 1e-4);
    }
}

// Products and convolutions with few output tiles and a deep k, which run split along k (partial
// sums, then one pass adding them with the epilogue): vec4 and element-wise reads, B transposed,
// short products, batches, and a convolution with bias, residual and activation.
TEST(VulkanBackend, SplitKProducts) {
  SKIP_WITHOUT_VULKAN();
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {64, 2048, 96}, {3, 2048, 40}, {40, 1502, 24}, {100, 777, 61}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    Tensor a = random_tensor(Shape{m, k}, 70, -1, 1);
    Tensor b = random_tensor(Shape{k, n}, 71, -1, 1);
    Tensor bias = random_tensor(Shape{n}, 72, -1, 1);
    Tensor z = random_tensor(Shape{m, n}, 73, -1, 1);
    expect_matches_cpu("FusedMatMul", {a, constant(b), constant(bias), z},
                       {{"activation", std::string("GeluErf")}}, 1e-4, 1e-4);
    expect_matches_cpu("FusedMatMul", {a, random_tensor(Shape{n, k}, 74, -1, 1)},
                       {{"trans_b", int64_t{1}}, {"activation", std::string("Relu")}}, 1e-4, 1e-4);
    expect_matches_cpu("Gemm",
                       {a, random_tensor(Shape{n, k}, 75, -1, 1), random_tensor(Shape{n}, 76)},
                       {{"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.f}}, 1e-4, 1e-4);
  }
  expect_matches_cpu(
      "MatMul",
      {random_tensor(Shape{3, 20, 1024}, 77, -1, 1), random_tensor(Shape{3, 1024, 36}, 78, -1, 1)},
      {}, 1e-4, 1e-4);
  Tensor x = random_tensor(Shape{2, 64, 7, 7}, 79, -1, 1);
  Tensor w = random_tensor(Shape{48, 64, 3, 3}, 80, -0.2f, 0.2f);
  Tensor b = random_tensor(Shape{48}, 81, -0.5f, 0.5f);
  const Attributes pads = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  expect_matches_cpu("Conv", {x, constant(w), constant(b)}, pads, 1e-4, 1e-4);
  Attributes fused = pads;
  fused["activation"] = std::string("Relu");
  expect_matches_cpu("FusedConv",
                     {x, constant(w), constant(b), random_tensor(Shape{2, 48, 7, 7}, 82, -1, 1)},
                     fused, 1e-4, 1e-4);
}

TEST(VulkanBackend, RowsAndMovement) {
  SKIP_WITHOUT_VULKAN();
  Tensor x = random_tensor(Shape{4, 6, 300}, 16, -5, 5);
  for (int64_t axis : {-1, 1, 0}) {
    expect_matches_cpu("Softmax", {x}, {{"axis", axis}});
    expect_matches_cpu("LogSoftmax", {x}, {{"axis", axis}});
  }
  Tensor scale = random_tensor(Shape{300}, 17, 0.5f, 1.5f);
  Tensor bias = random_tensor(Shape{300}, 18, -1, 1);
  expect_matches_cpu("LayerNormalization", {x, constant(scale), constant(bias)}, {}, 1e-4, 1e-4);
  expect_matches_cpu("LayerNormalization", {x, constant(scale)}, {{"epsilon", 1e-3f}}, 1e-4, 1e-4);
  expect_matches_cpu("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  expect_matches_cpu("Transpose", {x});
  expect_matches_cpu("Concat", {x, random_tensor(Shape{4, 2, 300}, 19, -1, 1)},
                     {{"axis", int64_t{1}}});
  expect_matches_cpu("Expand", {random_tensor(Shape{6, 1}, 20, -1, 1),
                                constant(Tensor::from_vector<int64_t>({3}, {2, 6, 5}))});
}

// Every Reduce op over one axis, two apart, all of them (no axes) and none (noop), keeping dims or
// not; axes as the attribute and as input 1; RMSNormalization over one and two trailing dims.
TEST(VulkanBackend, ReductionsAndRmsNorm) {
  SKIP_WITHOUT_VULKAN();
  Tensor x = random_tensor(Shape{3, 5, 70}, 100, 0.5f, 1.5f);
  const std::vector<std::vector<int64_t>> axes_sets = {{1}, {0, 2}, {-1}};
  for (const char* op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"}) {
    SCOPED_TRACE(op);
    const bool prod = std::string(op) == "ReduceProd";
    Tensor in = prod ? random_tensor(Shape{3, 5, 7}, 101, 0.8f, 1.2f) : x;
    for (const auto& axes : axes_sets)
      for (int64_t keep : {0, 1})
        expect_matches_cpu(op, {in}, {{"axes", axes}, {"keepdims", keep}}, 1e-5, 1e-4);
    expect_matches_cpu(op, {in}, {}, 1e-4, 1e-4);
  }
  expect_matches_cpu("ReduceSum",
                     {random_tensor(Shape{4, 6, 9}, 102, -1, 1),
                      constant(Tensor::from_vector<int64_t>({2}, {0, -1}))},
                     {}, 1e-5, 1e-4);
  expect_matches_cpu(
      "ReduceSum",
      {random_tensor(Shape{4, 6}, 103, -1, 1), constant(Tensor::from_vector<int64_t>({0}, {}))},
      {{"noop_with_empty_axes", int64_t{1}}});
  Tensor y = random_tensor(Shape{2, 3, 300}, 104, -3, 3);
  expect_matches_cpu("RMSNormalization", {y, constant(random_tensor(Shape{300}, 105))},
                     {{"epsilon", 1e-3f}}, 1e-5, 1e-4);
  expect_matches_cpu("RMSNormalization", {y, constant(random_tensor(Shape{3, 300}, 106))},
                     {{"axis", int64_t{1}}}, 1e-5, 1e-4);
  // Scale and bias per channel: InstanceNormalization (1-D, 2-D and 3-D spatial dims) and
  // GroupNormalization (several channels per group, and one).
  for (const Shape& s : {Shape{2, 3, 50}, Shape{2, 4, 9, 11}, Shape{1, 3, 4, 5, 6}}) {
    SCOPED_TRACE(s.to_string());
    const Tensor in = random_tensor(s, 107, -2, 3);
    const Tensor scale = random_tensor(Shape{s[1]}, 108), bias = random_tensor(Shape{s[1]}, 109);
    expect_matches_cpu("InstanceNormalization", {in, scale, bias}, {{"epsilon", 1e-4f}}, 1e-5,
                       1e-4);
  }
  const Tensor g = random_tensor(Shape{2, 6, 7, 5}, 110, -2, 3);
  for (int64_t groups : {1, 2, 6}) {
    SCOPED_TRACE(groups);
    expect_matches_cpu("GroupNormalization",
                       {g, random_tensor(Shape{6}, 111), random_tensor(Shape{6}, 112)},
                       {{"num_groups", groups}, {"epsilon", 1e-5f}}, 1e-5, 1e-4);
  }
}

// Resize: nearest (two rounding modes), linear and cubic (two coordinate transformations), by
// scales and by sizes, up- and down-sampling, on the spatial axes of NCHW and NHWC tensors;
// antialiased linear downsampling; one axis resized.
TEST(VulkanBackend, Resize) {
  SKIP_WITHOUT_VULKAN();
  Tensor x = random_tensor(Shape{2, 3, 7, 9}, 110, -1, 1);
  const OpInput none = constant(Tensor::from_vector<float>({0}, {}));
  auto scales = [](std::vector<float> s) {
    return constant(Tensor::from_vector<float>({static_cast<int64_t>(s.size())}, s));
  };
  auto sizes = [](std::vector<int64_t> s) {
    return constant(Tensor::from_vector<int64_t>({static_cast<int64_t>(s.size())}, s));
  };
  struct Case {
    Attributes attrs;
    std::vector<float> scale;
    std::vector<int64_t> size;
  };
  const std::vector<Case> cases = {
      {{{"mode", std::string("nearest")}}, {1, 1, 2, 2}, {}},
      {{{"mode", std::string("nearest")},
        {"nearest_mode", std::string("floor")},
        {"coordinate_transformation_mode", std::string("asymmetric")}},
       {},
       {2, 3, 4, 13}},
      {{{"mode", std::string("linear")}}, {1, 1, 1.5f, 0.5f}, {}},
      {{{"mode", std::string("linear")},
        {"coordinate_transformation_mode", std::string("align_corners")}},
       {},
       {2, 3, 11, 5}},
      {{{"mode", std::string("cubic")}}, {1, 1, 2, 1.25f}, {}},
      {{{"mode", std::string("linear")}, {"antialias", int64_t{1}}}, {1, 1, 0.5f, 0.4f}, {}},
      {{{"mode", std::string("linear")}}, {1, 1, 1, 3}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.attrs.at("mode").as_string() + " " + std::to_string(c.size.size()));
    if (c.size.empty())
      expect_matches_cpu("Resize", {x, none, scales(c.scale)}, c.attrs, 1e-5, 1e-4);
    else
      expect_matches_cpu("Resize", {x, none, none, sizes(c.size)}, c.attrs, 1e-5, 1e-4);
  }
  expect_matches_cpu("Resize",
                     {random_tensor(Shape{1, 6, 5, 4}, 111, -1, 1), none, scales({1, 2, 1.5f, 1})},
                     {{"mode", std::string("linear")}}, 1e-5, 1e-4);
}

// Gather with indices that come at run time (int64 and int32, negative ones), on the device; an
// index out of range raises a clear error where the host waits, and the next run is clean.
TEST(VulkanBackend, GatherWithRunTimeIndices) {
  SKIP_WITHOUT_VULKAN();
  Tensor table = random_tensor(Shape{50, 16}, 120, -1, 1);
  const Tensor ids64 = Tensor::from_vector<int64_t>({2, 3}, {0, 49, -1, 7, -50, 3});
  const Tensor ids32 = Tensor::from_vector<int32_t>({4}, {5, -2, 0, 31});
  expect_matches_cpu("Gather", {constant(table), ids64});
  expect_matches_cpu("Gather", {constant(table), ids32});
  expect_matches_cpu("Gather",
                     {random_tensor(Shape{3, 9, 4}, 121, -1, 1),
                      Tensor::from_vector<int32_t>({2, 2}, {5, -2, 0, 8})},
                     {{"axis", int64_t{1}}});

  Runtime rt;
  CompileOptions options;
  options.backends = {"vulkan"};
  std::vector<Tensor> inputs;
  Executable* exe = compile_op(rt, "Gather", {constant(table), ids64}, {}, 1, options, &inputs);
  EXPECT_EQ(backend_of_step(exe->summary(), "node"), "vulkan") << exe->summary();
  const Tensor bad = Tensor::from_vector<int64_t>({2, 3}, {0, 1, 2, 50, 4, 5});
  try {
    exe->execute({bad});
    ADD_FAILURE() << "an index of 50 into 50 rows ran";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("index 50 is out of range [-50, 50)"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Gather"), std::string::npos) << e.what();
  }
  std::vector<Tensor> good = exe->execute({ids64});
  const std::vector<double> got = to_doubles(good[0]), rows = to_doubles(table);
  const std::vector<int64_t> want = {0, 49, 49, 7, 0, 3};
  for (size_t i = 0; i < want.size(); ++i)
    for (int64_t c = 0; c < 16; ++c)
      EXPECT_EQ(got[i * 16 + c], rows[want[i] * 16 + c]) << i << " " << c;
}

TEST(VulkanBackend, ConvolutionsAndPools) {
  SKIP_WITHOUT_VULKAN();
  Tensor x = random_tensor(Shape{2, 8, 13, 11}, 40, -1, 1);
  // Implicit GEMM (16+ output channels per group) and one thread per output (depthwise).
  struct Case {
    Shape w;
    Attributes attrs;
  };
  const std::vector<Case> cases = {
      {Shape{32, 8, 3, 3}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}},
      {Shape{16, 8, 1, 1}, {}},
      {Shape{32, 4, 3, 3},
       {{"group", int64_t{2}},
        {"strides", std::vector<int64_t>{2, 2}},
        {"dilations", std::vector<int64_t>{1, 2}},
        {"pads", std::vector<int64_t>{2, 1, 2, 1}}}},
      {Shape{8, 1, 5, 5}, {{"group", int64_t{8}}, {"pads", std::vector<int64_t>{2, 2, 2, 2}}}},
      {Shape{16, 8, 3, 2}, {{"auto_pad", std::string("SAME_UPPER")}}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.w.to_string());
    Tensor w = random_tensor(c.w, 41, -0.5f, 0.5f);
    Tensor b = random_tensor(Shape{c.w[0]}, 42, -0.5f, 0.5f);
    expect_matches_cpu("Conv", {x, constant(w), constant(b)}, c.attrs, 1e-4, 1e-4);
    expect_matches_cpu("Conv", {x, constant(w)}, c.attrs, 1e-4, 1e-4);
  }
  // FusedConv: bias, residual and activation in the epilogue, both forms.
  for (const Shape& ws : {Shape{24, 8, 3, 3}, Shape{8, 1, 3, 3}}) {
    const int64_t group = ws[1] == 1 ? 8 : 1;
    Attributes a = {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                    {"group", group},
                    {"activation", std::string("Relu")}};
    Tensor w = random_tensor(ws, 43, -0.5f, 0.5f);
    Tensor b = random_tensor(Shape{ws[0]}, 44, -0.5f, 0.5f);
    Tensor z = random_tensor(Shape{2, ws[0], 13, 11}, 45, -1, 1);
    expect_matches_cpu("FusedConv", {x, constant(w), constant(b), z}, a, 1e-4, 1e-4);
    a["activation"] = std::string("HardSwish");
    expect_matches_cpu("FusedConv", {x, constant(w), constant(b)}, a, 1e-4, 1e-4);
  }
  // 64x64 implicit-GEMM tiles (enough of them on a large plane).
  expect_matches_cpu("Conv",
                     {random_tensor(Shape{2, 8, 64, 64}, 59, -1, 1),
                      constant(random_tensor(Shape{64, 8, 3, 3}, 60, -0.5f, 0.5f))},
                     {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}, 1e-4, 1e-4);
  // 1-D convolutions (a 2-D one of a single row): strides, dilations and asymmetric pads, grouped,
  // depthwise, pointwise, and with a bias.
  {
    Tensor x1 = random_tensor(Shape{2, 6, 41}, 113, -1, 1);
    expect_matches_cpu("Conv",
                       {x1, constant(random_tensor(Shape{20, 6, 5}, 114, -0.5f, 0.5f)),
                        constant(random_tensor(Shape{20}, 115))},
                       {{"strides", std::vector<int64_t>{2}},
                        {"dilations", std::vector<int64_t>{2}},
                        {"pads", std::vector<int64_t>{3, 1}}},
                       1e-4, 1e-4);
    expect_matches_cpu("Conv", {x1, constant(random_tensor(Shape{32, 3, 3}, 116, -0.5f, 0.5f))},
                       {{"group", int64_t{2}}, {"pads", std::vector<int64_t>{1, 1}}}, 1e-4, 1e-4);
    expect_matches_cpu("Conv", {x1, constant(random_tensor(Shape{6, 1, 3}, 117, -0.5f, 0.5f))},
                       {{"group", int64_t{6}}}, 1e-4, 1e-4);
    expect_matches_cpu("Conv", {x1, constant(random_tensor(Shape{24, 6, 1}, 118, -0.5f, 0.5f))}, {},
                       1e-4, 1e-4);
  }
  // 1-D pooling (a 2-D window over a single row), and global pooling over 1-D and 3-D planes.
  {
    Tensor x1 = random_tensor(Shape{2, 5, 33}, 119, -1, 1);
    const Attributes w1 = {{"kernel_shape", std::vector<int64_t>{3}},
                           {"strides", std::vector<int64_t>{2}},
                           {"pads", std::vector<int64_t>{1, 0}}};
    expect_matches_cpu("MaxPool", {x1}, w1);
    expect_matches_cpu("AveragePool", {x1}, w1);
    Attributes ceil = w1;
    ceil["ceil_mode"] = int64_t{1};
    ceil["count_include_pad"] = int64_t{1};
    expect_matches_cpu("AveragePool", {x1}, ceil);
    expect_matches_cpu("GlobalAveragePool", {x1});
    expect_matches_cpu("GlobalMaxPool", {random_tensor(Shape{2, 3, 4, 5, 6}, 123, -1, 1)});
  }
  // Pointwise convolutions run as products (the 128x128 tiles where the plane allows).
  Tensor x2 = random_tensor(Shape{2, 8, 16, 12}, 46, -1, 1);
  Tensor w2 = random_tensor(Shape{72, 8, 1, 1}, 47, -0.5f, 0.5f);
  Tensor b2 = random_tensor(Shape{72}, 48, -0.5f, 0.5f);
  expect_matches_cpu("Conv", {x2, constant(w2), constant(b2)}, {}, 1e-4, 1e-4);
  expect_matches_cpu("FusedConv",
                     {x2, constant(w2), constant(b2), random_tensor(Shape{2, 72, 16, 12}, 49)},
                     {{"activation", std::string("Relu")}}, 1e-4, 1e-4);
  const Attributes window = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                             {"strides", std::vector<int64_t>{2, 2}},
                             {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  expect_matches_cpu("MaxPool", {x}, window);
  expect_matches_cpu("AveragePool", {x}, window);
  Attributes with_pad = window;
  with_pad["count_include_pad"] = int64_t{1};
  with_pad["ceil_mode"] = int64_t{1};
  expect_matches_cpu("AveragePool", {x}, with_pad);
  expect_matches_cpu("GlobalAveragePool", {x});
  expect_matches_cpu("GlobalMaxPool", {x});
}

TEST(VulkanBackend, AttentionAndSlices) {
  SKIP_WITHOUT_VULKAN();
  Tensor q = random_tensor(Shape{2, 3, 5, 8}, 50, -1, 1);
  Tensor k = random_tensor(Shape{2, 3, 7, 8}, 51, -1, 1);
  Tensor kt = random_tensor(Shape{2, 3, 8, 7}, 52, -1, 1);
  Tensor v = random_tensor(Shape{2, 3, 7, 6}, 53, -1, 1);
  const Attributes scale = {{"scale", 0.35f}};
  expect_matches_cpu("FusedAttention", {q, k, v}, scale, 1e-5, 1e-4);
  expect_matches_cpu("FusedAttention", {q, kt, v}, {{"scale", 0.35f}, {"k_transposed", int64_t{1}}},
                     1e-5, 1e-4);
  for (const Shape& ms : {Shape{2, 1, 1, 7}, Shape{5, 7}, Shape{2, 3, 5, 7}}) {
    SCOPED_TRACE(ms.to_string());
    expect_matches_cpu("FusedAttention", {q, k, v, random_tensor(ms, 54, -2, 0)}, scale, 1e-5,
                       1e-4);
  }
  // Three dims (no heads), long rows (more keys than threads).
  expect_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{2, 3, 16}, 55, -1, 1), random_tensor(Shape{2, 700, 16}, 56, -1, 1),
       random_tensor(Shape{2, 700, 4}, 57, -1, 1)},
      scale, 1e-5, 1e-4);
  // Blocks of 8 and 16 query rows over key tiles (depths up to 128), ragged last tiles, K^T, a
  // mask with -inf (one row masked everywhere gives NaN, as the unfused ops do), and a depth
  // above 128 (one workgroup per row).
  expect_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{1, 4, 40, 64}, 83, -1, 1), random_tensor(Shape{1, 4, 64, 45}, 84, -1, 1),
       random_tensor(Shape{1, 4, 45, 100}, 85, -1, 1)},
      {{"scale", 0.125f}, {"k_transposed", int64_t{1}}}, 1e-5, 1e-4);
  // Depths that are not multiples of 4 (the shader reads them as vec4s, zero-padded), K^T.
  expect_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{3, 2, 21, 10}, 98, -1, 1), random_tensor(Shape{3, 2, 10, 37}, 99, -1, 1),
       random_tensor(Shape{3, 2, 37, 7}, 100, -1, 1)},
      {{"scale", 0.3f}, {"k_transposed", int64_t{1}}}, 1e-5, 1e-4);
  expect_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{2, 4, 600, 32}, 86, -1, 1), random_tensor(Shape{2, 4, 600, 32}, 87),
       random_tensor(Shape{2, 4, 600, 32}, 88, -1, 1), random_tensor(Shape{2, 1, 1, 600}, 89)},
      scale, 1e-5, 1e-4);
  std::vector<float> masked(5 * 70);
  for (size_t e = 0; e < masked.size(); ++e)
    masked[e] = e / 70 == 2 || e % 3 == 0 ? -std::numeric_limits<float>::infinity()
                                          : static_cast<float>(e % 7) * -0.25f;
  const Tensor inf_mask = Tensor::from_vector<float>({5, 70}, masked);
  std::vector<Tensor> got = run_on({"vulkan"}, "FusedAttention",
                                   {q, random_tensor(Shape{2, 3, 70, 8}, 90, -1, 1),
                                    random_tensor(Shape{2, 3, 70, 6}, 91, -1, 1), inf_mask},
                                   scale, 2);
  std::vector<Tensor> want = run_on({"cpu"}, "FusedAttention",
                                    {q, random_tensor(Shape{2, 3, 70, 8}, 90, -1, 1),
                                     random_tensor(Shape{2, 3, 70, 6}, 91, -1, 1), inf_mask},
                                    scale);
  const std::vector<double> g = to_doubles(got[0]), w = to_doubles(want[0]);
  ASSERT_EQ(g.size(), w.size());
  for (size_t e = 0; e < g.size(); ++e) {
    const bool row2 = (e / 6) % 5 == 2;
    if (row2) {
      EXPECT_TRUE(std::isnan(g[e])) << e;
    } else {
      EXPECT_NEAR(g[e], w[e], 1e-5 + 1e-4 * std::abs(w[e])) << e;
    }
  }
  expect_matches_cpu(
      "FusedAttention",
      {random_tensor(Shape{1, 2, 9, 200}, 92, -1, 1), random_tensor(Shape{1, 2, 33, 200}, 93),
       random_tensor(Shape{1, 2, 33, 20}, 94, -1, 1)},
      {{"scale", 0.07f}}, 1e-5, 1e-4);
  // StridedAttention: Q, K and V as views of one projection [S, N, 3E] (heads H, depth D), Y
  // written into [S, N, E]; then K from its own tensor stored [N, H, D, S] (K^T's layout).
  {
    const int64_t S = 5, N = 2, H = 2, D = 4, E = H * D;
    Tensor proj = random_tensor(Shape{S, N, 3 * E}, 95, -1, 1);
    const std::vector<int64_t> shape = {N, H, S, D};
    Attributes a = {{"scale", 0.5f},
                    {"q_shape", shape},
                    {"k_shape", shape},
                    {"v_shape", shape},
                    {"q_view", std::vector<int64_t>{0, 3 * E, D, N * 3 * E, 1}},
                    {"k_view", std::vector<int64_t>{E, 3 * E, D, N * 3 * E, 1}},
                    {"v_view", std::vector<int64_t>{2 * E, 3 * E, D, N * 3 * E, 1}},
                    {"y_view", std::vector<int64_t>{0, E, D, N * E, 1}},
                    {"output_shape", std::vector<int64_t>{S, N, E}}};
    expect_matches_cpu("StridedAttention", {proj, proj, proj}, a, 1e-5, 1e-4);
    expect_matches_cpu("StridedAttention",
                       {proj, proj, proj, random_tensor(Shape{1, 1, S, S}, 96, -1, 0)}, a, 1e-5,
                       1e-4);
    a["k_view"] = std::vector<int64_t>{0, H * D * S, D * S, 1, S};
    expect_matches_cpu("StridedAttention", {proj, random_tensor(Shape{N, H, D, S}, 97), proj}, a,
                       1e-5, 1e-4);
  }
  Tensor x = random_tensor(Shape{4, 9, 10}, 58, -1, 1);
  auto ints = [](std::vector<int64_t> v) {
    return constant(Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
  };
  // Gather with known indices: a view (one index on the outermost dim), or a copy on any axis.
  expect_matches_cpu("Gather", {x, constant(Tensor::scalar<int64_t>(-2))});
  expect_matches_cpu("Gather", {x, ints({3, -1, 0, 3})}, {{"axis", int64_t{1}}});
  expect_matches_cpu("Gather", {x, ints({9, 2})}, {{"axis", int64_t{-1}}});
  expect_matches_cpu("Slice", {x, ints({1, 2}), ints({4, 9}), ints({0, 2})});
  expect_matches_cpu("Slice", {x, ints({8, -1}), ints({0, -100}), ints({1, 2}), ints({-2, -3})});
}

// A two-layer MLP with softmax, all on the device: every step on vulkan, replayed runs agree.
TEST(VulkanBackend, ModelRunsOnTheDevice) {
  SKIP_WITHOUT_VULKAN();
  auto build = [](Graph& g) {
    Value* x = g.add_input("x", Shape{8, 64});
    Value* w1 = g.add_constant("w1", random_tensor(Shape{64, 128}, 21, -0.2f, 0.2f));
    Value* b1 = g.add_constant("b1", random_tensor(Shape{128}, 22, -0.2f, 0.2f));
    Value* w2 = g.add_constant("w2", random_tensor(Shape{128, 10}, 23, -0.2f, 0.2f));
    Value* h = g.add_op("Relu", {g.add_op("Add", {g.add_op("MatMul", {x, w1}), b1})});
    g.mark_output(g.add_op("Softmax", {g.add_op("MatMul", {h, w2})}, {{"axis", int64_t{1}}}));
  };
  Tensor x = random_tensor(Shape{8, 64}, 24, -1, 1);
  Runtime rt;
  Graph gc, gv;
  build(gc);
  build(gv);
  CompileOptions cpu, vk;
  cpu.backends = {"cpu"};
  vk.backends = {"vulkan"};
  std::vector<Tensor> want = gc.compile(&rt, cpu)->execute(std::vector<Tensor>{x});
  Executable* exe = gv.compile(&rt, vk);
  const std::string summary = exe->summary();
  EXPECT_EQ(summary.find(" @cpu"), std::string::npos) << summary;
  for (int r = 0; r < 4; ++r) {
    std::vector<Tensor> got = exe->execute(std::vector<Tensor>{x});
    expect_close(got[0], want[0].shape(), to_doubles(want[0]), 1e-5, 1e-4);
  }
  // A wrong input shape is a clear error, not a crash.
  EXPECT_THROW(exe->execute(std::vector<Tensor>{random_tensor(Shape{8, 63}, 25, -1, 1)}), Error);
}

// The optimizer's fused element-wise programs run on the device: every op the pass fuses inside a
// Mul -> op -> Add tree, and a tree of three inputs, one broadcast, with binary ops and immediates.
TEST(VulkanBackend, FusedElementwisePrograms) {
  SKIP_WITHOUT_VULKAN();
  struct Case {
    const char* op;
    Attributes attrs;
    std::vector<float> params;  // constant inputs after the first
    float lo = -3, hi = 3;
  };
  const std::vector<Case> cases = {{"Relu", {}, {}},
                                   {"Sigmoid", {}, {}},
                                   {"Tanh", {}, {}},
                                   {"Exp", {}, {}},
                                   {"Log", {}, {}, 0.1f, 4},
                                   {"Neg", {}, {}},
                                   {"Abs", {}, {}},
                                   {"Sqrt", {}, {}, 0.1f, 4},
                                   {"Reciprocal", {}, {}, 0.5f, 3},
                                   {"Erf", {}, {}},
                                   {"Clip", {}, {-0.5f, 1.25f}},
                                   {"LeakyRelu", {{"alpha", 0.3f}}, {}},
                                   {"HardSigmoid", {{"alpha", 0.3f}, {"beta", 0.4f}}, {}},
                                   {"HardSwish", {}, {}},
                                   {"Softplus", {}, {}},
                                   {"Gelu", {}, {}},
                                   {"Gelu", {{"approximate", "tanh"}}, {}},
                                   {"Pow", {}, {3.0f}},
                                   {"Pow", {}, {1.7f}, 0.1f, 4}};
  auto run = [](const std::function<void(Graph&)>& build, const std::vector<Tensor>& inputs,
                const std::string& backend) {
    Runtime rt;
    Graph g;
    build(g);
    g.optimize({backend});
    CompileOptions options;
    options.backends = {backend};
    Executable* exe = g.compile(&rt, options);
    if (backend == "vulkan") {
      const std::string summary = exe->summary();
      EXPECT_NE(summary.find("(FusedElementwise) @vulkan"), std::string::npos) << summary;
      EXPECT_EQ(summary.find(" @cpu"), std::string::npos) << summary;
    }
    return exe->execute(inputs)[0];
  };
  auto scalar = [](Graph& g, float v) {
    return g.add_constant(g.unique_name("c"), Tensor::from_vector<float>(Shape{}, {v}));
  };
  const Shape shape{3, 171};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    const Tensor x = random_tensor(shape, 124, c.lo, c.hi);
    auto build = [&](Graph& g) {
      Value* y = g.add_op("Mul", {g.add_input("x", shape), scalar(g, 1.5f)});
      std::vector<Value*> in = {y};
      for (float p : c.params) in.push_back(scalar(g, p));
      g.mark_output(g.add_op("Add", {g.add_op(c.op, in, c.attrs), scalar(g, 0.5f)}));
    };
    const Tensor want = run(build, {x}, "cpu");
    expect_close(run(build, {x}, "vulkan"), shape, to_doubles(want), 1e-5, 1e-4);
  }
  const Tensor a = random_tensor(Shape{2, 5, 67}, 125, -2, 2);
  const Tensor b = random_tensor(Shape{2, 5, 67}, 126, -2, 2);
  const Tensor c = random_tensor(Shape{67}, 127, 0.5f, 2);
  auto tree = [&](Graph& g) {
    Value* va = g.add_input("a", a.shape());
    Value* vb = g.add_input("b", b.shape());
    Value* vc = g.add_input("c", c.shape());
    Value* m = g.add_op("Max", {g.add_op("Max", {va, vb}), scalar(g, 0.25f)});
    Value* d = g.add_op("Div", {g.add_op("Sub", {m, g.add_op("Min", {va, vb})}), vc});
    g.mark_output(
        g.add_op("Mul", {d, g.add_op("Sigmoid", {g.add_op("Sub", {scalar(g, 1.5f), va})})}));
  };
  const Tensor want = run(tree, {a, b, c}, "cpu");
  expect_close(run(tree, {a, b, c}, "vulkan"), a.shape(), to_doubles(want), 1e-5, 1e-4);
}

// An op without a Vulkan kernel runs on the host under {"vulkan"}, with the copies it needs.
// Every kernel family's float16 form (shaders built with LUMEN_F16), where the device stores
// float16: element-wise ops and programs, every product shader (short, tiled with and without
// vec4 reads, split along k), convolutions of each form, pooling, rows, reductions, movement,
// gather, resize and both attention shaders.
TEST(VulkanBackend, Float16Storage) {
  SKIP_WITHOUT_VULKAN();
  if (!vulkan()->takes_half_floats(DType::kFloat16))
    GTEST_SKIP() << "this Vulkan device has no 16-bit storage: float16 skipped";
  EXPECT_FALSE(vulkan()->takes_half_floats(DType::kBFloat16));
  Tensor x = random_tensor(Shape{2, 3, 4, 5}, 401, -2, 2);
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Gelu", "Exp", "Neg", "HardSwish"})
    expect_half_matches_cpu(op, {x});
  expect_half_matches_cpu("Clip",
                          {x, constant(Tensor::scalar(-0.5f)), constant(Tensor::scalar(1.25f))});
  expect_half_matches_cpu("Add", {x, random_tensor(Shape{4, 1}, 402)});
  expect_half_matches_cpu("Mul", {x, constant(random_tensor(Shape{5}, 403))});
  expect_half_matches_cpu("Div", {x, random_tensor(Shape{2, 3, 4, 5}, 404, 0.5f, 2)});
  // r4 = x * row; r5 = r4 + col; r6 = r5 - s; r7 = GeluTanh(r6)
  expect_half_matches_cpu(
      "FusedElementwise",
      {x, random_tensor(Shape{5}, 405), random_tensor(Shape{1}, 406),
       random_tensor(Shape{3, 1, 1}, 407)},
      {{"code", std::vector<int64_t>{2, 4, 0, 1, 0, 5, 4, 3, 1, 6, 5, 2, 24, 7, 6, 0}},
       {"consts", std::vector<float>{0.25f}}});
  // Sums of up to 2048 products of values in [-1, 1], each input rounded to 11 bits.
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{3, 64, 40},
                                                            {130, 256, 132},
                                                            {70, 45, 129},
                                                            {64, 2048, 96},
                                                            {3, 2048, 40},
                                                            {1540, 68, 1532}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    Tensor a = random_tensor(Shape{m, k}, 408, -1, 1);
    Tensor b = random_tensor(Shape{k, n}, 409, -1, 1);
    const double atol = 2e-3 * std::sqrt(static_cast<double>(k)) + 1e-2;
    expect_half_matches_cpu("MatMul", {a, constant(b)}, {}, atol, 1e-2);
    expect_half_matches_cpu(
        "FusedMatMul",
        {a, constant(random_tensor(Shape{n, k}, 410, -1, 1)),
         constant(random_tensor(Shape{n}, 411)), random_tensor(Shape{m, n}, 412)},
        {{"trans_b", int64_t{1}}, {"activation", std::string("GeluErf")}}, atol, 1e-2);
  }
  expect_half_matches_cpu(
      "Gemm",
      {random_tensor(Shape{13, 6}, 413), random_tensor(Shape{10, 13}, 414),
       random_tensor(Shape{10}, 415)},
      {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.7f}, {"beta", 1.3f}});
  // Convolutions: implicit GEMM (and split along its depth), depthwise, pointwise; pooling.
  Tensor img = random_tensor(Shape{2, 8, 13, 11}, 416, -1, 1);
  const Attributes pad1 = {{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  expect_half_matches_cpu("Conv",
                          {img, constant(random_tensor(Shape{32, 8, 3, 3}, 417, -0.5f, 0.5f)),
                           constant(random_tensor(Shape{32}, 418))},
                          pad1, 5e-2);
  expect_half_matches_cpu("Conv",
                          {random_tensor(Shape{1, 256, 7, 7}, 419, -1, 1),
                           constant(random_tensor(Shape{16, 256, 3, 3}, 420, -0.1f, 0.1f))},
                          pad1, 5e-2);
  expect_half_matches_cpu(
      "FusedConv",
      {img, constant(random_tensor(Shape{8, 1, 3, 3}, 421, -0.5f, 0.5f)),
       constant(random_tensor(Shape{8}, 422)), random_tensor(Shape{2, 8, 13, 11}, 423)},
      {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
       {"group", int64_t{8}},
       {"activation", std::string("Relu")}});
  expect_half_matches_cpu("Conv",
                          {img, constant(random_tensor(Shape{72, 8, 1, 1}, 424, -0.5f, 0.5f))});
  const Attributes window = {{"kernel_shape", std::vector<int64_t>{3, 3}},
                             {"strides", std::vector<int64_t>{2, 2}},
                             {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  expect_half_matches_cpu("MaxPool", {img}, window);
  expect_half_matches_cpu("AveragePool", {img}, window);
  expect_half_matches_cpu("GlobalAveragePool", {img});
  // Rows, reductions, normalizations.
  Tensor rows = random_tensor(Shape{6, 300}, 425, -3, 3);
  expect_half_matches_cpu("Softmax", {rows}, {{"axis", int64_t{-1}}});
  expect_half_matches_cpu("LogSoftmax", {rows}, {{"axis", int64_t{-1}}});
  expect_half_matches_cpu(
      "LayerNormalization",
      {rows, constant(random_tensor(Shape{300}, 426)), constant(random_tensor(Shape{300}, 427))},
      {{"axis", int64_t{-1}}});
  expect_half_matches_cpu("InstanceNormalization", {img, constant(random_tensor(Shape{8}, 428)),
                                                    constant(random_tensor(Shape{8}, 429))});
  expect_half_matches_cpu("ReduceMean", {x, constant(Tensor::from_vector<int64_t>({1}, {2}))});
  expect_half_matches_cpu("ReduceMax", {x, constant(Tensor::from_vector<int64_t>({2}, {1, 3}))});
  // Movement and gathers.
  expect_half_matches_cpu("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
  expect_half_matches_cpu("Concat", {x, random_tensor(Shape{2, 1, 4, 5}, 430)},
                          {{"axis", int64_t{1}}});
  expect_half_matches_cpu("Slice", {x, constant(Tensor::from_vector<int64_t>({2}, {3, 1})),
                                    constant(Tensor::from_vector<int64_t>({2}, {0, 4})),
                                    constant(Tensor::from_vector<int64_t>({2}, {3, 1})),
                                    constant(Tensor::from_vector<int64_t>({2}, {-1, 1}))});
  expect_half_matches_cpu("Expand", {random_tensor(Shape{3, 1, 5}, 431),
                                     constant(Tensor::from_vector<int64_t>({4}, {2, 3, 4, 5}))});
  expect_half_matches_cpu("Gather", {random_tensor(Shape{50, 24}, 432),
                                     Tensor::from_vector<int64_t>({2, 3}, {4, 49, 0, -1, 17, 4})});
  expect_half_matches_cpu(
      "Resize", {img, omitted(), constant(Tensor::from_vector<float>({4}, {1, 1, 2, 1.5f}))},
      {{"mode", std::string("linear")}});
  // Attention: the tiled shader with vec4 reads (depth 64) and without (depth 20), the row shader
  // (depth 160), with a mask.
  for (int64_t d : {64, 20, 160}) {
    SCOPED_TRACE(d);
    expect_half_matches_cpu(
        "FusedAttention",
        {random_tensor(Shape{1, 2, 9, d}, 433, -1, 1),
         random_tensor(Shape{1, 2, 33, d}, 434, -1, 1),
         random_tensor(Shape{1, 2, 33, d}, 435, -1, 1), random_tensor(Shape{9, 33}, 436, -2, 0)},
        {{"scale", 0.125f}});
  }
}

TEST(VulkanBackend, OpsWithoutKernelsFallBackToTheHost) {
  SKIP_WITHOUT_VULKAN();
  Graph g;
  Value* x = g.add_input("x", Shape{4, 6});
  Value* r = g.add_op("Relu", {x});
  g.mark_output(
      g.add_op("ReduceSum", {r, g.add_constant("axes", Tensor::from_vector<int64_t>({1}, {1}))}));
  Runtime rt;
  CompileOptions vk;
  vk.backends = {"vulkan"};
  Executable* exe = g.compile(&rt, vk);
  Tensor xv = random_tensor(Shape{4, 6}, 26, -1, 1);
  Tensor got = exe->execute(std::vector<Tensor>{xv})[0];
  std::vector<double> want(4, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) want[i] += std::max(0.f, xv.data<float>()[i * 6 + j]);
  expect_close(got, Shape{4, 1}, want, 1e-5, 1e-5);
  EXPECT_NE(exe->summary().find("@vulkan"), std::string::npos) << exe->summary();
}

}  // namespace
}  // namespace lumen::test
