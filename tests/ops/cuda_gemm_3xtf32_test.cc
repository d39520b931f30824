// Float32 products of many rows on CUDA, which cuBLASLt may run as 3xTF32 (lt_matmul.h): MatMul
// and Gemm (transposed operands, a bias) against a double-precision reference on random data,
// every output element within 8e-6 of the sum of |a||b| over k: far inside float32's classical
// bound (k * 2^-24 of it, 4.6e-5 at k = 768), which plain TF32 (about 3e-5 there) fails; 3xTF32
// measured 2.1e-6 on an H200 (its tensor cores' float32 accumulation is coarser than float32
// FMAs' rounding, which give about 1e-7). The step's detail says which way each product took.
// Without a CUDA device every test skips with a message; run on a GPU machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/backend_check_util.h"

namespace lumen::test {
namespace {

struct Case {
  int64_t m, k, n;
  bool trans_a, trans_b, bias;
  bool b_constant = true;  // a weight (split once at compile time), else an input (every run)
};

TEST(CudaGemm3xTf32, FloatAccuracyAtManyRows) {
  SKIP_WITHOUT_CUDA();
  // Columns and depth off a multiple of 4 take the split's one-float form, the rest its float4
  // form.
  const std::vector<Case> cases = {
      {2048, 768, 1024, false, false, false},       {1024, 512, 768, false, true, true},
      {1536, 384, 512, true, false, true},          {2048, 768, 1024, false, true, false, false},
      {2048, 766, 1022, false, false, true, false}, {2048, 766, 1022, false, true, true}};
  uint64_t seed = 70;
  int split = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.m << "x" << c.k << "x" << c.n << " transA " << c.trans_a
                                    << " transB " << c.trans_b << " B constant " << c.b_constant);
    const Tensor a = random_tensor(c.trans_a ? Shape{c.k, c.m} : Shape{c.m, c.k}, ++seed);
    const Tensor b = random_tensor(c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n}, ++seed);
    const Tensor bias = random_tensor({c.n}, ++seed);
    std::vector<OpInput> inputs = {a, c.b_constant ? constant(b) : OpInput(b)};
    if (c.bias) inputs.push_back(constant(bias));
    const Attributes attrs = {{"transA", int64_t{c.trans_a}}, {"transB", int64_t{c.trans_b}}};
    Runtime rt;
    CompileOptions gpu;
    gpu.backends = {"cuda", "cpu"};
    std::vector<Tensor> gpu_inputs;
    Executable* exe = compile_op(rt, "Gemm", inputs, attrs, 1, gpu, &gpu_inputs);
    ASSERT_EQ(backend_of_step(exe->summary(), "node"), "cuda") << exe->summary();
    RunProfile profile;
    const Tensor y = exe->execute(gpu_inputs, &profile)[0].to(Device::cpu());
    std::string detail;
    for (const RunProfile::Step& s : profile.steps)
      if (s.node == "node") detail = s.detail;
    if (detail.find("3xTF32 ") != std::string::npos &&
        detail.rfind(": 3xTF32") == detail.size() - 8)
      ++split;
    std::printf("  %lldx%lldx%lld: %s\n", static_cast<long long>(c.m), static_cast<long long>(c.k),
                static_cast<long long>(c.n), detail.c_str());
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    const float* py = y.data<float>();
    double worst = 0;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = c.bias ? bias.data<float>()[j] : 0.0, mag = std::fabs(sum);
        for (int64_t t = 0; t < c.k; ++t) {
          const double av = c.trans_a ? pa[t * c.m + i] : pa[i * c.k + t];
          const double bv = c.trans_b ? pb[j * c.k + t] : pb[t * c.n + j];
          sum += av * bv;
          mag += std::fabs(av * bv);
        }
        const double err = std::fabs(py[i * c.n + j] - sum) / mag;
        worst = std::max(worst, err);
        ASSERT_LE(err, 8e-6) << "at (" << i << ", " << j << "): " << py[i * c.n + j] << " vs "
                             << sum;
      }
    std::printf("  worst |error| / sum |a b|: %.2e\n", worst);
  }
  // On Hopper the 2048-row product runs 3xTF32 (5.9x TF32's speed over float32 SIMT there).
  std::printf("  %d of %zu products took 3xTF32\n", split, cases.size());
}

// Precision::kFloat32Strict: the product that runs as 3xTF32 by default stays in float32 FMAs, to
// their accuracy.
TEST(CudaGemm3xTf32, StrictPrecisionKeepsFloat32) {
  SKIP_WITHOUT_CUDA();
  const int64_t m = 2048, k = 768, n = 1024;
  const Tensor a = random_tensor({m, k}, 90);
  const Tensor b = random_tensor({k, n}, 91);
  Runtime rt;
  CompileOptions gpu;
  gpu.backends = {"cuda", "cpu"};
  gpu.precision = Precision::kFloat32Strict;
  std::vector<Tensor> gpu_inputs;
  Executable* exe = compile_op(rt, "MatMul", {a, constant(b)}, {}, 1, gpu, &gpu_inputs);
  ASSERT_EQ(backend_of_step(exe->summary(), "node"), "cuda") << exe->summary();
  RunProfile profile;
  const Tensor y = exe->execute(gpu_inputs, &profile)[0].to(Device::cpu());
  for (const RunProfile::Step& s : profile.steps)
    if (s.node == "node") EXPECT_EQ(s.detail.find("3xTF32"), std::string::npos) << s.detail;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const float* py = y.data<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t t = 0; t < k; ++t) {
        sum += double(pa[i * k + t]) * pb[t * n + j];
        mag += std::fabs(double(pa[i * k + t]) * pb[t * n + j]);
      }
      ASSERT_LE(std::fabs(py[i * n + j] - sum) / mag, 1e-6)
          << "at (" << i << ", " << j << "): " << py[i * n + j] << " vs " << sum;
    }
}

}  // namespace
}  // namespace lumen::test
