#include "core/device_ops.h"

#include <array>

#include "lumen/error.h"

namespace lumen {
namespace {

std::array<DeviceOps, 2>& table() {
  static std::array<DeviceOps, 2> ops{};
  return ops;
}

}  // namespace

bool register_device_ops(DeviceType type, DeviceOps ops) {
  table()[static_cast<size_t>(type)] = ops;
  return true;
}

const DeviceOps& device_ops(Device device) {
  const DeviceOps& ops = table()[static_cast<size_t>(device.type)];
  if (ops.allocator == nullptr)
    throw DeviceError("no backend for device " + device.to_string() + " in this build");
  return ops;
}

}  // namespace lumen
