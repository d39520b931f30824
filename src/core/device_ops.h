// DeviceOps: how core code (Tensor::empty, Tensor::to, clone) reaches memory on a device that a
// backend provides. A backend registers its ops at static initialisation; core never includes a
// backend's header.
#pragma once

#include <cstddef>

#include "lumen/allocator.h"
#include "lumen/device.h"

namespace lumen {

// One strided copy of DeviceOps::copy_rows: `rows` rows of `width` bytes, row r read from
// src + r * src_pitch and written to dst + r * dst_pitch; a null src writes zeros instead.
struct RowCopy {
  void* dst = nullptr;
  size_t dst_pitch = 0;
  const void* src = nullptr;
  size_t src_pitch = 0;
  size_t width = 0;
  size_t rows = 0;
};

struct DeviceOps {
  // The device's caching pool; it throws DeviceError when the device is absent.
  Allocator& (*allocator)() = nullptr;
  // Copies `bytes` between any two of this device and the host (either side may be the host) and
  // returns when the copy is complete.
  void (*copy)(void* dst, Device dst_device, const void* src, Device src_device,
               size_t bytes) = nullptr;
  // Sets `bytes` bytes of device memory to zero and returns when done.
  void (*zero)(void* dst, Device device, size_t bytes) = nullptr;
  // Runs `count` strided copies within this device's memory, in order, and returns when all are
  // complete (one wait for the lot). Null where the device does not offer it.
  void (*copy_rows)(const RowCopy* copies, size_t count, Device device) = nullptr;
  // Per row r < rows of float32 values data[r * stride + j], j < cols, on this device: the index
  // of its largest value (the first of equals, as std::max_element) into out[r] on the host. False
  // where a row holds a NaN (out is then unspecified; the caller decides on the host). Null where
  // the device does not offer it.
  bool (*argmax_rows)(const float* data, int64_t rows, int64_t cols, int64_t stride, Device device,
                      int64_t* out) = nullptr;
};

// Installs the ops of a device type (once, from a backend's static initialiser).
bool register_device_ops(DeviceType type, DeviceOps ops);
// The ops of a device type; throws DeviceError naming the device when no backend in this build
// provides it.
const DeviceOps& device_ops(Device device);

}  // namespace lumen
