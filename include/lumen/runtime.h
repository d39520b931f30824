// Runtime (devices, memory, compiled executables) and Executable (a compiled graph).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lumen/graph.h"
#include "lumen/precision.h"
#include "lumen/router.h"
#include "lumen/tensor.h"

namespace lumen {

struct CompileOptions {
  // Backends to place nodes on, in order of preference ("cpu", "cuda"): each node goes to the first
  // that supports it; empty means every available backend. {"auto"}: every available backend, each
  // node where the router predicts the shortest run, transfers included (lumen/router.h).
  std::vector<std::string> backends;
  // Free each weight from the Graph as soon as every reader has packed it into its own layout
  // (Kernel::reads_input), so compiling holds each such weight once, not twice, at its peak. The
  // Graph keeps its other weights but can no longer be compiled (compile throws InvalidArgument).
  bool release_weights = false;
  // How the router measures and caches costs, with backends {"auto"}.
  RouterOptions router;
  // Float32 exactly, TF32 where CUDA offers it (weights stay float32), or float16 / bfloat16 on
  // CUDA.
  Precision precision = Precision::kFloat32;
  // Whether backends is {"auto"}.
  bool is_auto() const { return backends.size() == 1 && backends[0] == "auto"; }
};

// Name and type of an Executable's input or output.
struct TensorInfo {
  std::string name;
  TensorType type;
};

// How an Executable lays out its intermediate tensors (memory/liveness.h): one arena per run,
// every intermediate at a fixed offset, planned at compile time.
struct MemoryReport {
  struct Entry {
    std::string name;  // the value's name
    TensorType type;
    size_t offset = 0;  // in the arena
    size_t bytes = 0;
  };
  size_t arena_bytes = 0;        // the planned arena
  size_t no_reuse_bytes = 0;     // the sum of all intermediates, had each its own memory
  size_t lower_bound_bytes = 0;  // the most intermediate bytes alive at one step
  size_t in_place_steps = 0;     // steps that write their output over a dying input
  std::vector<Entry> tensors;    // every intermediate in the arena, largest first
};

// Where the time of one run went (Executable::execute with a profile): every step with its start
// and duration. With a profile, each step's stream is synchronized after the step, so device
// steps are timed honestly at the cost of their overlap.
struct RunProfile {
  struct Step {
    std::string node;     // the node's name
    std::string op;       // its op kind, "Conv"
    std::string backend;  // "cpu", "cuda"
    double start_us = 0;  // from the start of the run
    double duration_us = 0;
    std::string detail;  // how the kernel runs it, when it chose at compile time ("" otherwise)
  };
  std::vector<Step> steps;  // in execution order
  double total_us = 0;      // the whole run, input checks and output copies included
};

// Where Executable::execute hands its outputs back.
enum class OutputPlace {
  kHost,    // every output on the host (one made on a device is copied back)
  kDevice,  // each output where it was made: a device output stays there, as memory of its own
            // that later runs do not overwrite (for work that continues on the device)
};

class BoundReplay;
class KernelDonorScope;

// A compiled graph: kernels made once, constants bound, steps in order. execute() may be called
// from several threads at once; each call uses its own intermediate buffers.
class Executable {
 public:
  struct Impl;
  explicit Executable(std::unique_ptr<Impl> impl);
  ~Executable();

  // Runs with inputs in the order of inputs(); returns outputs in the order of outputs().
  // Throws InvalidArgument for a wrong count, ShapeError for a wrong shape or dtype.
  std::vector<Tensor> execute(const std::vector<Tensor>& inputs);
  // The same with inputs by name; every input must be given.
  std::vector<Tensor> execute(const std::map<std::string, Tensor>& inputs);
  // The same, recording the time of every step into *profile (replacing what it held).
  std::vector<Tensor> execute(const std::vector<Tensor>& inputs, RunProfile* profile);
  // The same with the outputs where `place` says (inputs may be on the host or the device).
  std::vector<Tensor> execute(const std::map<std::string, Tensor>& inputs, OutputPlace place);

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // For a plan that replays one recorded device graph, once it has run: a replay of its own
  // (recorded now, with intermediate memory of its own) that reads each input named in `bound`
  // straight from the given device tensor, with no copy per run: the caller writes new values
  // there between runs (a decoder's key/value cache). Null when the plan does not replay, has not
  // run yet, or a tensor is not a device tensor of its input's type. Throws InvalidArgument for
  // an unknown input name.
  std::unique_ptr<BoundReplay> bind(const std::map<std::string, Tensor>& bound);
  // The arena plan: its size next to the no-reuse total and the lower bound.
  MemoryReport memory_report() const;
  // Steps, their kernels and backends, one line each.
  std::string summary() const;

 private:
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, RunProfile* profile,
                          OutputPlace place);
  friend class KernelDonorScope;  // runtime internals: hands kernels to plans of other sizes
  std::shared_ptr<Impl> impl_;
};

// Executable::bind's replay. It keeps the executable's kernels and constants alive (it may
// outlive the Executable). One thread at a time per BoundReplay; several may run at once.
class BoundReplay {
 public:
  ~BoundReplay();
  BoundReplay(const BoundReplay&) = delete;
  BoundReplay& operator=(const BoundReplay&) = delete;
  // Runs with every input that was not bound, by name (host or device tensors). Host outputs
  // come back as copies; device outputs are this replay's own memory, valid until its next run
  // (no copy: read them at once). Throws as Executable::execute. With `wait` false it returns once
  // the run is enqueued: device outputs are then ready for work enqueued after it on the device's
  // stream, and a failure inside the run (an index out of range) is raised by the next wait on
  // that stream.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs, bool wait = true);

 private:
  friend class Executable;
  struct State;
  explicit BoundReplay(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Entry point: owns the executables it compiles and hands out device memory.
class Runtime {
 public:
  Runtime();
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // A zero-filled tensor from the device's caching pool.
  Tensor alloc(const Shape& shape, DType dtype = DType::kFloat32, Device device = Device::cpu());
  // Names of the backends this build can use on this machine ("cpu", and "cuda" with a GPU).
  std::vector<std::string> backends() const;
  MemoryStats memory_stats(Device device = Device::cpu()) const;
  // Takes ownership of an executable; returns the same pointer.
  Executable* adopt(std::unique_ptr<Executable> executable);

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<Executable>> executables_;
};

// Version string, "0.1.0".
const char* version();

}  // namespace lumen
