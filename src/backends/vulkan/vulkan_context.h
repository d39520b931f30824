// The Vulkan backend's insides shared by its files: the device (instance, physical device, queue),
// device memory addressed by 64-bit device addresses, the stream that records and submits command
// buffers, compute pipelines, and the kernel registry.
//
// Tensors on a Vulkan device hold the buffer device address (VK_KHR_buffer_device_address) of
// their first byte as their data pointer, so views and offsets are pointer arithmetic as on CUDA,
// and shaders reach every tensor through push-constant addresses (GL_EXT_buffer_reference) with
// no descriptor sets.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/recording.h"
#include "graph/node_context.h"

namespace lumen::vulkan {

// Throws DeviceError naming `what` and the Vulkan result unless `result` is VK_SUCCESS.
void check(VkResult result, const std::string& what);

// What the chosen physical device offers, for device_name(), `lumen bench` and kernel choices.
struct DeviceInfo {
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t vendor_id = 0;
  uint32_t subgroup_size = 0;
  uint64_t device_local_bytes = 0;  // the largest DEVICE_LOCAL heap
  bool float16 = false;             // shaderFloat16 and 16-bit storage
  // VK_NV_cooperative_matrix with 16x16x16 float16 products accumulated in float32 in subgroups of
  // 32 (shaders/gemm_coop.comp); the KHR form needs newer headers and glslang than Debian 12's.
  bool cooperative_matrix = false;
  uint32_t max_shared_bytes = 0;
  uint32_t timestamp_bits = 0;     // valid bits of the queue's timestamps (0: none)
  double timestamp_period_ns = 0;  // nanoseconds per timestamp tick
  // One line: name, type, memory, subgroup size and features.
  std::string describe() const;
};

// One block of device memory: a buffer with its own VkDeviceMemory, its device address, and its
// host mapping where the memory is host-visible (lavapipe, integrated GPUs), else null.
struct Block {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t address = 0;
  size_t bytes = 0;
  void* mapped = nullptr;
};

// A location in device memory: the buffer that holds `address` and the offset of it there.
struct BufferSpan {
  const Block* block = nullptr;
  VkDeviceSize offset = 0;
};

class VulkanStream;

// The device: created once per process by the backend's probe, never destroyed (tensors may
// outlive main()).
class Context {
 public:
  // Null where the loader, a driver or a device with the features the backend needs is missing.
  static Context* create();

  const DeviceInfo& info() const { return info_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  VulkanStream& stream() { return *stream_; }

  // A new buffer of `bytes` (rounded up by the caller) usable as storage and copy source and
  // target, with its device address; device-local memory (host-visible too where the device has
  // such memory for all of it). Throws OutOfMemory.
  Block create_block(size_t bytes);
  // A host-visible, host-coherent buffer for staging copies.
  Block create_staging(size_t bytes);
  void destroy_block(const Block& block);

  // Tracks which block holds which addresses (the pool registers every block it makes).
  void register_block(const Block& block);
  void unregister_block(uint64_t address);
  // The block and offset of a device address; DeviceError when no block holds it.
  BufferSpan locate(const void* address) const;

  // Copies between device memory and the host (either side may be the host) and returns when the
  // copy is complete; work queued before on the stream finishes first.
  void copy(void* dst, bool dst_host, const void* src, bool src_host, size_t bytes);
  // Sets device memory to zero, complete on return.
  void zero(void* dst, size_t bytes);

  // The scratch buffer of split-K products (kSplitWorkspaceBytes, made on first use, never
  // freed, so recorded command buffers may name it): its device address. Only work recorded as
  // one VulkanStream::dispatch sequence may rely on its contents.
  uint64_t split_workspace();
  static constexpr size_t kSplitWorkspaceBytes = size_t{16} << 20;

  // Out-of-range indices met by index shaders at run time (indices known only then). A shader
  // cannot raise, so the first failure claims the record (host-visible memory, the device
  // address of an IndexErrorRecord, shaders/common.glsl's layout) and the host raises it where it
  // waits for the queue anyway: VulkanStream::synchronize (so every copy to the host) and events.
  uint64_t index_record();
  // The id a shader writes for the kernel of node `where` ("node 'emb' (Gather)").
  int32_t index_check_id(const std::string& where);
  // Throws InvalidArgument "node 'emb' (Gather): index 50300 is out of range [-50257, 50257)"
  // for a recorded failure, clearing the record first; nothing when there is none.
  void raise_index_error();

 private:
  Context() = default;
  bool init();
  uint32_t memory_type(uint32_t allowed, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid,
                       bool* found) const;

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceMemoryProperties memory_{};
  uint32_t device_type_ = 0;   // the memory type of tensors
  uint32_t staging_type_ = 0;  // host-visible, coherent
  DeviceInfo info_;
  std::unique_ptr<VulkanStream> stream_;

  mutable std::mutex blocks_mutex_;
  std::map<uint64_t, Block> blocks_;  // by address

  std::mutex staging_mutex_;
  Block staging_{};

  std::mutex workspace_mutex_;
  Block workspace_{};

  std::mutex index_mutex_;
  Block index_record_{};
  std::vector<std::string> index_names_;  // id - 1 -> where
};

// A compute pipeline: one shader with its specialization constants (int32, constant_id 0, 1, ...).
// Every pipeline of the backend shares one layout: 128 bytes of push constants, no descriptors.
struct Pipeline {
  VkPipeline handle = VK_NULL_HANDLE;
};

// The pipeline of shader `name` (an embedded SPIR-V module, shaders/NAME.comp) with `constants`,
// built on first use and cached for the process.
const Pipeline& pipeline(const std::string& name, std::span<const int32_t> constants = {});
VkPipelineLayout pipeline_layout();
// The maximum push-constant bytes every shader may use.
inline constexpr uint32_t kPushBytes = 128;

// The backend's queue: work is recorded into a command buffer and submitted when the host needs a
// result (synchronize, an event, a copy involving the host). Every command is followed by a memory
// barrier, so commands run in the order they were recorded, as on a CUDA stream.
// Capture (RecordingStream) records into a command buffer that is kept and resubmitted by each
// replay: the Vulkan form of a CUDA graph.
class VulkanStream final : public Stream, public RecordingStream {
 public:
  explicit VulkanStream(Context& context);
  ~VulkanStream() override;
  Device device() const override { return Device::vulkan(0); }
  void synchronize() override;
  void wait(const Event& event) override;
  std::unique_ptr<Event> create_event() override;
  // A timestamp query of the stream's pool (null where the queue has no timestamps or all
  // kTimestampQueries are taken).
  std::unique_ptr<Event> create_timing_event() override;
  void begin_capture() override;
  std::unique_ptr<CapturedWork> end_capture() override;
  void copy(const Tensor& src, const Tensor& dst) override;

  // Records one dispatch of `pipe` with `push` (at most kPushBytes) over groups x*y*z.
  void dispatch(const Pipeline& pipe, const void* push, uint32_t push_bytes, uint32_t x,
                uint32_t y = 1, uint32_t z = 1);
  // One dispatch of a sequence: the pipeline, its push constants and its groups.
  struct Dispatch {
    const Pipeline* pipe = nullptr;
    const void* push = nullptr;
    uint32_t push_bytes = 0;
    uint32_t x = 1, y = 1, z = 1;
  };
  // Records the dispatches in order, with no other work between them (a split-K product and its
  // reduction share the split workspace).
  void dispatch(std::span<const Dispatch> work);
  // Records a copy between device buffers. `immediate`: into the buffer submitted by the next
  // flush even while a capture records (the copies of Context::copy, which wait for it).
  void copy_buffer(VkBuffer src, VkDeviceSize src_offset, VkBuffer dst, VkDeviceSize dst_offset,
                   VkDeviceSize bytes, bool immediate = false);
  // Records a fill with zeros (offset and bytes multiples of 4).
  void fill_zero(VkBuffer dst, VkDeviceSize offset, VkDeviceSize bytes, bool immediate = false);
  // Submits what was recorded (not the capture) and returns the value the queue's timeline
  // reaches when it is done.
  uint64_t flush();
  // Blocks the host until the timeline reaches `value` (raises no index error).
  void wait_value(uint64_t value);
  uint64_t completed() const;
  // Submits a captured command buffer once more.
  void submit_captured(VkCommandBuffer cb);
  void free_captured(VkCommandBuffer cb);

  // Timestamp queries: a free one's index (-1 when none is), its release, a command that resets
  // it and writes the time the work recorded before it is done, and the time written there in
  // nanoseconds (after the write was submitted and has run).
  int take_query();
  void release_query(int query);
  void write_timestamp(int query);
  double timestamp_ns(int query) const;
  static constexpr int kTimestampQueries = 4096;

 private:
  // The buffer commands go to (under mutex_): the capture's while one records, unless immediate.
  VkCommandBuffer current(bool immediate);
  VkCommandBuffer begin_new(bool reusable);
  // Orders the commands recorded before and after it: shaders and transfers (between commands),
  // or every stage with the host's reads and writes (at the ends of a command buffer).
  void barrier(VkCommandBuffer cb);
  void full_barrier(VkCommandBuffer cb);
  uint64_t submit_locked(VkCommandBuffer cb, bool keep);
  void reclaim_locked();

  Context& context_;
  mutable std::mutex mutex_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  uint64_t submitted_ = 0;
  VkCommandBuffer open_ = VK_NULL_HANDLE;     // recording, not yet submitted
  VkCommandBuffer capture_ = VK_NULL_HANDLE;  // recording for a capture
  std::vector<std::pair<VkCommandBuffer, uint64_t>> in_flight_;
  std::vector<VkCommandBuffer> free_;
  VkQueryPool queries_ = VK_NULL_HANDLE;  // kTimestampQueries timestamps, where the queue has them
  std::vector<int> free_queries_;
};

class VulkanBackend final : public Backend {
 public:
  explicit VulkanBackend(Context& context) : context_(context) {}
  std::string name() const override { return "vulkan"; }
  Device device() const override { return Device::vulkan(0); }
  std::string device_name() const override { return context_.info().name + " (Vulkan)"; }
  bool supports(const Graph& graph, const Node& node, std::string* reason) const override;
  std::unique_ptr<Kernel> make_kernel(const Graph& graph, const Node& node,
                                      Precision precision) const override;
  Allocator& allocator() const override;
  Stream& default_stream() override { return context_.stream(); }
  // Float16 storage where the device has it (every kernel has a float16 form); no bfloat16.
  bool takes_half_floats(DType half) const override;
  bool in_auto() const override;
  Context& context() const { return context_; }

 private:
  Context& context_;
};

// The backend, or nullptr where this machine has no usable Vulkan device.
VulkanBackend* vulkan_backend();
// The backend, or DeviceError.
VulkanBackend& require_vulkan_backend();
// The stream a kernel records on.
VulkanStream& stream_of(const KernelContext& ctx);

// The caching pool of device memory (vulkan_memory.cc) and core's DeviceOps for kVulkan.
Allocator& device_allocator();
void register_vulkan_device_ops();

// Builds a node's kernel; throws UnsupportedOp (ctx.fail_unsupported) for variants it cannot run.
using KernelFactory = std::unique_ptr<Kernel> (*)(const NodeContext& ctx);
// Returns "" when the kernel can run the node, else the reason it cannot.
using KernelCheck = std::string (*)(const NodeContext& ctx);
struct KernelEntry {
  KernelFactory make = nullptr;
  KernelCheck check = nullptr;
};
bool register_kernel(OpKind op, KernelEntry entry);
const KernelEntry* find_kernel(OpKind op);

// Registers the Vulkan kernel of op `Name` (from the bottom of the kernel's file).
#define LUMEN_REGISTER_VULKAN_KERNEL(Name, ...)                                               \
  static const bool lumen_vulkan_kernel_registered_##Name = ::lumen::vulkan::register_kernel( \
      ::lumen::OpKind::k##Name, ::lumen::vulkan::KernelEntry{__VA_ARGS__})

// The usual check: every present input and every output of one float type that float_storage()
// takes, with at most kMaxRank dims and fewer than 2^31 elements (the shaders index with 32 bits).
std::string require_float(const NodeContext& ctx);
// The same for the first `data_inputs` inputs only (the rest: integer parameters such as axes).
std::string require_float(const NodeContext& ctx, int data_inputs);
// Whether the shaders take float tensors of `dtype`: float32 always, float16 where the device
// stores 16-bit floats (DeviceInfo::float16; a Precision::kFloat16 compile makes such tensors).
bool float_storage(DType dtype);
// The shader `name` built for float tensors of `dtype`: NAME for float32, NAME.f16 (float16
// storage, float32 math; cmake/vulkan_shaders.cmake) for float16.
std::string shader_for(const std::string& name, DType dtype);
inline constexpr int kMaxRank = 6;

// The device address of a tensor's first element, for push constants.
inline uint64_t address(const Tensor& t) {
  return reinterpret_cast<uint64_t>(t.raw_data());
}

// A kernel that runs a function of the context: the usual form of this backend's kernels.
template <typename Fn>
class FnKernel final : public Kernel {
 public:
  FnKernel(Fn fn, bool views = false) : fn_(std::move(fn)), views_(views) {}
  void run(KernelContext& ctx) const override { fn_(ctx); }
  bool makes_outputs() const override { return views_; }
  bool runs_any_shape() const override { return !views_; }

 private:
  Fn fn_;
  bool views_;
};
template <typename Fn>
std::unique_ptr<Kernel> make_fn_kernel(Fn fn, bool views = false) {
  return std::make_unique<FnKernel<Fn>>(std::move(fn), views);
}

// Groups of `size` threads to cover `n` items with a grid-stride loop (at most 65535 groups).
inline uint32_t groups_for(int64_t n, uint32_t size) {
  int64_t g = (n + size - 1) / size;
  return static_cast<uint32_t>(g < 1 ? 1 : (g > 65535 ? 65535 : g));
}

}  // namespace lumen::vulkan
