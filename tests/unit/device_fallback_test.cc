// A device list without the host ({"cuda"}, `--device cuda`): every node the GPU runs goes there,
// integer shape arithmetic and ops without a CUDA kernel stay on the host with the copies they
// need, and the executable's summary says which stayed and why. Without a GPU, "cuda" is a
// DeviceError.
#include <gtest/gtest.h>

#include <sstream>

#include "ops/backend_check_util.h"

namespace lumen::test {
namespace {

bool have_cuda() {
  Runtime rt;
  const std::vector<std::string> names = rt.backends();
  return std::find(names.begin(), names.end(), "cuda") != names.end();
}

// An encoder's padding mask: mask [B, S] int64 -> Unsqueeze -> Cast float -> (1 - m) * -1e4,
// added to scores [B, 1, S, S]; beside it shape arithmetic (an int64 Add on two elements) and a
// Det of matrices larger than the CUDA kernel takes, both for the host.
// The largest matrices the CUDA Det kernel takes (backends/cuda/extra_ops.h's kMaxDetSize).
constexpr int64_t kMaxDet = 64;

struct MaskGraph {
  Graph graph;
  std::vector<Tensor> inputs;
};

MaskGraph mask_graph() {
  MaskGraph m;
  Graph& g = m.graph;
  const int64_t b = 4, s = 24;
  Value* mask = g.add_input("mask", Shape{b, s}, DType::kInt64);
  Value* scores = g.add_input("scores", Shape{b, 1, s, s});
  const int64_t big = kMaxDet + 6;
  Value* mats = g.add_input("mats", Shape{3, big, big});
  // Shape arithmetic on a small int64 tensor given at run time (a Shape of a static input would
  // fold when the graph is built): count + 1, a graph output.
  Value* count = g.add_input("count", Shape{2}, DType::kInt64);
  g.mark_output(g.add_op("Add", {count, g.add_constant("one_i", Tensor::scalar<int64_t>(1))}, 1, {},
                         "axes")[0]);
  Value* axes = g.add_constant("one_two", Tensor::from_vector<int64_t>(Shape{2}, {1, 2}));
  Value* m4 = g.add_op("Unsqueeze", {mask, axes}, 1, {}, "unsqueeze")[0];
  Value* mf = g.add_op("Cast", {m4}, 1, {{"to", int64_t{1}}}, "cast")[0];
  Value* inv =
      g.add_op("Sub", {g.add_constant("one", Tensor::scalar<float>(1.f)), mf}, 1, {}, "invert")[0];
  Value* bias =
      g.add_op("Mul", {inv, g.add_constant("big", Tensor::scalar<float>(-1e4f))}, 1, {}, "bias")[0];
  g.mark_output(g.add_op("Add", {scores, bias}, 1, {}, "masked")[0]);
  g.mark_output(g.add_op("Det", {mats}, 1, {}, "det")[0]);
  m.inputs = {random_ints(Shape{b, s}, 1, 0, 1), random_tensor(Shape{b, 1, s, s}, 2),
              near_identity(3, big, 3, 0.01f), random_ints(Shape{2}, 4, 0, 50)};
  return m;
}

TEST(DeviceFallback, CudaWithoutTheHostKeepsWhatMustStayThere) {
  if (!have_cuda()) {
    MaskGraph m = mask_graph();
    Runtime rt;
    CompileOptions options;
    options.backends = {"cuda"};
    EXPECT_THROW(m.graph.compile(&rt, options), DeviceError);
    GTEST_SKIP() << "no CUDA device: only the DeviceError is checked";
  }
  MaskGraph on_cpu = mask_graph(), on_gpu = mask_graph();
  Runtime rt;
  CompileOptions cpu, gpu;
  cpu.backends = {"cpu"};
  gpu.backends = {"cuda"};
  const std::vector<Tensor> want = on_cpu.graph.compile(&rt, cpu)->execute(on_cpu.inputs);
  Executable* exe = on_gpu.graph.compile(&rt, gpu);
  const std::vector<Tensor> got = exe->execute(on_gpu.inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    expect_close(got[k], want[k].shape(), to_doubles(want[k]), 1e-4, 1e-4);
  const std::string summary = exe->summary();
  for (const char* node : {"unsqueeze", "cast", "invert", "bias", "masked"})
    EXPECT_EQ(backend_of_step(summary, node), "cuda") << node << "\n" << summary;
  for (const char* node : {"axes", "det"}) {
    EXPECT_EQ(backend_of_step(summary, node), "cpu") << node << "\n" << summary;
    std::istringstream lines(summary);
    std::string line;
    bool explained = false;
    while (std::getline(lines, line))
      if (line.find(": " + std::string(node) + " (") != std::string::npos)
        explained = line.find("(on the host: cuda: ") != std::string::npos;
    EXPECT_TRUE(explained) << node << " has no reason:\n" << summary;
  }
}

TEST(DeviceFallback, UnknownBackendIsAnInvalidArgument) {
  Graph g;
  Value* x = g.add_input("x", Shape{4});
  g.mark_output(g.add_op("Relu", {x}, 1, {}, "node")[0]);
  Runtime rt;
  CompileOptions options;
  options.backends = {"tpu"};
  EXPECT_THROW(g.compile(&rt, options), InvalidArgument);
}

}  // namespace
}  // namespace lumen::test
