// KernelDonorScope: a plan compiled for new sizes takes the kernels that run at any size from a
// plan of the same graph compiled before, instead of building (packing weights, timing) again.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "backends/kernel.h"
#include "lumen/runtime.h"

namespace lumen {

class ArenaPool;
class Backend;

// While one lives on a thread, Graph::compile there takes each node's kernel from `donor` where
// the donor ran a node of the same name and op on the same backend with a kernel that
// runs_any_shape(); other nodes get kernels built as usual, and the plan takes its arenas from
// the donor's pool (ArenaPool). It also opens an AnyShapeScope, so kernels are built for many
// sizes too. `donor` must outlive the scope; the kernels it gives stay
// alive with every plan that takes them.
class KernelDonorScope {
 public:
  explicit KernelDonorScope(const Executable& donor);
  ~KernelDonorScope();
  KernelDonorScope(const KernelDonorScope&) = delete;
  KernelDonorScope& operator=(const KernelDonorScope&) = delete;

 private:
  AnyShapeScope any_shape_;
  std::unordered_map<std::string, std::shared_ptr<Kernel>> kernels_;  // "node\nop\nbackend"
  std::shared_ptr<ArenaPool> arenas_;
  const KernelDonorScope* outer_ = nullptr;
  friend std::shared_ptr<Kernel> donated_kernel(const std::string& node, const std::string& op,
                                                const Backend& backend);
  friend std::shared_ptr<ArenaPool> arena_pool_for_new_plan();
};

// The arenas the plans compiled now on this thread share: the donor's, under a KernelDonorScope;
// a new pool under an AnyShapeScope alone (a family's first plan); else null.
std::shared_ptr<ArenaPool> arena_pool_for_new_plan();

// Whether a KernelDonorScope lives on this thread: the plan compiled now is one of a shape
// family's at new sizes (a size a service may meet only once).
bool building_from_donor();

// The kernel the innermost KernelDonorScope of this thread gives for the node, or null.
std::shared_ptr<Kernel> donated_kernel(const std::string& node, const std::string& op,
                                       const Backend& backend);

// How many kernels donated_kernel has handed out on this thread and how many nodes it found none
// for (a plan compiled under a scope: the difference before and after).
struct KernelDonations {
  long long taken = 0;
  long long built = 0;
};
KernelDonations kernel_donations();

}  // namespace lumen
