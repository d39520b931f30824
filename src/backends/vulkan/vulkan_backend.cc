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

bool VulkanBackend::takes_half_floats(DType half) const {
  return half == DType::kFloat16 && float_storage(half);
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

std::string require_float(const NodeContext& ctx) {
  return require_float(ctx, ctx.num_inputs());
}

bool float_storage(DType dtype) {
  if (dtype == DType::kFloat32) return true;
  const VulkanBackend* b = vulkan_backend();
  return dtype == DType::kFloat16 && b != nullptr && b->context().info().float16;
}

std::string shader_for(const std::string& name, DType dtype) {
  return dtype == DType::kFloat16 ? name + ".f16" : name;
}

std::string require_float(const NodeContext& ctx, int data_inputs) {
  constexpr int64_t kMaxElements = int64_t{1} << 31;
  // Every float tensor of the node has the first one's type: one shader form reads them all.
  DType first = DType::kFloat32;
  bool seen = false;
  auto check_type = [&](DType t, const std::string& what) -> std::string {
    if (!float_storage(t))
      return what + " is " + dtype_name(t) + "; the Vulkan kernel takes float32" +
             (float_storage(DType::kFloat16) ? " or float16" : "");
    if (seen && t != first)
      return what + " is " + dtype_name(t) + ", another is " + dtype_name(first);
    first = t;
    seen = true;
    return "";
  };
  for (int i = 0; i < std::min(data_inputs, ctx.num_inputs()); ++i) {
    if (!ctx.has_input(i)) continue;
    const TensorType& t = ctx.input(i);
    std::string why = check_type(t.dtype, "input " + std::to_string(i));
    if (!why.empty()) return why;
    if (t.shape.rank() > kMaxRank) return "input " + std::to_string(i) + " has rank above 6";
    if (t.shape.is_static() && t.shape.numel() >= kMaxElements)
      return "input " + std::to_string(i) + " has 2^31 elements or more";
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    const TensorType& t = ctx.output(i);
    std::string why = check_type(t.dtype, "output " + std::to_string(i));
    if (!why.empty()) return why;
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
