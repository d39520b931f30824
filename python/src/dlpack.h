// The DLPack C structures (https://dmlc.github.io/dlpack, version 0.8 ABI, the one PyTorch 1.13
// speaks), declared here from the public specification. Only the fields Lumen reads or writes.
#pragma once

#include <cstdint>

namespace lumen::python {

// DLDeviceType values Lumen knows.
inline constexpr int32_t kDLCPU = 1;
inline constexpr int32_t kDLCUDA = 2;

// DLDataTypeCode values.
inline constexpr uint8_t kDLInt = 0;
inline constexpr uint8_t kDLUInt = 1;
inline constexpr uint8_t kDLFloat = 2;
inline constexpr uint8_t kDLBfloat = 4;
inline constexpr uint8_t kDLBool = 6;

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// The names a DLPack capsule carries before and after a consumer takes it.
inline constexpr const char* kDLTensorCapsule = "dltensor";
inline constexpr const char* kUsedDLTensorCapsule = "used_dltensor";

}  // namespace lumen::python
