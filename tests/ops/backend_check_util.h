// Helpers of the op tests that check an accelerator's kernels (--lumen-backends=cuda,cpu): skip
// when a requested backend is missing on this machine, run one op and check it ran on the first
// requested backend (so a silent fallback to the host does not pass as a GPU test), and build
// integer-valued tensors of any dtype.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen::test {

// Whether every backend of run_op_backends() exists on this machine (a GPU test skips where not).
inline bool requested_backends_available() {
  Runtime rt;
  const std::vector<std::string> have = rt.backends();
  for (const std::string& b : run_op_backends())
    if (std::find(have.begin(), have.end(), b) == have.end()) return false;
  return true;
}

// Skips the test where a requested backend is missing (e.g. cuda on a machine without a GPU).
#define LUMEN_SKIP_WITHOUT_BACKENDS()                                                   \
  do {                                                                                  \
    if (!::lumen::test::requested_backends_available())                                 \
      GTEST_SKIP() << "a backend of --lumen-backends is not available on this machine"; \
  } while (0)

// The backend a step of `summary` (Executable::summary) named `node` ran on, "" if none.
inline std::string backend_of_step(const std::string& summary, const std::string& node) {
  std::istringstream lines(summary);
  std::string line;
  const std::string key = ": " + node + " (";
  while (std::getline(lines, line)) {
    const size_t at = line.find(key);
    const size_t b = at == std::string::npos ? at : line.find(" @", at);
    if (at != std::string::npos && b != std::string::npos) {
      const size_t end = line.find(' ', b + 2);
      return line.substr(b + 2, end == std::string::npos ? std::string::npos : end - b - 2);
    }
  }
  return "";
}

// run_op that also checks the node ran on backend `expect` ("" for the first of
// run_op_backends()); no check where only the host was requested.
inline std::vector<Tensor> run_checked(const std::string& op, const std::vector<OpInput>& inputs,
                                       const Attributes& attrs = {}, int num_outputs = 1,
                                       const std::string& expect = "") {
  Runtime rt;
  CompileOptions options;
  options.backends = run_op_backends();
  std::vector<Tensor> runtime_inputs;
  Executable* exe = compile_op(rt, op, inputs, attrs, num_outputs, options, &runtime_inputs);
  const std::string want = expect.empty() ? run_op_backends().front() : expect;
  if (run_op_backends() != std::vector<std::string>{"cpu"})
    EXPECT_EQ(backend_of_step(exe->summary(), "node"), want)
        << op << " did not run on " << want << ":\n"
        << exe->summary();
  return exe->execute(runtime_inputs);
}

// Integer values uniform in [lo, hi] as a tensor of `dtype` (floats included: integer-valued, so
// comparisons meet ties), reproducible from `seed`.
inline Tensor int_valued(const Shape& shape, DType dtype, uint64_t seed, int64_t lo, int64_t hi) {
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> dist(lo, hi);
    std::vector<double> v(static_cast<size_t>(shape.numel()));
    for (double& x : v) x = static_cast<double>(dist(rng));
    if (dtype == DType::kFloat64) return Tensor::from_vector<double>(shape, v);
    return Tensor::from_vector<float>(shape, std::vector<float>(v.begin(), v.end()));
  }
  return random_ints(shape, seed, lo, hi, dtype);
}

// Random float64 values in [lo, hi).
inline Tensor random_doubles(const Shape& shape, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (double& x : v) x = dist(rng);
  return Tensor::from_vector<double>(shape, v);
}

}  // namespace lumen::test
