// The host caching pool: freed blocks are kept in per-size free lists and handed out again, so a
// model that runs repeatedly stops calling the system allocator after its first run.

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lumen/allocator.h"
#include "lumen/error.h"
#include "lumen/memory_limit.h"

namespace lumen {
namespace {

// Plain 4 KiB pages, no transparent huge pages. Measured on this workplace's VMs: touching 400 MB
// of fresh memory took 210-250 ms in 4 KiB pages every time, but 280-1110 ms in huge pages (slowest
// after the machine idled), which made BERT-base's load vary from 0.2 to 1.7 s; products over
// packed weights ran no faster on huge pages.
void* system_allocate(size_t cls) {
  return std::aligned_alloc(kAlignment, cls);
}

size_t physical_memory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : SIZE_MAX;
}

std::atomic<size_t>& limit() {
  static std::atomic<size_t> bytes{physical_memory()};
  return bytes;
}

// Rounds a request up to a size class: multiples of 64 bytes up to 4 KiB, then 8 classes per
// power of two (at most 12.5% waste), so blocks are reusable by requests of nearby sizes.
size_t size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= 4096) return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  int top = 63 - __builtin_clzll(bytes);
  size_t step = size_t{1} << (top - 3);
  return (bytes + step - 1) / step * step;
}

class CachingHostPool final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    size_t cap = limit().load(std::memory_order_relaxed);
    if (bytes > cap)
      throw OutOfMemory("host pool: " + std::to_string(bytes) +
                        " bytes asked for, over the limit of " + std::to_string(cap));
    size_t cls = size_class(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    if (stats_.bytes_in_use + cls > cap)
      throw OutOfMemory("host pool: " + std::to_string(bytes) + " more bytes would take the " +
                        std::to_string(stats_.bytes_in_use) + " in use past the limit of " +
                        std::to_string(cap));
    ++stats_.num_allocs;
    void* ptr = nullptr;
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      ptr = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= cls;
    } else {
      ptr = system_allocate(cls);
      if (ptr == nullptr) {
        release_locked();
        ptr = system_allocate(cls);
      }
      if (ptr == nullptr)
        throw OutOfMemory("host pool: cannot allocate " + std::to_string(bytes) + " bytes");
      ++stats_.num_system_allocs;
    }
    stats_.bytes_in_use += cls;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    size_t cls = size_class(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    free_[cls].push_back(ptr);
    stats_.bytes_in_use -= cls;
    stats_.bytes_cached += cls;
  }

  MemoryStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void release_cached() override {
    std::lock_guard<std::mutex> lock(mutex_);
    release_locked();
  }

  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

  Device device() const override { return Device::cpu(); }

 private:
  void release_locked() {
    for (auto& [cls, list] : free_) {
      for (void* p : list) std::free(p);
      list.clear();
    }
    stats_.bytes_cached = 0;
  }

  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  MemoryStats stats_;
};

}  // namespace

void set_host_memory_limit(size_t bytes) {
  limit().store(bytes, std::memory_order_relaxed);
}

size_t host_memory_limit() {
  return limit().load(std::memory_order_relaxed);
}

Allocator& cpu_allocator() {
  static auto* pool = new CachingHostPool();  // never destroyed: see allocator.h
  return *pool;
}

}  // namespace lumen
