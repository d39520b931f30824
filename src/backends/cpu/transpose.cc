// CPU Transpose for every dtype (moved as raw bits by element size). The permutation is simplified
// at compile time (size-1 axes dropped, input axes that stay neighbours merged); what is left runs
// as a view (identity), a row copy (innermost axis kept), or cache-blocked 2-D plane transposes
// with an AVX2 8x8 micro-kernel for 4-byte elements.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/movement_copy.h"
#include "backends/cpu/simd_transpose.h"
#include "graph/schemas/movement.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kTile = 32;  // plane tile edge, in elements
constexpr int64_t kParallelBytes = 1 << 16;

// dst[b * ldd + a] = src[a * lds + b] for a in [a0, a1), b in [b0, b1).
template <typename T>
inline void transpose_tile_scalar(const T* src, int64_t lds, T* dst, int64_t ldd, int64_t a0,
                                  int64_t a1, int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t a = a0; a < a1; ++a) dst[b * ldd + a] = src[a * lds + b];
}

#if LUMEN_X86
LUMEN_AVX2_BEGIN
// The tile's whole 8x8 blocks of 32-bit elements, each transposed in registers.
void transpose_blocks_avx2(const uint32_t* src, int64_t lds, uint32_t* dst, int64_t ldd, int64_t a0,
                           int64_t a8, int64_t b0, int64_t b8) {
  for (int64_t b = b0; b < b8; b += 8)
    for (int64_t a = a0; a < a8; a += 8) {
      const float* s = reinterpret_cast<const float*>(src + a * lds + b);
      float* d = reinterpret_cast<float*>(dst + b * ldd + a);
      __m256 m[8];
      for (int64_t r = 0; r < 8; ++r) m[r] = _mm256_loadu_ps(s + r * lds);
      transpose_8x8(m);
      for (int64_t r = 0; r < 8; ++r) _mm256_storeu_ps(d + r * ldd, m[r]);
    }
}
LUMEN_ISA_END
#endif

// The whole of a plane only kA rows tall (a0 = 0, a1 = kA; NCHW -> NHWC with 3 channels): with kA
// fixed the inner loop unrolls and g++ vectorises the loop over b (interleaved stores).
template <typename T, int kA>
inline void transpose_short(const T* __restrict src, int64_t lds, T* __restrict dst, int64_t ldd,
                            int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; ++b)
    for (int a = 0; a < kA; ++a) dst[b * ldd + a] = src[a * lds + b];
}

template <typename T>
inline void transpose_tile(const T* src, int64_t lds, T* dst, int64_t ldd, int64_t a0, int64_t a1,
                           int64_t b0, int64_t b1, bool avx2) {
  if (a0 == 0 && a1 == 3) return transpose_short<T, 3>(src, lds, dst, ldd, b0, b1);
  if (a0 == 0 && a1 == 4) return transpose_short<T, 4>(src, lds, dst, ldd, b0, b1);
#if LUMEN_X86
  if constexpr (sizeof(T) == 4) {
    if (!avx2) return transpose_tile_scalar(src, lds, dst, ldd, a0, a1, b0, b1);
    int64_t a8 = a0 + (a1 - a0) / 8 * 8, b8 = b0 + (b1 - b0) / 8 * 8;
    transpose_blocks_avx2(src, lds, dst, ldd, a0, a8, b0, b8);
    transpose_tile_scalar(src, lds, dst, ldd, a8, a1, b0, b1);
    transpose_tile_scalar(src, lds, dst, ldd, a0, a8, b8, b1);
    return;
  }
#endif
  transpose_tile_scalar(src, lds, dst, ldd, a0, a1, b0, b1);
}

class TransposeKernel final : public Kernel {
 public:
  explicit TransposeKernel(const NodeContext& ctx)
      : elem_size_(dtype_size(ctx.input_dtype(0))), out_shape_(ctx.output(0).shape) {
    const std::vector<int64_t>& in = ctx.input_shape(0).dims();
    std::vector<int64_t> perm = transpose_perm(ctx);
    int rank = static_cast<int>(in.size());
    // Drop size-1 axes; they do not move any data.
    std::vector<int> new_index(rank, -1);
    std::vector<int64_t> dims;
    for (int a = 0; a < rank; ++a)
      if (in[a] != 1) {
        new_index[a] = static_cast<int>(dims.size());
        dims.push_back(in[a]);
      }
    std::vector<int> p;
    for (int64_t a : perm)
      if (new_index[a] >= 0) p.push_back(new_index[a]);
    // Merge input axes a, a + 1 that stay neighbours in the output: runs of consecutive axes in p.
    std::vector<std::vector<int>> groups;  // in output order, each a run of input axes
    for (size_t k = 0; k < p.size(); ++k) {
      if (k > 0 && p[k] == p[k - 1] + 1) {
        groups.back().push_back(p[k]);
      } else {
        groups.push_back({p[k]});
      }
    }
    // Merged input dims in input order, and the permutation over them.
    std::vector<int> order(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) order[g] = static_cast<int>(g);
    std::sort(order.begin(), order.end(),
              [&](int x, int y) { return groups[x][0] < groups[y][0]; });
    std::vector<int> rank_of(groups.size());
    for (size_t r = 0; r < order.size(); ++r) rank_of[order[r]] = static_cast<int>(r);
    dims_.assign(groups.size(), 1);
    for (size_t g = 0; g < groups.size(); ++g)
      for (int a : groups[g]) dims_[rank_of[g]] *= dims[a];
    perm_.resize(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) perm_[g] = rank_of[g];
    identity_ = true;
    for (size_t k = 0; k < perm_.size(); ++k)
      identity_ = identity_ && perm_[k] == static_cast<int>(k);
  }

  bool makes_outputs() const override { return identity_; }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    if (identity_) {
      ctx.outputs[0] = x.reshape(out_shape_);
      return;
    }
    Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return;
    int r = static_cast<int>(dims_.size());
    std::vector<int64_t> in_strides = contiguous_strides(dims_);
    std::vector<int64_t> out_dims(r), src_strides(r);
    for (int k = 0; k < r; ++k) {
      out_dims[k] = dims_[perm_[k]];
      src_strides[k] = in_strides[perm_[k]];
    }
    if (perm_.back() == r - 1) {  // the innermost axis stays innermost: whole rows move
      strided_copy(y.raw_data(), x.raw_data(), out_dims, src_strides, elem_size_);
      return;
    }
    dispatch_elem_size(elem_size_, [&](auto tag) {
      using T = decltype(tag);
      transpose_planes(static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), out_dims,
                       src_strides);
    });
  }

 private:
  // Output axis r-1 reads input axis a (stride lds); input axis r-1 (stride 1) lands at output
  // axis pb (stride ldd). Each plane over those two axes is transposed tile by tile; the other
  // axes index the planes.
  template <typename T>
  void transpose_planes(const T* src, T* dst, const std::vector<int64_t>& out_dims,
                        const std::vector<int64_t>& src_strides) const {
    int r = static_cast<int>(out_dims.size());
    std::vector<int64_t> out_strides = contiguous_strides(out_dims);
    int pb = 0;
    while (perm_[pb] != r - 1) ++pb;
    int64_t na = out_dims[r - 1], nb = out_dims[pb];
    int64_t lds = src_strides[r - 1], ldd = out_strides[pb];
    std::vector<int64_t> od, os, is;  // the plane-indexing axes
    for (int k = 0; k < r - 1; ++k)
      if (k != pb) {
        od.push_back(out_dims[k]);
        os.push_back(out_strides[k]);
        is.push_back(src_strides[k]);
      }
    int64_t planes = 1;
    for (int64_t d : od) planes *= d;
    // One unit per tile row (a block) or, when that leaves fewer units than threads (a plane few
    // rows tall, such as NCHW -> NHWC with 3 channels), per band of b blocks too.
    int64_t a_blocks = (na + kTile - 1) / kTile;
    int64_t b_blocks = (nb + kTile - 1) / kTile;
    bool parallel = planes * na * nb * static_cast<int64_t>(sizeof(T)) >= kParallelBytes;
    const int64_t threads = parallel ? omp_get_max_threads() : 1;
    int64_t b_bands = planes * a_blocks >= threads ? 1 : std::min(b_blocks, 4 * threads);
    int64_t band = (b_blocks + b_bands - 1) / b_bands * kTile;  // b elements per band
    int64_t units = planes * a_blocks * b_bands;
    const bool avx2 = has_avx2();  // once per run, not per tile
    // One unit's tiles, from the AVX2 copy where the CPU has it (the short planes' loops
    // vectorise 8 wide there).
    const auto unit = [&](int64_t u) {
      int64_t plane = u / (a_blocks * b_bands), a0 = (u / b_bands % a_blocks) * kTile;
      int64_t a1 = std::min(na, a0 + kTile);
      int64_t b_lo = (u % b_bands) * band, b_hi = std::min(nb, b_lo + band);
      int64_t soff = 0, doff = 0, rest = plane;
      for (int k = static_cast<int>(od.size()) - 1; k >= 0; --k) {
        int64_t i = rest % od[k];
        rest /= od[k];
        soff += i * is[k];
        doff += i * os[k];
      }
      for (int64_t b0 = b_lo; b0 < b_hi; b0 += kTile)
        transpose_tile(src + soff, lds, dst + doff, ldd, a0, a1, b0, std::min(b_hi, b0 + kTile),
                       avx2);
    };
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t u = 0; u < units; ++u) isa_call(unit, u);
  }

  size_t elem_size_;
  Shape out_shape_;
  std::vector<int64_t> dims_;  // simplified input dims
  std::vector<int> perm_;      // over the simplified dims
  bool identity_ = false;
};

std::unique_ptr<Kernel> make_transpose(const NodeContext& ctx) {
  return std::make_unique<TransposeKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Transpose, &make_transpose, nullptr);

}  // namespace lumen::cpu
