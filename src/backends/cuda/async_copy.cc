// CudaBackend::move: copies between the host and the device on a stream of their own, ordered
// with the backend's stream by events, so that neither the host nor the device waits for work
// that the copy does not need.
#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace lumen::cuda {
namespace {

// Pinned host buffers for copies to the device: the host fills one and the copy engine reads it
// later, so a buffer is handed out again only once the copy that last read it has finished; when
// none is free a new one is allocated (so there are about as many as copies in flight). Never
// freed, like the pools.
class PinnedStaging {
 public:
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
    std::unique_ptr<Event> queued;  // recorded on the compute stream before the copy is queued
    std::unique_ptr<Event> read;    // recorded after the copy that reads it
    bool taken = false;
  };

  // A buffer of at least `bytes` that no queued copy reads, with its events (made on `stream`);
  // give it back with release().
  Buffer& take(size_t bytes, Stream& stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Buffer& b : buffers_)
      if (!b.taken && b.bytes >= bytes && b.read->done()) {
        b.taken = true;
        return b;
      }
    Buffer& b = buffers_.emplace_back();
    b.bytes = std::max(bytes, kMinBytes);
    check(cudaMallocHost(&b.ptr, b.bytes),
          "pinned staging buffer of " + std::to_string(b.bytes) + " bytes");
    b.queued = stream.create_event();
    b.read = stream.create_event();
    b.taken = true;
    return b;
  }

  void release(Buffer& b) {
    std::lock_guard<std::mutex> lock(mutex_);
    b.taken = false;
  }

 private:
  static constexpr size_t kMinBytes = size_t{1} << 20;
  std::mutex mutex_;
  std::deque<Buffer> buffers_;  // a deque: taken buffers stay where they are as it grows
};

PinnedStaging& pinned_staging() {
  static auto* s = new PinnedStaging();
  return *s;
}

}  // namespace

Tensor CudaBackend::move(const Tensor& src, Device to, Event* ready) {
  const size_t bytes = src.nbytes();
  if (src.device().type == DeviceType::kCPU && to == device()) {
    Tensor dst = Tensor::empty(src.shape(), src.dtype(), to);
    if (bytes == 0) return dst;
    PinnedStaging::Buffer& buf = pinned_staging().take(bytes, *copy_stream_);
    // The pool hands out memory that work queued on stream_ may still use (safe on one stream:
    // cuda_allocator.cc), so the copy waits for that work; the host does not. (A wait takes the
    // event as recorded when it is queued, so the buffer's events are recorded again next time.)
    buf.queued->record(*stream_);
    copy_stream_->wait(*buf.queued);
    std::memcpy(buf.ptr, src.raw_data(), bytes);
    check(cudaMemcpyAsync(dst.raw_data(), buf.ptr, bytes, cudaMemcpyHostToDevice,
                          copy_stream_->handle()),
          "copy host -> " + to.to_string());
    buf.read->record(*copy_stream_);
    stream_->wait(*buf.read);
    pinned_staging().release(buf);
    return dst;
  }
  if (src.device() == device() && to.type == DeviceType::kCPU) {
    Tensor dst = Tensor::empty(src.shape(), src.dtype(), to);
    if (bytes == 0) return dst;
    std::unique_ptr<Event> queued;
    if (ready == nullptr) {
      queued = stream_->create_event();
      queued->record(*stream_);
      ready = queued.get();
    }
    copy_stream_->wait(*ready);
    check(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), bytes, cudaMemcpyDeviceToHost,
                          copy_stream_->handle()),
          "copy " + src.device().to_string() + " -> host");
    copy_stream_->synchronize();
    // The work the copy waited for has finished: raise an index its kernels found out of range.
    index_errors_->raise_pending(stream_->handle());
    return dst;
  }
  return src.to(to);
}

}  // namespace lumen::cuda
