// Calibration: kernels timed on random inputs, links timed with copies of two sizes, launch cost
// timed with a one-element kernel, eager and inside a recorded graph.
#include "router/calibrate.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "backends/recording.h"
#include "core/host_info.h"
#include "graph/op_kind.h"

namespace lumen::router {
namespace {

using Clock = std::chrono::steady_clock;

double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Per-run time of `run` (microseconds): warmed up with `warmups` calls (each kernel's first call
// creates primitives and touches memory), then launched back to back for about 2 ms (at least
// once; the count follows the best time so far) and the stream synchronized, the median of five
// such rounds: a run sees the typical time, not the best.
double time_per_run(const std::function<void()>& run, Stream& stream, int warmups = 1) {
  for (int w = 0; w < warmups; ++w) run();
  stream.synchronize();
  Clock::time_point t0 = Clock::now();
  run();
  stream.synchronize();
  double best = micros_since(t0);
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    const int reps = static_cast<int>(std::clamp(2000.0 / std::max(best, 0.5), 1.0, 2000.0));
    t0 = Clock::now();
    for (int r = 0; r < reps; ++r) run();
    stream.synchronize();
    rounds.push_back(micros_since(t0) / reps);
    best = std::min(best, rounds.back());
  }
  std::nth_element(rounds.begin(), rounds.begin() + 2, rounds.end());
  return rounds[2];
}

// Per-run time of `run` on the host (microseconds), the minimum of up to three rounds' medians
// (the later rounds while the earlier took under 20 ms, or their median is over twice the fastest
// run: a kernel of milliseconds that runs alike every time shrugs off a burst): warmed up with
// `warmups` calls and one more, then in each round every run timed on its own, at least 5 runs
// and 1 ms, and up to 15 runs while under 15 ms (at most 100000 runs). On a shared host a round's
// mean takes in other processes' bursts (a parallel region that waits for a descheduled thread
// took milliseconds instead of microseconds on the H100 machine's virtual CPUs); a median does
// not, and a round the whole of which such a burst covered loses to the other two.
double time_per_host_run(const std::function<void()>& run, int warmups = 1) {
  for (int w = 0; w < warmups + 1; ++w) run();
  double best = std::numeric_limits<double>::infinity();
  double fastest = std::numeric_limits<double>::infinity();  // the fastest single run
  const Clock::time_point first = Clock::now();
  for (int round = 0;
       round < 3 && (round == 0 || micros_since(first) < 20000 || best > 2 * fastest); ++round) {
    std::vector<double> times;
    const Clock::time_point start = Clock::now();
    auto more = [&] {
      const double spent = micros_since(start);
      if (times.size() < 5 || (spent < 1000 && times.size() < 100000)) return true;
      return times.size() < 15 && spent < 15000;
    };
    while (more()) {
      Clock::time_point t0 = Clock::now();
      run();
      times.push_back(micros_since(t0));
      fastest = std::min(fastest, times.back());
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    best = std::min(best, times[times.size() / 2]);
  }
  return best;
}

// Random float32 data in [-1, 1] (other dtypes zero: valid indices and shapes), on `device`.
Tensor random_tensor(const TensorType& type, Device device, std::mt19937& rng) {
  Tensor host = Tensor::zeros(type.shape, type.dtype);
  if (type.dtype == DType::kFloat32) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    float* p = host.data<float>();
    const int64_t n = host.numel();
    for (int64_t i = 0; i < n; ++i) p[i] = dist(rng);
  }
  return host.to(device);
}

// One launch of `kernel` as an eager run makes it: outputs allocated from the device's pool, or
// `given` where it holds them (a kernel that makes its outputs ignores it).
void run_kernel(const Kernel& kernel, const std::vector<Tensor>& inputs,
                const std::vector<TensorType>& output_types, Backend& backend,
                const std::vector<Tensor>* given = nullptr) {
  std::vector<Tensor> outputs(output_types.size());
  if (!kernel.makes_outputs())
    for (size_t k = 0; k < outputs.size(); ++k)
      outputs[k] = given != nullptr ? (*given)[k]
                                    : Tensor::empty(output_types[k].shape, output_types[k].dtype,
                                                    backend.device());
  KernelContext ctx{inputs, outputs, &backend.default_stream()};
  kernel.run(ctx);
}

// Per-run time of `run` recorded kLaunches times on `recorder` and replayed (microseconds), or 0
// when recording fails (the kernel then has no in-graph time).
double time_recorded(const std::function<void()>& run, RecordingStream& recorder, Stream& stream) {
  constexpr int kLaunches = 16;
  stream.synchronize();
  std::unique_ptr<CapturedWork> work;
  recorder.begin_capture();
  try {
    for (int k = 0; k < kLaunches; ++k) run();
  } catch (...) {
    try {
      recorder.end_capture();
    } catch (...) {
    }
    return 0;
  }
  try {
    work = recorder.end_capture();
  } catch (const Error&) {
    return 0;
  }
  return time_per_run([&] { work->replay(); }, stream) / kLaunches;
}

// Below this many constant bytes a kernel is timed with its constants as they are, cold or not.
constexpr double kColdMinBytes = 64 * 1024;
// From this many bytes of graph inputs a kernel is timed with them cold.
constexpr double kColdInputMinBytes = 1 << 20;
// From this many output bytes a device kernel writes to fresh memory on every launch.
constexpr double kFreshOutputMinBytes = 1 << 20;

// How many copies of `bytes` make launches that take turns over them read each from memory: 2 to
// 16, together at least twice the cache (16 where its size is unknown).
size_t cold_copies(double bytes, size_t cache) {
  if (cache == 0) return 16;
  return static_cast<size_t>(
      std::clamp(std::ceil(2.0 * static_cast<double>(cache) / bytes), 2.0, 16.0));
}

// Times `node`'s kernel on `backend`: eager, and recorded where the backend's stream records.
// Where the regime's constants are cold, each launch reads another of several copies of them
// (together at least twice the cache): a kernel per copy, since kernels may pack constants when
// they are built. Where the regime says so, graph inputs of kColdInputMinBytes or more are read
// cold the same way. On a device, outputs of kFreshOutputMinBytes or more take turns over as many
// copies: in a run each kernel writes a buffer that no recent kernel wrote, so its writes evict
// other data and go to memory; writing one buffer over and over stays in the cache (on the H100,
// batch-32 mobilenet_v2 was predicted 34% fast with one output buffer, 3% with fresh ones). Returns
// a negative eager time when it cannot be measured.
KernelSample time_node(const Graph& graph, const Node& node, Backend& backend,
                       const TimingRegime& regime, std::mt19937& rng) {
  KernelSample sample;
  sample.us = -1;
  std::vector<TensorType> output_types;
  for (int out : node.outputs) {
    const TensorType& t = graph.value(out).type;
    if (!t.shape.is_static()) return sample;
    output_types.push_back(t);
  }
  const double const_bytes = constant_bytes(graph, node);
  const double input_bytes = graph_input_bytes(graph, node);
  double output_bytes = 0;
  for (const TensorType& t : output_types)
    output_bytes += static_cast<double>(t.shape.numel()) * dtype_size(t.dtype);
  const bool cold_constants = regime.cold_constants && const_bytes >= kColdMinBytes;
  const bool cold_inputs = regime.cold_inputs && input_bytes >= kColdInputMinBytes;
  const bool fresh_outputs =
      backend.device().type != DeviceType::kCPU && output_bytes >= kFreshOutputMinBytes;
  size_t copies = 1;
  if (cold_constants) copies = cold_copies(const_bytes, backend.cache_bytes());
  if (cold_inputs) copies = std::max(copies, cold_copies(input_bytes, backend.cache_bytes()));
  if (fresh_outputs) copies = std::max(copies, cold_copies(output_bytes, backend.cache_bytes()));
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (size_t c = 0; c < (cold_constants ? copies : 1); ++c)
    kernels.push_back(backend.make_kernel(graph, node, Precision::kFloat32));
  std::vector<std::vector<Tensor>> input_sets(copies);
  for (int in : node.inputs) {
    if (in < 0) {
      for (auto& set : input_sets) set.emplace_back();
      continue;
    }
    const Value& v = graph.value(in);
    const bool own_copy = v.data.has_value() ? cold_constants : v.is_input && cold_inputs;
    if (!v.data.has_value() && !v.type.shape.is_static()) return sample;
    Tensor shared;
    for (auto& set : input_sets) {
      if (!shared.defined() || own_copy)
        shared = !v.data.has_value() ? random_tensor(v.type, backend.device(), rng)
                 : own_copy          ? v.data->clone().to(backend.device())
                                     : v.data->to(backend.device());
      set.push_back(shared);
    }
  }
  std::vector<std::vector<Tensor>> output_sets;
  if (fresh_outputs)
    for (size_t c = 0; c < copies; ++c) {
      std::vector<Tensor>& set = output_sets.emplace_back();
      for (const TensorType& t : output_types)
        set.push_back(Tensor::empty(t.shape, t.dtype, backend.device()));
    }
  size_t next = 0;
  auto run = [&] {
    run_kernel(*kernels[next % kernels.size()], input_sets[next], output_types, backend,
               fresh_outputs ? &output_sets[next] : nullptr);
    next = (next + 1) % copies;
  };
  // Every copy's kernel gets its first call before the timing starts.
  const int warmups = static_cast<int>(std::max(copies, kernels.size()));
  sample.us = backend.device().type == DeviceType::kCPU
                  ? time_per_host_run(run, warmups)
                  : time_per_run(run, backend.default_stream(), warmups);
  if (auto* recorder = dynamic_cast<RecordingStream*>(&backend.default_stream()))
    sample.graph_us = time_recorded(run, *recorder, backend.default_stream());
  return sample;
}

// Eager and recorded launch cost of a one-element kernel on a device backend.
LaunchCost time_launch(Backend& backend) {
  Graph tiny;
  Value* x = tiny.add_input("x", Shape{1});
  tiny.mark_output(tiny.add_op("Relu", {x}));
  const Node& relu = tiny.node(tiny.num_nodes() - 1);
  std::unique_ptr<Kernel> kernel = backend.make_kernel(tiny, relu, Precision::kFloat32);
  Tensor in = Tensor::zeros(Shape{1}, DType::kFloat32, backend.device());
  Tensor out = Tensor::zeros(Shape{1}, DType::kFloat32, backend.device());
  std::vector<Tensor> inputs = {in};
  std::vector<TensorType> types = {{DType::kFloat32, Shape{1}}};
  LaunchCost cost;
  cost.eager_us =
      time_per_run([&] { run_kernel(*kernel, inputs, types, backend); }, backend.default_stream());
  cost.graph_us = cost.eager_us / 5;
  auto* recorder = dynamic_cast<RecordingStream*>(&backend.default_stream());
  if (recorder == nullptr) return cost;
  auto capture = [&](int launches) {
    std::vector<Tensor> outputs = {out};
    KernelContext ctx{inputs, outputs, &backend.default_stream()};
    backend.default_stream().synchronize();
    recorder->begin_capture();
    for (int k = 0; k < launches; ++k) kernel->run(ctx);
    return recorder->end_capture();
  };
  constexpr int kLaunches = 32;
  std::unique_ptr<CapturedWork> one = capture(1);
  std::unique_ptr<CapturedWork> many = capture(kLaunches);
  double t_one = time_per_run([&] { one->replay(); }, backend.default_stream());
  double t_many = time_per_run([&] { many->replay(); }, backend.default_stream());
  cost.graph_us = std::max(0.0, (t_many - t_one) / (kLaunches - 1));
  return cost;
}

// Host -> device and device -> host copy time, measured at eight sizes from 4 KiB to 64 MiB and
// read off between them (Link::points), made as a run makes its copies (Backend::move: on CUDA,
// staged through pinned memory, by the host's threads from 1 MiB). One line through a 4 KiB and a
// 16 MiB copy predicted wide_deep_small's 256 KiB input (staged on one thread) at 0.05 ms per run
// that took 0.07, and pooled_mlp's 128 MiB input (from memory, not the host's cache) at 7.4 ms that
// took 12.8 on the H200 machine. Four points (4 KiB, 256 KiB, 4 MiB, 64 MiB) were still too few
// there at 2 threads: a 32 MiB input that the caller rewrites stays in the host's last-level cache
// and went at 18 GB/s, where the 64 MiB point (from memory) made 10, so two_tower's batch-32 plan
// on the GPU was predicted at 3.3 ms and ran in 1.9. Each copy is timed on its own, to the stream's
// end, and the median taken: a run waits for its one copy, and back-to-back copies (the best of
// rounds) ran faster than that on the H100 machine's shared host. The source is the same buffer
// each time, as an input the caller has just written. Times are made non-decreasing in the size.
std::pair<Link, Link> time_links(Backend& backend) {
  constexpr int64_t kKi = 1024;
  constexpr std::array<int64_t, 8> kSizes = {kKi,           64 * kKi,      256 * kKi,
                                             kKi * kKi,     2 * kKi * kKi, 4 * kKi * kKi,
                                             8 * kKi * kKi, 16 * kKi * kKi};  // float32 elements
  Stream& stream = backend.default_stream();
  auto link = [&](bool to_device) {
    Link out;
    for (int64_t n : kSizes) {
      Tensor host = Tensor::zeros(Shape{n});
      Tensor dev = host.to(backend.device());
      double us = time_per_host_run([&] {
        if (to_device)
          (void)backend.move(host, backend.device(), nullptr);
        else
          (void)backend.move(dev, Device::cpu(), nullptr);
        stream.synchronize();
      });
      if (!out.points.empty()) us = std::max(us, out.points.back().second);
      out.points.emplace_back(static_cast<double>(n) * 4, us);
    }
    const auto& [b0, t0] = out.points.front();
    const auto& [b1, t1] = out.points.back();
    out.latency_us = t0;
    out.us_per_byte = (t1 - t0) / (b1 - b0);
    return out;
  };
  return {link(true), link(false)};
}

// A progress line on stderr, rewritten in place; only on a terminal.
class Progress {
 public:
  Progress(bool enabled, int total) : enabled_(enabled && total > 0 && isatty(2)), total_(total) {}
  void update(int done, const std::string& what) {
    if (enabled_)
      std::fprintf(stderr, "\rlumen: calibrating %d/%d %-50.50s", done, total_, what.c_str());
  }
  ~Progress() {
    if (enabled_) std::fprintf(stderr, "\r%80s\r", "");
  }

 private:
  bool enabled_;
  int total_;
};

}  // namespace

bool constants_stream(const Graph& graph, const std::vector<int>& nodes, const Backend& backend) {
  const size_t cache = backend.cache_bytes();
  if (cache == 0) return false;
  std::set<int> seen;
  double bytes = 0;
  for (int id : nodes)
    for (int in : graph.node(id).inputs)
      if (in >= 0 && graph.value(in).data.has_value() && seen.insert(in).second)
        bytes += static_cast<double>(graph.value(in).data->nbytes());
  return bytes > static_cast<double>(cache);
}

TimingRegime timing_regime(const Graph& graph, const std::vector<int>& nodes,
                           const Backend& backend) {
  TimingRegime regime;
  regime.cold_constants = constants_stream(graph, nodes, backend);
  const size_t cache = backend.cache_bytes();
  if (backend.device().type == DeviceType::kCPU && cache > 0) {
    double bytes = 0;
    for (int in : graph.inputs())
      if (!graph.value(in).data.has_value() && graph.value(in).type.shape.is_static())
        bytes += static_cast<double>(graph.value(in).type.shape.numel()) *
                 dtype_size(graph.value(in).type.dtype);
    regime.cold_inputs = bytes > static_cast<double>(cache) / 2;
  }
  return regime;
}

std::string timed_key(const Graph& graph, const Node& node, const NodeSignature& sig,
                      const TimingRegime& regime) {
  std::string key = regime.cold_constants ? cold_key(sig.key) : sig.key;
  if (!regime.cold_inputs && graph_input_bytes(graph, node) >= kColdInputMinBytes)
    key = warm_input_key(key);
  return key;
}

std::string device_identity(const std::vector<Backend*>& backends) {
  std::string out;
  for (Backend* b : backends) {
    if (!out.empty()) out += "; ";
    if (b->device().type == DeviceType::kCPU)
      out += b->name() + "=" + cpu_model_name() + " (" + std::to_string(omp_get_max_threads()) +
             " threads)";
    else
      out += b->name() + "=" + b->device_name();
  }
  return out;
}

CalibrationReport calibrate(const Graph& graph, const std::vector<int>& nodes,
                            const std::vector<Backend*>& backends, double budget_s, bool progress,
                            CostModel* model) {
  const Clock::time_point start = Clock::now();
  CalibrationReport report;
  // What to measure: each signature once per backend that supports it and lacks it.
  struct Work {
    int node;
    Backend* backend;
    NodeSignature sig;
  };
  std::vector<Work> work;
  std::map<std::pair<std::string, std::string>, Work> of_key;  // (backend, key) -> how to time it
  std::set<std::pair<std::string, std::string>> planned;
  std::map<const Backend*, TimingRegime> regime;
  for (Backend* b : backends) regime[b] = timing_regime(graph, nodes, *b);
  for (int id : nodes) {
    const Node& node = graph.node(id);
    NodeSignature sig = signature_of(graph, node);
    for (Backend* b : backends) {
      NodeSignature s = sig;
      s.key = timed_key(graph, node, sig, regime[b]);
      if (!planned.insert({b->name(), s.key}).second) continue;
      std::string why;
      const bool supported = b->supports(graph, node, &why);
      if (supported) of_key[{b->name(), s.key}] = {id, b, s};
      if (model->measured(b->name(), s.key)) {
        ++report.cached;
        continue;
      }
      if (supported) work.push_back({id, b, s});
    }
  }
  Progress line(progress, static_cast<int>(work.size()));
  const double budget_us = budget_s * 1e6;
  for (Backend* b : backends) {
    if (b->device().type == DeviceType::kCPU || work.empty()) continue;
    if (!model->has_launch(b->name())) model->set_launch(b->name(), time_launch(*b));
    if (!model->has_link(b->name())) {
      auto [to_device, to_host] = time_links(*b);
      model->set_link(b->name(), to_device, to_host);
    }
  }
  std::mt19937 rng(1234);
  // Times `w`'s kernel into a sample; negative us when it cannot be measured.
  auto measure = [&](const Work& w) {
    KernelSample sample;
    sample.us = -1;
    try {
      sample = time_node(graph, graph.node(w.node), *w.backend, regime[w.backend], rng);
    } catch (const Error&) {
      sample.us = -1;  // no kernel for this variant, or it rejects random inputs: estimated
    }
    sample.op = w.sig.op;
    sample.flops = w.sig.flops;
    sample.bytes = w.sig.bytes;
    return sample;
  };
  for (size_t k = 0; k < work.size(); ++k) {
    if (micros_since(start) > budget_us) {
      report.skipped = static_cast<int>(work.size() - k);
      break;
    }
    const Work& w = work[k];
    line.update(static_cast<int>(k), w.sig.op + " on " + w.backend->name());
    KernelSample sample = measure(w);
    if (sample.us < 0) {
      ++report.failed;
      continue;
    }
    model->add_kernel(w.backend->name(), w.sig.key, sample);
    ++report.measured;
  }
  // Samples of this graph that their op's other samples contradict by an order of magnitude (a
  // burst of other work, a cold first call) are timed again, twice at most, keeping the least.
  for (int pass = 0; pass < 2; ++pass) {
    bool changed = false;
    for (Backend* b : backends)
      for (const std::string& key : model->outliers(b->name())) {
        auto it = of_key.find({b->name(), key});
        if (it == of_key.end() || micros_since(start) > budget_us) continue;
        const KernelSample* old = model->measured(b->name(), key);
        KernelSample again = measure(it->second);
        ++report.remeasured;
        if (again.us <= 0 || old == nullptr || again.us >= old->us) continue;
        if (again.graph_us <= 0) again.graph_us = old->graph_us;
        again.run_us = old->run_us;
        model->add_kernel(b->name(), key, again);
        changed = true;
      }
    if (!changed) break;
  }
  report.seconds = micros_since(start) / 1e6;
  return report;
}

}  // namespace lumen::router
