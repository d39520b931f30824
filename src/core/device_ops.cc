#include "core/device_ops.h"

#include <array>

#include "core/plugins.h"
#include "lumen/error.h"
#include "lumen/plugin.h"

namespace lumen {
namespace {

std::array<DeviceOps, 3>& table() {  // one per DeviceType
  static std::array<DeviceOps, 3> ops{};
  return ops;
}

}  // namespace

bool register_device_ops(DeviceType type, DeviceOps ops) {
  table()[static_cast<size_t>(type)] = ops;
  return true;
}

const DeviceOps& device_ops(Device device) {
  const DeviceOps& ops = table()[static_cast<size_t>(device.type)];
  if (ops.allocator == nullptr && device.type != DeviceType::kCPU) load_default_plugins();
  if (ops.allocator == nullptr) {
    std::string plugins;
    for (const std::string& line : backend_plugins()) plugins += "; " + line;
    throw DeviceError("no backend for device " + device.to_string() +
                      " (its plugin is not next to liblumen or did not load" + plugins + ")");
  }
  return ops;
}

}  // namespace lumen
