// The Vulkan backend: the probe, the kernel registry, the plugin's entry point.
#include <algorithm>
#include <array>

#include "backends/backend_registry.h"
#include "backends/vulkan/vulkan_context.h"
#include "graph/op_kind.h"
#include "lumen/error.h"

namespace lumen::vulkan {
namespace {

constexpr uint32_t kNvidiaVendor = 0x10DE;

std::array<KernelEntry, kNumOpKinds>& kernel_table() {
  static std::array<KernelEntry, kNumOpKinds> table{};
  return table;
}

Backend* probe_vulkan() {
  return vulkan_backend();
}

}  // namespace

VulkanBackend* vulkan_backend() {
  // No loader, driver or capable device: the backend is simply not available (no error).
  static VulkanBackend* backend = []() -> VulkanBackend* {
    Context* ctx = Context::create();
    return ctx ? new VulkanBackend(*ctx) : nullptr;  // never destroyed
  }();
  return backend;
}

VulkanBackend& require_vulkan_backend() {
  VulkanBackend* b = vulkan_backend();
  if (b == nullptr)
    throw DeviceError("no Vulkan device on this machine (vulkan:0 is not available)");
  return *b;
}

VulkanStream& stream_of(const KernelContext& ctx) {
  auto* s = dynamic_cast<VulkanStream*>(ctx.stream);
  return s ? *s : require_vulkan_backend().context().stream();
}

bool VulkanBackend::supports(const Graph& graph, const Node& node, std::string* reason) const {
  const KernelEntry* entry = find_kernel(node.op);
  std::string why;
  if (entry == nullptr) {
    why = std::string("no Vulkan kernel for ") + op_name(node.op);
  } else if (entry->check != nullptr) {
    why = entry->check(NodeContext(graph, node));
  }
  if (reason) *reason = why;
  return why.empty();
}

std::unique_ptr<Kernel> VulkanBackend::make_kernel(const Graph& graph, const Node& node,
                                                   Precision precision) const {
  NodeContext ctx(graph, node, precision);
  const KernelEntry* entry = find_kernel(node.op);
  if (entry == nullptr) ctx.fail_unsupported("no Vulkan kernel");
  if (entry->check != nullptr) {
    std::string why = entry->check(ctx);
    if (!why.empty()) ctx.fail_unsupported("Vulkan: " + why);
  }
  return entry->make(ctx);
}

Allocator& VulkanBackend::allocator() const {
  return device_allocator();
}

bool VulkanBackend::in_auto() const {
  const DeviceInfo& info = context_.info();
  if (info.type == VK_PHYSICAL_DEVICE_TYPE_CPU) return false;  // lavapipe: the CPU backend wins
  if (info.vendor_id == kNvidiaVendor && find_backend("cuda") != nullptr) return false;
  return true;
}

bool register_kernel(OpKind op, KernelEntry entry) {
  kernel_table()[static_cast<size_t>(op)] = entry;
  return true;
}

const KernelEntry* find_kernel(OpKind op) {
  const KernelEntry& e = kernel_table()[static_cast<size_t>(op)];
  return e.make ? &e : nullptr;
}

std::string require_float32(const NodeContext& ctx) {
  return require_float32(ctx, ctx.num_inputs());
}

std::string require_float32(const NodeContext& ctx, int data_inputs) {
  constexpr int64_t kMaxElements = int64_t{1} << 31;
  for (int i = 0; i < std::min(data_inputs, ctx.num_inputs()); ++i) {
    if (!ctx.has_input(i)) continue;
    const TensorType& t = ctx.input(i);
    if (t.dtype != DType::kFloat32)
      return "input " + std::to_string(i) + " is " + dtype_name(t.dtype) +
             "; the Vulkan kernel takes float32";
    if (t.shape.rank() > kMaxRank) return "input " + std::to_string(i) + " has rank above 6";
    if (t.shape.is_static() && t.shape.numel() >= kMaxElements)
      return "input " + std::to_string(i) + " has 2^31 elements or more";
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const TensorType& t = ctx.output(i);
    if (t.dtype != DType::kFloat32) return "output is not float32";
    if (t.shape.rank() > kMaxRank) return "output has rank above 6";
    if (t.shape.is_static() && t.shape.numel() >= kMaxElements)
      return "output has 2^31 elements or more";
  }
  return "";
}

}  // namespace lumen::vulkan

// The plugin's entry point (core/plugins.h): registers the backend and the device's memory ops
// once, when this build's version is the loading core's.
extern "C" __attribute__((visibility("default"))) const char* lumen_plugin_register(
    const char* core_version) {
  static const std::string kMismatch = std::string("built for Lumen ") + LUMEN_VERSION;
  if (core_version == nullptr || std::string(core_version) != LUMEN_VERSION)
    return kMismatch.c_str();
  static const bool kRegistered = (lumen::register_backend(&lumen::vulkan::probe_vulkan),
                                   lumen::vulkan::register_vulkan_device_ops(), true);
  (void)kRegistered;
  return nullptr;
}
