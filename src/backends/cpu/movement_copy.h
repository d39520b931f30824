// Strided gather-copy shared by the data-movement kernels (Slice, Expand, Tile, Transpose): reads a
// strided (possibly broadcast or reversed) view of a tensor into a contiguous output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lumen::cpu {

// Writes the contiguous tensor of shape `dims` at `dst`, whose element at index (i_0, ..., i_k)
// is read from `src` + sum_j i_j * strides[j] elements. Strides may be 0 (broadcast) or negative.
// elem_size is 1, 2, 4 or 8 bytes. Runs on OpenMP threads when the copy is large.
void strided_copy(void* dst, const void* src, std::vector<int64_t> dims,
                  std::vector<int64_t> strides, size_t elem_size);

// Row-major element strides of `dims`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);

// Calls f(T{}) with T the unsigned integer type of `elem_size` bytes (1, 2, 4 or 8): the kernels
// move elements as raw bits, so one instantiation serves every dtype of that size.
template <typename F>
void dispatch_elem_size(size_t elem_size, F&& f) {
  switch (elem_size) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    default:
      f(uint64_t{});
      break;
  }
}

}  // namespace lumen::cpu
