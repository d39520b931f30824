// Graph::compile: verify, place every node on a backend, build kernels once, assign value slots,
// and copy values that cross devices (weights once, here; activations by copy steps).
#include <algorithm>
#include <map>
#include <unordered_map>

#include "backends/backend.h"
#include "core/derived_tensors.h"
#include "graph/op_kind.h"
#include "router/router.h"
#include "runtime/control_flow.h"
#include "runtime/executable_impl.h"
#include "runtime/float_widening.h"
#include "runtime/half_storage.h"
#include "runtime/kernel_donor.h"
#include "runtime/threads.h"

namespace lumen {
namespace {

// A copy step's kernel: its output is the input moved to `to` (the same tensor when already
// there, so a graph input may come on either device), with Backend::move: host and device do not
// wait for each other's queued work, and on CUDA a host input is staged in pinned memory by the
// process's threads (async_copy.cc; the driver's own staging of pageable memory, which graph
// inputs took before, ran a 19 MB input at 6-9 GB/s on the H200 machine).
class CopyKernel final : public Kernel {
 public:
  CopyKernel(Backend* backend, Device to) : backend_(backend), to_(to) {}
  void run(KernelContext& ctx) const override {
    const Tensor& src = ctx.inputs[0];
    ctx.outputs[0] = src.device() == to_ ? src : backend_->move(src, to_, ctx.ready);
  }
  bool makes_outputs() const override { return true; }

 private:
  Backend* backend_;
  Device to_;
};

// `order` (a topological order of graph's nodes before `first_added`) with the nodes added since
// (the 16-bit casts of half_storage.h, each with one input) placed right before their first reader
// in it, or right after their input's producer where nothing in it reads them (casts of outputs):
// their readers read their input before, so the order stays topological.
std::vector<int> with_added_nodes(const Graph& graph, const std::vector<int>& order,
                                  int first_added) {
  const int num_nodes = graph.num_nodes();
  if (first_added >= num_nodes) return order;
  std::vector<int> position(num_nodes, -1);
  for (size_t k = 0; k < order.size(); ++k) position[order[k]] = static_cast<int>(k);
  std::vector<std::vector<int>> before(order.size()), after(order.size());
  std::vector<int> out;
  for (int id = first_added; id < num_nodes; ++id) {
    const Node& cast = graph.node(id);
    int reader = -1;
    for (int c : graph.value(cast.outputs[0]).consumers)
      if (c < first_added && position[c] >= 0 && (reader < 0 || position[c] < position[reader]))
        reader = c;
    const int in = cast.inputs[0];
    const int producer = in >= 0 ? graph.value(in).producer : -1;
    if (reader >= 0)
      before[position[reader]].push_back(id);
    else if (producer >= 0 && position[producer] >= 0)
      after[position[producer]].push_back(id);
    else
      out.push_back(id);
  }
  for (size_t k = 0; k < order.size(); ++k) {
    out.insert(out.end(), before[k].begin(), before[k].end());
    out.push_back(order[k]);
    out.insert(out.end(), after[k].begin(), after[k].end());
  }
  return out;
}

Backend* backend_of(Device device) {
  if (device.type == DeviceType::kCPU) return find_backend("cpu");
  for (Backend* b : available_backends())
    if (b->device() == device) return b;
  throw DeviceError("compile: no backend for " + device.to_string());
}

// The backends of options.backends in order. A list without the host's gets it last, as the
// fallback for what no listed backend runs (integer shape arithmetic, ops without a kernel there;
// *host_fallback says so): {"cuda"} means the GPU first and the host where it must. "cuda" on a
// machine or build without it is a DeviceError; an unknown name an InvalidArgument.
std::vector<Backend*> candidate_backends(const CompileOptions& options, bool* host_fallback) {
  *host_fallback = false;
  if (options.backends.empty() || options.is_auto()) return auto_backends();
  std::vector<Backend*> out;
  bool has_host = false;
  for (const std::string& name : options.backends) {
    Backend* b = find_backend(name);
    if (b == nullptr && name == "cuda")
      throw DeviceError(
          "compile: backend 'cuda' is not available (no CUDA device, or a build "
          "without CUDA)");
    if (b == nullptr) throw InvalidArgument("compile: backend '" + name + "' is not available");
    has_host |= b->device().type == DeviceType::kCPU;
    out.push_back(b);
  }
  if (!has_host) {
    out.push_back(find_backend("cpu"));
    *host_fallback = true;
  }
  return out;
}

// Steps that run in place over a graph input the run may write (Graph::mark_input_written), read
// directly or through its copy onto the step's device: their output is that tensor itself.
void mark_written_inputs(Executable::Impl& impl, const Graph& graph) {
  for (Step& step : impl.steps) {
    const int k = step.kernel->in_place_input();
    if (k < 0 || step.kernel->makes_outputs() || static_cast<size_t>(k) >= step.inputs.size() ||
        step.outputs.empty())
      continue;
    int s = step.inputs[k];
    for (const Step& copy : impl.steps)
      if (copy.input_copy && !copy.outputs.empty() && copy.outputs[0] == s) s = copy.inputs[0];
    for (size_t i = 0; i < impl.input_slots.size(); ++i)
      if (impl.input_slots[i] == s && graph.value(graph.inputs()[i]).written_in_place &&
          step.output_types[0] == impl.inputs[i].type) {
        step.alias_input = k;
        impl.written_inputs.emplace_back(static_cast<int>(i), step.outputs[0]);
      }
  }
}

// Lays every intermediate out in one arena: not inputs, constants or graph outputs (the caller
// keeps those), nor what kernels make themselves (views, data-dependent shapes). The arena is the
// host's, or, for a plan recorded as one CUDA graph, the device's: a recording then holds the
// planned bytes instead of every intermediate at once, and records no allocations.
void plan_memory(Executable::Impl& impl, const std::unordered_map<int, int>& slot_of,
                 const Graph& graph) {
  const size_t num_slots = impl.constants.size();
  std::vector<size_t> bytes(num_slots, 0);
  std::vector<bool> in_arena(num_slots, false);
  impl.slot_names.assign(num_slots, "");
  for (const auto& [value_id, s] : slot_of) {
    const Value& v = graph.value(value_id);
    if (v.type.shape.is_static())  // run-time-sized values come from their kernels
      bytes[s] = static_cast<size_t>(v.type.shape.numel()) * dtype_size(v.type.dtype);
    impl.slot_names[s] = v.name;
  }
  Backend* device_arena = nullptr;
  if (impl.record_stream != nullptr)
    for (const Step& step : impl.steps)
      if (step.backend->device().type == DeviceType::kCUDA) device_arena = step.backend;
  if (device_arena != nullptr) impl.arena_allocator = &device_arena->allocator();
  std::vector<StepUses> uses;
  for (const Step& step : impl.steps) {
    bool views = step.kernel->makes_outputs();
    bool here = device_arena != nullptr ? step.backend == device_arena
                                        : step.backend->device().type == DeviceType::kCPU;
    for (int out : step.outputs) in_arena[out] = here && !views && bytes[out] > 0;
    uses.push_back({step.inputs, step.outputs, views, step.kernel->in_place_input()});
  }
  for (int s : impl.input_slots) in_arena[s] = false;
  for (int s : impl.output_slots) in_arena[s] = false;
  for (const auto& written : impl.written_inputs) in_arena[written.second] = false;
  for (size_t s = 0; s < num_slots; ++s)
    if (impl.constants[s].defined()) in_arena[s] = false;
  impl.layout = plan_steps(uses, bytes, in_arena, impl.output_slots, kAlignment);
}

}  // namespace

Executable* Graph::compile(Runtime* runtime) {
  return compile(runtime, CompileOptions{});
}

Executable* Graph::compile(Runtime* runtime, const CompileOptions& options) {
  if (runtime == nullptr) throw InvalidArgument("compile: runtime is null");
  apply_num_threads();
  if (weights_released_)
    throw InvalidArgument(
        "compile: an earlier compile freed this graph's packed weights "
        "(CompileOptions::release_weights); load or build the graph again");
  verify();
  if (outputs_.empty()) throw InvalidModel("compile: the graph has no outputs (mark_output)");
  bool host_fallback = false;
  std::vector<Backend*> backends = candidate_backends(options, &host_fallback);
  // Only nodes that lead to an output and are not already known run.
  std::vector<bool> needed = router::nodes_to_run(*this);
  // Float16, bfloat16 and float64 nodes that only a float32 kernel runs get Casts around them.
  if (widen_unsupported_floats(*this, backends, needed) > 0) needed = router::nodes_to_run(*this);
  // With "auto", the router picks each node's backend and the order the steps run in (device work
  // enqueued before independent host work); otherwise the first backend that supports a node, in
  // topological order.
  std::vector<Backend*> routed;
  std::vector<int> step_order;
  if (options.is_auto()) {
    router::RoutePlan plan = router::route(*this, backends, options.router);
    routed = std::move(plan.backend_of);
    step_order = std::move(plan.order);
  } else {
    step_order = topological_order();
  }
  // Each node's backend: the CPU for control flow (its subgraphs are placed on their own), the
  // router's choice, or the first backend that supports it.
  std::vector<Backend*> placed(nodes_.size(), nullptr);
  // Why each node the host runs as the fallback of a list without it stayed there.
  std::vector<std::string> on_host_why(nodes_.size());
  for (int id : topological_order()) {
    if (!needed[id]) continue;
    Node& n = nodes_[id];
    if (is_control_flow(n.op)) {
      placed[id] = find_backend("cpu");
      if (host_fallback) on_host_why[id] = "control flow runs on the host";
      continue;
    }
    if (!routed.empty()) placed[id] = routed[id];
    std::string reasons;
    for (Backend* b : backends) {
      if (placed[id] != nullptr) break;
      std::string why;
      if (b->supports(*this, n, &why)) {
        placed[id] = b;
        break;
      }
      reasons += (reasons.empty() ? "" : "; ") + b->name() + ": " + why;
    }
    if (placed[id] == nullptr)
      throw UnsupportedOp("node '" + n.name + "' (" + op_name(n.op) + "): " + reasons);
    if (host_fallback && placed[id] == backends.back()) on_host_why[id] = reasons;
  }
  const int nodes_before = static_cast<int>(nodes_.size());
  if (options.precision == Precision::kFloat16)
    convert_to_half_storage(*this, DType::kFloat16, placed, needed);
  if (options.precision == Precision::kBFloat16)
    convert_to_half_storage(*this, DType::kBFloat16, placed, needed);
  step_order = with_added_nodes(*this, step_order, nodes_before);

  auto impl = std::make_unique<Executable::Impl>();
  impl->arena_pool = arena_pool_for_new_plan();
  impl->record_on_first_run = !building_from_donor();
  std::unordered_map<int, int> slot_of;  // value id -> slot
  std::vector<Device> slot_device;       // where each slot's tensor lives during a run
  std::vector<bool> slot_shares;         // a weight whose device copies other plans may share
  auto slot = [&](int value_id) {
    auto [it, inserted] = slot_of.emplace(value_id, static_cast<int>(impl->constants.size()));
    if (inserted) {
      const Value& v = values_[value_id];
      impl->constants.push_back(v.data && !v.is_input ? *v.data : Tensor());
      slot_device.push_back(Device::cpu());
      slot_shares.push_back(v.data && !v.is_input && !v.user_weight);
    }
    return it->second;
  };
  // A constant's copy on `device`: shared with every plan that copies the same weight there
  // (a decoder's prefill and decode plans hold one device copy of the model).
  auto device_copy = [&](int s, Device device) {
    const Tensor& t = impl->constants[s];
    if (!slot_shares[s]) return t.to(device);
    return derived_tensor(t, "to " + device.to_string(), [&] { return t.to(device); });
  };
  // A slot's value on another device: constants are copied now, once; anything else gets a copy
  // step, shared by every reader on that device.
  std::map<std::pair<int, int>, int> moved;  // (slot, device type) -> slot
  std::vector<bool> is_input_slot;
  auto on_device = [&](int s, Device device, const TensorType& type, const std::string& name) {
    if (slot_device[s] == device) return s;
    auto key = std::make_pair(s, static_cast<int>(device.type));
    if (auto it = moved.find(key); it != moved.end()) return it->second;
    int copy = static_cast<int>(impl->constants.size());
    impl->constants.push_back(impl->constants[s].defined() ? device_copy(s, device) : Tensor());
    slot_device.push_back(device);
    slot_shares.push_back(false);
    if (!impl->constants[s].defined()) {
      Step step;
      Device src = slot_device[s];
      step.backend = backend_of(device.type == DeviceType::kCPU ? src : device);
      step.input_copy = s < static_cast<int>(is_input_slot.size()) && is_input_slot[s];
      step.kernel = std::make_unique<CopyKernel>(step.backend, device);
      step.inputs = {s};
      step.outputs = {copy};
      step.output_types = {type};
      step.label = "copy '" + name + "' " + src.to_string() + " -> " + device.to_string();
      step.node = name;
      step.op = "Copy";
      if (device.type == DeviceType::kCPU) {
        // Its source's maker signals when the value is made.
        for (Step& maker : impl->steps)
          for (int out : maker.outputs)
            if (out == s && maker.backend->device() == src) {
              if (maker.signal < 0) maker.signal = impl->num_events++;
              step.wait = maker.signal;
            }
      }
      impl->steps.push_back(std::move(step));
    }
    moved[key] = copy;
    return copy;
  };
  for (int in : inputs_) {
    impl->input_slots.push_back(slot(in));
    impl->inputs.push_back({values_[in].name, values_[in].type});
  }
  is_input_slot.assign(impl->constants.size(), false);
  for (int s : impl->input_slots) is_input_slot[s] = true;
  impl->input_read_on_host.assign(impl->input_slots.size(), false);
  // With release_weights: how many needed readers each weight still has, and whether one of them
  // reads it at run time (or moves it to a device). A subgraph may read outer weights unseen here,
  // so graphs with control flow release nothing early.
  std::vector<int> readers_left(values_.size(), 0);
  std::vector<bool> kept(values_.size(), false);
  bool release = options.release_weights;
  for (size_t id = 0; id < nodes_.size(); ++id) {
    if (!needed[id]) continue;
    if (is_control_flow(nodes_[id].op)) release = false;
    for (int in : nodes_[id].inputs)
      if (in >= 0) ++readers_left[in];
  }
  for (int out : outputs_) kept[out] = true;
  if (release) weights_released_ = true;
  for (int id : step_order) {
    if (!needed[id]) continue;
    Node& n = nodes_[id];
    Step step;
    step.backend = placed[id];
    // A control-flow kernel runs compiled subgraphs, each placed on its own; the node itself only
    // hands tensors over, on the host.
    if (is_control_flow(n.op)) step.kernel = make_control_flow_kernel(runtime, options, *this, n);
    n.backend = step.backend->name();
    if (!step.kernel) step.kernel = donated_kernel(n.name, op_name(n.op), *step.backend);
    if (!step.kernel) step.kernel = step.backend->make_kernel(*this, n, options.precision);
    Device device = step.backend->device();
    for (int in : n.inputs) {
      if (in < 0) {
        step.inputs.push_back(-1);
        continue;
      }
      int s = slot(in);
      if (device.type == DeviceType::kCPU)
        for (size_t i = 0; i < impl->input_slots.size(); ++i)
          if (impl->input_slots[i] == s) impl->input_read_on_host[i] = true;
      step.inputs.push_back(on_device(s, device, values_[in].type, values_[in].name));
    }
    for (int out : n.outputs) {
      // A shape known only at run time cannot be allocated ahead: the kernel must make it.
      if (!values_[out].type.shape.is_static() && !step.kernel->makes_outputs())
        throw UnsupportedOp("node '" + n.name + "' (" + op_name(n.op) + "): output '" +
                            values_[out].name + "' has a shape known only at run time (" +
                            values_[out].type.shape.to_string() + "), which its " +
                            step.backend->name() + " kernel cannot produce");
      step.outputs.push_back(slot(out));
      slot_device[step.outputs.back()] = device;
      step.output_types.push_back(values_[out].type);
    }
    if (release)
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        int in = n.inputs[k];
        if (in < 0) continue;
        const Value& v = values_[in];
        if (!v.is_weight() || v.is_input || v.user_weight) continue;
        if (device.type != DeviceType::kCPU || step.kernel->reads_input(static_cast<int>(k)))
          kept[in] = true;
        if (--readers_left[in] == 0 && !kept[in]) {
          impl->constants[slot_of.at(in)] = Tensor();
          values_[in].data.reset();
        }
      }
    step.node = n.name;
    step.op = op_name(n.op);
    step.label = n.name + " (" + step.op + ") @" + n.backend;
    if (static_cast<size_t>(id) < on_host_why.size() && !on_host_why[id].empty())
      step.label += "  (on the host: " + on_host_why[id] + ")";
    impl->steps.push_back(std::move(step));
  }
  for (int out : outputs_) {
    impl->output_slots.push_back(slot(out));
    impl->outputs.push_back({values_[out].name, values_[out].type});
  }
  mark_written_inputs(*impl, *this);
  // Record-and-replay (CUDA graphs) when every step runs on one device stream that can record,
  // apart from copies of graph inputs onto it, which a replay binds instead of running.
  Stream* record = nullptr;
  bool recordable = !impl->steps.empty();
  for (const Step& step : impl->steps) {
    Stream& s = step.backend->default_stream();
    if (dynamic_cast<RecordingStream*>(&s) == nullptr) recordable = false;
    if (record == nullptr) record = &s;
    if (&s != record) recordable = false;
    bool device_input = step.input_copy && step.backend->device().type != DeviceType::kCPU;
    for (const TensorType& t : step.output_types)
      if (!t.shape.is_static()) recordable = false;
    if (step.kernel->makes_outputs() && dynamic_cast<CopyKernel*>(step.kernel.get()) &&
        !device_input)
      recordable = false;
  }
  for (bool host : impl->input_read_on_host) recordable = recordable && !host;
  for (const Step& step : impl->steps) {
    Stream* s = &step.backend->default_stream();
    if (step.backend->device().type != DeviceType::kCPU &&
        std::find(impl->device_streams.begin(), impl->device_streams.end(), s) ==
            impl->device_streams.end())
      impl->device_streams.push_back(s);
  }
  if (recordable) {
    impl->record_stream = record;
    impl->recorder = dynamic_cast<RecordingStream*>(record);
  }

  // Free each intermediate after its last reader, unless it is an output or a constant.
  std::vector<int> last_use(impl->constants.size(), -1);
  for (size_t s = 0; s < impl->steps.size(); ++s) {
    for (int in : impl->steps[s].inputs)
      if (in >= 0) last_use[in] = static_cast<int>(s);
    for (int out : impl->steps[s].outputs)
      if (last_use[out] < 0) last_use[out] = static_cast<int>(s);
  }
  std::vector<bool> keep(impl->constants.size(), false);
  for (int o : impl->output_slots) keep[o] = true;
  for (const auto& written : impl->written_inputs) keep[written.second] = true;
  for (size_t k = 0; k < keep.size(); ++k)
    if (impl->constants[k].defined()) keep[k] = true;
  for (size_t k = 0; k < last_use.size(); ++k)
    if (last_use[k] >= 0 && !keep[k])
      impl->steps[last_use[k]].release.push_back(static_cast<int>(k));

  // A constant that every reader packed at compile time (Kernel::reads_input) is not kept: the
  // packed copies are the only ones the executable holds.
  std::vector<bool> read_at_run(impl->constants.size(), false);
  for (const Step& step : impl->steps)
    for (size_t k = 0; k < step.inputs.size(); ++k)
      if (step.inputs[k] >= 0 && step.kernel->reads_input(static_cast<int>(k)))
        read_at_run[step.inputs[k]] = true;
  for (int o : impl->output_slots) read_at_run[o] = true;
  for (size_t s = 0; s < impl->constants.size(); ++s)
    if (!read_at_run[s]) impl->constants[s] = Tensor();

  plan_memory(*impl, slot_of, *this);
  return runtime->adopt(std::make_unique<Executable>(std::move(impl)));
}

}  // namespace lumen
