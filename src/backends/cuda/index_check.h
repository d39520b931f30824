// What a CUDA index kernel (Gather, GatherElements, GatherND, ScatterElements, ScatterND, the loss
// ops) needs to report an out-of-range index met at run time: plain structs that host code and
// device code share. The host side is index_errors.h; the device side index_check.cuh.
#pragma once

#include <cstdint>

namespace lumen::cuda {

// The first out-of-range index of a kernel, as the kernel wrote it (into mapped host memory, so
// the host reads it without a copy once it has waited for the kernel): `kernel` is the failing
// kernel's id (0: none), `value` the index as given, [lo, hi) the range it had to lie in.
struct IndexErrorRecord {
  int64_t value = 0;
  int64_t lo = 0;
  int64_t hi = 0;
  int32_t kernel = 0;
};

// A kernel's handle on its backend's error record (kernel parameter, by value): `claim` is a
// device word that the first failing thread takes with atomicCAS (so one failure is recorded
// whole), `record` the mapped record (a pointer the device can use), `kernel` this kernel's id
// (> 0). A null `claim` turns reporting off.
struct IndexCheck {
  int* claim = nullptr;
  IndexErrorRecord* record = nullptr;
  int32_t kernel = 0;
};

}  // namespace lumen::cuda
