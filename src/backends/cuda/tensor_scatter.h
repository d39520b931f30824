// Launcher of the CUDA kernel of TensorScatter (tensor_scatter.cu): a KV cache's update rows at
// each batch's write position. Plain C++ types, so the kernel class (tensor_scatter.cc) needs no
// CUDA C++. Any element size of 1, 2, 4 or 8 bytes: the copies move bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/index_check.h"

namespace lumen::cuda {

// TensorScatter with the cache seen as [prefix, max_seq, inner] and the update as
// [prefix, seq, inner]: prefix row p (of batch p / (prefix / batch)) gets its update rows at
// write[batch] (int64, null: 0), wrapping past max_seq when circular. In linear mode a write
// index outside [0, max_seq - seq] is reported through `check` and its rows are not written. The
// output must already hold the cache (the same memory, or a copy).
struct TensorScatterDesc {
  int64_t batch = 1, prefix = 1, max_seq = 1, seq = 0, inner = 1;
  bool circular = false;
};
void launch_tensor_scatter(int elem_bytes, const TensorScatterDesc& desc, const void* update,
                           const int64_t* write, void* out, const IndexCheck& check,
                           cudaStream_t stream);

}  // namespace lumen::cuda
