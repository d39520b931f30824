// KernelDonorScope: kernels handed from one plan to a plan of the same graph at other sizes.
#include "runtime/kernel_donor.h"

#include "backends/backend.h"
#include "runtime/executable_impl.h"

namespace lumen {
namespace {

thread_local const KernelDonorScope* innermost = nullptr;
thread_local long long taken_count = 0;
thread_local long long built_count = 0;

std::string key_of(const std::string& node, const std::string& op, const std::string& backend) {
  return node + "\n" + op + "\n" + backend;
}

}  // namespace

KernelDonorScope::KernelDonorScope(const Executable& donor) : outer_(innermost) {
  for (const Step& step : donor.impl_->steps)
    if (!step.input_copy && step.op != "Copy" && step.kernel->runs_any_shape())
      kernels_.emplace(key_of(step.node, step.op, step.backend->name()), step.kernel);
  arenas_ = donor.impl_->arena_pool;
  innermost = this;
}

KernelDonorScope::~KernelDonorScope() {
  innermost = outer_;
}

std::shared_ptr<Kernel> donated_kernel(const std::string& node, const std::string& op,
                                       const Backend& backend) {
  if (innermost == nullptr) return nullptr;
  auto it = innermost->kernels_.find(key_of(node, op, backend.name()));
  if (it == innermost->kernels_.end()) {
    ++built_count;
    return nullptr;
  }
  ++taken_count;
  return it->second;
}

std::shared_ptr<ArenaPool> arena_pool_for_new_plan() {
  if (innermost != nullptr && innermost->arenas_) return innermost->arenas_;
  return building_for_any_shape() ? std::make_shared<ArenaPool>() : nullptr;
}

bool building_from_donor() {
  return innermost != nullptr;
}

KernelDonations kernel_donations() {
  return {taken_count, built_count};
}

}  // namespace lumen
