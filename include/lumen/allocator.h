// Allocators: where tensor memory comes from. Each device has one caching pool.
#pragma once

#include <cstddef>

#include "lumen/device.h"

namespace lumen {

// Every allocation lumen makes is aligned to this many bytes (a cache line, and an AVX-512 vector).
inline constexpr size_t kAlignment = 64;

struct MemoryStats {
  size_t bytes_in_use = 0;       // handed out and not yet returned
  size_t peak_bytes_in_use = 0;  // the most bytes_in_use has ever been
  size_t bytes_cached = 0;       // returned blocks kept for reuse
  size_t num_allocs = 0;         // allocate() calls
  size_t num_system_allocs = 0;  // allocate() calls that had to ask the system
};

// The allocator contract. allocate() returns kAlignment-aligned memory or throws OutOfMemory;
// deallocate() takes the same size that was asked for. Implementations are thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual MemoryStats stats() const = 0;
  // Gives cached blocks back to the system.
  virtual void release_cached() {}
  virtual void reset_peak() {}
  virtual Device device() const = 0;
};

// The process-wide caching pool for host memory. It is never destroyed, so tensors that outlive
// main() still free safely.
Allocator& cpu_allocator();

}  // namespace lumen
