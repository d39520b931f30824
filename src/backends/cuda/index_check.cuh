// Device side of index checks (index_check.h): a kernel that meets an out-of-range index writes
// nothing out of bounds (its output elements get 0, or the update is skipped) and calls
// report_bad_index, which records the first failure of all kernels for the host to raise.
#pragma once

#include "backends/cuda/index_check.h"

namespace lumen::cuda {

// Records index `value` outside [lo, hi) for `check`'s kernel unless a failure is recorded
// already (only the first one is kept until the host reads and resets it).
__device__ __forceinline__ void report_bad_index(const IndexCheck& check, int64_t value, int64_t lo,
                                                 int64_t hi) {
  if (check.claim == nullptr) return;
  if (*static_cast<volatile int*>(check.claim) != 0) return;  // cheap for many failing threads
  if (atomicCAS(check.claim, 0, check.kernel) != 0) return;
  volatile IndexErrorRecord* r = check.record;
  r->value = value;
  r->lo = lo;
  r->hi = hi;
  __threadfence_system();  // the host sees the fields before the id that marks them valid
  r->kernel = check.kernel;
}

}  // namespace lumen::cuda
