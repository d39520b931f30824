// Device memory: a caching pool of device-addressed buffers, and core's DeviceOps for Vulkan.
//
// Every command runs on the backend's one queue in recording order, so a block freed on the host
// while queued work still uses it can be handed out again at once: whatever the new owner records
// runs after that work (the reasoning of a single-stream caching allocator). Small blocks are
// carved from 32 MiB slabs (a device allows only a few thousand memory allocations); larger ones
// get a buffer of their own. Freed blocks go to per-size free lists.
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "backends/vulkan/vulkan_context.h"
#include "core/device_ops.h"
#include "lumen/error.h"

namespace lumen::vulkan {
namespace {

constexpr size_t kSlabBytes = size_t{32} << 20;
constexpr size_t kSmallBytes = size_t{1} << 20;  // blocks up to this come from slabs

// 256-byte steps up to 64 KiB, then 8 classes per power of two (at most 12.5% waste).
size_t size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= 65536) return (bytes + 255) / 256 * 256;
  int top = 63 - __builtin_clzll(bytes);
  size_t step = size_t{1} << (top - 3);
  return (bytes + step - 1) / step * step;
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

class CachingDevicePool final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    Context& ctx = require_vulkan_backend().context();
    const size_t cls = size_class(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.num_allocs;
    uint64_t addr = 0;
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      addr = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= cls;
    } else {
      addr = cls <= kSmallBytes ? carve_locked(ctx, cls) : dedicated_locked(ctx, cls);
      ++stats_.num_system_allocs;
    }
    stats_.bytes_in_use += cls;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return reinterpret_cast<void*>(addr);
  }

  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    const size_t cls = size_class(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    free_[cls].push_back(reinterpret_cast<uint64_t>(ptr));
    stats_.bytes_in_use -= cls;
    stats_.bytes_cached += cls;
  }

  MemoryStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  // Gives the free blocks with buffers of their own back to the device (slabs stay).
  void release_cached() override {
    Context& ctx = require_vulkan_backend().context();
    ctx.stream().synchronize();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [cls, list] : free_) {
      if (cls <= kSmallBytes) continue;
      for (uint64_t addr : list) {
        auto d = dedicated_.find(addr);
        if (d == dedicated_.end()) continue;
        ctx.unregister_block(d->second.address);
        ctx.destroy_block(d->second);
        dedicated_.erase(d);
        stats_.bytes_cached -= cls;
      }
      list.clear();
    }
  }

  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

  Device device() const override { return Device::vulkan(0); }

 private:
  uint64_t carve_locked(Context& ctx, size_t cls) {
    if (slab_next_ == 0 || slab_next_ + cls > slab_end_) {
      Block slab = ctx.create_block(kSlabBytes);
      ctx.register_block(slab);
      slab_next_ = align_up(slab.address, 256);
      slab_end_ = slab.address + slab.bytes;
    }
    uint64_t addr = slab_next_;
    slab_next_ += cls;
    return addr;
  }

  uint64_t dedicated_locked(Context& ctx, size_t cls) {
    Block b;
    try {
      b = ctx.create_block(cls + kAlignment);
    } catch (const OutOfMemory&) {
      mutex_.unlock();
      try {
        release_cached();
      } catch (...) {
        mutex_.lock();
        throw;
      }
      mutex_.lock();
      b = ctx.create_block(cls + kAlignment);
    }
    ctx.register_block(b);
    uint64_t addr = align_up(b.address, kAlignment);
    dedicated_[addr] = b;
    return addr;
  }

  mutable std::mutex mutex_;
  MemoryStats stats_;
  std::unordered_map<size_t, std::vector<uint64_t>> free_;
  std::unordered_map<uint64_t, Block> dedicated_;  // by the address handed out
  uint64_t slab_next_ = 0, slab_end_ = 0;
};

Allocator& pool_or_throw() {
  return require_vulkan_backend().allocator();
}

void copy_op(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  require_vulkan_backend().context().copy(dst, dst_device.type == DeviceType::kCPU, src,
                                          src_device.type == DeviceType::kCPU, bytes);
}

void zero_op(void* dst, Device /*device*/, size_t bytes) {
  require_vulkan_backend().context().zero(dst, bytes);
}

}  // namespace

Allocator& device_allocator() {
  static auto* pool = new CachingDevicePool();  // never destroyed: tensors may outlive main()
  return *pool;
}

void register_vulkan_device_ops() {
  DeviceOps ops;
  ops.allocator = &pool_or_throw;
  ops.copy = &copy_op;
  ops.zero = &zero_op;
  register_device_ops(DeviceType::kVulkan, ops);
}

}  // namespace lumen::vulkan
