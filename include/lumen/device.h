// Devices a tensor can live on.
#pragma once

#include <string>

namespace lumen {

enum class DeviceType { kCPU, kCUDA, kVulkan };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  static Device cpu() { return {DeviceType::kCPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::kCUDA, index}; }
  static Device vulkan(int index = 0) { return {DeviceType::kVulkan, index}; }
  bool operator==(const Device& other) const = default;
  // "cpu", "cuda:0" or "vulkan:0"
  std::string to_string() const;
};

}  // namespace lumen
