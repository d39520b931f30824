// Soak: 100,000 runs of the shipped model (models/digits, one image a run) with resident memory
// sampled every 10,000 runs. After a warm-up the process must not grow: each run's intermediates
// come from the executable's arena and its outputs from the host pool's free lists. Label `soak`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

constexpr int kRuns = 100000;
constexpr int kWarmup = 2000;
constexpr int kSampleEvery = 10000;
// Allowed growth from the first sample after warm-up to the last: 1 MiB, 10 bytes a run. A leak
// of one small allocation per run (a tensor header, a vector) is several times this.
constexpr long kSlackBytes = 1 << 20;

const std::string kDigits = std::string(LUMEN_SOURCE_DIR) + "/models/digits";

long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

TEST(Soak, HundredThousandRunsKeepResidentMemorySteady) {
  Tensor images = read_npy(kDigits + "/test_x.npy");
  Tensor logits = read_npy(kDigits + "/reference_logits.npy");
  OnnxLoadOptions options;
  options.input_shapes["image"] = Shape{1, 1, 8, 8};
  Graph graph = load_onnx(kDigits + "/digits.onnx", options);
  graph.optimize();
  Runtime rt;
  Executable* exe = graph.compile(&rt);
  const int64_t n = images.shape()[0];
  std::vector<Tensor> inputs;
  for (int64_t i = 0; i < n; ++i) inputs.push_back(images.narrow(i, 1).clone());

  long start = 0, peak = 0;
  std::vector<long> samples;
  for (int r = 0; r < kRuns + kWarmup; ++r) {
    int64_t i = r % n;
    Tensor out = exe->execute({inputs[i]}).at(0);
    if (r < n)  // each image once against PyTorch's logits
      test::expect_close(out, {1, 10}, test::to_doubles(logits.narrow(i, 1)), 1e-4, 1e-4);
    if (r == kWarmup) start = resident_bytes();
    if (r > kWarmup && (r - kWarmup) % kSampleEvery == 0) {
      samples.push_back(resident_bytes());
      peak = std::max(peak, samples.back());
    }
  }
  long end = resident_bytes();
  std::printf(
      "soak: %d runs; resident memory after %d warm-up runs %ld KiB, at the end %ld KiB, "
      "highest sample %ld KiB\n",
      kRuns, kWarmup, start / 1024, end / 1024, peak / 1024);
  EXPECT_LE(end, start + kSlackBytes);
  EXPECT_LE(peak, start + kSlackBytes);
}

}  // namespace
}  // namespace lumen
