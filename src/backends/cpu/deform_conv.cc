// CPU kernel of DeformConv over float32 and float64, for 1 to 3 spatial dimensions, as a
// deformable im2col followed by one matrix product per batch entry and group:
//  1. taps: for each offset group, kernel point k and output point p, the sampling position
//     (the regular window position plus the learned offset) gives 2^d input corners with their
//     multilinear weights, times the mask; corners outside the input get weight 0. These are
//     shared by every channel of the offset group.
//  2. columns: cols[c * K + k, p] = sum over corners of weight * X[n, c, corner], per group.
//  3. Y[n, group rows] = W_group (Og x Cg*K) * cols (Cg*K x P) + B, through oneDNN's sgemm for
//     float32 and a plain row-by-row product for float64.
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 14;
constexpr int kMaxSpatial = 3;

template <typename T>
class DeformConvKernel final : public Kernel {
 public:
  explicit DeformConvKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const Shape& x = ctx.input_shape(0);
    const Shape& w = ctx.input_shape(1);
    g_ = window_geometry(ctx, x, conv_kernel_shape(ctx, w), false);
    batch_ = x[0];
    channels_ = x[1];
    out_channels_ = w[0];
    group_ = ctx.attr_int("group", 1);
    offset_group_ = ctx.attr_int("offset_group", 1);
    for (int i = 0; i < g_.spatial; ++i) {
      in_size_ *= g_.in[i];
      out_size_ *= g_.out[i];
      taps_ *= g_.kernel[i];
    }
    has_bias_ = ctx.has_input(3);
    has_mask_ = ctx.has_input(4);
  }

  void run(KernelContext& ctx) const override {
    const T* x = ctx.inputs[0].data<T>();
    const T* w = ctx.inputs[1].data<T>();
    const T* offset = ctx.inputs[2].data<T>();
    const T* bias = has_bias_ ? ctx.inputs[3].data<T>() : nullptr;
    const T* mask = has_mask_ ? ctx.inputs[4].data<T>() : nullptr;
    T* y = ctx.outputs[0].data<T>();
    const int corners = 1 << g_.spatial;
    const int64_t cg = channels_ / group_, og = out_channels_ / group_;
    const int64_t per_offset_group = channels_ / offset_group_;
    const int64_t rows = cg * taps_;  // of the column matrix
    const int64_t P = out_size_;
    // Scratch from the host pool (reused between runs, so no fresh pages to fault in).
    const int64_t tap_count = offset_group_ * taps_ * P * corners;
    Tensor tap_index_buf = Tensor::empty({tap_count}, DType::kInt32);
    Tensor tap_weight_buf = Tensor::empty({tap_count}, DTypeOf<T>::value);
    Tensor cols_buf = Tensor::empty({rows * P}, DTypeOf<T>::value);
    int32_t* tap_index = tap_index_buf.data<int32_t>();
    T* tap_weight = tap_weight_buf.data<T>();
    T* cols = cols_buf.data<T>();
    for (int64_t n = 0; n < batch_; ++n) {
      make_taps(offset + n * offset_group_ * taps_ * g_.spatial * P,
                mask ? mask + n * offset_group_ * taps_ * P : nullptr, tap_index, tap_weight);
      for (int64_t grp = 0; grp < group_; ++grp) {
        const bool parallel = rows * P * corners > kParallelWork;
        // Kernel point outermost, so each thread's run of rows reuses one kernel point's taps.
#pragma omp parallel for schedule(static) if (parallel)
        for (int64_t t = 0; t < rows; ++t) {
          const int64_t k = t / cg, cl = t % cg, c = grp * cg + cl;
          const int64_t first = ((c / per_offset_group) * taps_ + k) * P * corners;
          gather(x + (n * channels_ + c) * in_size_, tap_index + first, tap_weight + first, P,
                 corners, cols + (cl * taps_ + k) * P);
        }
        multiply(w + grp * og * rows, og, rows, P, cols, y + (n * out_channels_ + grp * og) * P,
                 bias ? bias + grp * og : nullptr);
      }
    }
  }

 private:
  // out[p] = sum of the p-th point's corner weights times the plane's values there.
  static void gather(const T* plane, const int32_t* index, const T* weight, int64_t points,
                     int corners, T* out) {
    switch (corners) {
      case 2:
        return gather_n<2>(plane, index, weight, points, out);
      case 4:
        return gather_n<4>(plane, index, weight, points, out);
      default:
        return gather_n<8>(plane, index, weight, points, out);
    }
  }
  template <int kCorners>
  static void gather_n(const T* plane, const int32_t* index, const T* weight, int64_t points,
                       T* out) {
    for (int64_t p = 0; p < points; ++p) {
      T v = 0;
      for (int q = 0; q < kCorners; ++q)
        v += weight[p * kCorners + q] * plane[index[p * kCorners + q]];
      out[p] = v;
    }
  }

  // Fills the taps of one batch entry: offsets (offset_group, K, d, P), mask (offset_group, K, P).
  void make_taps(const T* offset, const T* mask, int32_t* index, T* weight) const {
    const int d = g_.spatial;
    const int corners = 1 << d;
    const int64_t P = out_size_;
    const int64_t count = offset_group_ * taps_;
#pragma omp parallel for schedule(static) if (count * P > kParallelWork)
    for (int64_t gk = 0; gk < count; ++gk) {
      const int64_t k = gk % taps_;
      int64_t kidx[kMaxSpatial] = {};
      for (int64_t i = d - 1, rest = k; i >= 0; --i) {
        kidx[i] = rest % g_.kernel[i];
        rest /= g_.kernel[i];
      }
      const T* off = offset + gk * d * P;
      const T* m = mask ? mask + gk * P : nullptr;
      int64_t oidx[kMaxSpatial] = {};
      for (int64_t p = 0; p < P; ++p) {
        int64_t low[kMaxSpatial];
        T frac[kMaxSpatial];
        bool is_nan = false;
        for (int i = 0; i < d; ++i) {
          T pos = static_cast<T>(oidx[i] * g_.strides[i] - g_.pad_begin[i] +
                                 kidx[i] * g_.dilations[i]) +
                  off[i * P + p];
          is_nan = is_nan || std::isnan(pos);
          // Beyond one pixel outside the input every corner is outside; clamping there keeps
          // the conversion to an integer defined for any offset.
          pos = std::clamp(pos, T(-2), static_cast<T>(g_.in[i] + 1));
          const T fl = std::floor(pos);
          low[i] = is_nan ? 0 : static_cast<int64_t>(fl);
          frac[i] = pos - fl;
        }
        const T scale = m ? m[p] : T(1);
        int32_t* idx = index + (gk * P + p) * corners;
        T* wt = weight + (gk * P + p) * corners;
        for (int q = 0; q < corners; ++q) {
          T wq = scale;
          int64_t flat = 0;
          bool inside = true;
          for (int i = 0; i < d; ++i) {
            const int bit = (q >> (d - 1 - i)) & 1;
            const int64_t at = low[i] + bit;
            inside = inside && at >= 0 && at < g_.in[i];
            wq *= bit ? frac[i] : T(1) - frac[i];
            flat = flat * g_.in[i] + at;
          }
          // A NaN offset makes the output NaN, as interpolating at NaN does.
          idx[q] = inside ? static_cast<int32_t>(flat) : 0;
          wt[q] = is_nan ? std::numeric_limits<T>::quiet_NaN() : inside ? wq : T(0);
        }
        for (int i = d - 1; i >= 0; --i) {  // next output point
          if (++oidx[i] < g_.out[i]) break;
          oidx[i] = 0;
        }
      }
    }
  }

  // y (m x n) = a (m x k, row-major) * b (k x n) + bias[row].
  void multiply(const T* a, int64_t m, int64_t k, int64_t n, const T* b, T* y,
                const T* bias) const {
    if constexpr (std::is_same_v<T, float>) {
      if (k > 0 && dnnl_sgemm('N', 'N', m, n, k, 1.0f, a, k, b, n, 0.0f, y, n) != dnnl_success)
        throw DeviceError(where_ + ": oneDNN sgemm failed");
      if (k == 0) std::fill(y, y + m * n, 0.0f);
      if (bias) {
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) y[i * n + j] += bias[i];
      }
    } else {
#pragma omp parallel for schedule(static) if (m * n * k > kParallelWork)
      for (int64_t i = 0; i < m; ++i) {
        T* row = y + i * n;
        const T b0 = bias ? bias[i] : T(0);
        for (int64_t j = 0; j < n; ++j) row[j] = b0;
        for (int64_t t = 0; t < k; ++t) {
          const T av = a[i * k + t];
          const T* brow = b + t * n;
          for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
        }
      }
    }
  }

  std::string where_;
  ConvGeometry g_;
  int64_t batch_ = 0, channels_ = 0, out_channels_ = 0, group_ = 1, offset_group_ = 1;
  int64_t in_size_ = 1, out_size_ = 1, taps_ = 1;
  bool has_bias_ = false, has_mask_ = false;
};

std::string check_deform_conv(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (t != DType::kFloat32 && t != DType::kFloat64)
    return std::string("X is ") + dtype_name(t) + "; the CPU kernel takes float32, float64";
  const Shape& x = ctx.input_shape(0);
  if (x.rank() > 2 + kMaxSpatial) return "the CPU kernel takes 1 to 3 spatial dimensions";
  // Tap indices are int32: one channel plane of X must have fewer than 2^31 elements.
  int64_t plane = 1;
  for (int d = 2; d < x.rank(); ++d) plane *= x[d];
  if (plane > std::numeric_limits<int32_t>::max())
    return "an input channel plane of 2^31 or more elements";
  return "";
}

std::unique_ptr<Kernel> make_deform_conv(const NodeContext& ctx) {
  const std::string reason = check_deform_conv(ctx);
  if (!reason.empty()) ctx.fail_unsupported("CPU: " + reason);
  if (ctx.input_dtype(0) == DType::kFloat64) return std::make_unique<DeformConvKernel<double>>(ctx);
  return std::make_unique<DeformConvKernel<float>>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(DeformConv, &make_deform_conv, &check_deform_conv);

}  // namespace lumen::cpu
