// `lumen bench lengths MODEL.onnx`: one session over many sequence lengths, Lumen's shape family
// against a plan compiled per exact length (OnnxLoadOptions::plan_per_shape).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "tools/bench_util.h"
#include "tools/commands.h"

namespace lumen::cli {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Milliseconds of one run, and its first output on the host.
double timed_run(OnnxSession& session, const std::map<std::string, Tensor>& feeds, Tensor* out) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> outputs = session.run(feeds);
  const double ms = ms_since(start);
  if (out != nullptr) *out = outputs.at(0);
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The largest |a - b| over the largest |b| (float32 outputs; -1 for others).
double max_relative(const Tensor& a, const Tensor& b) {
  if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32 || a.numel() != b.numel())
    return -1.0;
  double diff = 0.0, scale = 1e-30;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::abs(double(b.data<float>()[i])));
  }
  return diff / scale;
}

}  // namespace

int bench_lengths(const std::vector<std::string>& args) {
  if (args.empty()) throw InvalidArgument("lumen bench lengths: give a model file");
  const std::string path = args[0];
  std::vector<int64_t> lengths;
  int64_t count = 20, max_length = 512, repeat = 5, vocab = 1000;
  uint64_t seed = 0;
  std::string device = "cpu";
  for (size_t i = 1; i < args.size(); ++i) {
    const auto value = [&](const char* flag) {
      if (i + 1 >= args.size()) throw InvalidArgument(std::string(flag) + " needs a value");
      return args[++i];
    };
    const std::string& a = args[i];
    if (a == "--lengths") {
      const std::string list = value("--lengths");
      for (size_t start = 0; start < list.size();) {
        const size_t comma = std::min(list.find(',', start), list.size());
        lengths.push_back(std::stoll(list.substr(start, comma - start)));
        start = comma + 1;
      }
    } else if (a == "--count") {
      count = std::stoll(value("--count"));
    } else if (a == "--max-length") {
      max_length = std::stoll(value("--max-length"));
    } else if (a == "--repeat") {
      repeat = std::stoll(value("--repeat"));
    } else if (a == "--seed") {
      seed = std::stoull(value("--seed"));
    } else if (a == "--vocab") {
      vocab = std::stoll(value("--vocab"));
    } else if (a == "--device") {
      device = value("--device");
    } else if (a == "--threads") {
      set_num_threads(static_cast<int>(std::stoll(value("--threads"))));
    } else {
      throw InvalidArgument("lumen bench lengths: unknown argument '" + a + "'");
    }
  }
  if (count < 1 || max_length < 1 || repeat < 1 || vocab < 1)
    throw InvalidArgument(
        "lumen bench lengths: --count, --max-length, --repeat and --vocab must "
        "be positive");
  std::mt19937_64 rng(seed);
  if (lengths.empty())
    for (int64_t k = 0; k < count; ++k)
      lengths.push_back(std::uniform_int_distribution<int64_t>(1, max_length)(rng));
  CompileOptions compile;
  compile.backends = {device};
  OnnxLoadOptions per_shape;
  per_shape.plan_per_shape = true;
  OnnxSession family(path, {}, compile);
  OnnxSession exact(path, per_shape, compile);
  if (family.info().inputs.size() != 1 || family.info().inputs[0].dims.size() != 2)
    throw InvalidArgument("lumen bench lengths: the model must take one input of [1, seq] ids");
  const OnnxInputInfo& input = family.info().inputs[0];
  // family_second_ms: the second call at a length, where a device plan records its graph.
  std::printf(
      "length family_first_ms exact_first_ms family_ms exact_ms max_rel family_plan_ms "
      "family_second_ms\n");
  for (int64_t length : lengths) {
    Tensor ids = Tensor::empty({1, length}, input.dtype);
    for (int64_t i = 0; i < length; ++i) {
      const int64_t id = std::uniform_int_distribution<int64_t>(0, vocab - 1)(rng);
      if (input.dtype == DType::kInt64)
        ids.data<int64_t>()[i] = id;
      else
        ids.data<int32_t>()[i] = static_cast<int32_t>(id);
    }
    const std::map<std::string, Tensor> feeds{{input.name, ids}};
    Tensor family_out, exact_out;
    // A new length's cost in two parts: making its plan, then its first run.
    const auto plan_start = std::chrono::steady_clock::now();
    family.plan_for(feeds);
    const double family_plan = ms_since(plan_start);
    const double family_first = family_plan + timed_run(family, feeds, &family_out);
    const double exact_first = timed_run(exact, feeds, &exact_out);
    std::vector<double> f, e;
    for (int64_t r = 0; r < repeat; ++r) {  // the two alternate, so both see the same machine
      f.push_back(timed_run(family, feeds, nullptr));
      e.push_back(timed_run(exact, feeds, nullptr));
    }
    const double family_second = f[0];
    std::printf("%lld %.3f %.3f %.3f %.3f %.2e %.3f %.3f\n", static_cast<long long>(length),
                family_first, exact_first, median(f), median(e),
                max_relative(family_out, exact_out), family_plan, family_second);
    std::fflush(stdout);
  }
  const OnnxSession::Stats fs = family.stats(), es = exact.stats();
  std::printf("family: %zu compiles, %zu plans from families, %zu kernels shared, %zu built%s%s\n",
              fs.compiles, fs.sized, fs.kernels_shared, fs.kernels_built,
              fs.refused.empty() ? "" : "; refused: ", fs.refused.c_str());
  std::printf("exact: %zu compiles\n", es.compiles);
  if (device != "cpu") {
    // Both sessions' plans are alive here: what the device's pool holds for them.
    const MemoryStats ms =
        Runtime().memory_stats(device == "cuda" ? Device::cuda() : Device::vulkan());
    std::printf("device memory: %.1f MB in use, %.1f MB peak, %.1f MB cached\n",
                ms.bytes_in_use / 1e6, ms.peak_bytes_in_use / 1e6, ms.bytes_cached / 1e6);
  }
  return 0;
}

}  // namespace lumen::cli
