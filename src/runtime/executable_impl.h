// The inside of an Executable: steps over value slots. Built by compile.cc, run by executable.cc.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/recording.h"
#include "lumen/runtime.h"
#include "memory/liveness.h"

namespace lumen {

struct Step {
  std::shared_ptr<Kernel> kernel;  // shared with the plans of other sizes where it runs_any_shape()
  Backend* backend = nullptr;
  std::vector<int> inputs;   // slot per input; -1 for an omitted optional input
  std::vector<int> outputs;  // slot per output
  std::vector<TensorType> output_types;
  std::vector<int> release;  // slots whose last reader is this step (freed after it)
  std::string label;         // "conv1 (Conv) @cpu"
  std::string node;          // "conv1"
  std::string op;            // "Conv"
  bool input_copy = false;   // a copy of a graph input to the device (bound, not run, in a replay)
  int signal = -1;  // >= 0: record run event `signal` on its stream after it (a copy reads it)
  int wait = -1;    // >= 0: a copy to the host, given run event `wait` as KernelContext::ready
  // >= 0: output 0 is input `alias_input`'s tensor itself (a kernel running in place over a graph
  // input the run may write, Graph::mark_input_written), not memory of its own.
  int alias_input = -1;
};

// A whole run recorded once as device work (a CUDA graph) and replayed: every slot tensor of the
// recorded run stays alive, at the addresses the recording holds.
struct RecordedRun {
  std::unique_ptr<CapturedWork> work;
  std::vector<Tensor> slots;
  std::vector<Tensor> input_tensors;  // per graph input: the device tensor it is copied into, or
                                      // undefined where the input is not read on the device
};

// Arenas shared by the plans of one shape family (onnx/shape_family.h): a run takes the smallest
// free arena large enough for its plan, so a new size reuses memory already touched instead of
// faulting in an arena of its own, and the family holds a few arenas, not one per size.
class ArenaPool {
 public:
  // A free arena of at least `bytes` on `device`, or null.
  std::shared_ptr<Buffer> take(size_t bytes, Device device);
  // Returns an arena; beyond kMaxFree free arenas, the smallest is released.
  void give(std::shared_ptr<Buffer> arena);

 private:
  static constexpr size_t kMaxFree = 4;
  std::mutex mutex_;
  std::vector<std::shared_ptr<Buffer>> free_;
};

struct Executable::Impl {
  std::vector<Step> steps;
  std::vector<Tensor> constants;  // one per slot: set for constant slots, undefined otherwise
  std::vector<int> input_slots;
  std::vector<int> output_slots;
  // Per graph input written in place: (its index, the slot its in-place step's output takes),
  // what a run copies back to the caller's tensor where that step wrote a copy of it.
  std::vector<std::pair<int, int>> written_inputs;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  // Every intermediate lives at a fixed offset of one arena (memory/liveness.h): on the host, or
  // on the device for a plan recorded as one CUDA graph, so that a recording holds the planned
  // bytes, not every intermediate at once. A run takes an arena from `free_arenas` (allocating
  // one only when every arena is in use by another thread's run) and gives it back when it ends.
  ArenaLayout layout;
  Allocator* arena_allocator = nullptr;  // where arenas are allocated (null: the host's)
  std::vector<std::string> slot_names;   // for the memory report
  std::mutex arena_mutex;
  std::vector<std::shared_ptr<Buffer>> free_arenas;
  // Set for the plans of a shape family: their arenas come from and go back to it (free_arenas
  // is then unused).
  std::shared_ptr<ArenaPool> arena_pool;
  // Per graph input: whether a host kernel reads it (an input given on a device is then copied
  // to the host first).
  std::vector<bool> input_read_on_host;
  int num_events = 0;  // run events (Step::signal) each run records
  // The device streams the steps run on: a run with host outputs waits for each at its end, which
  // also raises the errors its kernels could only record (a CUDA index out of range).
  std::vector<Stream*> device_streams;
  // Set when every step runs on one device stream that can record work (all CUDA, static
  // shapes): the run is recorded once, after a run step by step (which also creates library
  // handles and pool memory, which a recording may not), and every later run replays it. With
  // record_on_first_run the first execute does all three (warm-up, recording, replay); without it
  // (a shape family's plan at new sizes, which a service may meet only once) the first execute
  // only runs step by step and the second records.
  Stream* record_stream = nullptr;
  RecordingStream* recorder = nullptr;  // the same stream, as a recorder
  std::mutex record_mutex;
  bool record_on_first_run = true;
  bool warmed = false;  // a run went step by step to its end (guarded by record_mutex)
  std::unique_ptr<RecordedRun> recorded;
};

}  // namespace lumen
