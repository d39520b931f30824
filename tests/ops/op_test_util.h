// Helpers for op tests: random inputs, one-op graphs, element-by-element comparison.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lumen/lumen.h"

namespace lumen::test {

// Uniform random float32 values in [lo, hi), reproducible from `seed`.
Tensor random_tensor(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// `count` n x n float32 matrices I + E, E uniform random in [-spread, spread): their determinants
// are near 1 whatever n (Det tests of large matrices).
Tensor near_identity(int64_t count, int64_t n, uint64_t seed, float spread);
// `n` uniform random floats in [-1, 1), reproducible from `seed` (for kernels on raw buffers).
std::vector<float> random_floats(int64_t n, uint64_t seed);
// Uniform random integers in [lo, hi] of an integer dtype (or bool: 0/1).
Tensor random_ints(const Shape& shape, uint64_t seed, int64_t lo, int64_t hi,
                   DType dtype = DType::kInt64);

// A path for a scratch file `name` in a folder of this process's own (lumen_test_PID under the
// system's temporary folder), created on first use and removed with everything in it when the
// process exits.
std::string temp_file(const std::string& name);

// Every element as double, row-major.
std::vector<double> to_doubles(const Tensor& t);

// The number of live nodes of kind `op` (an op name, "Softmax", "StridedAttention") in `graph`.
int count_ops(const Graph& graph, const std::string& op);

// A tensor of `dtype` (float16 or bfloat16) holding float32 x's values rounded to it; x is
// rewritten with the same rounded values, so that a reference computed from x sees what the
// 16-bit tensor holds.
Tensor to_16bit(Tensor& x, DType dtype);

// Runs `body` once at each level Lumen's own kernels have a form for on this CPU (AVX2 and
// AVX-512 where it has them, lowering the level in use with set_cpu_isa_limit; elsewhere once,
// at the level in use), with the level in a SCOPED_TRACE, and restores the level in use.
void at_each_kernel_level(const std::function<void()>& body);

// An input of run_op: a tensor, and whether it is bound as a graph constant (for inputs that
// must be known when the graph is built, such as Reshape's shape) or as a runtime input.
struct OpInput {
  Tensor tensor;
  bool constant = false;
  OpInput(Tensor t, bool c = false) : tensor(std::move(t)), constant(c) {}
};
inline OpInput constant(Tensor t) {
  return OpInput(std::move(t), true);
}
// An omitted optional input.
inline OpInput omitted() {
  return OpInput(Tensor(), false);
}

// The backends run_op compiles for, in order of preference: {"cpu"} unless the test program was
// started with --lumen-backends=LIST (tests/test_main.cc), e.g. cuda,cpu on a GPU machine so that
// every op test checks the CUDA kernels against its reference.
std::vector<std::string>& run_op_backends();

// Builds a graph with one `op` node (named "node") over `inputs` and compiles it into `rt` with
// `options`; the tensors execute() takes (the non-constant inputs, in order) are appended to
// *runtime_inputs.
Executable* compile_op(Runtime& rt, const std::string& op, const std::vector<OpInput>& inputs,
                       const Attributes& attrs, int num_outputs, const CompileOptions& options,
                       std::vector<Tensor>* runtime_inputs);

// Builds a graph with one `op` node over `inputs`, compiles it for run_op_backends() and runs it.
std::vector<Tensor> run_op(const std::string& op, const std::vector<OpInput>& inputs,
                           const Attributes& attrs = {}, int num_outputs = 1);

// Checks shape and every element: |got - want| <= atol + rtol * |want| (NaNs must match).
void expect_close(const Tensor& got, const Shape& want_shape, const std::vector<double>& want,
                  double atol = 1e-5, double rtol = 1e-4);
// The same for exact dtypes (integers, bool) and a dtype check.
void expect_equal(const Tensor& got, DType want_dtype, const Shape& want_shape,
                  const std::vector<double>& want);

// Checks that `fn` throws E whose message names run_op's node and `op`: "node 'node' (OP)".
template <typename E, typename Fn>
void expect_error(Fn fn, const std::string& op) {
  try {
    fn();
    ADD_FAILURE() << "no error for " << op;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find("node 'node' (" + op + ")"), std::string::npos)
        << e.what();
  }
}

// A naive 2-D convolution in double for references: x (N, C, H, W) row-major, w (O, C, kh, kw),
// bias b (O), the same stride and padding on both axes, one group.
std::vector<double> conv2d_reference(const std::vector<double>& x, const Shape& x_shape,
                                     const Tensor& w, const Tensor& b, int64_t stride, int64_t pad);

// Row-major index helpers for naive references.
std::vector<int64_t> unravel(int64_t flat, const Shape& shape);
int64_t ravel(const std::vector<int64_t>& index, const Shape& shape);
// Reads element `index` (of the broadcast output shape `out`) from a tensor of shape `in` under
// NumPy broadcasting.
int64_t broadcast_source(const std::vector<int64_t>& out_index, const Shape& in);

}  // namespace lumen::test
