// What the `lumen bench` subcommands share.
#include "tools/bench_util.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "lumen/error.h"

namespace lumen::cli {

Timing time_runs(const std::function<double()>& one_run, int64_t runs) {
  one_run();
  std::vector<double> ms;
  auto start = std::chrono::steady_clock::now();
  for (int64_t r = 0;; ++r) {
    ms.push_back(one_run());
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (runs > 0 ? r + 1 >= runs : (r + 1 >= 5 && elapsed > 2.0)) break;
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.size()};
}

Tensor uniform_tensor(const Shape& shape, float bound, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-bound, bound);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

double wall_ms(const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double steps_ms(const RunProfile& profile) {
  double us = 0;
  for (const RunProfile::Step& step : profile.steps) us += step.duration_us;
  return us / 1e3;
}

namespace {

// A "VmRSS:   1234 kB" line of /proc/self/status, in bytes.
size_t status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    size_t kb = 0;
    fields >> kb;
    return kb * 1024;
  }
  return 0;
}

}  // namespace

size_t resident_bytes() {
  return status_kb("VmRSS");
}
size_t peak_resident_bytes() {
  return status_kb("VmHWM");
}

Precision parse_precision(const std::string& text) {
  if (text == "float32") return Precision::kFloat32;
  if (text == "tf32") return Precision::kTF32;
  if (text == "float16") return Precision::kFloat16;
  if (text == "bfloat16") return Precision::kBFloat16;
  if (text == "float32-strict") return Precision::kFloat32Strict;
  throw InvalidArgument(
      "--precision must be float32, float32-strict, tf32, float16 or bfloat16, not '" + text + "'");
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFloat32:
      return "float32";
    case Precision::kTF32:
      return "tf32";
    case Precision::kFloat16:
      return "float16";
    case Precision::kBFloat16:
      return "bfloat16";
    case Precision::kFloat32Strict:
      return "float32-strict";
  }
  return "?";
}

std::vector<std::string> parse_backends(const std::string& list, const Runtime& runtime) {
  if (list == "cpu") return {"cpu"};  // listing the backends would load the GPU plugins
  std::vector<std::string> have = runtime.backends();
  if (list.empty()) return have;
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = std::min(list.find(',', start), list.size());
    std::string name = list.substr(start, comma - start);
    if (std::find(have.begin(), have.end(), name) == have.end()) {
      std::string known;
      for (const std::string& h : have) known += (known.empty() ? "" : ", ") + h;
      throw DeviceError("--device: backend '" + name + "' is not available here (this build and " +
                        "machine have: " + known + ")");
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    start = comma + 1;
  }
  return out;
}

Device backend_device(const std::string& backend) {
  if (backend == "cuda") return Device::cuda(0);
  if (backend == "vulkan") return Device::vulkan(0);
  return Device::cpu();
}

}  // namespace lumen::cli
