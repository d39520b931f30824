// Strided row copies on the device in one launch per kRowCopyBatch of them: a decoder's new
// key/value slots going into its cache (one strided copy per layer, key and value: 24 for GPT-2
// small), and the blocks of a Split or a Concat. As as many cudaMemcpy2DAsync calls (memcpy nodes
// of a CUDA graph) they cost more than the copies themselves.
#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {
namespace {

struct RowCopyBatch {
  RowCopyDesc copies[kRowCopyBatch];
};

// Items of 16 bytes where every address and size of the copy allows it, else of one byte.
__device__ __forceinline__ bool wide_copy(const RowCopyDesc& c) {
  return ((reinterpret_cast<uintptr_t>(c.dst) | reinterpret_cast<uintptr_t>(c.src) | c.dst_pitch |
           c.src_pitch | c.width) &
          15) == 0;
}

// Blocks (copy, k): the copy's rows x items spread over gridDim.y blocks of threads, so one wide
// copy (a cache's past) and many narrow rows alike fill the device; a null source writes zeros.
__global__ void copy_rows_kernel(const __grid_constant__ RowCopyBatch batch) {
  const RowCopyDesc& c = batch.copies[blockIdx.x];
  const bool wide = wide_copy(c);
  const size_t per_row = wide ? c.width / 16 : c.width;
  const size_t items = per_row * c.rows;
  for (size_t i = static_cast<size_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < items;
       i += static_cast<size_t>(gridDim.y) * blockDim.x) {
    const size_t row = i / per_row, at = i - row * per_row;
    char* dst = static_cast<char*>(c.dst) + row * c.dst_pitch;
    const char* src =
        c.src == nullptr ? nullptr : static_cast<const char*>(c.src) + row * c.src_pitch;
    if (wide)
      reinterpret_cast<uint4*>(dst)[at] =
          src == nullptr ? make_uint4(0, 0, 0, 0) : reinterpret_cast<const uint4*>(src)[at];
    else
      dst[at] = src == nullptr ? 0 : src[at];
  }
}

}  // namespace

void launch_copy_rows(const RowCopyDesc* copies, size_t count, cudaStream_t stream) {
  constexpr size_t kThreads = 128, kItemsPerThread = 4, kMostBlocks = 4096;
  for (size_t start = 0; start < count; start += kRowCopyBatch) {
    RowCopyBatch batch{};
    const size_t n = count - start < kRowCopyBatch ? count - start : kRowCopyBatch;
    size_t most = 1;  // the largest copy's items (bytes: an upper bound)
    for (size_t k = 0; k < n; ++k) {
      batch.copies[k] = copies[start + k];
      const size_t items = batch.copies[k].width * batch.copies[k].rows;
      most = items > most ? items : most;
    }
    size_t blocks = (most / 16 + kThreads * kItemsPerThread - 1) / (kThreads * kItemsPerThread);
    blocks = blocks < 1 ? 1 : blocks > kMostBlocks ? kMostBlocks : blocks;
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(blocks));
    copy_rows_kernel<<<grid, kThreads, 0, stream>>>(batch);
  }
}

}  // namespace lumen::cuda
