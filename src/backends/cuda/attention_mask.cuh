// Where an attention kernel reads a query row's additive mask (AttentionDesc's broadcast strides),
// shared by FusedAttention's kernels (attention.cu) and StridedAttention's (strided_attention.cu).
#pragma once

#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// Where query row `i` of head `b` (the flat index over desc's leading dims) reads its mask: the
// head's leading coordinates times their mask strides, plus the row's.
template <typename T>
__device__ __forceinline__ const T* mask_row_of(const AttentionDesc& d, const T* mask, int64_t b,
                                                int64_t i) {
  int64_t base = 0;
  for (int j = d.lead_rank - 1; j >= 0; --j) {
    base += (b % d.lead_dims[j]) * d.mask_lead_strides[j];
    b /= d.lead_dims[j];
  }
  return mask + base + i * d.mask_q_stride;
}

}  // namespace lumen::cuda
