// CUDA kernel of TensorScatter (tensor_scatter.h): a thread per element written, moving its bits
// as an unsigned integer of the element's size.
#include <cstdint>

#include "backends/cuda/any_types.cuh"
#include "backends/cuda/index_check.cuh"
#include "backends/cuda/tensor_scatter.h"

namespace lumen::cuda {
namespace {

template <typename U>
__global__ void tensor_scatter_kernel(TensorScatterDesc d, const U* update, const int64_t* write,
                                      U* out, IndexCheck check) {
  const int64_t per_batch = d.prefix / d.batch;
  ANY_GRID_LOOP(i, d.prefix * d.seq * d.inner) {
    const int64_t e = i % d.inner, s = (i / d.inner) % d.seq, p = i / (d.inner * d.seq);
    int64_t start = write == nullptr ? 0 : write[p / per_batch];
    if (d.circular) {
      start = ((start % d.max_seq) + d.max_seq) % d.max_seq;
    } else if (start < 0 || start + d.seq > d.max_seq) {
      if (s == 0 && e == 0) report_bad_index(check, start, 0, d.max_seq - d.seq + 1);
      continue;
    }
    out[(p * d.max_seq + (start + s) % d.max_seq) * d.inner + e] = update[i];
  }
}

}  // namespace

void launch_tensor_scatter(int elem_bytes, const TensorScatterDesc& desc, const void* update,
                           const int64_t* write, void* out, const IndexCheck& check,
                           cudaStream_t stream) {
  const int64_t n = desc.prefix * desc.seq * desc.inner;
  if (n == 0 || desc.max_seq == 0) return;
  with_word(elem_bytes, [&](auto v) {
    using U = decltype(v);
    tensor_scatter_kernel<U><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        desc, static_cast<const U*>(update), write, static_cast<U*>(out), check);
  });
}

}  // namespace lumen::cuda
