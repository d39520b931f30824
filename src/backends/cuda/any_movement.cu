// Dtype-generic data movement: Tile, Trilu, OneHot, ScatterElements, ScatterND, GatherElements,
// GatherND, Pad, Range and EyeLike. Copies move elements as raw words of their size, so one
// instantiation per element size serves every type.
#include "backends/cuda/any_launch.h"
#include "backends/cuda/any_types.cuh"
#include "backends/cuda/index_check.cuh"

namespace lumen::cuda {
namespace {

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

// The data offset that element j of an Elements op addresses: j's index (in the indices' shape
// idx_dims) with dim `axis` replaced by indices[j], negative from the end; -1 when out of range
// (reported through `check`).
__device__ int64_t elements_offset(int64_t j, const void* indices, bool i64,
                                   const ScatterElementsDesc& d, const IndexCheck& check) {
  int64_t rest = j, off = 0, stride = 1;
  for (int k = d.rank - 1; k >= 0; --k) {
    int64_t c = rest % d.idx_dims[k];
    rest /= d.idx_dims[k];
    if (k == d.axis) {
      const int64_t given =
          i64 ? static_cast<const int64_t*>(indices)[j] : static_cast<const int32_t*>(indices)[j];
      c = given < 0 ? given + d.dims[k] : given;
      if (c < 0 || c >= d.dims[k]) {
        report_bad_index(check, given, -d.dims[k], d.dims[k]);
        return -1;
      }
    }
    off += c * stride;
    stride *= d.dims[k];
  }
  return off;
}

// The offset of index tuple `tuple` (k indices, negative from the end) over dims and element
// strides; -1 when an index is out of range (reported through `check`).
__device__ int64_t tuple_offset(const int64_t* tuple, int k, const int64_t* dims,
                                const int64_t* strides, const IndexCheck& check) {
  int64_t off = 0;
  for (int q = 0; q < k; ++q) {
    const int64_t given = tuple[q];
    const int64_t c = given < 0 ? given + dims[q] : given;
    if (c < 0 || c >= dims[q]) {
      report_bad_index(check, given, -dims[q], dims[q]);
      return -1;
    }
    off += c * strides[q];
  }
  return off;
}

// Out-of-range indices are skipped, or read zero, and reported.
template <typename W>
__global__ void scatter_elements_kernel(const void* indices, bool i64, const W* updates, W* y,
                                        ScatterElementsDesc d, int64_t n, IndexCheck check) {
  ANY_GRID_LOOP(j, n) {
    const int64_t off = elements_offset(j, indices, i64, d, check);
    if (off >= 0) y[off] = updates[j];
  }
}

template <typename W>
__global__ void scatter_nd_kernel(const int64_t* indices, const W* updates, W* y, ScatterNDDesc d,
                                  IndexCheck check) {
  ANY_GRID_LOOP(i, d.num_updates * d.slice) {
    const int64_t u = i / d.slice, s = i % d.slice;
    const int64_t off = tuple_offset(indices + u * d.k, d.k, d.dims, d.strides, check);
    if (off >= 0) y[off + s] = updates[i];
  }
}

template <typename W>
__global__ void gather_elements_kernel(const W* data, const void* indices, bool i64, W* y,
                                       ScatterElementsDesc d, int64_t n, IndexCheck check) {
  ANY_GRID_LOOP(j, n) {
    const int64_t off = elements_offset(j, indices, i64, d, check);
    y[j] = off >= 0 ? data[off] : W(0);
  }
}

template <typename W>
__global__ void gather_nd_kernel(const W* data, const int64_t* indices, W* y, GatherNDDesc d,
                                 IndexCheck check) {
  ANY_GRID_LOOP(i, d.batch * d.num * d.slice) {
    const int64_t s = i % d.slice, t = i / d.slice;  // t: the tuple, batch-major
    const int64_t off = tuple_offset(indices + t * d.k, d.k, d.dims, d.strides, check);
    y[i] = off >= 0 ? data[(t / d.num) * d.batch_stride + off + s] : W(0);
  }
}

// The x coordinate output coordinate c - pad_begin (here `c`) reads within the window
// [lo, lo + n), or -1 for the constant.
__device__ __forceinline__ int64_t pad_source(int64_t c, int64_t lo, int64_t n, PadKind mode) {
  if (n <= 0) return -1;
  const int64_t r = c - lo;
  if (r >= 0 && r < n) return c;
  switch (mode) {
    case PadKind::kEdge:
      return r < 0 ? lo : lo + n - 1;
    case PadKind::kReflect: {
      if (n == 1) return lo;
      const int64_t period = 2 * (n - 1);
      int64_t m = r % period;
      if (m < 0) m += period;
      return lo + (m < n ? m : period - m);
    }
    case PadKind::kWrap: {
      const int64_t m = r % n;
      return lo + (m < 0 ? m + n : m);
    }
    default:
      return -1;
  }
}

template <typename T>
__global__ void pad_kernel(const T* x, const T* value, T* y, PadDesc d, int64_t n) {
  ANY_GRID_LOOP(i, n) {
    int64_t rest = i, off = 0, stride = 1;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t c = rest % d.dims[k];
      rest /= d.dims[k];
      const int64_t src = pad_source(c - d.pad_begin[k], d.win_lo[k], d.win_n[k], d.mode);
      if (src < 0) {
        off = -1;
        break;
      }
      off += src * stride;
      stride *= d.x_dims[k];
    }
    y[i] = off >= 0 ? x[off] : value != nullptr ? value[0] : store_as<T>(0);
  }
}

template <typename T>
__global__ void range_kernel(const T* start, const T* delta, T* y, int64_t n) {
  ANY_GRID_LOOP(i, n) {
    y[i] = store_as<T>(load(start, 0) + static_cast<math_t<T>>(i) * load(delta, 0));
  }
}

template <typename T>
__global__ void eye_kernel(T* y, int64_t rows, int64_t cols, int64_t k) {
  ANY_GRID_LOOP(i, rows * cols) {
    y[i] = store_as<T>(i % cols - i / cols == k ? 1 : 0);
  }
}

template <typename T>
__device__ __forceinline__ T combine_as(AnyBinaryOp op, T a, T b) {
  const math_t<T> x = load(&a, 0), y = load(&b, 0);
  switch (op) {
    case AnyBinaryOp::kMul:
      return store_as<T>(x * y);
    case AnyBinaryOp::kMax:
      return store_as<T>(y > x ? y : x);
    case AnyBinaryOp::kMin:
      return store_as<T>(y < x ? y : x);
    default:
      return store_as<T>(x + y);
  }
}

// One thread per line of the indices along the axis (every other coordinate fixed).
template <typename T>
__global__ void scatter_elements_reduce_kernel(AnyBinaryOp op, const void* indices, bool i64,
                                               const T* updates, T* y, ScatterElementsDesc d,
                                               int64_t lines, IndexCheck check) {
  const int64_t len = d.idx_dims[d.axis];
  ANY_GRID_LOOP(line, lines) {
    for (int64_t a = 0; a < len; ++a) {
      // The index of update j: `line` spread over the non-axis dims, `a` on the axis.
      int64_t rest = line, j = 0, off = 0, jstride = 1, stride = 1;
      bool ok = true;
      for (int k = d.rank - 1; k >= 0; --k) {
        int64_t c;
        if (k == d.axis) {
          c = a;
        } else {
          c = rest % d.idx_dims[k];
          rest /= d.idx_dims[k];
        }
        j += c * jstride;
        jstride *= d.idx_dims[k];
        if (k != d.axis) {
          off += c * stride;
        }
        stride *= d.dims[k];
      }
      const int64_t given =
          i64 ? static_cast<const int64_t*>(indices)[j] : static_cast<const int32_t*>(indices)[j];
      const int64_t c = given < 0 ? given + d.dims[d.axis] : given;
      if (c < 0 || c >= d.dims[d.axis]) {
        ok = false;
        report_bad_index(check, given, -d.dims[d.axis], d.dims[d.axis]);
      }
      int64_t axis_stride = 1;
      for (int k = d.rank - 1; k > d.axis; --k) axis_stride *= d.dims[k];
      if (ok) {
        const int64_t at = off + c * axis_stride;
        y[at] = combine_as(op, y[at], updates[j]);
      }
    }
  }
}

// One thread per position within a slice, over every update in order.
template <typename T>
__global__ void scatter_nd_reduce_kernel(AnyBinaryOp op, const int64_t* indices, const T* updates,
                                         T* y, ScatterNDDesc d, IndexCheck check) {
  ANY_GRID_LOOP(s, d.slice) {
    for (int64_t u = 0; u < d.num_updates; ++u) {
      const int64_t off = tuple_offset(indices + u * d.k, d.k, d.dims, d.strides, check);
      if (off >= 0) y[off + s] = combine_as(op, y[off + s], updates[u * d.slice + s]);
    }
  }
}

}  // namespace

void launch_scatter_elements_reduce(Elem t, AnyBinaryOp op, const void* indices, bool indices_int64,
                                    const void* updates, void* y, const ScatterElementsDesc& desc,
                                    int64_t n, const IndexCheck& check, cudaStream_t stream) {
  const int64_t len = desc.idx_dims[desc.axis];
  if (n == 0 || len == 0) return;
  const int64_t lines = n / len;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      scatter_elements_reduce_kernel<T><<<any_blocks(lines), kAnyThreads, 0, stream>>>(
          op, indices, indices_int64, static_cast<const T*>(updates), static_cast<T*>(y), desc,
          lines, check);
  });
}

void launch_scatter_nd_reduce(Elem t, AnyBinaryOp op, const int64_t* indices, const void* updates,
                              void* y, const ScatterNDDesc& desc, const IndexCheck& check,
                              cudaStream_t stream) {
  if (desc.slice == 0 || desc.num_updates == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      scatter_nd_reduce_kernel<T><<<any_blocks(desc.slice), kAnyThreads, 0, stream>>>(
          op, indices, static_cast<const T*>(updates), static_cast<T*>(y), desc, check);
  });
}

void launch_gather_elements(const void* data, const void* indices, bool indices_int64, void* y,
                            int element_bytes, const ScatterElementsDesc& desc, int64_t n,
                            const IndexCheck& check, cudaStream_t stream) {
  if (n == 0) return;
  with_word(element_bytes, [&](auto tag) {
    using W = decltype(tag);
    gather_elements_kernel<W><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        static_cast<const W*>(data), indices, indices_int64, static_cast<W*>(y), desc, n, check);
  });
}

void launch_gather_nd(const void* data, const int64_t* indices, void* y, int element_bytes,
                      const GatherNDDesc& desc, const IndexCheck& check, cudaStream_t stream) {
  const int64_t n = desc.batch * desc.num * desc.slice;
  if (n == 0) return;
  with_word(element_bytes, [&](auto tag) {
    using W = decltype(tag);
    gather_nd_kernel<W><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        static_cast<const W*>(data), indices, static_cast<W*>(y), desc, check);
  });
}

void launch_pad(Elem t, const void* x, const void* value, void* y, const PadDesc& desc, int64_t n,
                cudaStream_t stream) {
  if (n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    pad_kernel<T><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(value), static_cast<T*>(y), desc, n);
  });
}

void launch_range(Elem t, const void* start, const void* delta, void* y, int64_t n,
                  cudaStream_t stream) {
  if (n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>)
      range_kernel<T><<<any_blocks(n), kAnyThreads, 0, stream>>>(
          static_cast<const T*>(start), static_cast<const T*>(delta), static_cast<T*>(y), n);
  });
}

void launch_eye(Elem t, void* y, int64_t rows, int64_t cols, int64_t k, cudaStream_t stream) {
  if (rows * cols == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    eye_kernel<T>
        <<<any_blocks(rows * cols), kAnyThreads, 0, stream>>>(static_cast<T*>(y), rows, cols, k);
  });
}

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

void launch_scatter_elements(const void* indices, bool indices_int64, const void* updates, void* y,
                             int element_bytes, const ScatterElementsDesc& desc, int64_t n,
                             const IndexCheck& check, cudaStream_t stream) {
  if (n == 0) return;
  with_word(element_bytes, [&](auto tag) {
    using W = decltype(tag);
    scatter_elements_kernel<W><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        indices, indices_int64, static_cast<const W*>(updates), static_cast<W*>(y), desc, n, check);
  });
}

void launch_scatter_nd(const int64_t* indices, const void* updates, void* y, int element_bytes,
                       const ScatterNDDesc& desc, const IndexCheck& check, cudaStream_t stream) {
  if (desc.num_updates * desc.slice == 0) return;
  with_word(element_bytes, [&](auto tag) {
    using W = decltype(tag);
    scatter_nd_kernel<W><<<any_blocks(desc.num_updates * desc.slice), kAnyThreads, 0, stream>>>(
        indices, static_cast<const W*>(updates), static_cast<W*>(y), desc, check);
  });
}

}  // namespace lumen::cuda
