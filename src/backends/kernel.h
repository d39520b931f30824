// Kernel: the compiled form of one node on one backend.
#pragma once

#include <span>
#include <string>

#include "backends/stream.h"
#include "lumen/graph.h"
#include "lumen/tensor.h"

namespace lumen {

// What a kernel sees when it runs. Inputs that were omitted are undefined Tensors. Outputs come
// allocated with their inferred shapes unless the kernel says it makes its own (views).
struct KernelContext {
  std::span<const Tensor> inputs;
  std::span<Tensor> outputs;
  Stream* stream = nullptr;
  // For a copy to the host: an event on the source device's stream recorded once the input was
  // made, so the copy need not wait for work queued after it (null: it waits for all of it).
  Event* ready = nullptr;
  // The types the plan gives the outputs (one per output; empty where the caller has none): a
  // kernel that makes its outputs (a view) and runs at any shape reads its output shape here.
  std::span<const TensorType> output_types = {};
};

// Built once per node at compile time (where library primitives are chosen); run() is const and
// may be called from several threads at once.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(KernelContext& ctx) const = 0;
  // True when run() sets ctx.outputs itself, e.g. as a view of an input (Reshape).
  virtual bool makes_outputs() const { return false; }
  // The input whose memory output 0 may overwrite when that input dies at this node, or -1.
  virtual int in_place_input() const { return -1; }
  // False when run() never reads input k: a constant the kernel copied into its own layout at
  // compile time (packed weights). The executable then keeps only the kernel's copy.
  virtual bool reads_input(int /*k*/) const { return true; }
  // How the kernel runs the node, where it chose among ways at compile time (which library
  // algorithm, what it measured), for profiles; "" when there was nothing to choose.
  virtual std::string describe() const { return ""; }
  // True when run() takes every size from ctx (the tensors and output_types), never from the
  // shapes the node had when the kernel was built: one kernel then serves the node at every size
  // of a dynamic plan's symbolic dimensions (same ranks, dtypes, attributes and constants).
  virtual bool runs_any_shape() const { return false; }
};

// While one lives on a thread, kernels built there are for a plan that runs at many sizes of its
// symbolic dimensions: where a node can run on a kernel that runs_any_shape() or on one chosen by
// timing it at the present sizes, the first is built (a choice timed at one size says nothing of
// the others, and timing at every size is a compile per size). Scopes nest.
class AnyShapeScope {
 public:
  AnyShapeScope();
  ~AnyShapeScope();
  AnyShapeScope(const AnyShapeScope&) = delete;
  AnyShapeScope& operator=(const AnyShapeScope&) = delete;
};
// Whether an AnyShapeScope lives on this thread.
bool building_for_any_shape();

}  // namespace lumen
