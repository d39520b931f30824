// Strided gather-copy (movement_copy.h): dims are simplified first (size-1 dims dropped,
// neighbours that stay contiguous merged), then rows of the innermost dim are copied with memcpy,
// a fill, or a strided loop, split over OpenMP threads by whole rows.
#include "backends/cpu/movement_copy.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

namespace lumen::cpu {
namespace {

// Below this many bytes a copy runs on one thread: starting a team costs more than it saves.
constexpr int64_t kParallelBytes = 1 << 16;

template <typename T>
void copy_rows(T* dst, const T* src, const std::vector<int64_t>& dims,
               const std::vector<int64_t>& strides) {
  int outer_rank = static_cast<int>(dims.size()) - 1;
  int64_t inner = dims.back();
  int64_t istride = strides.back();
  int64_t rows = 1;
  for (int i = 0; i < outer_rank; ++i) rows *= dims[i];
  int64_t bytes = rows * inner * static_cast<int64_t>(sizeof(T));
  int threads = bytes >= kParallelBytes ? std::min<int64_t>(omp_get_max_threads(), rows) : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t begin = rows * t / nt, end = rows * (t + 1) / nt;
    // Odometer over the outer dims, started at row `begin`.
    std::vector<int64_t> idx(outer_rank, 0);
    int64_t offset = 0;
    int64_t rest = begin;
    for (int i = outer_rank - 1; i >= 0; --i) {
      idx[i] = rest % dims[i];
      rest /= dims[i];
      offset += idx[i] * strides[i];
    }
    for (int64_t row = begin; row < end; ++row) {
      T* out = dst + row * inner;
      const T* in = src + offset;
      if (istride == 1) {
        std::memcpy(out, in, static_cast<size_t>(inner) * sizeof(T));
      } else if (istride == 0) {
        std::fill(out, out + inner, *in);
      } else {
        for (int64_t j = 0; j < inner; ++j) out[j] = in[j * istride];
      }
      for (int i = outer_rank - 1; i >= 0; --i) {
        offset += strides[i];
        if (++idx[i] < dims[i]) break;
        offset -= idx[i] * strides[i];
        idx[i] = 0;
      }
    }
  }
}

}  // namespace

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

void strided_copy(void* dst, const void* src, std::vector<int64_t> dims,
                  std::vector<int64_t> strides, size_t elem_size) {
  for (int64_t d : dims)
    if (d == 0) return;
  // Drop size-1 dims, then merge each dim into its inner neighbour when they stay contiguous.
  std::vector<int64_t> d2, s2;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!d2.empty() && s2.back() == strides[i] * dims[i]) {
      d2.back() *= dims[i];
      s2.back() = strides[i];
      continue;
    }
    d2.push_back(dims[i]);
    s2.push_back(strides[i]);
  }
  if (d2.empty()) {
    d2.push_back(1);
    s2.push_back(1);
  }
  dispatch_elem_size(elem_size, [&](auto tag) {
    using T = decltype(tag);
    copy_rows(static_cast<T*>(dst), static_cast<const T*>(src), d2, s2);
  });
}

}  // namespace lumen::cpu
