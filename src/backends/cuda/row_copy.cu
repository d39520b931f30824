// Strided row copies on the device in one launch per kRowCopyBatch of them: a decoder's new
// key/value slots go into its cache, one strided copy per layer, key and value (24 for GPT-2
// small), which as as many cudaMemcpy2DAsync calls cost more than the copies themselves.
#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {
namespace {

struct RowCopyBatch {
  RowCopyDesc copies[kRowCopyBatch];
};

// Block (copy, row group): its copy's rows blockIdx.y, blockIdx.y + gridDim.y, ..., 16 bytes per
// thread where every address and size allows it, else byte by byte; a null source writes zeros.
__global__ void copy_rows_kernel(const __grid_constant__ RowCopyBatch batch) {
  const RowCopyDesc& c = batch.copies[blockIdx.x];
  const bool wide = ((reinterpret_cast<uintptr_t>(c.dst) | reinterpret_cast<uintptr_t>(c.src) |
                      c.dst_pitch | c.src_pitch | c.width) &
                     15) == 0;
  for (size_t row = blockIdx.y; row < c.rows; row += gridDim.y) {
    char* dst = static_cast<char*>(c.dst) + row * c.dst_pitch;
    const char* src =
        c.src == nullptr ? nullptr : static_cast<const char*>(c.src) + row * c.src_pitch;
    if (wide) {
      for (size_t at = threadIdx.x * 16; at < c.width; at += blockDim.x * 16)
        *reinterpret_cast<uint4*>(dst + at) =
            src == nullptr ? make_uint4(0, 0, 0, 0) : *reinterpret_cast<const uint4*>(src + at);
    } else {
      for (size_t at = threadIdx.x; at < c.width; at += blockDim.x)
        dst[at] = src == nullptr ? 0 : src[at];
    }
  }
}

}  // namespace

void launch_copy_rows(const RowCopyDesc* copies, size_t count, cudaStream_t stream) {
  for (size_t start = 0; start < count; start += kRowCopyBatch) {
    RowCopyBatch batch{};
    const size_t n = count - start < kRowCopyBatch ? count - start : kRowCopyBatch;
    size_t rows = 1;
    for (size_t k = 0; k < n; ++k) {
      batch.copies[k] = copies[start + k];
      rows = batch.copies[k].rows > rows ? batch.copies[k].rows : rows;
    }
    const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(rows < 64 ? rows : 64));
    copy_rows_kernel<<<grid, 128, 0, stream>>>(batch);
  }
}

}  // namespace lumen::cuda
