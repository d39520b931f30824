// DeviceOps: how core code (Tensor::empty, Tensor::to, clone) reaches memory on a device that a
// backend provides. A backend registers its ops at static initialisation; core never includes a
// backend's header.
#pragma once

#include <cstddef>
#include <cstdint>

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
  // Runs `count` strided copies within this device's memory, in order. With `wait` it returns
  // when all are complete (one wait for the lot); without, once they are enqueued ahead of any
  // later op of this table on the device (a failure is then raised by the next op that waits).
  // Null where the device does not offer it.
  void (*copy_rows)(const RowCopy* copies, size_t count, Device device, bool wait) = nullptr;
  // Per row r < rows of float32 values data[r * stride + j], j < cols, on this device: the index
  // of its largest value (the first of equals, as std::max_element) into out[r] on the host, after
  // the device's earlier work. False where a row holds a NaN (out is then unspecified; the caller
  // decides on the host). Null where the device does not offer it.
  bool (*argmax_rows)(const float* data, int64_t rows, int64_t cols, int64_t stride, Device device,
                      int64_t* out) = nullptr;
  // The greedy choice kept on the device, enqueued without a wait: per row r < rows of float32
  // values data[r * stride + j], j < cols, the index std::max_element gives (the first of equals;
  // 0 where the row starts with a NaN, other NaNs passed over) into ids[r] (device memory, int64,
  // or int32 where `ids32`) and chosen[r] (device memory, int64). Null where not offered.
  void (*argmax_rows_into)(const float* data, int64_t rows, int64_t cols, int64_t stride,
                           Device device, void* ids, bool ids32, int64_t* chosen) = nullptr;
  // A mark of the work enqueued on the device so far, for copy_to_host_after. Null where not
  // offered.
  uint64_t (*mark)(Device device) = nullptr;
  // Copies `bytes` of device memory at src to the host at dst once the device's work up to `mark`
  // is complete, without waiting for work enqueued after the mark; returns when the copy is done,
  // raising a failure of the work up to the mark (an index out of range). Null where not offered.
  void (*copy_to_host_after)(void* dst, const void* src, size_t bytes, Device device,
                             uint64_t mark) = nullptr;
};

// Installs the ops of a device type (once, from a backend's static initialiser).
bool register_device_ops(DeviceType type, DeviceOps ops);
// The ops of a device type; throws DeviceError naming the device when no backend in this build
// provides it.
const DeviceOps& device_ops(Device device);
// Runs strided copies whose sides both live on `device`: host loops on the CPU, else the device's
// copy_rows (complete on return with `wait`, else only enqueued). Throws DeviceError where the
// device has no copy_rows.
void copy_rows_on(Device device, const RowCopy* copies, size_t count, bool wait);

}  // namespace lumen
