// CPU kernels of Slice, Gather, Expand, Tile and Pad for every dtype: elements are moved as raw
// bits by element size (1, 2, 4 or 8 bytes), so one instantiation serves float32, int64, bool...
// Slice, Expand and Tile are strided views of the input copied by strided_copy; Gather checks
// every index before it writes; Pad maps each output coordinate back per axis.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/movement_copy.h"
#include "graph/schemas/movement.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelBytes = 1 << 16;

// Copies a strided view of input 0, fixed at compile time, into output 0.
class StridedViewKernel final : public Kernel {
 public:
  StridedViewKernel(const NodeContext& ctx, std::vector<int64_t> dims, std::vector<int64_t> strides,
                    int64_t base)
      : elem_size_(dtype_size(ctx.input_dtype(0))),
        dims_(std::move(dims)),
        strides_(std::move(strides)),
        base_(base) {}

  void run(KernelContext& ctx) const override {
    Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return;
    const char* src = static_cast<const char*>(ctx.inputs[0].raw_data()) +
                      base_ * static_cast<int64_t>(elem_size_);
    strided_copy(y.raw_data(), src, dims_, strides_, elem_size_);
  }

 private:
  size_t elem_size_;
  std::vector<int64_t> dims_;     // the output's dims (or a finer split of them, for Tile)
  std::vector<int64_t> strides_;  // input element strides per dim
  int64_t base_;                  // input element read for index 0
};

std::unique_ptr<Kernel> make_slice(const NodeContext& ctx) {
  SliceSpec spec = slice_spec(ctx);
  std::vector<int64_t> in_strides = contiguous_strides(ctx.input_shape(0).dims());
  int rank = ctx.input_shape(0).rank();
  std::vector<int64_t> strides(rank);
  int64_t base = 0;
  for (int a = 0; a < rank; ++a) {
    strides[a] = in_strides[a] * spec.steps[a];
    base += spec.starts[a] * in_strides[a];
  }
  return std::make_unique<StridedViewKernel>(ctx, spec.output.dims(), std::move(strides), base);
}

std::unique_ptr<Kernel> make_expand(const NodeContext& ctx) {
  const std::vector<int64_t>& in = ctx.input_shape(0).dims();
  const std::vector<int64_t>& out = ctx.output(0).shape.dims();
  std::vector<int64_t> in_strides = contiguous_strides(in);
  size_t lead = out.size() - in.size();
  std::vector<int64_t> strides(out.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) strides[lead + i] = in[i] == 1 ? 0 : in_strides[i];
  return std::make_unique<StridedViewKernel>(ctx, out, std::move(strides), 0);
}

// Tile as a broadcast: the output [r0 * d0, r1 * d1, ...] is laid out like [r0, d0, r1, d1, ...]
// where each r axis reads with stride 0.
std::unique_ptr<Kernel> make_tile(const NodeContext& ctx) {
  const std::vector<int64_t>& in = ctx.input_shape(0).dims();
  std::vector<int64_t> repeats = ctx.input_ints(1, "repeats");
  std::vector<int64_t> in_strides = contiguous_strides(in);
  std::vector<int64_t> dims, strides;
  for (size_t i = 0; i < in.size(); ++i) {
    dims.insert(dims.end(), {repeats[i], in[i]});
    strides.insert(strides.end(), {0, in_strides[i]});
  }
  return std::make_unique<StridedViewKernel>(ctx, std::move(dims), std::move(strides), 0);
}

// --- Gather ---

class GatherKernel final : public Kernel {
 public:
  explicit GatherKernel(const NodeContext& ctx)
      : where_(ctx.where()), elem_size_(dtype_size(ctx.input_dtype(0))) {
    const Shape& data = ctx.input_shape(0);
    axis_ = normalize_axis(ctx.attr_int("axis", 0), data.rank());
    for (int a = 0; a < axis_; ++a) outer_ *= data.dims()[a];
    dim_ = data.dims()[axis_];
    for (int a = axis_ + 1; a < data.rank(); ++a) inner_ *= data.dims()[a];
  }

  void run(KernelContext& ctx) const override {
    const Tensor& ind = ctx.inputs[1];
    int64_t n = ind.numel();
    // Every index is read and checked before the output is touched.
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      int64_t k = ind.dtype() == DType::kInt64 ? ind.data<int64_t>()[j] : ind.data<int32_t>()[j];
      if (k < -dim_ || k >= dim_)
        throw InvalidArgument(where_ + ": index " + std::to_string(k) +
                              " is out of range for axis " + std::to_string(axis_) + " of size " +
                              std::to_string(dim_));
      idx[j] = k < 0 ? k + dim_ : k;
    }
    Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return;
    dispatch_elem_size(elem_size_, [&](auto tag) {
      using T = decltype(tag);
      gather<T>(static_cast<const T*>(ctx.inputs[0].raw_data()), static_cast<T*>(y.raw_data()),
                idx);
    });
  }

 private:
  template <typename T>
  void gather(const T* src, T* dst, const std::vector<int64_t>& idx) const {
    int64_t n = static_cast<int64_t>(idx.size());
    int64_t units = outer_ * n;
    int64_t inner = inner_;
    bool parallel = units * inner * static_cast<int64_t>(sizeof(T)) >= kParallelBytes;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t o = 0; o < outer_; ++o)
        for (int64_t j = 0; j < n; ++j) dst[o * n + j] = src[o * dim_ + idx[j]];
      return;
    }
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t u = 0; u < units; ++u) {
      int64_t o = u / n, j = u % n;
      std::memcpy(dst + u * inner, src + (o * dim_ + idx[j]) * inner,
                  static_cast<size_t>(inner) * sizeof(T));
    }
  }

  std::string where_;
  size_t elem_size_;
  int axis_ = 0;
  int64_t outer_ = 1, dim_ = 0, inner_ = 1;
};

std::unique_ptr<Kernel> make_gather(const NodeContext& ctx) {
  return std::make_unique<GatherKernel>(ctx);
}

// --- Pad ---

class PadKernel final : public Kernel {
 public:
  explicit PadKernel(const NodeContext& ctx) : elem_size_(dtype_size(ctx.input_dtype(0))) {
    PadSpec spec = pad_spec(ctx);
    in_dims_ = ctx.input_shape(0).dims();
    out_dims_ = spec.output.dims();
    in_strides_ = contiguous_strides(in_dims_);
    int rank = static_cast<int>(in_dims_.size());
    // Per axis, the input coordinate each output coordinate reads, or -1 for the constant.
    maps_.resize(rank);
    for (int a = 0; a < rank; ++a) {
      int64_t d = in_dims_[a];
      for (int64_t o = 0; o < out_dims_[a]; ++o) {
        int64_t x = o - spec.begin[a];
        if (spec.mode == PadMode::kEdge) {
          x = std::clamp<int64_t>(x, 0, d - 1);
        } else if (spec.mode == PadMode::kReflect) {
          if (x < 0) x = -x;
          if (x >= d) x = 2 * (d - 1) - x;
        } else if (spec.mode == PadMode::kWrap) {
          // Periodic over what cropping keeps: [lo, hi) of the input axis.
          const int64_t lo = std::max<int64_t>(0, -spec.begin[a]);
          const int64_t period = d - lo - std::max<int64_t>(0, -spec.end[a]);
          x = lo + ((x - lo) % period + period) % period;
        } else if (x < 0 || x >= d) {
          x = -1;
        }
        maps_[a].push_back(x);
      }
    }
    if (rank > 0) {
      int64_t b = spec.begin.back(), out = out_dims_.back();
      mid_lo_ = std::clamp<int64_t>(b, 0, out);
      mid_hi_ = std::clamp<int64_t>(b + in_dims_.back(), mid_lo_, out);
      last_begin_ = b;
    }
  }

  void run(KernelContext& ctx) const override {
    Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return;
    dispatch_elem_size(elem_size_, [&](auto tag) {
      using T = decltype(tag);
      T value{};  // all-zero bits: 0 in every dtype
      if (ctx.inputs.size() > 2 && ctx.inputs[2].defined())
        std::memcpy(&value, ctx.inputs[2].raw_data(), sizeof(T));
      pad<T>(static_cast<const T*>(ctx.inputs[0].raw_data()), static_cast<T*>(y.raw_data()), value);
    });
  }

 private:
  template <typename T>
  void pad(const T* src, T* dst, T value) const {
    int rank = static_cast<int>(out_dims_.size());
    if (rank == 0) {
      dst[0] = src[0];
      return;
    }
    int64_t inner = out_dims_.back();
    int64_t rows = 1;
    for (int a = 0; a < rank - 1; ++a) rows *= out_dims_[a];
    const std::vector<int64_t>& last_map = maps_.back();
    bool parallel = rows * inner * static_cast<int64_t>(sizeof(T)) >= kParallelBytes;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t row = 0; row < rows; ++row) {
      T* out = dst + row * inner;
      int64_t offset = 0, rest = row;
      bool inside = true;
      for (int a = rank - 2; a >= 0; --a) {
        int64_t x = maps_[a][rest % out_dims_[a]];
        rest /= out_dims_[a];
        inside = inside && x >= 0;
        offset += x * in_strides_[a];
      }
      if (!inside) {
        std::fill(out, out + inner, value);
        continue;
      }
      const T* in = src + offset;
      for (int64_t j = 0; j < mid_lo_; ++j) out[j] = last_map[j] < 0 ? value : in[last_map[j]];
      if (mid_hi_ > mid_lo_)
        std::memcpy(out + mid_lo_, in + (mid_lo_ - last_begin_),
                    static_cast<size_t>(mid_hi_ - mid_lo_) * sizeof(T));
      for (int64_t j = mid_hi_; j < inner; ++j) out[j] = last_map[j] < 0 ? value : in[last_map[j]];
    }
  }

  size_t elem_size_;
  std::vector<int64_t> in_dims_, out_dims_, in_strides_;
  std::vector<std::vector<int64_t>> maps_;
  // Output coordinates [mid_lo_, mid_hi_) of the last axis copy input coordinates from
  // mid_lo_ - last_begin_ on, in one piece.
  int64_t mid_lo_ = 0, mid_hi_ = 0, last_begin_ = 0;
};

std::unique_ptr<Kernel> make_pad(const NodeContext& ctx) {
  return std::make_unique<PadKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Slice, &make_slice, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Gather, &make_gather, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Expand, &make_expand, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Tile, &make_tile, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Pad, &make_pad, nullptr);

}  // namespace lumen::cpu
