// The CUDA backend's record of out-of-range indices met by its index kernels at run time (indices
// known only at run time: a decoder's token and position ids, a loss's targets). A kernel cannot
// raise, so it records the first failure (index_check.cuh) and the host raises it where it waits
// for the stream anyway: CudaStream::synchronize, the copies of outputs to the host (both through
// synchronize), Backend::move's copies to the host, and the end of Executable::execute for host
// outputs. With outputs left on the device, the error surfaces at the next such wait.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/index_check.h"

namespace lumen::cuda {

class IndexErrors {
 public:
  // Allocates the claim word (device memory, zero) and the record (mapped host memory) once.
  IndexErrors();
  ~IndexErrors();
  IndexErrors(const IndexErrors&) = delete;
  IndexErrors& operator=(const IndexErrors&) = delete;

  // The check that the kernel of node `where` ("node 'emb' (Gather)") passes to its launches; its
  // id maps back to `where` (the same id for the same text).
  IndexCheck check_for(const std::string& where);

  // Throws InvalidArgument "node 'emb' (Gather): index 50300 is out of range [-50257, 50257)" for
  // the first failure recorded since the last raise, after clearing the record and enqueueing the
  // claim word's reset on `stream` (so the next run records afresh). Call it only once the host
  // has waited for the kernels in question (the record is read without a copy); a failure of work
  // still queued is raised by a later call. One record serves every thread using the backend: a
  // failure is raised in whichever thread waits first.
  void raise_pending(cudaStream_t stream);

 private:
  std::mutex mutex_;
  int* claim_ = nullptr;                       // device memory
  IndexErrorRecord* record_ = nullptr;         // mapped host memory, as the host addresses it
  IndexErrorRecord* device_record_ = nullptr;  // the same, as kernels address it
  std::vector<std::string> names_;             // id - 1 -> where
  std::map<std::string, int32_t> ids_;
};

}  // namespace lumen::cuda
