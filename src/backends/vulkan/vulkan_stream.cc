// The Vulkan stream: command buffers recorded on the host and submitted to the one compute queue,
// a timeline semaphore as its clock (events are values of it), and captures kept for replay.
#include "backends/vulkan/vulkan_context.h"
#include "lumen/error.h"

namespace lumen::vulkan {
namespace {

// A point on the stream's timeline.
class VulkanEvent final : public Event {
 public:
  explicit VulkanEvent(VulkanStream& stream) : stream_(stream) {}
  void record(Stream& stream) override {
    if (&stream != &stream_)
      throw DeviceError("vulkan: an event recorded on a " + stream.device().to_string() +
                        " stream");
    value_ = stream_.flush();
  }
  void synchronize() override {
    stream_.wait_value(value_);
    require_vulkan_backend().context().raise_index_error();
  }
  bool done() const override { return stream_.completed() >= value_; }

 private:
  VulkanStream& stream_;
  uint64_t value_ = 0;
};

// A point on the stream's timeline that also takes the device's clock: a timestamp query.
class VulkanTimingEvent final : public Event {
 public:
  VulkanTimingEvent(VulkanStream& stream, int query) : stream_(stream), query_(query) {}
  ~VulkanTimingEvent() override { stream_.release_query(query_); }
  void record(Stream& stream) override {
    if (&stream != &stream_)
      throw DeviceError("vulkan: an event recorded on a " + stream.device().to_string() +
                        " stream");
    stream_.write_timestamp(query_);
    recorded_ = true;
  }
  void synchronize() override { stream_.synchronize(); }
  bool done() const override { return !recorded_ || stream_.completed() >= stream_.flush(); }
  double elapsed_us(const Event& later) const override {
    const auto* end = dynamic_cast<const VulkanTimingEvent*>(&later);
    if (end == nullptr || !recorded_ || !end->recorded_)
      throw DeviceError("vulkan: elapsed_us needs two recorded timing events of one stream");
    stream_.wait_value(stream_.flush());
    return (stream_.timestamp_ns(end->query_) - stream_.timestamp_ns(query_)) / 1000.0;
  }

 private:
  VulkanStream& stream_;
  int query_;
  bool recorded_ = false;
};

// A captured command buffer, submitted again by each replay.
class CapturedCommands final : public CapturedWork {
 public:
  CapturedCommands(VulkanStream& stream, VkCommandBuffer cb) : stream_(stream), cb_(cb) {}
  ~CapturedCommands() override { stream_.free_captured(cb_); }
  void replay() override { stream_.submit_captured(cb_); }

 private:
  VulkanStream& stream_;
  VkCommandBuffer cb_;
};

}  // namespace

VulkanStream::VulkanStream(Context& context) : context_(context) {
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = context_.queue_family();
  check(vkCreateCommandPool(context_.device(), &pci, nullptr, &pool_), "create command pool");
  VkSemaphoreTypeCreateInfo tci{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  tci.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  tci.initialValue = 0;
  VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  sci.pNext = &tci;
  check(vkCreateSemaphore(context_.device(), &sci, nullptr, &timeline_), "create semaphore");
  if (context_.info().timestamp_bits > 0) {
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = kTimestampQueries;
    check(vkCreateQueryPool(context_.device(), &qci, nullptr, &queries_), "create query pool");
    for (int q = kTimestampQueries - 1; q >= 0; --q) free_queries_.push_back(q);
  }
}

VulkanStream::~VulkanStream() {
  vkDeviceWaitIdle(context_.device());
  if (queries_ != VK_NULL_HANDLE) vkDestroyQueryPool(context_.device(), queries_, nullptr);
  vkDestroySemaphore(context_.device(), timeline_, nullptr);
  vkDestroyCommandPool(context_.device(), pool_, nullptr);
}

VkCommandBuffer VulkanStream::begin_new(bool reusable) {
  VkCommandBuffer cb = VK_NULL_HANDLE;
  if (!reusable && !free_.empty()) {
    cb = free_.back();
    free_.pop_back();
  } else {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(context_.device(), &ai, &cb), "allocate command buffer");
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = reusable ? VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT
                      : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(cb, &bi), "begin command buffer");
  full_barrier(cb);  // after all work submitted before, and the host's writes
  return cb;
}

void VulkanStream::barrier(VkCommandBuffer cb) {
  // Between commands of one buffer only shaders and transfers read and write: a barrier over
  // those stages (one with the host's stages costs NVIDIA several microseconds per dispatch).
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cb, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void VulkanStream::full_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask =
      VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                       0, nullptr, 0, nullptr);
}

VkCommandBuffer VulkanStream::current(bool immediate) {
  if (capture_ != VK_NULL_HANDLE && !immediate) return capture_;
  if (open_ == VK_NULL_HANDLE) open_ = begin_new(false);
  return open_;
}

void VulkanStream::dispatch(const Pipeline& pipe, const void* push, uint32_t push_bytes, uint32_t x,
                            uint32_t y, uint32_t z) {
  const Dispatch one{&pipe, push, push_bytes, x, y, z};
  dispatch(std::span<const Dispatch>(&one, 1));
}

void VulkanStream::dispatch(std::span<const Dispatch> work) {
  for (const Dispatch& d : work)
    if (d.push_bytes > kPushBytes) throw DeviceError("vulkan: push constants above 128 bytes");
  std::lock_guard<std::mutex> lock(mutex_);
  VkCommandBuffer cb = current(false);
  for (const Dispatch& d : work) {
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, d.pipe->handle);
    if (d.push_bytes > 0)
      vkCmdPushConstants(cb, pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, d.push_bytes,
                         d.push);
    vkCmdDispatch(cb, d.x, d.y, d.z);
    barrier(cb);
  }
}

void VulkanStream::copy_buffer(VkBuffer src, VkDeviceSize src_offset, VkBuffer dst,
                               VkDeviceSize dst_offset, VkDeviceSize bytes, bool immediate) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  VkCommandBuffer cb = current(immediate);
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cb, src, dst, 1, &region);
  barrier(cb);
}

void VulkanStream::fill_zero(VkBuffer dst, VkDeviceSize offset, VkDeviceSize bytes,
                             bool immediate) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  VkCommandBuffer cb = current(immediate);
  vkCmdFillBuffer(cb, dst, offset, bytes, 0);
  barrier(cb);
}

uint64_t VulkanStream::submit_locked(VkCommandBuffer cb, bool keep) {
  const uint64_t value = submitted_ + 1;
  VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  ti.signalSemaphoreValueCount = 1;
  ti.pSignalSemaphoreValues = &value;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &ti;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &timeline_;
  check(vkQueueSubmit(context_.queue(), 1, &si, VK_NULL_HANDLE), "submit");
  submitted_ = value;
  if (!keep) in_flight_.emplace_back(cb, value);
  return value;
}

void VulkanStream::reclaim_locked() {
  const uint64_t done = completed();
  for (size_t i = 0; i < in_flight_.size();) {
    if (in_flight_[i].second <= done) {
      vkResetCommandBuffer(in_flight_[i].first, 0);
      free_.push_back(in_flight_[i].first);
      in_flight_[i] = in_flight_.back();
      in_flight_.pop_back();
    } else {
      ++i;
    }
  }
}

uint64_t VulkanStream::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  reclaim_locked();
  if (open_ == VK_NULL_HANDLE) return submitted_;
  VkCommandBuffer cb = open_;
  open_ = VK_NULL_HANDLE;
  full_barrier(cb);  // the host may read what it wrote once the timeline says it is done
  check(vkEndCommandBuffer(cb), "end command buffer");
  return submit_locked(cb, false);
}

void VulkanStream::wait_value(uint64_t value) {
  if (value == 0) return;
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &timeline_;
  wi.pValues = &value;
  check(vkWaitSemaphores(context_.device(), &wi, UINT64_MAX), "wait for the queue");
}

uint64_t VulkanStream::completed() const {
  uint64_t value = 0;
  check(vkGetSemaphoreCounterValue(context_.device(), timeline_, &value), "read the timeline");
  return value;
}

void VulkanStream::synchronize() {
  wait_value(flush());
  context_.raise_index_error();
}

void VulkanStream::wait(const Event& /*event*/) {
  // One queue: work submitted later starts after the barrier at the head of its command buffer,
  // so it already follows every event recorded before.
}

std::unique_ptr<Event> VulkanStream::create_event() {
  return std::make_unique<VulkanEvent>(*this);
}

std::unique_ptr<Event> VulkanStream::create_timing_event() {
  const int query = take_query();
  if (query < 0) return nullptr;
  return std::make_unique<VulkanTimingEvent>(*this, query);
}

int VulkanStream::take_query() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_queries_.empty()) return -1;
  const int q = free_queries_.back();
  free_queries_.pop_back();
  return q;
}

void VulkanStream::release_query(int query) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_queries_.push_back(query);
}

void VulkanStream::write_timestamp(int query) {
  std::lock_guard<std::mutex> lock(mutex_);
  VkCommandBuffer cb = current(false);
  vkCmdResetQueryPool(cb, queries_, static_cast<uint32_t>(query), 1);
  // BOTTOM_OF_PIPE: written once every command recorded before it has completed.
  vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                      static_cast<uint32_t>(query));
}

double VulkanStream::timestamp_ns(int query) const {
  uint64_t ticks = 0;
  check(vkGetQueryPoolResults(context_.device(), queries_, static_cast<uint32_t>(query), 1,
                              sizeof(ticks), &ticks, sizeof(ticks),
                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "read a timestamp");
  const uint32_t bits = context_.info().timestamp_bits;
  if (bits < 64) ticks &= (uint64_t{1} << bits) - 1;
  return static_cast<double>(ticks) * context_.info().timestamp_period_ns;
}

void VulkanStream::begin_capture() {
  flush();
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_ != VK_NULL_HANDLE) throw DeviceError("vulkan: a capture is already recording");
  capture_ = begin_new(true);
}

std::unique_ptr<CapturedWork> VulkanStream::end_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_ == VK_NULL_HANDLE) throw DeviceError("vulkan: end_capture without begin_capture");
  VkCommandBuffer cb = capture_;
  capture_ = VK_NULL_HANDLE;
  full_barrier(cb);
  check(vkEndCommandBuffer(cb), "end captured command buffer");
  return std::make_unique<CapturedCommands>(*this, cb);
}

void VulkanStream::submit_captured(VkCommandBuffer cb) {
  flush();  // what was recorded before runs first
  std::lock_guard<std::mutex> lock(mutex_);
  submit_locked(cb, true);
}

void VulkanStream::free_captured(VkCommandBuffer cb) {
  wait_value(flush());  // it may still be running (an index error stays for the next wait)
  std::lock_guard<std::mutex> lock(mutex_);
  vkFreeCommandBuffers(context_.device(), pool_, 1, &cb);
}

void VulkanStream::copy(const Tensor& src, const Tensor& dst) {
  if (src.nbytes() != dst.nbytes())
    throw InvalidArgument("VulkanStream::copy: " + std::to_string(src.nbytes()) + " bytes into " +
                          std::to_string(dst.nbytes()));
  context_.copy(dst.raw_data(), dst.device().type == DeviceType::kCPU, src.raw_data(),
                src.device().type == DeviceType::kCPU, src.nbytes());
}

}  // namespace lumen::vulkan
