#include "core/device_ops.h"

#include <array>
#include <cstring>
#include <string>

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

void copy_rows_on(Device device, const RowCopy* copies, size_t count, bool wait) {
  if (device.type != DeviceType::kCPU) {
    const DeviceOps& ops = device_ops(device);
    if (ops.copy_rows == nullptr)
      throw DeviceError(device.to_string() + " cannot copy strided rows");
    ops.copy_rows(copies, count, device, wait);
    return;
  }
  for (size_t k = 0; k < count; ++k) {
    const RowCopy& c = copies[k];
    for (size_t r = 0; r < c.rows; ++r) {
      auto* to = static_cast<char*>(c.dst) + r * c.dst_pitch;
      if (c.src == nullptr)
        std::memset(to, 0, c.width);
      else
        std::memcpy(to, static_cast<const char*>(c.src) + r * c.src_pitch, c.width);
    }
  }
}

}  // namespace lumen
