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

// The widest item (16, 8, 4, 2 or 1 bytes) that every address, pitch and width of `c` is a
// multiple of: ShuffleNet's 7 x 7 channel planes (196 bytes) move as 4-byte items, not bytes.
__host__ __device__ __forceinline__ unsigned copy_unit(const RowCopyDesc& c) {
  const size_t bits = reinterpret_cast<uintptr_t>(c.dst) | reinterpret_cast<uintptr_t>(c.src) |
                      c.dst_pitch | c.src_pitch | c.width;
  unsigned unit = 16;
  while (unit > 1 && (bits & (unit - 1)) != 0) unit /= 2;
  return unit;
}

// The copy's rows x items of T spread over gridDim.y blocks of threads, indexed by I (32 bits
// where the items fit: a 64-bit division per item cost more than the copy of a small one).
template <typename T, typename I>
__device__ __forceinline__ void copy_items(const RowCopyDesc& c) {
  const I per_row = static_cast<I>(c.width / sizeof(T));
  const I items = per_row * static_cast<I>(c.rows);
  const I stride = static_cast<I>(gridDim.y) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.y) * blockDim.x + threadIdx.x; i < items; i += stride) {
    const I row = i / per_row, at = i - row * per_row;
    T* dst =
        reinterpret_cast<T*>(static_cast<char*>(c.dst) + static_cast<size_t>(row) * c.dst_pitch);
    if (c.src == nullptr) {
      dst[at] = T{};
    } else {
      const T* src = reinterpret_cast<const T*>(static_cast<const char*>(c.src) +
                                                static_cast<size_t>(row) * c.src_pitch);
      dst[at] = src[at];
    }
  }
}

template <typename T>
__device__ __forceinline__ void copy_unit_items(const RowCopyDesc& c, bool narrow_index) {
  if (narrow_index)
    copy_items<T, unsigned>(c);
  else
    copy_items<T, size_t>(c);
}

// Blocks (copy, k): the copy's rows x items spread over gridDim.y blocks of threads, so one wide
// copy (a cache's past) and many narrow rows alike fill the device; a null source writes zeros.
__global__ void copy_rows_kernel(const __grid_constant__ RowCopyBatch batch) {
  const RowCopyDesc& c = batch.copies[blockIdx.x];
  const unsigned unit = copy_unit(c);
  // 32-bit indices while every index the loop forms stays below 2^31.
  const bool narrow = c.width / unit * c.rows < (size_t{1} << 31);
  switch (unit) {
    case 16:
      return copy_unit_items<uint4>(c, narrow);
    case 8:
      return copy_unit_items<uint2>(c, narrow);
    case 4:
      return copy_unit_items<unsigned>(c, narrow);
    case 2:
      return copy_unit_items<unsigned short>(c, narrow);
    default:
      return copy_unit_items<unsigned char>(c, narrow);
  }
}

}  // namespace

void launch_copy_rows(const RowCopyDesc* copies, size_t count, cudaStream_t stream) {
  constexpr size_t kThreads = 128, kItemsPerThread = 4, kMostBlocks = 4096;
  for (size_t start = 0; start < count; start += kRowCopyBatch) {
    RowCopyBatch batch{};
    const size_t n = count - start < kRowCopyBatch ? count - start : kRowCopyBatch;
    size_t most = 1;  // the largest copy's items
    for (size_t k = 0; k < n; ++k) {
      batch.copies[k] = copies[start + k];
      const size_t items =
          batch.copies[k].width / copy_unit(batch.copies[k]) * batch.copies[k].rows;
      most = items > most ? items : most;
    }
    size_t blocks = (most + kThreads * kItemsPerThread - 1) / (kThreads * kItemsPerThread);
    blocks = blocks < 1 ? 1 : blocks > kMostBlocks ? kMostBlocks : blocks;
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(blocks));
    copy_rows_kernel<<<grid, kThreads, 0, stream>>>(batch);
  }
}

}  // namespace lumen::cuda
