// Backend: the contract between the graph and a device (CPU, CUDA).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "backends/stream.h"
#include "lumen/allocator.h"
#include "lumen/graph.h"
#include "lumen/precision.h"

namespace lumen {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // The hardware it runs on ("NVIDIA H100 80GB HBM3"): measured costs are kept per device name.
  virtual std::string device_name() const { return name(); }
  // Whether this backend can run `node` as typed; if not, *reason says why.
  virtual bool supports(const Graph& graph, const Node& node, std::string* reason) const = 0;
  // Builds the node's kernel (once, at compile time), at the compile's precision. Throws
  // UnsupportedOp with the reason.
  virtual std::unique_ptr<Kernel> make_kernel(const Graph& graph, const Node& node,
                                              Precision precision) const = 0;
  virtual Allocator& allocator() const = 0;
  virtual Stream& default_stream() = 0;
  // Whether every kernel that supports a node with float32 tensors also runs it with those tensors
  // in `half` (kFloat16 or kBFloat16), so a Precision::kFloat16 or kBFloat16 compile may store the
  // node's float values so.
  virtual bool takes_half_floats(DType /*half*/) const { return false; }
  // Bytes of the device's last-level cache (a GPU's L2), 0 where unknown: a model whose constants
  // are larger reads them from memory on every run, which the router's calibration imitates.
  virtual size_t cache_bytes() const { return 0; }
  // Moves `src` between the host and this backend's device without holding the host up for device
  // work queued before: a copy to the device is queued after that work, on a stream of its own,
  // and later work on default_stream() waits for it; a copy to the host waits only for `ready`
  // (an event recorded on default_stream() once `src` was made; null: all work queued so far) and
  // is complete when it returns. Here, where the device has no such stream: Tensor::to.
  virtual Tensor move(const Tensor& src, Device to, Event* /*ready*/) { return src.to(to); }
  // Whether `auto` places nodes here. False for a backend that only reaches hardware another
  // backend serves better: Vulkan on the host's CPU (Mesa's lavapipe) or on a GPU that CUDA drives.
  // Such a backend still runs what names it (--device vulkan).
  virtual bool in_auto() const { return true; }
};

// Backends usable on this machine, best first: the CPU's, then those of the plugins next to
// liblumen (loaded by the first call, core/plugins.h) whose probe finds their device.
std::vector<Backend*> available_backends();
// The backends `auto` chooses among: available_backends() that are in_auto().
std::vector<Backend*> auto_backends();
// A backend by name ("cpu"), or nullptr when it is not available. Only a name other than "cpu"
// loads the plugins.
Backend* find_backend(const std::string& name);

}  // namespace lumen
