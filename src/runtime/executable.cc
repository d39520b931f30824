// Executable::execute: bind inputs, run the steps, hand back the outputs.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "core/device_ops.h"
#include "runtime/executable_impl.h"
#include "runtime/threads.h"

namespace lumen {
namespace {

// Holds one arena for the length of a run and gives it back to the executable's free list, also
// when the run throws. A new arena is allocated only when every existing one is in use.
class ArenaLease {
 public:
  // With `own`, the arena is a new one that never goes to the free list (keep() hands it over).
  explicit ArenaLease(Executable::Impl& impl, bool own = false) : impl_(impl) {
    if (impl.layout.plan.arena_bytes == 0) return;
    if (own) {
      arena_ = Buffer::allocate(impl.layout.plan.arena_bytes, allocator());
      own_ = true;
      return;
    }
    if (impl.arena_pool) {
      arena_ = impl.arena_pool->take(impl.layout.plan.arena_bytes, allocator().device());
      return;
    }
    std::lock_guard<std::mutex> lock(impl.arena_mutex);
    if (!impl.free_arenas.empty()) {
      arena_ = std::move(impl.free_arenas.back());
      impl.free_arenas.pop_back();
    }
  }
  ~ArenaLease() {
    if (!arena_ || own_) return;
    if (impl_.arena_pool) {
      impl_.arena_pool->give(std::move(arena_));
      return;
    }
    std::lock_guard<std::mutex> lock(impl_.arena_mutex);
    impl_.free_arenas.push_back(std::move(arena_));
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;

  const std::shared_ptr<Buffer>& arena() {
    if (!arena_ && impl_.layout.plan.arena_bytes > 0)
      arena_ = Buffer::allocate(impl_.layout.plan.arena_bytes, allocator());
    return arena_;
  }
  // The arena of an own lease, kept alive by the caller from now on.
  std::shared_ptr<Buffer> keep() const { return arena_; }
  bool contains(const Tensor& t) const {
    if (!arena_ || !t.defined() || t.nbytes() == 0) return false;
    auto* base = static_cast<const char*>(arena_->data());
    auto* p = static_cast<const char*>(t.raw_data());
    return p >= base && p < base + arena_->size();
  }

 private:
  Allocator& allocator() const {
    return impl_.arena_allocator != nullptr ? *impl_.arena_allocator : cpu_allocator();
  }

  Executable::Impl& impl_;
  std::shared_ptr<Buffer> arena_;
  bool own_ = false;
};

}  // namespace

std::shared_ptr<Buffer> ArenaPool::take(size_t bytes, Device device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if ((*it)->size() >= bytes && (*it)->device() == device &&
        (best == free_.end() || (*it)->size() < (*best)->size()))
      best = it;
  if (best == free_.end()) return nullptr;
  std::shared_ptr<Buffer> arena = std::move(*best);
  free_.erase(best);
  return arena;
}

void ArenaPool::give(std::shared_ptr<Buffer> arena) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(arena));
  if (free_.size() <= kMaxFree) return;
  auto smallest = std::min_element(free_.begin(), free_.end(), [](const auto& a, const auto& b) {
    return a->size() < b->size();
  });
  free_.erase(smallest);
}

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::~Executable() = default;

const std::vector<TensorInfo>& Executable::inputs() const {
  return impl_->inputs;
}
const std::vector<TensorInfo>& Executable::outputs() const {
  return impl_->outputs;
}

namespace {

using Clock = std::chrono::steady_clock;

double micros_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

// A profiled device step timed on its stream: its entry in RunProfile::steps, when the host
// issued it, and the timing events recorded before and after it.
struct DeviceTiming {
  size_t entry = 0;
  Stream* stream = nullptr;
  Clock::time_point host_start;
  std::unique_ptr<Event> before, after;
};

// Fills the durations of device-timed steps once their streams are done. A step's start is its
// stream's first timed step's host start plus the device time from that step to this one.
void fill_device_times(Executable::Impl& impl, const std::vector<DeviceTiming>& timings,
                       RunProfile& profile, Clock::time_point run_start) {
  for (Stream* s : impl.device_streams) s->synchronize();
  std::vector<const DeviceTiming*> origins;
  for (const DeviceTiming& t : timings) {
    const DeviceTiming* origin = nullptr;
    for (const DeviceTiming* o : origins)
      if (o->stream == t.stream) origin = o;
    if (origin == nullptr) {
      origins.push_back(&t);
      origin = &t;
    }
    RunProfile::Step& step = profile.steps[t.entry];
    step.start_us =
        micros_between(run_start, origin->host_start) + origin->before->elapsed_us(*t.before);
    step.duration_us = t.before->elapsed_us(*t.after);
  }
}

// Runs every step over `slots` (inputs and constants bound). With `record` set, copies of graph
// inputs are skipped (their outputs are already bound) and no slot is released, so every tensor
// the recorded work touches stays alive. With `profile`, each step's time is appended (start
// measured from `run_start`): a device step whose stream has timing events is timed on the device
// between two of them, with no wait; any other step after the device work before it is done,
// waiting for its own stream after it.
void run_steps(Executable::Impl& impl, std::vector<Tensor>& slots, ArenaLease& lease, bool record,
               RunProfile* profile = nullptr, Clock::time_point run_start = {}) {
  const std::shared_ptr<Buffer>& arena = lease.arena();
  std::vector<Tensor> step_inputs;
  std::vector<Tensor> step_outputs;
  std::vector<std::unique_ptr<Event>> events(impl.num_events);
  std::vector<DeviceTiming> timings;
  for (const Step& step : impl.steps) {
    if (record && step.input_copy) continue;
    step_inputs.clear();
    for (int s : step.inputs) step_inputs.push_back(s < 0 ? Tensor() : slots[s]);
    step_outputs.assign(step.outputs.size(), Tensor());
    if (step.alias_input >= 0) {
      step_outputs[0] = step_inputs[step.alias_input];
    } else if (!step.kernel->makes_outputs()) {
      for (size_t k = 0; k < step_outputs.size(); ++k) {
        const TensorType& type = step.output_types[k];
        size_t offset = impl.layout.slot_offset[step.outputs[k]];
        step_outputs[k] = offset == ArenaLayout::kNotInArena
                              ? Tensor::empty(type.shape, type.dtype, step.backend->device())
                              : Tensor(arena, offset, type.shape, type.dtype);
      }
    }
    KernelContext ctx{step_inputs, step_outputs, &step.backend->default_stream()};
    ctx.output_types = step.output_types;
    if (step.wait >= 0) ctx.ready = events[step.wait].get();
    std::unique_ptr<Event> before;
    if (profile != nullptr && step.backend->device().type != DeviceType::kCPU)
      before = ctx.stream->create_timing_event();
    if (before != nullptr) {
      before->record(*ctx.stream);
    } else if (profile != nullptr) {
      for (Stream* s : impl.device_streams) s->synchronize();
    }
    const Clock::time_point step_start = Clock::now();
    step.kernel->run(ctx);
    if (step.signal >= 0) {
      events[step.signal] = ctx.stream->create_event();
      events[step.signal]->record(*ctx.stream);
    }
    if (profile != nullptr) {
      std::unique_ptr<Event> after = before ? ctx.stream->create_timing_event() : nullptr;
      if (after != nullptr) {
        after->record(*ctx.stream);
        timings.push_back(
            {profile->steps.size(), ctx.stream, step_start, std::move(before), std::move(after)});
        profile->steps.push_back(
            {step.node, step.op, step.backend->name(), 0, 0, step.kernel->describe()});
      } else {
        ctx.stream->synchronize();
        profile->steps.push_back(
            {step.node, step.op, step.backend->name(), micros_between(run_start, step_start),
             micros_between(step_start, Clock::now()), step.kernel->describe()});
      }
    }
    for (size_t k = 0; k < step_outputs.size(); ++k) {
      const TensorType& want = step.output_types[k];
      if (step_outputs[k].dtype() != want.dtype || !want.shape.admits(step_outputs[k].shape()))
        throw DeviceError("execute: step " + step.label + " produced " +
                          TensorType{step_outputs[k].dtype(), step_outputs[k].shape()}.to_string() +
                          ", expected " + want.to_string());
      slots[step.outputs[k]] = std::move(step_outputs[k]);
    }
    if (!record)
      for (int s : step.release) slots[s] = Tensor();
  }
  if (!timings.empty()) fill_device_times(impl, timings, *profile, run_start);
}

// Whether two tensors are the same memory.
bool same_memory(const Tensor& a, const Tensor& b) {
  return a.raw_data() == b.raw_data() && a.device() == b.device();
}

// Copies what the in-place steps wrote (in `slots`) into the caller's inputs where they wrote a
// copy of them (an input moved to the step's device, or a replay's own input tensor), on
// `recorder`'s stream when given (after the replay), else at once (the device work is done).
void write_back(const Executable::Impl& impl, const std::vector<Tensor>& slots,
                const std::vector<Tensor>& inputs, RecordingStream* recorder) {
  for (const auto& [i, s] : impl.written_inputs) {
    const Tensor& made = slots[s];
    const Tensor& into = inputs[i];
    if (!made.defined() || same_memory(made, into) || into.nbytes() == 0) continue;
    if (recorder != nullptr) {
      recorder->copy(made, into);
      continue;
    }
    const Device device = into.device().type != DeviceType::kCPU ? into.device() : made.device();
    if (device.type == DeviceType::kCPU) {
      std::memcpy(into.raw_data(), made.raw_data(), into.nbytes());
    } else {
      device_ops(device).copy(into.raw_data(), into.device(), made.raw_data(), made.device(),
                              into.nbytes());
    }
  }
}

// Records the whole run on the device stream once (after one ordinary run has warmed up library
// handles and the memory pool), so later runs replay it. Returns null when recording failed; the
// executable then runs step by step from then on.
// With `bound`, input i is read from bound[i] where that is defined (a device tensor of the
// input's type) instead of a tensor of the recording's own, and the recording gets an arena of
// its own (*arena keeps it).
std::unique_ptr<RecordedRun> record_run(Executable::Impl& impl,
                                        const std::vector<Tensor>* bound = nullptr,
                                        std::shared_ptr<Buffer>* arena = nullptr) {
  auto rec = std::make_unique<RecordedRun>();
  rec->slots = impl.constants;
  rec->input_tensors.resize(impl.input_slots.size());
  for (const Step& step : impl.steps) {
    if (!step.input_copy) continue;
    for (size_t i = 0; i < impl.input_slots.size(); ++i)
      if (impl.input_slots[i] == step.inputs[0]) {
        const TensorType& t = step.output_types[0];
        const bool given = bound != nullptr && (*bound)[i].defined();
        rec->input_tensors[i] =
            given ? (*bound)[i] : Tensor::empty(t.shape, t.dtype, step.backend->device());
        rec->slots[step.outputs[0]] = rec->input_tensors[i];
      }
  }
  ArenaLease lease(impl, bound != nullptr);
  if (arena != nullptr) *arena = lease.keep();
  impl.record_stream->synchronize();
  impl.recorder->begin_capture();
  try {
    run_steps(impl, rec->slots, lease, true);
  } catch (...) {
    try {
      impl.recorder->end_capture();
    } catch (...) {
    }
    return nullptr;
  }
  rec->work = impl.recorder->end_capture();
  return rec;
}

// One replay of `rec` with `inputs` (checked; `slots` holds them and the constants). Inputs are
// copied where the replay reads them, unless they are that very tensor (a bound input). Host
// outputs come back as copies; device outputs as views of the recorded memory with `views`, else
// with place kDevice as copies of their own (made as one batch with one wait), else on the host.
// Without `wait`, device outputs that are views come back without waiting for the run.
// The caller holds impl.record_mutex.
std::vector<Tensor> replay(Executable::Impl& impl, RecordedRun& rec,
                           const std::vector<Tensor>& inputs, const std::vector<Tensor>& slots,
                           OutputPlace place, bool views, bool wait = true) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& into = rec.input_tensors[i];
    if (!into.defined()) continue;
    if (inputs[i].buffer() == into.buffer() && inputs[i].offset() == into.offset()) continue;
    impl.recorder->copy(inputs[i], into);
  }
  rec.work->replay();
  write_back(impl, rec.slots, inputs, impl.recorder);
  std::vector<Tensor> outputs;
  std::vector<RowCopy> device_copies;
  Device copies_on = Device::cpu();
  for (int s : impl.output_slots) {
    const Tensor& t = rec.slots[s].defined() ? rec.slots[s] : slots[s];
    const bool on_device = t.device().type != DeviceType::kCPU;
    if (views && on_device) {
      outputs.push_back(t);
      continue;
    }
    if (place == OutputPlace::kDevice && on_device) {
      Tensor own = Tensor::empty(t.shape(), t.dtype(), t.device());
      device_copies.push_back({own.raw_data(), t.nbytes(), t.raw_data(), t.nbytes(), t.nbytes(),
                               t.nbytes() > 0 ? size_t{1} : size_t{0}});
      copies_on = t.device();
      outputs.push_back(own);
      continue;
    }
    Tensor host = Tensor::empty(t.shape(), t.dtype());
    impl.recorder->copy(t, host);
    outputs.push_back(host);
  }
  if (!device_copies.empty()) {
    const DeviceOps& ops = device_ops(copies_on);
    if (ops.copy_rows != nullptr) {
      ops.copy_rows(device_copies.data(), device_copies.size(), copies_on, false);
    } else {
      for (const RowCopy& c : device_copies) ops.copy(c.dst, copies_on, c.src, copies_on, c.width);
    }
  }
  // Device outputs were copied on the device (or not at all) without a host wait that checks for
  // errors (a CUDA index out of range): this one does.
  if ((views && wait) || place == OutputPlace::kDevice) impl.record_stream->synchronize();
  return outputs;
}

// Checks `inputs` (in the order of impl.inputs) against the declared types and binds them into a
// copy of the constants: what every run starts from.
std::vector<Tensor> bind_inputs(const Executable::Impl& impl, const std::vector<Tensor>& inputs) {
  if (inputs.size() != impl.inputs.size())
    throw InvalidArgument("execute: expected " + std::to_string(impl.inputs.size()) +
                          " inputs, got " + std::to_string(inputs.size()));
  std::vector<Tensor> slots = impl.constants;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& info = impl.inputs[i];
    const Tensor& t = inputs[i];
    if (!t.defined()) throw InvalidArgument("execute: input '" + info.name + "' is undefined");
    if (t.dtype() != info.type.dtype || t.shape() != info.type.shape)
      throw ShapeError("execute: input '" + info.name + "' must be " + info.type.to_string() +
                       ", got " + TensorType{t.dtype(), t.shape()}.to_string());
    bool to_host = t.device().type != DeviceType::kCPU && impl.input_read_on_host[i];
    slots[impl.input_slots[i]] = to_host ? t.to(Device::cpu()) : t;
  }
  return slots;
}

}  // namespace

struct BoundReplay::State {
  std::shared_ptr<Executable::Impl> impl;
  std::unique_ptr<RecordedRun> rec;
  std::shared_ptr<Buffer> arena;
  std::vector<Tensor> bound;  // per input: the bound tensor, or undefined
};

BoundReplay::BoundReplay(std::unique_ptr<State> state) : state_(std::move(state)) {}
BoundReplay::~BoundReplay() = default;

std::vector<Tensor> BoundReplay::run(const std::map<std::string, Tensor>& inputs, bool wait) {
  State& s = *state_;
  Executable::Impl& impl = *s.impl;
  std::vector<Tensor> ordered;
  for (size_t i = 0; i < impl.inputs.size(); ++i) {
    const std::string& name = impl.inputs[i].name;
    auto it = inputs.find(name);
    if (s.bound[i].defined() && it != inputs.end())
      throw InvalidArgument("execute: input '" + name + "' is bound; do not pass it");
    if (s.bound[i].defined()) {
      ordered.push_back(s.bound[i]);
    } else if (it == inputs.end()) {
      throw InvalidArgument("execute: input '" + name + "' is missing");
    } else {
      ordered.push_back(it->second);
    }
  }
  for (const auto& [name, tensor] : inputs) {
    bool known = false;
    for (const TensorInfo& info : impl.inputs) known = known || info.name == name;
    if (!known) throw InvalidArgument("execute: the graph has no input named '" + name + "'");
  }
  apply_num_threads();
  std::vector<Tensor> slots = bind_inputs(impl, ordered);
  std::lock_guard<std::mutex> lock(impl.record_mutex);
  return replay(impl, *s.rec, ordered, slots, OutputPlace::kDevice, true, wait);
}

std::unique_ptr<BoundReplay> Executable::bind(const std::map<std::string, Tensor>& bound) {
  Impl& impl = *impl_;
  std::vector<Tensor> by_input(impl.inputs.size());
  for (const auto& [name, t] : bound) {
    size_t i = 0;
    while (i < impl.inputs.size() && impl.inputs[i].name != name) ++i;
    if (i == impl.inputs.size())
      throw InvalidArgument("bind: the graph has no input named '" + name + "'");
    const TensorType& want = impl.inputs[i].type;
    if (!t.defined() || t.device().type == DeviceType::kCPU || t.dtype() != want.dtype ||
        t.shape() != want.shape)
      return nullptr;
    by_input[i] = t;
  }
  std::lock_guard<std::mutex> lock(impl.record_mutex);
  if (impl.record_stream == nullptr || !impl.warmed) return nullptr;
  // Every bound tensor must be on the device where a replay reads that input from a tensor of its
  // own (the device copy of the input).
  for (size_t i = 0; i < by_input.size(); ++i) {
    if (!by_input[i].defined()) continue;
    bool read_there = false;
    for (const Step& step : impl.steps)
      read_there |= step.input_copy && step.inputs[0] == impl.input_slots[i] &&
                    step.backend->device() == by_input[i].device();
    if (!read_there) return nullptr;
  }
  auto state = std::make_unique<BoundReplay::State>();
  state->impl = impl_;
  state->rec = record_run(impl, &by_input, &state->arena);
  if (!state->rec) return nullptr;
  state->bound = std::move(by_input);
  return std::unique_ptr<BoundReplay>(new BoundReplay(std::move(state)));
}

std::vector<Tensor> Executable::execute(const std::vector<Tensor>& inputs) {
  return execute(inputs, nullptr);
}

std::vector<Tensor> Executable::execute(const std::vector<Tensor>& inputs, RunProfile* profile) {
  return run(inputs, profile, OutputPlace::kHost);
}

std::vector<Tensor> Executable::run(const std::vector<Tensor>& inputs, RunProfile* profile,
                                    OutputPlace place) {
  const Clock::time_point run_start = Clock::now();
  apply_num_threads();
  if (profile != nullptr) profile->steps.clear();
  Impl& impl = *impl_;
  std::vector<Tensor> slots = bind_inputs(impl, inputs);
  // A profiled run goes step by step, so each step can be timed.
  if (impl.record_stream != nullptr && profile == nullptr) {
    std::lock_guard<std::mutex> lock(impl.record_mutex);
    if (!impl.recorded && !impl.warmed && impl.record_on_first_run) {
      ArenaLease warm(impl);
      std::vector<Tensor> warm_slots = slots;
      run_steps(impl, warm_slots, warm, false);
      impl.warmed = true;
    }
    if (!impl.recorded && impl.warmed) {
      impl.recorded = record_run(impl);
      if (!impl.recorded) impl.record_stream = nullptr;
    }
    if (impl.recorded) return replay(impl, *impl.recorded, inputs, slots, place, false);
  }
  ArenaLease lease(impl);

  run_steps(impl, slots, lease, false, profile, run_start);
  if (impl.record_stream != nullptr) {
    std::lock_guard<std::mutex> lock(impl.record_mutex);
    impl.warmed = true;
  }
  // The host waits for the device work, and a device's synchronize() raises what its kernels could
  // only record: a CUDA index out of range. Outputs left on the device wait too, so the error
  // comes from the run that made it. A replay raises it when its outputs are copied back
  // (RecordingStream::copy synchronizes).
  for (Stream* stream : impl.device_streams) stream->synchronize();
  write_back(impl, slots, inputs, nullptr);
  // An output that is a constant, or a view into the arena (which the next run reuses), is copied;
  // one on a device comes back to the host.
  std::vector<Tensor> outputs;
  for (int s : impl.output_slots) {
    const Tensor& t = slots[s];
    if (t.device().type != DeviceType::kCPU) {
      // A view into a device arena is copied: the next run reuses that memory.
      if (place == OutputPlace::kDevice)
        outputs.push_back(lease.contains(t) ? t.clone() : t);
      else
        outputs.push_back(t.to(Device::cpu()));
      continue;
    }
    bool copy = impl.constants[s].defined() || lease.contains(t);
    outputs.push_back(copy ? t.clone() : t);
  }

  if (profile != nullptr) profile->total_us = micros_between(run_start, Clock::now());
  return outputs;
}

std::vector<Tensor> Executable::execute(const std::map<std::string, Tensor>& inputs) {
  return execute(inputs, OutputPlace::kHost);
}

std::vector<Tensor> Executable::execute(const std::map<std::string, Tensor>& inputs,
                                        OutputPlace place) {
  std::vector<Tensor> ordered;
  for (const TensorInfo& info : impl_->inputs) {
    auto it = inputs.find(info.name);
    if (it == inputs.end()) throw InvalidArgument("execute: input '" + info.name + "' is missing");
    ordered.push_back(it->second);
  }
  for (const auto& [name, tensor] : inputs) {
    bool known = false;
    for (const TensorInfo& info : impl_->inputs) known = known || info.name == name;
    if (!known) throw InvalidArgument("execute: the graph has no input named '" + name + "'");
  }
  return run(ordered, nullptr, place);
}

MemoryReport Executable::memory_report() const {
  const ArenaLayout& layout = impl_->layout;
  MemoryReport report;
  report.arena_bytes = layout.plan.arena_bytes;
  report.no_reuse_bytes = layout.intermediate_bytes;
  report.lower_bound_bytes = layout.plan.lower_bound_bytes;
  report.in_place_steps = layout.in_place_steps.size();
  for (const Step& step : impl_->steps)
    for (size_t k = 0; k < step.outputs.size(); ++k) {
      size_t offset = layout.slot_offset[step.outputs[k]];
      if (offset == ArenaLayout::kNotInArena) continue;
      const TensorType& t = step.output_types[k];
      report.tensors.push_back({impl_->slot_names[step.outputs[k]], t, offset,
                                static_cast<size_t>(t.shape.numel()) * dtype_size(t.dtype)});
    }
  std::stable_sort(report.tensors.begin(), report.tensors.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return report;
}

std::string Executable::summary() const {
  std::ostringstream os;
  os << impl_->steps.size() << " steps";
  {
    std::lock_guard<std::mutex> lock(impl_->record_mutex);
    if (impl_->recorded)
      os << ", recorded as one device graph that every run replays";
    else if (impl_->record_stream != nullptr)
      os << ", to be recorded as one device graph by its "
         << (impl_->record_on_first_run ? "first" : "second") << " run";
  }
  os << "\n";
  for (size_t i = 0; i < impl_->steps.size(); ++i)
    os << "  " << i << ": " << impl_->steps[i].label << "\n";
  return os.str();
}

}  // namespace lumen
