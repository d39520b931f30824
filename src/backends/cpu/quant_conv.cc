// CPU kernels of ConvInteger and QLinearConv: grouped, strided, dilated and padded convolution of
// 8-bit tensors with zero points (x per tensor, w per tensor or per output channel), accumulated
// exactly in int32. Padding holds x's zero point, so it adds nothing. QLinearConv adds the int32
// bias and requantizes: y = saturate(round(acc * x_scale * w_scale[m] / y_scale) + y_zero_point).
// QLinearConv with channels_last=1 reads x and writes y as (N, ..., C).
#include <algorithm>
#include <memory>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/quant_dnnl.h"
#include "backends/cpu/quant_math.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::cpu {
namespace {

class IntegerConvBase : public Kernel {
 protected:
  IntegerConvBase(const NodeContext& ctx, int x_in, int w_in)
      : x_in_(x_in), w_in_(w_in), channels_last_(is_channels_last(ctx)) {
    const Shape x =
        channels_last_ ? to_channels_first(ctx.input_shape(x_in)) : ctx.input_shape(x_in);
    const Shape& w = ctx.input_shape(w_in);
    const ConvGeometry g = window_geometry(ctx, x, conv_kernel_shape(ctx, w), false);
    batch_ = x[0];
    in_channels_ = x[1];
    out_channels_ = w[0];
    group_ = ctx.attr_int("group", 1);
    for (int64_t v : g.in) in_spatial_ *= v;
    for (int64_t v : g.out) out_spatial_ *= v;
    for (int64_t v : g.kernel) kernel_spatial_ *= v;
    // source[kpos * out_spatial + o]: x's spatial offset read by kernel tap kpos at output o, or
    // -1 where the tap falls in the padding.
    source_.assign(static_cast<size_t>(kernel_spatial_ * out_spatial_), -1);
    const int s = g.spatial;
    std::vector<int64_t> kidx(s), oidx(s);
    for (int64_t kp = 0; kp < kernel_spatial_; ++kp) {
      int64_t rest = kp;
      for (int d = s - 1; d >= 0; --d) {
        kidx[d] = rest % g.kernel[d];
        rest /= g.kernel[d];
      }
      for (int64_t o = 0; o < out_spatial_; ++o) {
        int64_t r = o, off = 0, stride = 1;
        bool inside = true;
        for (int d = s - 1; d >= 0; --d) {
          oidx[d] = r % g.out[d];
          r /= g.out[d];
          const int64_t pos = oidx[d] * g.strides[d] - g.pad_begin[d] + kidx[d] * g.dilations[d];
          if (pos < 0 || pos >= g.in[d]) inside = false;
          off += pos * stride;
          stride *= g.in[d];
        }
        if (inside) source_[kp * out_spatial_ + o] = off;
      }
    }
  }

  // Calls emit(n, m, acc) with the int32 accumulators (out_spatial of them) of each image n and
  // output channel m. Per image and group, the zero-point-shifted inputs each output reads are
  // gathered as int16 rows ([-255, 255]; padding is 0 = x's zero point shifted), and each
  // accumulator is a contiguous int16 dot product with the shifted weights (exact in int32).
  template <typename Emit>
  void for_each_channel(KernelContext& ctx, const Tensor& x_zp, const Tensor& w_zp,
                        Emit emit) const {
    const Tensor& x = ctx.inputs[x_in_];
    const Tensor& w = ctx.inputs[w_in_];
    const int32_t xzp = zero_points(x_zp, 1)[0];
    const std::vector<int32_t> wzp = zero_points(w_zp, out_channels_);
    const int64_t cg = in_channels_ / group_, mg = out_channels_ / group_;
    const int64_t taps = cg * kernel_spatial_, os = out_spatial_, ks = kernel_spatial_;
    const int64_t is = in_spatial_, in_channels = in_channels_;
    // x's element steps between channels and between spatial positions.
    const int64_t c_step = channels_last_ ? 1 : is, s_step = channels_last_ ? in_channels : 1;
    const void* xd = x.raw_data();
    const void* wd = w.raw_data();
    const DType xt = x.dtype(), wt = w.dtype();
    std::vector<int16_t> wv(static_cast<size_t>(out_channels_ * taps));
    for (int64_t m = 0; m < out_channels_; ++m)
      for (int64_t t = 0; t < taps; ++t)
        wv[m * taps + t] = static_cast<int16_t>(load_8bit(wd, wt, m * taps + t) - wzp[m]);
    const int64_t tasks = batch_ * group_;
    const bool outer = group_ > 1 && mg < 4;
#pragma omp parallel for schedule(static) if (outer && tasks * taps * os > (1 << 16))
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t n = task / group_, g = task % group_;
      std::vector<int16_t> rows(static_cast<size_t>(os * taps));
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t x_base = n * in_channels * is + (g * cg + c) * c_step;
        for (int64_t kp = 0; kp < ks; ++kp) {
          const int64_t* src = source_.data() + kp * os;
          int16_t* col = rows.data() + c * ks + kp;
          for (int64_t o = 0; o < os; ++o)
            col[o * taps] =
                src[o] >= 0
                    ? static_cast<int16_t>(load_8bit(xd, xt, x_base + src[o] * s_step) - xzp)
                    : int16_t{0};
        }
      }
#pragma omp parallel for schedule(static) if (!outer && mg * taps * os > (1 << 16))
      for (int64_t mi = 0; mi < mg; ++mi) {
        const int64_t m = g * mg + mi;
        const int16_t* wr = wv.data() + m * taps;
        std::vector<int32_t> acc(static_cast<size_t>(os));
        for (int64_t o = 0; o < os; ++o) {
          acc[o] = dot_i16(rows.data() + o * taps, wr, taps);
        }
        emit(n, m, acc.data());
      }
    }
  }

  int x_in_;
  int w_in_;
  bool channels_last_ = false;
  int64_t batch_ = 1;
  int64_t in_channels_ = 1;
  int64_t out_channels_ = 1;
  int64_t group_ = 1;
  int64_t in_spatial_ = 1;
  int64_t out_spatial_ = 1;
  int64_t kernel_spatial_ = 1;
  std::vector<int64_t> source_;
};

// Inputs: x, w, x_zero_point, w_zero_point.
class ConvIntegerKernel final : public IntegerConvBase {
 public:
  explicit ConvIntegerKernel(const NodeContext& ctx) : IntegerConvBase(ctx, 0, 1) {}

  void run(KernelContext& ctx) const override {
    int32_t* y = ctx.outputs[0].data<int32_t>();
    auto input = [&](size_t i) { return i < ctx.inputs.size() ? ctx.inputs[i] : Tensor(); };
    const int64_t os = out_spatial_, oc = out_channels_;
    for_each_channel(ctx, input(2), input(3), [&](int64_t n, int64_t m, const int32_t* acc) {
      std::copy_n(acc, os, y + (n * oc + m) * os);
    });
  }
};

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
class QLinearConvKernel final : public IntegerConvBase {
 public:
  explicit QLinearConvKernel(const NodeContext& ctx)
      : IntegerConvBase(ctx, 0, 3), out_(ctx.output(0).dtype) {}

  void run(KernelContext& ctx) const override {
    const float xs = ctx.inputs[1].data<float>()[0];
    const std::vector<float> ws = scales(ctx.inputs[4], out_channels_);
    const float ys = ctx.inputs[6].data<float>()[0];
    const int32_t yzp = int_at(ctx.inputs[7], 0);
    const int32_t* bias = nullptr;
    if (ctx.inputs.size() > 8 && ctx.inputs[8].defined()) bias = ctx.inputs[8].data<int32_t>();
    const int32_t lo = quant_min(out_), hi = quant_max(out_);
    void* y = ctx.outputs[0].raw_data();
    const DType out = out_;
    const int64_t os = out_spatial_, oc = out_channels_;
    // y's element steps between channels and between spatial positions.
    const int64_t m_step = channels_last_ ? 1 : os, o_step = channels_last_ ? oc : 1;
    for_each_channel(
        ctx, ctx.inputs[2], ctx.inputs[5], [&](int64_t n, int64_t m, const int32_t* acc) {
          const double scale = static_cast<double>(xs) * ws[m] / ys;
          const int32_t b = bias ? bias[m] : 0;
          for (int64_t o = 0; o < os; ++o) {
            const float v = static_cast<float>((static_cast<int64_t>(acc[o]) + b) * scale);
            store_8bit(y, out, n * oc * os + m * m_step + o * o_step,
                       quantize_value(v, yzp, lo, hi));
          }
        });
  }

 private:
  DType out_;
};

std::unique_ptr<Kernel> make_conv_integer(const NodeContext& ctx) {
  return std::make_unique<ConvIntegerKernel>(ctx);
}

// oneDNN's int8 primitive where it is exact (quant_dnnl.h), else the reference loops.
std::unique_ptr<Kernel> make_qlinear_conv(const NodeContext& ctx) {
  if (std::unique_ptr<Kernel> fast = make_dnnl_qlinear_conv(ctx)) return fast;
  return std::make_unique<QLinearConvKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(ConvInteger, &make_conv_integer);
LUMEN_REGISTER_CPU_KERNEL(QLinearConv, &make_qlinear_conv);

}  // namespace lumen::cpu
