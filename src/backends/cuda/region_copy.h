// Launchers of the CUDA kernels that copy a region of one tensor into another (region_copy.cu):
// TensorScatter (a KV cache's update rows at each batch's write position) and CenterCropPad.
// Plain C++ types, so the kernel classes (region_copy.cc) need no CUDA C++. Any element size of 1,
// 2, 4 or 8 bytes: the copies move bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/index_check.h"
#include "backends/cuda/launch.h"

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

// CenterCropPad: y (out_dims) at coordinate o reads x (in_dims, contiguous) at o + shift per
// dim, zero where that falls outside x.
struct CropPadDesc {
  int rank = 0;
  int64_t in_dims[kMaxRank] = {};
  int64_t out_dims[kMaxRank] = {};
  int64_t shift[kMaxRank] = {};
};
void launch_center_crop_pad(int elem_bytes, const CropPadDesc& desc, const void* x, void* y,
                            int64_t n, cudaStream_t stream);

}  // namespace lumen::cuda
