// The Vulkan device: instance, the choice of physical device, the logical device with the
// features the shaders need, buffers with device addresses, and copies through staging memory.
#include <algorithm>
#include <cstring>

#include "backends/vulkan/vulkan_context.h"
#include "lumen/error.h"

namespace lumen::vulkan {
namespace {

const char* result_name(VkResult r) {
  switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "out of host memory";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "out of device memory";
    case VK_ERROR_DEVICE_LOST:
      return "device lost";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "initialization failed";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "feature not present";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "extension not present";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "incompatible driver";
    case VK_TIMEOUT:
      return "timeout";
    default:
      return "error";
  }
}

// Best first: a discrete GPU, an integrated one, a virtual one, the CPU (lavapipe).
int rank_of(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 3;
    default:
      return 4;
  }
}

const char* type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

bool has_extension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> props(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, props.data());
  return std::any_of(props.begin(), props.end(), [&](const VkExtensionProperties& p) {
    return std::strcmp(p.extensionName, name) == 0;
  });
}

// Whether the device multiplies 16x16x16 float16 matrices into float32 ones in subgroup scope
// through VK_NV_cooperative_matrix, with the feature on.
bool has_coop_f16(VkInstance instance, VkPhysicalDevice device) {
  if (!has_extension(device, "VK_NV_cooperative_matrix")) return false;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &coop;
  vkGetPhysicalDeviceFeatures2(device, &f);
  if (!coop.cooperativeMatrix) return false;
  auto list = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (list == nullptr) return false;
  uint32_t count = 0;
  if (list(device, &count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkCooperativeMatrixPropertiesNV> shapes(
      count, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  if (list(device, &count, shapes.data()) != VK_SUCCESS) return false;
  for (const VkCooperativeMatrixPropertiesNV& c : shapes)
    if (c.MSize == 16 && c.NSize == 16 && c.KSize == 16 &&
        c.AType == VK_COMPONENT_TYPE_FLOAT16_NV && c.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
        c.CType == VK_COMPONENT_TYPE_FLOAT32_NV && c.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
        c.scope == VK_SCOPE_SUBGROUP_NV)
      return true;
  return false;
}

}  // namespace

void check(VkResult result, const std::string& what) {
  if (result == VK_SUCCESS) return;
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY)
    throw OutOfMemory("vulkan: " + what + ": out of device memory");
  throw DeviceError("vulkan: " + what + ": " + result_name(result) + " (VkResult " +
                    std::to_string(static_cast<int>(result)) + ")");
}

std::string DeviceInfo::describe() const {
  return name + " (" + type_name(type) + ", " + std::to_string(device_local_bytes >> 20) +
         " MiB device memory, subgroup " + std::to_string(subgroup_size) +
         (float16 ? ", float16" : "") + (cooperative_matrix ? ", cooperative matrix" : "") + ")";
}

Context* Context::create() {
  auto* ctx = new Context();
  try {
    if (ctx->init()) return ctx;  // never destroyed: tensors may outlive main()
  } catch (const Error&) {
  }
  return nullptr;  // leaked on purpose: a half-made device is not torn down at exit either
}

bool Context::init() {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "lumen";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  if (vkCreateInstance(&ici, nullptr, &instance_) != VK_SUCCESS) return false;

  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(instance_, &count, devices.data());
  int best_rank = 99;
  for (VkPhysicalDevice d : devices) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(d, &p);
    if (p.apiVersion < VK_API_VERSION_1_2) continue;
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f.pNext = &f12;
    vkGetPhysicalDeviceFeatures2(d, &f);
    if (!f12.bufferDeviceAddress || !f12.timelineSemaphore || !f.features.shaderInt64) continue;
    int r = rank_of(p.deviceType);
    if (r < best_rank) {
      best_rank = r;
      physical_ = d;
    }
  }
  if (physical_ == VK_NULL_HANDLE) return false;

  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(physical_, &props);
  info_.name = props.properties.deviceName;
  info_.type = props.properties.deviceType;
  info_.vendor_id = props.properties.vendorID;
  info_.subgroup_size = subgroup.subgroupSize;
  info_.max_shared_bytes = props.properties.limits.maxComputeSharedMemorySize;
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);
  for (uint32_t h = 0; h < memory_.memoryHeapCount; ++h)
    if (memory_.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info_.device_local_bytes =
          std::max<uint64_t>(info_.device_local_bytes, memory_.memoryHeaps[h].size);

  VkPhysicalDeviceVulkan11Features have11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features have12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  have11.pNext = &have12;
  VkPhysicalDeviceFeatures2 have{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  have.pNext = &have11;
  vkGetPhysicalDeviceFeatures2(physical_, &have);
  info_.float16 = have12.shaderFloat16 && have11.storageBuffer16BitAccess;
  info_.cooperative_matrix =
      info_.float16 && info_.subgroup_size == 32 && has_coop_f16(instance_, physical_);

  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &families, nullptr);
  std::vector<VkQueueFamilyProperties> fam(families);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &families, fam.data());
  bool found = false;
  for (uint32_t i = 0; i < families && !found; ++i)
    if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      queue_family_ = i;
      found = true;
    }
  if (!found) return false;
  info_.timestamp_bits = fam[queue_family_].timestampValidBits;
  info_.timestamp_period_ns = props.properties.limits.timestampPeriod;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = queue_family_;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan11Features want11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  want11.storageBuffer16BitAccess = have11.storageBuffer16BitAccess;
  VkPhysicalDeviceVulkan12Features want12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  want12.bufferDeviceAddress = VK_TRUE;
  want12.timelineSemaphore = VK_TRUE;
  want12.shaderFloat16 = have12.shaderFloat16;
  want11.pNext = &want12;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV want_coop{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  want_coop.cooperativeMatrix = VK_TRUE;
  if (info_.cooperative_matrix) want12.pNext = &want_coop;
  VkPhysicalDeviceFeatures2 want{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  want.pNext = &want11;
  want.features.shaderInt64 = VK_TRUE;
  const char* coop_extension = "VK_NV_cooperative_matrix";
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &want;
  if (info_.cooperative_matrix) {
    dci.enabledExtensionCount = 1;
    dci.ppEnabledExtensionNames = &coop_extension;
  }
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  check(vkCreateDevice(physical_, &dci, nullptr, &device_), "create device");
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  // Tensors: device-local memory; on a device whose device-local memory is all host-visible too
  // (the CPU, integrated GPUs) such a type is taken, so copies are plain memcpy.
  const bool unified = info_.type == VK_PHYSICAL_DEVICE_TYPE_CPU ||
                       info_.type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  bool ok = false;
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if (unified) device_type_ = memory_type(~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host, 0, &ok);
  if (!ok) device_type_ = memory_type(~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, &ok);
  if (!ok) return false;
  staging_type_ = memory_type(~0u, host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0, &ok);
  if (!ok) staging_type_ = memory_type(~0u, host, 0, &ok);
  if (!ok) return false;
  stream_ = std::make_unique<VulkanStream>(*this);
  return true;
}

uint32_t Context::memory_type(uint32_t allowed, VkMemoryPropertyFlags want,
                              VkMemoryPropertyFlags avoid, bool* found) const {
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if ((allowed & (1u << i)) && (f & want) == want && (f & avoid) == 0) {
      *found = true;
      return i;
    }
  }
  *found = false;
  return 0;
}

namespace {

Block make_buffer(VkDevice device, const VkPhysicalDeviceMemoryProperties& memory, uint32_t type,
                  size_t bytes) {
  Block b;
  b.bytes = bytes;
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device, &bci, nullptr, &b.buffer),
        "create buffer of " + std::to_string(bytes) + " bytes");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device, b.buffer, &req);
  if ((req.memoryTypeBits & (1u << type)) == 0) {
    vkDestroyBuffer(device, b.buffer, nullptr);
    throw DeviceError("vulkan: the buffer cannot live in the chosen memory type");
  }
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.pNext = &flags;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = type;
  VkResult r = vkAllocateMemory(device, &mai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device, b.buffer, nullptr);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
      throw OutOfMemory("vulkan:0 pool: cannot allocate " + std::to_string(bytes) + " bytes");
    check(r, "allocate memory");
  }
  check(vkBindBufferMemory(device, b.buffer, b.memory, 0), "bind memory");
  VkBufferDeviceAddressInfo ai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  ai.buffer = b.buffer;
  b.address = vkGetBufferDeviceAddress(device, &ai);
  if (memory.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
    check(vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "map memory");
  return b;
}

}  // namespace

Block Context::create_block(size_t bytes) {
  return make_buffer(device_, memory_, device_type_, bytes);
}

Block Context::create_staging(size_t bytes) {
  return make_buffer(device_, memory_, staging_type_, bytes);
}

uint64_t Context::split_workspace() {
  std::lock_guard<std::mutex> lock(workspace_mutex_);
  if (workspace_.buffer == VK_NULL_HANDLE) workspace_ = create_block(kSplitWorkspaceBytes);
  return workspace_.address;
}

namespace {
// The record's layout (shaders/common.glsl's IndexErrors).
struct IndexErrorRecord {
  int32_t claim;  // the failing kernel's id, 0 while none failed
  int32_t pad;
  int64_t value, lo, hi;
};
}  // namespace

uint64_t Context::index_record() {
  std::lock_guard<std::mutex> lock(index_mutex_);
  if (index_record_.buffer == VK_NULL_HANDLE) {
    index_record_ = create_staging(sizeof(IndexErrorRecord));
    std::memset(index_record_.mapped, 0, sizeof(IndexErrorRecord));
  }
  return index_record_.address;
}

int32_t Context::index_check_id(const std::string& where) {
  std::lock_guard<std::mutex> lock(index_mutex_);
  for (size_t i = 0; i < index_names_.size(); ++i)
    if (index_names_[i] == where) return static_cast<int32_t>(i + 1);
  index_names_.push_back(where);
  return static_cast<int32_t>(index_names_.size());
}

void Context::raise_index_error() {
  std::string message;
  {
    std::lock_guard<std::mutex> lock(index_mutex_);
    if (index_record_.mapped == nullptr) return;
    auto* record = static_cast<volatile IndexErrorRecord*>(index_record_.mapped);
    const int32_t id = record->claim;
    if (id == 0) return;
    const std::string where = id > 0 && static_cast<size_t>(id) <= index_names_.size()
                                  ? index_names_[id - 1]
                                  : "a Vulkan index kernel";
    message = where + ": index " + std::to_string(record->value) + " is out of range [" +
              std::to_string(record->lo) + ", " + std::to_string(record->hi) + ")";
    record->claim = 0;  // the queue is idle here: the next run records afresh
  }
  throw InvalidArgument(message);
}

void Context::destroy_block(const Block& block) {
  if (block.mapped) vkUnmapMemory(device_, block.memory);
  vkDestroyBuffer(device_, block.buffer, nullptr);
  vkFreeMemory(device_, block.memory, nullptr);
}

void Context::register_block(const Block& block) {
  std::lock_guard<std::mutex> lock(blocks_mutex_);
  blocks_[block.address] = block;
}

void Context::unregister_block(uint64_t address) {
  std::lock_guard<std::mutex> lock(blocks_mutex_);
  blocks_.erase(address);
}

BufferSpan Context::locate(const void* address) const {
  const auto a = reinterpret_cast<uint64_t>(address);
  std::lock_guard<std::mutex> lock(blocks_mutex_);
  auto it = blocks_.upper_bound(a);
  if (it != blocks_.begin()) {
    --it;
    if (a < it->first + it->second.bytes) return {&it->second, a - it->first};
  }
  throw DeviceError("vulkan: no device memory at address " + std::to_string(a));
}

void Context::copy(void* dst, bool dst_host, const void* src, bool src_host, size_t bytes) {
  if (bytes == 0) return;
  VulkanStream& s = stream();
  if (dst_host && src_host) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (!dst_host && !src_host) {
    BufferSpan d = locate(dst), r = locate(src);
    s.copy_buffer(r.block->buffer, r.offset, d.block->buffer, d.offset, bytes, true);
    s.synchronize();
    return;
  }
  // One side is the host: wait for the queued work, then memcpy where the device memory is
  // mapped, else go through the staging buffer in pieces.
  s.synchronize();
  BufferSpan dev = locate(dst_host ? src : dst);
  if (dev.block->mapped != nullptr) {
    char* mapped = static_cast<char*>(dev.block->mapped) + dev.offset;
    if (dst_host)
      std::memcpy(dst, mapped, bytes);
    else
      std::memcpy(mapped, src, bytes);
    return;
  }
  std::lock_guard<std::mutex> lock(staging_mutex_);
  constexpr size_t kStagingBytes = size_t{64} << 20;
  const size_t want = std::min(bytes, kStagingBytes);
  if (staging_.bytes < want) {
    if (staging_.buffer != VK_NULL_HANDLE) destroy_block(staging_);
    staging_ = {};
    staging_ = create_staging(std::max<size_t>(want, size_t{1} << 20));
  }
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, staging_.bytes);
    if (dst_host) {
      s.copy_buffer(dev.block->buffer, dev.offset + done, staging_.buffer, 0, n, true);
      s.synchronize();
      std::memcpy(static_cast<char*>(dst) + done, staging_.mapped, n);
    } else {
      std::memcpy(staging_.mapped, static_cast<const char*>(src) + done, n);
      s.copy_buffer(staging_.buffer, 0, dev.block->buffer, dev.offset + done, n, true);
      s.synchronize();
    }
    done += n;
  }
}

void Context::zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  BufferSpan d = locate(dst);
  VulkanStream& s = stream();
  if (d.offset % 4 == 0 && bytes % 4 == 0) {
    s.fill_zero(d.block->buffer, d.offset, bytes, true);
    s.synchronize();
    return;
  }
  std::vector<char> zeros(bytes, 0);
  copy(dst, false, zeros.data(), true, bytes);
}

}  // namespace lumen::vulkan
