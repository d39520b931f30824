// CPU kernels of assorted ops: Shrink (every numeric dtype), MeanVarianceNormalization and Det
// (float32, statistics and elimination in double) and ReverseSequence (any dtype, bytewise).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 16;

// y = x + bias where x < -lambd, x - bias where x > lambd, else 0 (computed in double, stored in
// the input's dtype).
class ShrinkKernel final : public Kernel {
 public:
  explicit ShrinkKernel(const NodeContext& ctx)
      : lambd_(ctx.attr_float("lambd", 0.5f)), bias_(ctx.attr_float("bias", 0.0f)) {}

  void run(KernelContext& ctx) const override {
    switch (ctx.inputs[0].dtype()) {
      case DType::kFloat32:
        return apply<float>(ctx);
      case DType::kFloat64:
        return apply<double>(ctx);
      case DType::kInt8:
        return apply<int8_t>(ctx);
      case DType::kUInt8:
        return apply<uint8_t>(ctx);
      case DType::kInt32:
        return apply<int32_t>(ctx);
      default:
        return apply<int64_t>(ctx);
    }
  }

  int in_place_input() const override { return 0; }

 private:
  template <typename T>
  void apply(KernelContext& ctx) const {
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    const int64_t n = ctx.inputs[0].numel();
    const double lambd = lambd_, bias = bias_;
#pragma omp parallel for schedule(static) if (n > kParallelWork)
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(x[i]);
      y[i] = v < -lambd ? static_cast<T>(v + bias) : v > lambd ? static_cast<T>(v - bias) : T(0);
    }
  }

  float lambd_;
  float bias_;
};

std::string check_shrink(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt8 || t == DType::kUInt8 ||
      t == DType::kInt32 || t == DType::kInt64)
    return "";
  return std::string("the CPU kernel does not take ") + dtype_name(t);
}

// Y = (X - mean) / (sqrt(variance) + 1e-9), mean and (population) variance over `axes`. Each
// element's statistics group is the flat index over the dimensions not in axes.
class MvnKernel final : public Kernel {
 public:
  explicit MvnKernel(const NodeContext& ctx) : shape_(ctx.input_shape(0)) {
    const int rank = shape_.rank();
    std::vector<bool> reduced(rank, false);
    for (int64_t a : ctx.attr_ints("axes", {0, 2, 3})) reduced[normalize_axis(a, rank)] = true;
    group_stride_.assign(rank, 0);
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (reduced[d]) continue;
      group_stride_[d] = stride;
      stride *= shape_[d];
    }
    groups_ = stride;
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t n = shape_.numel();
    std::vector<int64_t> group(static_cast<size_t>(n));
    std::vector<int64_t> idx(shape_.rank(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t g = 0;
      for (int d = 0; d < shape_.rank(); ++d) g += idx[d] * group_stride_[d];
      group[i] = g;
      for (int d = shape_.rank() - 1; d >= 0; --d) {
        if (++idx[d] < shape_[d]) break;
        idx[d] = 0;
      }
    }
    std::vector<double> sum(static_cast<size_t>(groups_), 0.0), count(sum), sq(sum);
    for (int64_t i = 0; i < n; ++i) {
      sum[group[i]] += x[i];
      count[group[i]] += 1.0;
    }
    for (int64_t g = 0; g < groups_; ++g) sum[g] /= count[g];
    for (int64_t i = 0; i < n; ++i) {
      const double d = x[i] - sum[group[i]];
      sq[group[i]] += d * d;
    }
    for (int64_t g = 0; g < groups_; ++g) sq[g] = std::sqrt(sq[g] / count[g]) + 1e-9;
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<float>((x[i] - sum[group[i]]) / sq[group[i]]);
  }

 private:
  Shape shape_;
  std::vector<int64_t> group_stride_;
  int64_t groups_ = 1;
};

// Determinants of [..., M, M] by Gaussian elimination with partial pivoting, in double.
class DetKernel final : public Kernel {
 public:
  explicit DetKernel(const NodeContext& ctx) : m_(ctx.input_shape(0)[-1]) {}

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t m = m_, count = ctx.outputs[0].numel();
#pragma omp parallel for schedule(static) if (count * m * m * m > kParallelWork)
    for (int64_t b = 0; b < count; ++b) {
      std::vector<double> a(x + b * m * m, x + (b + 1) * m * m);
      double det = 1.0;
      for (int64_t c = 0; c < m && det != 0.0; ++c) {
        int64_t pivot = c;
        for (int64_t r = c + 1; r < m; ++r)
          if (std::abs(a[r * m + c]) > std::abs(a[pivot * m + c])) pivot = r;
        if (a[pivot * m + c] == 0.0) {
          det = 0.0;
          break;
        }
        if (pivot != c) {
          for (int64_t k = 0; k < m; ++k) std::swap(a[c * m + k], a[pivot * m + k]);
          det = -det;
        }
        det *= a[c * m + c];
        for (int64_t r = c + 1; r < m; ++r) {
          const double f = a[r * m + c] / a[c * m + c];
          for (int64_t k = c; k < m; ++k) a[r * m + k] -= f * a[c * m + k];
        }
      }
      y[b] = static_cast<float>(det);
    }
  }

 private:
  int64_t m_;
};

// The input seen as [d0, d1, inner]; batch and time are d0 and d1 in some order. Within batch b
// the first sequence_lens[b] time steps are reversed, the rest copied.
class ReverseSequenceKernel final : public Kernel {
 public:
  explicit ReverseSequenceKernel(const NodeContext& ctx)
      : where_(ctx.where()),
        batch_first_(ctx.attr_int("batch_axis", 1) == 0),
        elem_(dtype_size(ctx.input_dtype(0))) {
    const Shape& x = ctx.input_shape(0);
    d0_ = x[0];
    d1_ = x[1];
    for (int d = 2; d < x.rank(); ++d) inner_ *= x[d];
  }

  void run(KernelContext& ctx) const override {
    const auto* x = static_cast<const char*>(ctx.inputs[0].raw_data());
    auto* y = static_cast<char*>(ctx.outputs[0].raw_data());
    const int64_t* lens = ctx.inputs[1].data<int64_t>();
    const int64_t batch = batch_first_ ? d0_ : d1_, time = batch_first_ ? d1_ : d0_;
    for (int64_t b = 0; b < batch; ++b)
      if (lens[b] < 0 || lens[b] > time)
        throw InvalidArgument(where_ + ": sequence_lens[" + std::to_string(b) +
                              "] = " + std::to_string(lens[b]) + " is outside [0, " +
                              std::to_string(time) + "]");
    const size_t chunk = static_cast<size_t>(inner_) * elem_;
    for (int64_t i0 = 0; i0 < d0_; ++i0) {
      for (int64_t i1 = 0; i1 < d1_; ++i1) {
        const int64_t b = batch_first_ ? i0 : i1, t = batch_first_ ? i1 : i0;
        const int64_t src_t = t < lens[b] ? lens[b] - 1 - t : t;
        const int64_t s0 = batch_first_ ? i0 : src_t, s1 = batch_first_ ? src_t : i1;
        std::memcpy(y + (i0 * d1_ + i1) * chunk, x + (s0 * d1_ + s1) * chunk, chunk);
      }
    }
  }

 private:
  std::string where_;
  bool batch_first_;
  size_t elem_;
  int64_t d0_ = 1;
  int64_t d1_ = 1;
  int64_t inner_ = 1;
};

std::unique_ptr<Kernel> make_shrink(const NodeContext& ctx) {
  return std::make_unique<ShrinkKernel>(ctx);
}

std::unique_ptr<Kernel> make_mvn(const NodeContext& ctx) {
  return std::make_unique<MvnKernel>(ctx);
}

std::unique_ptr<Kernel> make_det(const NodeContext& ctx) {
  return std::make_unique<DetKernel>(ctx);
}

std::unique_ptr<Kernel> make_reverse_sequence(const NodeContext& ctx) {
  return std::make_unique<ReverseSequenceKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Shrink, &make_shrink, &check_shrink);
LUMEN_REGISTER_CPU_KERNEL(MeanVarianceNormalization, &make_mvn, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(Det, &make_det, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(ReverseSequence, &make_reverse_sequence);

}  // namespace lumen::cpu
