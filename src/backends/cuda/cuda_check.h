// Return-code checks for the CUDA runtime, cuBLASLt and cuDNN: a failure becomes a DeviceError
// naming what was being done.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "lumen/error.h"

namespace lumen::cuda {

inline void check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) throw DeviceError("CUDA: " + what + ": " + cudaGetErrorString(status));
}

inline void check(cublasStatus_t status, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw DeviceError("cuBLASLt: " + what + ": status " + std::to_string(static_cast<int>(status)));
}

inline void check(cudnnStatus_t status, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw DeviceError("cuDNN: " + what + ": " + cudnnGetErrorString(status));
}

// After a kernel launch: a bad configuration shows up here, not at the launch.
inline void check_launch(const std::string& what) {
  check(cudaGetLastError(), what);
}

}  // namespace lumen::cuda
