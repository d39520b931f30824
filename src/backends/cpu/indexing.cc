// CPU kernels of the indexing ops. GatherElements, GatherND, ScatterND, ScatterElements, Trilu
// and OneHot's values move elements by size, so they take any dtype; the scatter reductions
// (add, mul, max, min) take float32, float64, int64 and int32. Indices are int64 or int32 and may
// be negative (counted from the end); every index is checked before anything is written, and one
// out of range throws InvalidArgument naming the node. EyeLike writes any dtype.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 32768;

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction reduction_of(const NodeContext& ctx) {
  std::string r = ctx.attr_string("reduction", "none");
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return Reduction::kNone;
}

// Calls fn(E{}) with an unsigned type of the element size, for copies that ignore the dtype.
template <typename F>
void by_size(size_t size, F&& fn) {
  switch (size) {
    case 1:
      fn(uint8_t{});
      break;
    case 2:
      fn(uint16_t{});
      break;
    case 4:
      fn(uint32_t{});
      break;
    default:
      fn(uint64_t{});
      break;
  }
}

// Calls fn(I{}) with the C++ type of an index dtype (int64 or int32).
template <typename F>
void by_index(DType dt, F&& fn) {
  if (dt == DType::kInt32) {
    fn(int32_t{});
  } else {
    fn(int64_t{});
  }
}

// Calls fn(T{}) with the C++ type of a dtype a scatter reduction supports.
template <typename F>
void by_numeric(DType dt, F&& fn) {
  switch (dt) {
    case DType::kFloat32:
      fn(float{});
      break;
    case DType::kFloat64:
      fn(double{});
      break;
    case DType::kInt32:
      fn(int32_t{});
      break;
    default:
      fn(int64_t{});
      break;
  }
}

template <typename T>
T reduce_one(Reduction r, T a, T b) {
  switch (r) {
    case Reduction::kAdd:
      return a + b;
    case Reduction::kMul:
      return a * b;
    case Reduction::kMax:
      return std::max(a, b);
    case Reduction::kMin:
      return std::min(a, b);
    default:
      return b;
  }
}

// Throws InvalidArgument unless every index is in [-n, n) (n the size of the indexed dim,
// which for GatherND/ScatterND depends on the position in the tuple).
template <typename I>
void check_indices(const std::string& where, const I* idx, int64_t count,
                   const std::vector<int64_t>& dims) {
  const int64_t q = static_cast<int64_t>(dims.size());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t n = dims[i % q];
    const int64_t v = idx[i];
    if (v < -n || v >= n)
      throw InvalidArgument(where + ": index " + std::to_string(v) + " at position " +
                            std::to_string(i) + " is out of range [" + std::to_string(-n) + ", " +
                            std::to_string(n) + ")");
  }
}

inline int64_t wrap(int64_t v, int64_t n) {
  return v < 0 ? v + n : v;
}

// GatherElements / ScatterElements share the geometry: the element of `indices` at position p
// addresses data at p with dimension `axis` replaced by the index.
class ElementsGeometry {
 public:
  ElementsGeometry(const NodeContext& ctx)
      : where_(ctx.where()),
        data_(ctx.input_shape(0)),
        idx_(ctx.input_shape(1)),
        axis_(normalize_axis(ctx.attr_int("axis", 0), ctx.input_shape(0).rank())),
        strides_(data_.strides()) {}

  template <typename I>
  void check(const I* idx) const {
    check_indices(where_, idx, idx_.numel(), {data_.dims()[axis_]});
  }

  // Calls fn(index position, data offset) for every (checked) index, rows in parallel when
  // `parallel`.
  template <typename I, typename F>
  void for_each(const I* idx, bool parallel, F&& fn) const {
    const int64_t count = idx_.numel();
    if (count == 0) return;
    const int rank = idx_.rank();
    const int64_t last = idx_.dims().back();
    const int64_t rows = count / last;
    const int64_t axis_stride = strides_[axis_];
    const bool along_last = axis_ == rank - 1;
    const int64_t n = data_.dims()[axis_];
#pragma omp parallel for schedule(static) if (parallel && count > kParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t rest = r, base = 0;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t i = rest % idx_.dims()[d];
        rest /= idx_.dims()[d];
        if (d != axis_) base += i * strides_[d];
      }
      const I* row = idx + r * last;
      for (int64_t j = 0; j < last; ++j) {
        const int64_t v = wrap(row[j], n);
        fn(r * last + j, along_last ? base + v : base + j + v * axis_stride);
      }
    }
  }

  const std::string where_;
  const Shape data_;
  const Shape idx_;
  const int axis_;
  const std::vector<int64_t> strides_;
};

class GatherElementsKernel final : public Kernel {
 public:
  explicit GatherElementsKernel(const NodeContext& ctx)
      : geo_(ctx), esize_(dtype_size(ctx.input_dtype(0))), idx_dtype_(ctx.input_dtype(1)) {}

  void run(KernelContext& ctx) const override {
    by_index(idx_dtype_, [&](auto i_tag) {
      using I = decltype(i_tag);
      by_size(esize_, [&](auto e_tag) {
        using E = decltype(e_tag);
        const E* data = static_cast<const E*>(ctx.inputs[0].raw_data());
        E* out = static_cast<E*>(ctx.outputs[0].raw_data());
        const I* idx = static_cast<const I*>(ctx.inputs[1].raw_data());
        geo_.check(idx);
        geo_.for_each(idx, true, [&](int64_t p, int64_t off) { out[p] = data[off]; });
      });
    });
  }

 private:
  ElementsGeometry geo_;
  size_t esize_;
  DType idx_dtype_;
};

class ScatterElementsKernel final : public Kernel {
 public:
  explicit ScatterElementsKernel(const NodeContext& ctx)
      : geo_(ctx),
        dtype_(ctx.input_dtype(0)),
        idx_dtype_(ctx.input_dtype(1)),
        reduction_(reduction_of(ctx)) {}

  void run(KernelContext& ctx) const override {
    const Tensor& data = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    if (data.nbytes() == 0) return;
    // Check first so that nothing is written when an index is bad.
    by_index(idx_dtype_, [&](auto i_tag) {
      using I = decltype(i_tag);
      const I* idx = static_cast<const I*>(ctx.inputs[1].raw_data());
      geo_.check(idx);
      std::memcpy(out.raw_data(), data.raw_data(), data.nbytes());
      if (reduction_ == Reduction::kNone) {
        by_size(dtype_size(dtype_), [&](auto e_tag) {
          using E = decltype(e_tag);
          E* o = static_cast<E*>(out.raw_data());
          const E* u = static_cast<const E*>(ctx.inputs[2].raw_data());
          geo_.for_each(idx, false, [&](int64_t p, int64_t off) { o[off] = u[p]; });
        });
        return;
      }
      by_numeric(dtype_, [&](auto t_tag) {
        using T = decltype(t_tag);
        T* o = static_cast<T*>(out.raw_data());
        const T* u = static_cast<const T*>(ctx.inputs[2].raw_data());
        geo_.for_each(idx, false, [&](int64_t p, int64_t off) {
          o[off] = reduce_one(reduction_, o[off], u[p]);
        });
      });
    });
  }

 private:
  ElementsGeometry geo_;
  DType dtype_;
  DType idx_dtype_;
  Reduction reduction_;
};

// GatherND: out[batch, t, :] = data[batch, tuple t, :], slices of `slice_` elements.
class GatherNDKernel final : public Kernel {
 public:
  explicit GatherNDKernel(const NodeContext& ctx)
      : where_(ctx.where()),
        esize_(dtype_size(ctx.input_dtype(0))),
        idx_dtype_(ctx.input_dtype(1)) {
    const Shape& data = ctx.input_shape(0);
    const Shape& idx = ctx.input_shape(1);
    const int b = static_cast<int>(ctx.attr_int("batch_dims", 0));
    q_ = idx.dims().back();
    std::vector<int64_t> strides = data.strides();
    for (int d = 0; d < b; ++d) batches_ *= data.dims()[d];
    for (int d = b; d < idx.rank() - 1; ++d) tuples_ *= idx.dims()[d];
    for (int d = static_cast<int>(b + q_); d < data.rank(); ++d) slice_ *= data.dims()[d];
    batch_stride_ = b < data.rank() ? data.dims()[b] * strides[b] : 1;
    for (int k = 0; k < q_; ++k) {
      dims_.push_back(data.dims()[b + k]);
      strides_.push_back(strides[b + k]);
    }
  }

  void run(KernelContext& ctx) const override {
    const int64_t total = batches_ * tuples_;
    if (total * slice_ == 0) return;
    by_index(idx_dtype_, [&](auto i_tag) {
      using I = decltype(i_tag);
      const I* idx = static_cast<const I*>(ctx.inputs[1].raw_data());
      check_indices(where_, idx, total * q_, dims_);
      const char* data = static_cast<const char*>(ctx.inputs[0].raw_data());
      char* out = static_cast<char*>(ctx.outputs[0].raw_data());
      const size_t bytes = static_cast<size_t>(slice_) * esize_;
#pragma omp parallel for schedule(static) if (total * slice_ > kParallelWork)
      for (int64_t t = 0; t < total; ++t) {
        int64_t off = (t / tuples_) * batch_stride_;
        for (int64_t k = 0; k < q_; ++k) off += wrap(idx[t * q_ + k], dims_[k]) * strides_[k];
        std::memcpy(out + t * bytes, data + off * esize_, bytes);
      }
    });
  }

 private:
  std::string where_;
  size_t esize_;
  DType idx_dtype_;
  int64_t q_ = 1, batches_ = 1, tuples_ = 1, slice_ = 1, batch_stride_ = 1;
  std::vector<int64_t> dims_, strides_;
};

// ScatterND: out = data, then for every tuple t (in order) out[tuple t, :] = / op= updates[t, :].
class ScatterNDKernel final : public Kernel {
 public:
  explicit ScatterNDKernel(const NodeContext& ctx)
      : where_(ctx.where()),
        dtype_(ctx.input_dtype(0)),
        idx_dtype_(ctx.input_dtype(1)),
        reduction_(reduction_of(ctx)) {
    const Shape& data = ctx.input_shape(0);
    const Shape& idx = ctx.input_shape(1);
    q_ = idx.dims().back();
    std::vector<int64_t> strides = data.strides();
    for (int d = 0; d < idx.rank() - 1; ++d) tuples_ *= idx.dims()[d];
    for (int d = static_cast<int>(q_); d < data.rank(); ++d) slice_ *= data.dims()[d];
    for (int k = 0; k < q_; ++k) {
      dims_.push_back(data.dims()[k]);
      strides_.push_back(strides[k]);
    }
  }

  void run(KernelContext& ctx) const override {
    const Tensor& data = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    if (data.nbytes() == 0) return;
    by_index(idx_dtype_, [&](auto i_tag) {
      using I = decltype(i_tag);
      const I* idx = static_cast<const I*>(ctx.inputs[1].raw_data());
      check_indices(where_, idx, tuples_ * q_, dims_);
      std::memcpy(out.raw_data(), data.raw_data(), data.nbytes());
      auto offset = [&](int64_t t) {
        int64_t off = 0;
        for (int64_t k = 0; k < q_; ++k) off += wrap(idx[t * q_ + k], dims_[k]) * strides_[k];
        return off;
      };
      if (reduction_ == Reduction::kNone) {
        const size_t esize = dtype_size(dtype_);
        const size_t bytes = static_cast<size_t>(slice_) * esize;
        char* o = static_cast<char*>(out.raw_data());
        const char* u = static_cast<const char*>(ctx.inputs[2].raw_data());
        for (int64_t t = 0; t < tuples_; ++t)
          std::memcpy(o + offset(t) * esize, u + t * bytes, bytes);
        return;
      }
      by_numeric(dtype_, [&](auto t_tag) {
        using T = decltype(t_tag);
        T* o = static_cast<T*>(out.raw_data());
        const T* u = static_cast<const T*>(ctx.inputs[2].raw_data());
        for (int64_t t = 0; t < tuples_; ++t) {
          T* dst = o + offset(t);
          const T* src = u + t * slice_;
          for (int64_t s = 0; s < slice_; ++s) dst[s] = reduce_one(reduction_, dst[s], src[s]);
        }
      });
    });
  }

 private:
  std::string where_;
  DType dtype_;
  DType idx_dtype_;
  Reduction reduction_;
  int64_t q_ = 1, tuples_ = 1, slice_ = 1;
  std::vector<int64_t> dims_, strides_;
};

std::string check_reduction_dtype(const NodeContext& ctx) {
  if (reduction_of(ctx) == Reduction::kNone) return "";
  DType dt = ctx.input_dtype(0);
  if (dt == DType::kFloat32 || dt == DType::kFloat64 || dt == DType::kInt64 || dt == DType::kInt32)
    return "";
  return std::string("data is ") + dtype_name(dt) +
         "; the CPU reductions take float32, float64, int64, int32";
}

// OneHot: out[outer, depth, inner] = off, then on where the index (wrapped) hits. Indices out of
// [-depth, depth) leave their column all off, as ONNX specifies.
class OneHotKernel final : public Kernel {
 public:
  explicit OneHotKernel(const NodeContext& ctx)
      : idx_dtype_(ctx.input_dtype(0)), esize_(dtype_size(ctx.input_dtype(2))) {
    const Shape& idx = ctx.input_shape(0);
    depth_ = static_cast<int64_t>(ctx.input_value(1)->item_as_double(0));
    const int rank = idx.rank() + 1;
    int64_t axis = ctx.attr_int("axis", -1);
    const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
    for (int d = 0; d < a; ++d) outer_ *= idx.dims()[d];
    for (int d = a; d < idx.rank(); ++d) inner_ *= idx.dims()[d];
  }

  void run(KernelContext& ctx) const override {
    const int64_t count = outer_ * inner_;
    std::vector<int64_t> idx(static_cast<size_t>(count));
    const Tensor& in = ctx.inputs[0];
    switch (idx_dtype_) {
      case DType::kInt64:
        std::copy_n(in.data<int64_t>(), count, idx.begin());
        break;
      case DType::kInt32:
        std::copy_n(in.data<int32_t>(), count, idx.begin());
        break;
      default:
        // Floating (or other) indices truncate toward zero; NaN and values beyond int64 become
        // the out-of-range sentinel `depth_`, which leaves their column all off.
        for (int64_t i = 0; i < count; ++i) {
          const double v = in.item_as_double(i);
          idx[i] = v > -9e18 && v < 9e18 ? static_cast<int64_t>(v) : depth_;
        }
    }
    by_size(esize_, [&](auto e_tag) {
      using E = decltype(e_tag);
      const E* values = static_cast<const E*>(ctx.inputs[2].raw_data());
      E* out = static_cast<E*>(ctx.outputs[0].raw_data());
      std::fill(out, out + count * depth_, values[0]);
      for (int64_t o = 0; o < outer_; ++o)
        for (int64_t i = 0; i < inner_; ++i) {
          int64_t v = idx[o * inner_ + i];
          if (v < -depth_ || v >= depth_) continue;
          out[(o * depth_ + wrap(v, depth_)) * inner_ + i] = values[1];
        }
    });
  }

 private:
  DType idx_dtype_;
  size_t esize_;
  int64_t depth_ = 1, outer_ = 1, inner_ = 1;
};

// Trilu: per matrix row, a copied range and a zeroed range (zero bytes are zero in every dtype).
class TriluKernel final : public Kernel {
 public:
  explicit TriluKernel(const NodeContext& ctx)
      : upper_(ctx.attr_int("upper", 1) == 1), esize_(dtype_size(ctx.input_dtype(0))) {
    const Shape& x = ctx.input_shape(0);
    rows_ = x.dims()[x.rank() - 2];
    cols_ = x.dims()[x.rank() - 1];
    for (int d = 0; d < x.rank() - 2; ++d) batches_ *= x.dims()[d];
    if (ctx.has_input(1)) k_ = ctx.input_ints(1, "k")[0];
  }

  void run(KernelContext& ctx) const override {
    const char* x = static_cast<const char*>(ctx.inputs[0].raw_data());
    char* y = static_cast<char*>(ctx.outputs[0].raw_data());
    const int64_t total_rows = batches_ * rows_;
    if (total_rows * cols_ == 0) return;
#pragma omp parallel for schedule(static) if (total_rows * cols_ > kParallelWork)
    for (int64_t t = 0; t < total_rows; ++t) {
      const int64_t i = t % rows_;
      // Upper keeps columns j >= i + k; lower keeps j <= i + k.
      const int64_t edge = upper_ ? i + k_ : i + k_ + 1;
      const int64_t split = std::clamp<int64_t>(edge, 0, cols_);
      const char* in = x + t * cols_ * esize_;
      char* out = y + t * cols_ * esize_;
      const size_t head = static_cast<size_t>(split) * esize_;
      const size_t tail = static_cast<size_t>(cols_ - split) * esize_;
      if (upper_) {
        std::memset(out, 0, head);
        std::memcpy(out + head, in + head, tail);
      } else {
        std::memcpy(out, in, head);
        std::memset(out + head, 0, tail);
      }
    }
  }

 private:
  bool upper_;
  size_t esize_;
  int64_t rows_ = 0, cols_ = 0, batches_ = 1, k_ = 0;
};

// EyeLike: zeros with ones on diagonal k, in the output's dtype.
class EyeLikeKernel final : public Kernel {
 public:
  explicit EyeLikeKernel(const NodeContext& ctx)
      : dtype_(ctx.output(0).dtype),
        rows_(ctx.input_shape(0).dims()[0]),
        cols_(ctx.input_shape(0).dims()[1]),
        k_(ctx.attr_int("k", 0)) {}

  void run(KernelContext& ctx) const override {
    Tensor& out = ctx.outputs[0];
    if (out.nbytes() == 0) return;
    std::memset(out.raw_data(), 0, out.nbytes());
    unsigned char one[8] = {};
    switch (dtype_) {
      case DType::kFloat32: {
        float v = 1.0f;
        std::memcpy(one, &v, 4);
        break;
      }
      case DType::kFloat64: {
        double v = 1.0;
        std::memcpy(one, &v, 8);
        break;
      }
      case DType::kFloat16: {
        uint16_t v = 0x3C00;
        std::memcpy(one, &v, 2);
        break;
      }
      case DType::kBFloat16: {
        uint16_t v = 0x3F80;
        std::memcpy(one, &v, 2);
        break;
      }
      default: {
        int64_t v = 1;
        std::memcpy(one, &v, 8);
        break;
      }  // little-endian integers
    }
    const size_t esize = dtype_size(dtype_);
    char* y = static_cast<char*>(out.raw_data());
    for (int64_t i = 0; i < rows_; ++i) {
      const int64_t j = i + k_;
      if (j >= 0 && j < cols_) std::memcpy(y + (i * cols_ + j) * esize, one, esize);
    }
  }

 private:
  DType dtype_;
  int64_t rows_, cols_, k_;
};

template <typename K>
std::unique_ptr<Kernel> make(const NodeContext& ctx) {
  return std::make_unique<K>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(GatherElements, &make<GatherElementsKernel>, nullptr);
LUMEN_REGISTER_CPU_KERNEL(ScatterElements, &make<ScatterElementsKernel>, &check_reduction_dtype);
LUMEN_REGISTER_CPU_KERNEL(GatherND, &make<GatherNDKernel>, nullptr);
LUMEN_REGISTER_CPU_KERNEL(ScatterND, &make<ScatterNDKernel>, &check_reduction_dtype);
LUMEN_REGISTER_CPU_KERNEL(OneHot, &make<OneHotKernel>, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Trilu, &make<TriluKernel>, nullptr);
LUMEN_REGISTER_CPU_KERNEL(EyeLike, &make<EyeLikeKernel>, nullptr);

}  // namespace lumen::cpu
