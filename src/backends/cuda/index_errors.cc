// IndexErrors: the host side of the CUDA index kernels' run-time checks.
#include "backends/cuda/index_errors.h"

#include <atomic>

#include "backends/cuda/cuda_check.h"

namespace lumen::cuda {

IndexErrors::IndexErrors() {
  check(cudaMalloc(reinterpret_cast<void**>(&claim_), sizeof(int)), "index error word");
  check(cudaMemset(claim_, 0, sizeof(int)), "index error word");
  check(cudaHostAlloc(reinterpret_cast<void**>(&record_), sizeof(IndexErrorRecord),
                      cudaHostAllocMapped),
        "index error record");
  *record_ = IndexErrorRecord{};
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_record_), record_, 0),
        "index error record");
  check(cudaDeviceSynchronize(), "index error word");
}

IndexErrors::~IndexErrors() {
  if (claim_) cudaFree(claim_);
  if (record_) cudaFreeHost(record_);
}

IndexCheck IndexErrors::check_for(const std::string& where) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, added] = ids_.try_emplace(where, static_cast<int32_t>(names_.size() + 1));
  if (added) names_.push_back(where);
  return IndexCheck{claim_, device_record_, it->second};
}

void IndexErrors::raise_pending(cudaStream_t stream) {
  std::atomic_ref<int32_t> kernel(record_->kernel);
  const int32_t id = kernel.load(std::memory_order_acquire);
  if (id == 0) return;
  const int64_t value = std::atomic_ref<int64_t>(record_->value).load(std::memory_order_relaxed);
  const int64_t lo = std::atomic_ref<int64_t>(record_->lo).load(std::memory_order_relaxed);
  const int64_t hi = std::atomic_ref<int64_t>(record_->hi).load(std::memory_order_relaxed);
  // Only one waiting thread raises it (the fields stay put: the claim is still taken).
  int32_t expected = id;
  if (!kernel.compare_exchange_strong(expected, 0)) return;
  check(cudaMemsetAsync(claim_, 0, sizeof(int), stream), "reset the index error word");
  std::string where = "a CUDA index kernel";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (id > 0 && static_cast<size_t>(id) <= names_.size()) where = names_[id - 1];
  }
  throw InvalidArgument(where + ": index " + std::to_string(value) + " is out of range [" +
                        std::to_string(lo) + ", " + std::to_string(hi) + ")");
}

}  // namespace lumen::cuda
