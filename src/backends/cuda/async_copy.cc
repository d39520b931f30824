// CudaBackend::move: copies between the host and the device on a stream of their own, ordered
// with the backend's stream by events, so that neither the host nor the device waits for work
// that the copy does not need. A copy to the device is staged in pinned memory by the process's
// CPU threads, chunk by chunk, each chunk sent while the next is staged.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/stream_copy.h"
#include "lumen/threads.h"

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

// A copy to the device is staged and sent in chunks of this many bytes: the copy engine reads one
// chunk while the host fills the next.
constexpr size_t kSendChunk = size_t{2} << 20;
// From this many bytes the host fills the staging buffer with the process's CPU threads
// (lumen::num_threads()): one core's memcpy from pageable memory ran at 6-9 GB/s on the H200
// machine's Xeon (a batch-32 image input, 19 MB, took 2.2-3.0 ms to stage and send, the same run
// in different processes), far below what the copy engine takes from pinned memory.
constexpr size_t kParallelFillBytes = size_t{128} << 10;
// Each thread copies one block of the chunk, of at least this many bytes.
constexpr size_t kMinFillBlock = size_t{32} << 10;

// How fill() writes: through the caches (a destination the CPU reads next) or around them
// (pinned staging that the copy engine reads next).
enum class FillStores { kCached, kStreaming };

// memcpy(dst, src, bytes) by up to `threads` threads, a block each.
void fill(char* dst, const char* src, size_t bytes, int threads, FillStores stores) {
  auto copy = [stores](char* d, const char* s, size_t n) {
    if (stores == FillStores::kStreaming)
      stream_copy(d, s, n);
    else
      std::memcpy(d, s, n);
  };
  if (threads <= 1 || bytes < 2 * kMinFillBlock) {
    copy(dst, src, bytes);
    return;
  }
  constexpr size_t kPage = size_t{4} << 10;
  const size_t per_thread =
      (bytes + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  const size_t block = std::max(kMinFillBlock, (per_thread + kPage - 1) / kPage * kPage);
  const auto blocks = static_cast<int64_t>((bytes + block - 1) / block);
  const int team = static_cast<int>(std::min<int64_t>(threads, blocks));
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t at = static_cast<size_t>(b) * block;
    copy(dst + at, src + at, std::min(block, bytes - at));
  }
}

// Stages `bytes` at `src` in `buf` chunk by chunk, queuing each chunk's copy to `dst` on `on` as
// soon as it is staged.
void send_staged(PinnedStaging::Buffer& buf, void* dst, const void* src, size_t bytes,
                 CudaStream& on, const std::string& where) {
  const int threads = bytes >= kParallelFillBytes ? std::max(1, num_threads()) : 1;
  auto* staged = static_cast<char*>(buf.ptr);
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  for (size_t done = 0; done < bytes; done += kSendChunk) {
    const size_t n = std::min(kSendChunk, bytes - done);
    fill(staged + done, in + done, n, threads, FillStores::kStreaming);
    check(cudaMemcpyAsync(out + done, staged + done, n, cudaMemcpyHostToDevice, on.handle()),
          where);
  }
}

// A copy to the host moves through pinned memory in chunks of this many bytes, two in flight.
constexpr size_t kReceiveChunk = size_t{2} << 20;
// From this many bytes a copy between pageable host memory and the device is staged by the
// process's threads; on one thread only from kStagingBytes (below it a copy to the device goes
// through the driver's own staging, which overlaps its copy through pinned memory with the
// transfer and is as fast; a copy to the host goes through pinned memory at every size, copied
// out by the calling thread below these sizes). On the H200
// machine at 16 threads, host input to host output: MobileNet-V2's replay with its 602 KB input
// 0.416-0.430 ms through the driver, 0.396-0.415 ms staged by the threads; GPT-2's with its 25.7 MB
// of logits 3.44-3.75 ms through the driver, 2.55-2.65 ms received by the threads.
constexpr size_t kThreadedStagingBytes = size_t{128} << 10;
constexpr size_t kStagingBytes = size_t{1} << 20;

}  // namespace

bool stage_on_host_threads(size_t bytes) {
  return bytes >= kStagingBytes || (bytes >= kThreadedStagingBytes && num_threads() > 1);
}

void receive_from_device(void* dst, const void* src, size_t bytes, Stream& on,
                         const std::string& where) {
  if (bytes == 0) return;
  const size_t chunk = std::min(bytes, kReceiveChunk);
  PinnedStaging::Buffer& buf = pinned_staging().take(2 * chunk, on);
  auto* staged = static_cast<char*>(buf.ptr);
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  // Below stage_on_host_threads' sizes the calling thread copies out alone (a team's start-up
  // costs more than such a copy).
  const int threads = stage_on_host_threads(bytes) ? std::max(1, num_threads()) : 1;
  // The buffer's two events mark the arrival of the chunk in each half.
  Event* arrived[2] = {buf.queued.get(), buf.read.get()};
  auto half_of = [chunk](size_t at) { return static_cast<int>((at / chunk) % 2); };
  auto request = [&](size_t at) {
    const int half = half_of(at);
    check(cudaMemcpyAsync(staged + half * chunk, in + at, std::min(chunk, bytes - at),
                          cudaMemcpyDeviceToHost, static_cast<CudaStream&>(on).handle()),
          where);
    arrived[half]->record(on);
  };
  request(0);
  if (chunk < bytes) request(chunk);
  for (size_t at = 0; at < bytes; at += chunk) {
    const int half = half_of(at);
    arrived[half]->synchronize();
    fill(out + at, staged + half * chunk, std::min(chunk, bytes - at), threads,
         FillStores::kCached);
    if (at + 2 * chunk < bytes) request(at + 2 * chunk);  // into the half just emptied
  }
  pinned_staging().release(buf);
}

void send_to_device(void* dst, const void* src, size_t bytes, Stream& on,
                    const std::string& where) {
  if (bytes == 0) return;
  PinnedStaging::Buffer& buf = pinned_staging().take(bytes, on);
  send_staged(buf, dst, src, bytes, static_cast<CudaStream&>(on), where);
  buf.read->record(on);
  pinned_staging().release(buf);
}

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
    send_staged(buf, dst.raw_data(), src.raw_data(), bytes, *copy_stream_,
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
    const std::string where = "copy " + src.device().to_string() + " -> host";
    receive_from_device(dst.raw_data(), src.raw_data(), bytes, *copy_stream_, where);
    // The work the copy waited for has finished: raise an index its kernels found out of range.
    index_errors_->raise_pending(stream_->handle());
    return dst;
  }
  return src.to(to);
}

}  // namespace lumen::cuda
