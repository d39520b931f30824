// `lumen run MODEL.onnx`: load, optimize (unless --no-optimize), compile, run (with given or random
// inputs), print and save outputs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>

#include "lumen/lumen.h"
#include "lumen/npy.h"
#include "lumen/onnx.h"
#include "tools/auto_plan.h"
#include "tools/bench_util.h"
#include "tools/commands.h"
#include "tools/profile.h"

namespace lumen::cli {

Tensor random_input(const TensorInfo& info, uint64_t seed) {
  Tensor t = Tensor::empty(info.type.shape, info.type.dtype);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DType::kFloat32:
        t.data<float>()[i] = real(rng);
        break;
      case DType::kFloat64:
        t.data<double>()[i] = real(rng);
        break;
      case DType::kInt64:
        t.data<int64_t>()[i] = small(rng);
        break;
      case DType::kInt32:
        t.data<int32_t>()[i] = small(rng);
        break;
      case DType::kBool:
        t.data<bool>()[i] = small(rng) & 1;
        break;
      case DType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(small(rng));
        break;
      case DType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(small(rng));
        break;
      default:
        throw InvalidArgument(std::string("lumen run: cannot make random ") +
                              dtype_name(t.dtype()) + " input '" + info.name + "'");
    }
  }
  return t;
}

int64_t parse_count(const std::string& s, const char* what) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used == s.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(std::string(what) + " must be a positive integer, got '" + s + "'");
}

namespace {

std::string safe_file_name(const std::string& name) {
  std::string out = name;
  for (char& c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) c = '_';
  return out;
}

}  // namespace

// "1x3x224x224" -> Shape
Shape parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  size_t start = 0;
  while (start <= text.size()) {
    size_t x = text.find('x', start);
    std::string part = text.substr(start, x == std::string::npos ? std::string::npos : x - start);
    if (part.empty()) throw InvalidArgument("bad shape '" + text + "' (use e.g. 1x3x224x224)");
    dims.push_back(part == "0" ? 0 : parse_count(part, "a dimension"));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return Shape(dims);
}

std::pair<std::string, Shape> parse_shape_arg(const std::string& kv) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos) throw InvalidArgument("--shape takes NAME=1x3x224x224");
  return {kv.substr(0, eq), parse_shape(kv.substr(eq + 1))};
}

void print_host_fallbacks(const std::string& summary) {
  constexpr const char* kMark = "  (on the host: ";
  std::map<std::string, std::pair<int, std::string>> by_reason;  // why -> (count, first node)
  int total = 0;
  for (size_t p = 0; p < summary.size();) {
    const size_t end = std::min(summary.find('\n', p), summary.size());
    const std::string line = summary.substr(p, end - p);
    p = end + 1;
    const size_t at = line.find(kMark);
    if (at == std::string::npos) continue;
    std::string why = line.substr(at + std::strlen(kMark));
    if (!why.empty() && why.back() == ')') why.pop_back();
    const size_t colon = line.find(": ");
    auto& entry = by_reason[why];
    if (entry.first++ == 0) entry.second = line.substr(colon + 2, at - colon - 2);
    ++total;
  }
  if (total == 0) return;
  std::vector<std::pair<std::string, std::pair<int, std::string>>> rows(by_reason.begin(),
                                                                        by_reason.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("on the host: %d nodes the device list left there\n", total);
  for (const auto& [why, entry] : rows)
    std::printf("  %4d x %s (e.g. %s)\n", entry.first, why.c_str(), entry.second.c_str());
}

int run_model(const std::vector<std::string>& args) {
  if (args.empty()) throw InvalidArgument("lumen run: give a model file");
  std::string model = args[0];
  std::map<std::string, std::string> input_files;
  OnnxLoadOptions options;
  std::string out_dir;
  std::string device = "cpu";
  int64_t repeat = 10;
  bool optimize = true;
  bool profile = false;
  Precision precision = Precision::kFloat32;
  std::string trace;
  for (size_t i = 1; i < args.size(); ++i) {
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= args.size()) throw InvalidArgument(std::string(flag) + " needs a value");
      return args[++i];
    };
    const std::string& a = args[i];
    if (a == "--input") {
      std::string kv = value("--input");
      auto eq = kv.find('=');
      if (eq == std::string::npos) throw InvalidArgument("--input takes NAME=FILE.npy");
      input_files[kv.substr(0, eq)] = kv.substr(eq + 1);
    } else if (a == "--shape") {
      auto [name, shape] = parse_shape_arg(value("--shape"));
      options.input_shapes[name] = shape;
    } else if (a == "--output-dir") {
      out_dir = value("--output-dir");
    } else if (a == "--device") {
      device = value("--device");
    } else if (a == "--precision") {
      precision = parse_precision(value("--precision"));
    } else if (a == "--no-optimize") {
      optimize = false;
    } else if (a == "--profile") {
      profile = true;
    } else if (a == "--trace") {
      trace = value("--trace");
      profile = true;
    } else if (a == "--repeat") {
      repeat = parse_count(value("--repeat"), "--repeat");
    } else if (a == "--threads") {
      set_num_threads(static_cast<int>(parse_count(value("--threads"), "--threads")));
    } else {
      throw InvalidArgument("lumen run: unknown argument '" + a + "'");
    }
  }
  // --device takes a backend or a comma-separated list in order of preference ("cuda,cpu").
  std::vector<std::string> device_list;
  for (size_t start = 0; device != "auto" && start <= device.size();) {
    size_t comma = std::min(device.find(',', start), device.size());
    std::string name = device.substr(start, comma - start);
    if (name != "cpu" && name != "cuda" && name != "vulkan")
      throw InvalidArgument(
          "--device must be cpu, cuda, vulkan, a list such as cuda,cpu, or auto, "
          "not '" +
          device + "'");
    device_list.push_back(name);
    start = comma + 1;
  }

  std::map<std::string, Tensor> given;
  for (const auto& [name, file] : input_files) {
    given[name] = read_npy(file);
    options.input_shapes[name] = given[name].shape();
  }
  auto t0 = std::chrono::steady_clock::now();
  CompileOptions compile;
  compile.backends = device == "auto" ? std::vector<std::string>{"auto"} : device_list;
  compile.release_weights = true;
  compile.precision = precision;
  // The graph goes once compiled, and gives each weight up as soon as its readers packed it
  // (release_weights), so weights are not held twice, not even while compiling. Inputs whose
  // values decide shapes (a Reshape's shape fed at run time) are fixed to the values given and
  // compiled in, as OnnxSession does per run: the first load finds them, later loads reuse that.
  bool first_load = true;
  auto make = [&](const std::vector<std::string>& for_backends) {
    OnnxModelInfo info;
    Graph graph;
    try {
      graph = load_onnx(model, options, &info);
    } catch (const ShapeError&) {
      if (!first_load) throw;
      bool fixed = false;
      for (const std::string& name : info.value_inputs) {
        auto it = given.find(name);
        if (it == given.end()) continue;
        options.input_values[name] = it->second;
        options.input_shapes.erase(name);
        given.erase(it);
        fixed = true;
      }
      if (!fixed) throw;
      graph = load_onnx(model, options);
    }
    first_load = false;
    if (optimize) graph.optimize(for_backends);
    return graph;
  };
  auto make_inputs = [&](Executable* e) {
    std::vector<Tensor> out;
    for (size_t k = 0; k < e->inputs().size(); ++k) {
      const TensorInfo& info = e->inputs()[k];
      auto it = given.find(info.name);
      out.push_back(it != given.end() ? it->second : random_input(info, 1234 + k));
    }
    return out;
  };
  std::unique_ptr<Runtime> runtime;
  Executable* exe = nullptr;
  std::optional<AutoPlan> chosen;
  if (device == "auto") {
    chosen = compile_auto(make, compile, make_inputs, /*verify=*/true);
    runtime = std::move(chosen->runtime);
    exe = chosen->exe;
  } else {
    runtime = std::make_unique<Runtime>();
    Graph graph = make(device_list);
    exe = graph.compile(runtime.get(), compile);
  }
  Runtime& rt = *runtime;
  auto t1 = std::chrono::steady_clock::now();
  std::vector<Tensor> inputs = make_inputs(exe);
  for (const auto& [name, tensor] : given) {
    bool known = false;
    for (const TensorInfo& info : exe->inputs()) known = known || info.name == name;
    if (!known) throw InvalidArgument("lumen run: the model has no input named '" + name + "'");
  }

  const std::vector<std::string> usable = device == "auto" ? rt.backends() : device_list;
  bool on_cuda = std::find(usable.begin(), usable.end(), "cuda") != usable.end();
  MemoryStats before = rt.memory_stats();
  std::vector<Tensor> outputs = exe->execute(inputs);
  MemoryStats after_first = rt.memory_stats();
  MemoryStats cuda_first = on_cuda ? rt.memory_stats(Device::cuda()) : MemoryStats{};
  std::vector<double> ms = timed_runs(exe, inputs, repeat, &outputs);
  MemoryStats after_all = rt.memory_stats();
  // Profiled runs come after the timed ones, so timing every step does not disturb the latency.
  std::vector<RunProfile> profiles(profile ? static_cast<size_t>(repeat) : 0);
  for (RunProfile& p : profiles) exe->execute(inputs, &p);
  std::printf("%s: loaded and compiled in %.1f ms (%d CPU threads, %s kernels)\n", model.c_str(),
              std::chrono::duration<double, std::milli>(t1 - t0).count(), num_threads(),
              std::string(cpu_isa_name(cpu_isa())).c_str());
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k];
    double sum = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sum += t.item_as_double(i);
    std::printf("output %-20s %-8s %-20s checksum %.6g\n", exe->outputs()[k].name.c_str(),
                dtype_name(t.dtype()), t.shape().to_string().c_str(), sum);
    if (!out_dir.empty()) {
      std::filesystem::create_directories(out_dir);
      write_npy(out_dir + "/" + safe_file_name(exe->outputs()[k].name) + ".npy", t);
    }
  }
  {
    // Placement: steps per backend, and the copies between devices.
    std::string summary = exe->summary();
    // The device named is the accelerator that took the most steps (cuda when none did).
    std::map<std::string, size_t> steps_on;
    size_t copies = 0;
    for (size_t p = summary.find('\n'); p != std::string::npos; p = summary.find('\n', p + 1)) {
      std::string line = summary.substr(p + 1, summary.find('\n', p + 1) - p - 1);
      const size_t at = line.find(" @");
      if (line.find("copy '") != std::string::npos) {
        ++copies;
      } else if (at != std::string::npos) {
        const size_t end = line.find(' ', at + 2);
        ++steps_on[line.substr(at + 2, end == std::string::npos ? end : end - at - 2)];
      }
    }
    std::string accelerator = "cuda";
    for (const auto& [name, count] : steps_on)
      if (name != "cpu" && count > steps_on[accelerator]) accelerator = name;
    std::printf("placement: %zu steps on %s, %zu on cpu, %zu copies between devices\n",
                steps_on[accelerator], accelerator.c_str(), steps_on["cpu"], copies);
    print_host_fallbacks(summary);
  }
  // Four decimals, as `lumen plan --measure`: a plan of 20 us is then read to 0.5%, not 5%.
  std::printf("latency: median %.4f ms over %lld runs (min %.4f ms, p90 %.4f ms)\n",
              ms[ms.size() / 2], static_cast<long long>(ms.size()), ms.front(),
              ms[std::min(ms.size() - 1, ms.size() * 9 / 10)]);
  if (chosen) {
    std::printf("auto: ran plan %s; %s\n", chosen->candidates[chosen->chosen].name.c_str(),
                chosen->reason.c_str());
    const double predicted_ms = chosen->predicted_us() / 1000;
    if (predicted_ms >= 0)
      std::printf("auto: predicted %.4f ms, measured %.4f ms (%+.1f%%)\n", predicted_ms,
                  ms[ms.size() / 2], 100 * (predicted_ms - ms[ms.size() / 2]) / ms[ms.size() / 2]);
  }
  std::printf(
      "memory: arena %.2f MB; system allocations: %zu in the first run, %zu in the next "
      "%lld; peak in use %.2f MB\n",
      static_cast<double>(exe->memory_report().arena_bytes) / 1e6,
      after_first.num_system_allocs - before.num_system_allocs,
      after_all.num_system_allocs - after_first.num_system_allocs, static_cast<long long>(repeat),
      static_cast<double>(after_all.peak_bytes_in_use) / 1e6);
  if (on_cuda) {
    MemoryStats cuda_all = rt.memory_stats(Device::cuda());
    std::printf(
        "cuda memory: cudaMalloc calls after the first run: %zu in the next %lld; peak in "
        "use %.2f MB\n",
        cuda_all.num_system_allocs - cuda_first.num_system_allocs, static_cast<long long>(repeat),
        static_cast<double>(cuda_all.peak_bytes_in_use) / 1e6);
  }
  if (profile) print_profile(profiles);
  if (!trace.empty()) {
    write_chrome_trace(profiles, trace);
    std::printf(
        "wrote the trace of one run, each step with its median over all runs, to %s (open it in "
        "chrome://tracing or Perfetto)\n",
        trace.c_str());
  }
  return 0;
}

}  // namespace lumen::cli
