// Dtype-generic data movement: Tile, Trilu, OneHot, ScatterElements and ScatterND. Copies move
// elements as raw words of their size, so one instantiation per element size serves every type.
#include "backends/cuda/any_launch.h"
#include "backends/cuda/any_types.cuh"

namespace lumen::cuda {
namespace {

// Calls f(W{}) with W an unsigned word of `bytes` bytes.
template <typename F>
void with_word(int bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    default:
      return f(uint64_t{});
  }
}

template <typename W>
__global__ void tile_kernel(const W* x, W* y, TileDesc d, int64_t n) {
  ANY_GRID_LOOP(i, n) {
    int64_t rest = i, off = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t c = rest % d.dims[k];
      rest /= d.dims[k];
      off += (c % d.x_dims[k]) * d.x_strides[k];
    }
    y[i] = x[off];
  }
}

template <typename W>
__global__ void trilu_kernel(const W* x, W* y, int64_t n, int64_t rows, int64_t cols, int64_t k,
                             bool upper) {
  ANY_GRID_LOOP(i, n) {
    const int64_t c = i % cols, r = (i / cols) % rows;
    const bool keep = upper ? c - r >= k : c - r <= k;
    y[i] = keep ? x[i] : W(0);
  }
}

template <typename I, typename T>
__global__ void one_hot_kernel(const I* indices, const T* values, T* y, int64_t n, int64_t depth,
                               int64_t inner) {
  ANY_GRID_LOOP(i, n) {
    const int64_t in = i % inner, d = (i / inner) % depth, o = i / (inner * depth);
    int64_t idx = static_cast<int64_t>(load(indices, o * inner + in));
    if (idx < 0) idx += depth;
    y[i] = values[idx == d ? 1 : 0];
  }
}

template <typename W>
__global__ void scatter_elements_kernel(const void* indices, bool i64, const W* updates, W* y,
                                        ScatterElementsDesc d, int64_t n, int* error) {
  ANY_GRID_LOOP(j, n) {
    int64_t rest = j, off = 0, stride = 1;
    for (int k = d.rank - 1; k >= 0; --k) {
      int64_t c = rest % d.idx_dims[k];
      rest /= d.idx_dims[k];
      if (k == d.axis) {
        c = i64 ? static_cast<const int64_t*>(indices)[j] : static_cast<const int32_t*>(indices)[j];
        if (c < 0) c += d.dims[k];
        if (c < 0 || c >= d.dims[k]) {
          if (error != nullptr) *error = 1;
          off = -1;
          break;
        }
      }
      off += c * stride;
      stride *= d.dims[k];
    }
    if (off >= 0) y[off] = updates[j];
  }
}

template <typename W>
__global__ void scatter_nd_kernel(const int64_t* indices, const W* updates, W* y, ScatterNDDesc d,
                                  int* error) {
  ANY_GRID_LOOP(i, d.num_updates * d.slice) {
    const int64_t u = i / d.slice, s = i % d.slice;
    int64_t off = 0;
    bool ok = true;
    for (int k = 0; k < d.k; ++k) {
      int64_t c = indices[u * d.k + k];
      if (c < 0) c += d.dims[k];
      if (c < 0 || c >= d.dims[k]) ok = false;
      off += c * d.strides[k];
    }
    if (ok)
      y[off + s] = updates[i];
    else if (error != nullptr)
      *error = 1;
  }
}

}  // namespace

void launch_tile(const void* x, void* y, int element_bytes, const TileDesc& desc, int64_t n,
                 cudaStream_t stream) {
  if (n == 0) return;
  with_word(element_bytes, [&](auto tag) {
    using W = decltype(tag);
    tile_kernel<W><<<any_blocks(n), kAnyThreads, 0, stream>>>(static_cast<const W*>(x),
                                                             static_cast<W*>(y), desc, n);
  });
}

void launch_trilu(const void* x, void* y, int element_bytes, int64_t batch, int64_t rows,
                  int64_t cols, int64_t k, bool upper, cudaStream_t stream) {
  const int64_t n = batch * rows * cols;
  if (n == 0) return;
  with_word(element_bytes, [&](auto tag) {
    using W = decltype(tag);
    trilu_kernel<W><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        static_cast<const W*>(x), static_cast<W*>(y), n, rows, cols, k, upper);
  });
}

void launch_one_hot(Elem index_t, const void* indices, Elem t, const void* values, void* y,
                    int64_t outer, int64_t depth, int64_t inner, cudaStream_t stream) {
  const int64_t n = outer * depth * inner;
  if (n == 0) return;
  with_elem(index_t, [&](auto itag) {
    using I = decltype(itag);
    if constexpr (!std::is_same_v<I, bool>) {
      with_elem(t, [&](auto vtag) {
        using T = decltype(vtag);
        one_hot_kernel<I, T><<<any_blocks(n), kAnyThreads, 0, stream>>>(
            static_cast<const I*>(indices), static_cast<const T*>(values), static_cast<T*>(y), n,
            depth, inner);
      });
    }
  });
}

void launch_scatter_elements(const void* indices, bool indices_int64, const void* updates,
                             void* y, int element_bytes, const ScatterElementsDesc& desc,
                             int64_t n, int* error, cudaStream_t stream) {
  if (n == 0) return;
  with_word(element_bytes, [&](auto tag) {
    using W = decltype(tag);
    scatter_elements_kernel<W><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        indices, indices_int64, static_cast<const W*>(updates), static_cast<W*>(y), desc, n,
        error);
  });
}

void launch_scatter_nd(const int64_t* indices, const void* updates, void* y, int element_bytes,
                       const ScatterNDDesc& desc, int* error, cudaStream_t stream) {
  if (desc.num_updates * desc.slice == 0) return;
  with_word(element_bytes, [&](auto tag) {
    using W = decltype(tag);
    scatter_nd_kernel<W><<<any_blocks(desc.num_updates * desc.slice), kAnyThreads, 0, stream>>>(
        indices, static_cast<const W*>(updates), static_cast<W*>(y), desc, error);
  });
}

}  // namespace lumen::cuda
