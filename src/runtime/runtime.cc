#include "lumen/runtime.h"

#include <cstring>

#include "backends/backend.h"

namespace lumen {

const char* version() {
  return LUMEN_VERSION;
}

Runtime::Runtime() = default;
Runtime::~Runtime() = default;

Tensor Runtime::alloc(const Shape& shape, DType dtype, Device device) {
  return Tensor::zeros(shape, dtype, device);
}

std::vector<std::string> Runtime::backends() const {
  std::vector<std::string> names;
  for (Backend* b : available_backends()) names.push_back(b->name());
  return names;
}

MemoryStats Runtime::memory_stats(Device device) const {
  if (device.type == DeviceType::kCPU) return find_backend("cpu")->allocator().stats();
  for (Backend* b : available_backends())
    if (b->device() == device) return b->allocator().stats();
  throw InvalidArgument("memory_stats: no backend for " + device.to_string());
}

Executable* Runtime::adopt(std::unique_ptr<Executable> executable) {
  std::lock_guard<std::mutex> lock(mutex_);
  executables_.push_back(std::move(executable));
  return executables_.back().get();
}

}  // namespace lumen
