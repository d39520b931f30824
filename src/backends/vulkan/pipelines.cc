// Compute pipelines: the embedded SPIR-V modules (shaders/*.comp, compiled at build time) and a
// cache of pipelines per shader and specialization constants, all over one pipeline layout.
#include <map>

#include "backends/vulkan/shader_table.h"
#include "backends/vulkan/vulkan_context.h"
#include "lumen/error.h"

namespace lumen::vulkan {
namespace {

struct Cache {
  std::mutex mutex;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  std::map<std::string, VkShaderModule> modules;
  std::map<std::pair<std::string, std::vector<int32_t>>, Pipeline> pipelines;
};

Cache& cache() {
  static auto* c = new Cache();  // never destroyed, like the device
  return *c;
}

VkPipelineLayout layout_locked(Cache& c, VkDevice device) {
  if (c.layout != VK_NULL_HANDLE) return c.layout;
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  VkPipelineLayoutCreateInfo lci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  lci.pushConstantRangeCount = 1;
  lci.pPushConstantRanges = &range;
  check(vkCreatePipelineLayout(device, &lci, nullptr, &c.layout), "create pipeline layout");
  return c.layout;
}

}  // namespace

VkPipelineLayout pipeline_layout() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return layout_locked(c, require_vulkan_backend().context().device());
}

const Pipeline& pipeline(const std::string& name, std::span<const int32_t> constants) {
  Cache& c = cache();
  VkDevice device = require_vulkan_backend().context().device();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto key = std::make_pair(name, std::vector<int32_t>(constants.begin(), constants.end()));
  auto found = c.pipelines.find(key);
  if (found != c.pipelines.end()) return found->second;

  VkShaderModule& module = c.modules[name];
  if (module == VK_NULL_HANDLE) {
    const ShaderCode* code = find_shader(name);
    if (code == nullptr) throw DeviceError("vulkan: no shader named '" + name + "' in this build");
    VkShaderModuleCreateInfo mci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mci.codeSize = code->bytes;
    mci.pCode = code->words;
    check(vkCreateShaderModule(device, &mci, nullptr, &module), "create shader module " + name);
  }
  std::vector<VkSpecializationMapEntry> entries(constants.size());
  for (size_t i = 0; i < constants.size(); ++i)
    entries[i] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i * sizeof(int32_t)),
                  sizeof(int32_t)};
  VkSpecializationInfo spec{};
  spec.mapEntryCount = static_cast<uint32_t>(entries.size());
  spec.pMapEntries = entries.data();
  spec.dataSize = key.second.size() * sizeof(int32_t);
  spec.pData = key.second.data();
  VkComputePipelineCreateInfo pci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  pci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pci.stage.module = module;
  pci.stage.pName = "main";
  pci.stage.pSpecializationInfo = constants.empty() ? nullptr : &spec;
  pci.layout = layout_locked(c, device);
  Pipeline p;
  check(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &pci, nullptr, &p.handle),
        "create pipeline " + name);
  return c.pipelines.emplace(std::move(key), p).first->second;
}

}  // namespace lumen::vulkan
