// oneDNN int8 convolution and matmul for QLinearConv and QLinearMatMul. The primitive is made at
// compile time with the requantize as output scales (x_scale * w_scale[m] / y_scale, per output
// channel) and runtime zero points for x and y; the constant s8 weights are reordered once into
// its layout (with the compensation oneDNN keeps for s8 activations). The int32 accumulation is
// exact; the requantize multiplies in float32 where the reference kernels multiply in double and
// round to float32, so an output may differ by one unit where a product lies within a float32
// rounding of a half-way point (tested: tests/ops/qdq_fusion_test.cc).
#include "backends/cpu/quant_dnnl.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/dnnl_util.h"
#include "backends/cpu/int8_gemm.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/quant_math.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::cpu {
namespace {

using dnnl::memory;

memory::data_type dnnl_type(DType t) {
  switch (t) {
    case DType::kUInt8:
      return memory::data_type::u8;
    case DType::kInt8:
      return memory::data_type::s8;
    default:
      return memory::data_type::s32;
  }
}

// Row-major descriptor of `dims` with element type `t`.
memory::desc plain(const memory::dims& dims, memory::data_type t) {
  memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * std::max<memory::dim>(dims[i + 1], 1);
  return memory::desc(dims, t, strides);
}

// Channels-last descriptor of the (N, C, spatial...) `dims`: the elements in (N, spatial..., C)
// order.
memory::desc channels_last(const memory::dims& dims, memory::data_type t) {
  memory::dims strides(dims.size(), 1);
  memory::dim step = std::max<memory::dim>(dims[1], 1);
  for (size_t d = dims.size() - 1; d >= 2; --d) {
    strides[d] = step;
    step *= std::max<memory::dim>(dims[d], 1);
  }
  strides[0] = step;
  return memory::desc(dims, t, strides);
}

memory::desc scratch_md(size_t bytes) {
  return memory::desc({static_cast<memory::dim>(bytes)}, memory::data_type::u8,
                      memory::format_tag::a);
}

// A constant per-tensor (one-element) or absent input's value as int32 (0 when absent); nullopt
// when the input is given but not a constant.
std::optional<int32_t> const_zero_point(const NodeContext& ctx, int i) {
  if (!ctx.has_input(i)) return 0;
  const Tensor* t = ctx.input_value(i);
  if (!t || t->numel() != 1) return std::nullopt;
  return int_at(*t, 0);
}

// Whether input i is given, constant, and every element is zero.
bool all_zero(const NodeContext& ctx, int i) {
  if (!ctx.has_input(i)) return true;
  const Tensor* t = ctx.input_value(i);
  if (!t) return false;
  for (int64_t k = 0; k < t->numel(); ++k)
    if (int_at(*t, k) != 0) return false;
  return true;
}

int max_abs_s8(const Tensor& w) {
  const int8_t* p = w.data<int8_t>();
  int m = 0;
  for (int64_t i = 0; i < w.numel(); ++i) m = std::max(m, std::abs(static_cast<int>(p[i])));
  return m;
}

bool reference_impl(const std::string& impl) {
  return impl.rfind("ref", 0) == 0;
}

// A layout change made at compile time (user scratchpad: concurrent runs share no state).
struct Reorder {
  dnnl::reorder prim;
  size_t scratch_bytes = 0;
  Reorder(const memory::desc& from, const memory::desc& to) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::reorder::primitive_desc pd(dnnl_engine(), from, dnnl_engine(), to, attr);
    scratch_bytes = pd.scratchpad_desc().get_size();
    prim = dnnl::reorder(pd);
  }
};

// One int8 primitive (convolution or matmul) with the layout changes around it: x and y are
// plain row-major in Lumen; the primitive may want other layouts for them.
class DnnlInt8Kernel final : public Kernel {
 public:
  // Finishes setup from a primitive descriptor; `w_user` is the weights' plain layout and
  // `weights` their constant data.
  template <typename PD>
  void init(const PD& pd, const memory::desc& src_user, const memory::desc& w_user,
            const memory::desc& dst_user, const Tensor& weights, bool has_bias, int32_t x_zero,
            int32_t y_zero, bool src_zp, bool dst_zp) {
    prim_ = dnnl::primitive(pd);
    src_user_ = src_user;
    dst_user_ = dst_user;
    src_md_ = pd.src_desc();
    dst_md_ = pd.dst_desc();
    prim_scratch_md_ = pd.scratchpad_desc();
    scratch_bytes_ = prim_scratch_md_.get_size();
    impl_ = pd.impl_info_str();
    if (src_md_ != src_user_) src_reorder_.emplace(src_user_, src_md_);
    if (dst_md_ != dst_user_) dst_reorder_.emplace(dst_md_, dst_user_);
    for (const auto* r : {&src_reorder_, &dst_reorder_})
      if (r->has_value()) scratch_bytes_ = std::max(scratch_bytes_, (*r)->scratch_bytes);
    packed_w_ = memory(pd.weights_desc(), dnnl_engine());
    memory from(w_user, dnnl_engine(), const_cast<void*>(weights.raw_data()));
    dnnl::reorder(from, packed_w_).execute(dnnl_stream(), from, packed_w_);
    dnnl_stream().wait();
    has_bias_ = has_bias;
    if (has_bias) bias_md_ = pd.bias_desc();
    x_zero_ = x_zero;
    y_zero_ = y_zero;
    src_zp_ = src_zp;
    dst_zp_ = dst_zp;
  }

  // The weights (input `weight_input`) were packed at compile time.
  void set_weight_input(int k, int bias_input) {
    weight_input_ = k;
    bias_input_ = bias_input;
  }

  bool reads_input(int k) const override { return k != weight_input_; }
  std::string describe() const override {
    std::string d = "oneDNN int8 " + impl_;
    if (src_reorder_) d += ", input reordered";
    if (dst_reorder_) d += ", output reordered";
    return d;
  }

  void run(KernelContext& ctx) const override {
    dnnl_call(where_, [&] {
      dnnl::engine& eng = dnnl_engine();
      dnnl::stream& strm = dnnl_stream();
      Tensor scratch = scratch_bytes_
                           ? Tensor::empty({static_cast<int64_t>(scratch_bytes_)}, DType::kUInt8)
                           : Tensor();
      void* scratch_ptr = scratch_bytes_ ? scratch.raw_data() : nullptr;
      auto reorder = [&](const Reorder& r, const memory& from, const memory& to) {
        std::unordered_map<int, memory> args = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        if (r.scratch_bytes)
          args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch_md(r.scratch_bytes), eng, scratch_ptr));
        r.prim.execute(strm, args);
      };
      memory src(src_user_, eng, const_cast<void*>(ctx.inputs[0].raw_data()));
      Tensor src_tmp, dst_tmp;
      if (src_reorder_) {
        src_tmp = Tensor::empty({static_cast<int64_t>(src_md_.get_size())}, DType::kUInt8);
        memory to(src_md_, eng, src_tmp.raw_data());
        reorder(*src_reorder_, src, to);
        src = to;
      }
      memory dst_plain(dst_user_, eng, ctx.outputs[0].raw_data());
      memory dst = dst_plain;
      if (dst_reorder_) {
        dst_tmp = Tensor::empty({static_cast<int64_t>(dst_md_.get_size())}, DType::kUInt8);
        dst = memory(dst_md_, eng, dst_tmp.raw_data());
      }
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, packed_w_}, {DNNL_ARG_DST, dst}};
      if (has_bias_)
        args.emplace(DNNL_ARG_BIAS,
                     memory(bias_md_, eng, const_cast<void*>(ctx.inputs[bias_input_].raw_data())));
      const memory::desc zp_md({1}, memory::data_type::s32, memory::format_tag::a);
      int32_t xz = x_zero_, yz = y_zero_;
      if (src_zp_) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory(zp_md, eng, &xz));
      if (dst_zp_) args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, memory(zp_md, eng, &yz));
      if (prim_scratch_md_.get_size())
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(prim_scratch_md_, eng, scratch_ptr));
      prim_.execute(strm, args);
      if (dst_reorder_) reorder(*dst_reorder_, dst, dst_plain);
      strm.wait();
    });
  }

  std::string where_;

 private:
  dnnl::primitive prim_;
  memory::desc src_user_, dst_user_, src_md_, dst_md_, bias_md_, prim_scratch_md_;
  std::optional<Reorder> src_reorder_, dst_reorder_;
  memory packed_w_;
  size_t scratch_bytes_ = 0;
  bool has_bias_ = false;
  int32_t x_zero_ = 0, y_zero_ = 0;
  bool src_zp_ = false, dst_zp_ = false;
  int weight_input_ = 3, bias_input_ = 8;
  std::string impl_;
};

// The int32 accumulators of an int8 product, requantized the reference kernels' way (quant_conv.cc,
// quant_gemm.cc): y = round(float((acc + bias[c]) * (double(x_scale) * w_scale[c] / y_scale))) +
// y_zero_point, saturated. acc is [outer, channels, inner] (inner 1 where channels are last).
struct Requantize {
  std::vector<double> scale;  // per channel
  int64_t channels = 1, inner = 1;
  int32_t y_zero = 0;
  DType out = DType::kUInt8;

  void run(const int32_t* acc, const int32_t* bias, void* y, int64_t total) const {
    if (out == DType::kInt8)
      apply(acc, bias, static_cast<int8_t*>(y), total);
    else
      apply(acc, bias, static_cast<uint8_t*>(y), total);
  }

  template <typename YT>
  void apply(const int32_t* acc, const int32_t* bias, YT* y, int64_t total) const {
    const int64_t rows = total / (channels * inner);
    const float lo = static_cast<float>(quant_min(out)), hi = static_cast<float>(quant_max(out));
    auto body = [&, lo, hi](int64_t r0, int64_t r1) {
      // Locals, so the byte stores cannot alias what the loops read.
      const double* const sc = scale.data();
      const int32_t* const a = acc;
      const int32_t* const bi = bias;
      YT* const yl = y;
      const int64_t nc = channels, ni = inner;
      const float flo = lo, fhi = hi, fz = static_cast<float>(y_zero);
      // (acc + bias) in double is exact, as the reference kernels' int64 sum.
      auto quantize = [=](int32_t v, double b, double s) {
        const float f = static_cast<float>((v + b) * s);
        return static_cast<YT>(
            static_cast<int32_t>(std::min(std::max(std::nearbyint(f) + fz, flo), fhi)));
      };
      for (int64_t r = r0; r < r1; ++r) {
        if (ni == 1) {
          for (int64_t c = 0; c < nc; ++c)
            yl[r * nc + c] = quantize(a[r * nc + c], bi ? bi[c] : 0, sc[c]);
          continue;
        }
        for (int64_t c = 0; c < nc; ++c) {
          const double b = bi ? bi[c] : 0, s = sc[c];
          const int64_t base = (r * nc + c) * ni;
          for (int64_t i = 0; i < ni; ++i) yl[base + i] = quantize(a[base + i], b, s);
        }
      }
    };
    const int64_t block = std::max<int64_t>(1, 8192 / std::max<int64_t>(channels * inner, 1));
    const int64_t blocks = (rows + block - 1) / block;
#pragma omp parallel for schedule(static) if (total > (1 << 15))
    for (int64_t t = 0; t < blocks; ++t) isa_call(body, t * block, std::min(rows, (t + 1) * block));
  }
};

// n int8 values w (each the byte src[i] ^ flip: a flip of 0x80 re-centres a uint8 to int8, 0 takes
// an int8 as it is) split into two halves of magnitude at most 64, hi = floor(w / 2) and
// lo = w - hi, each exact in oneDNN's int8 products without VNNI (quant_dnnl.h). One pass.
void split_halves(const uint8_t* src, uint8_t flip, int8_t* hi, int8_t* lo, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const auto w = static_cast<int8_t>(src[i] ^ flip);
    hi[i] = static_cast<int8_t>(w >> 1);
    lo[i] = static_cast<int8_t>(w - hi[i]);
  }
}

// Constant int8 weights split by split_halves.
std::pair<Tensor, Tensor> split_weights(const Tensor& w) {
  Tensor hi = Tensor::empty(w.shape(), DType::kInt8), lo = Tensor::empty(w.shape(), DType::kInt8);
  split_halves(static_cast<const uint8_t*>(w.raw_data()), 0, hi.data<int8_t>(), lo.data<int8_t>(),
               w.numel());
  return {hi, lo};
}

// An int8 convolution or matmul with constant s8 weights beyond +-64 on a CPU without VNNI, exact:
// oneDNN multiplies x by each half of the split weights into one int32 accumulator (the second
// product through a sum post-op), then Requantize adds the bias and rounds as the reference
// kernels do. Two products at the saturating instructions' speed cost far less than the reference
// loops (ResNet-50 with full-range weights on 2 AVX2 cores: see docs/benchmarks.md, int8).
class DnnlInt8SplitKernel final : public Kernel {
 public:
  // `make_pd(attr, weights_md)` gives the primitive descriptor (src and dst fixed to the user
  // layouts, dst s32) for an attribute.
  template <typename PD, typename MakePd>
  bool init(MakePd make_pd, const memory::desc& w_user, const Tensor& weights, int32_t x_zero,
            Requantize requantize) {
    // Two attributes (a dnnl::primitive_attr copy shares its handle): the second adds the sum.
    auto make_attr = [&](bool sum) {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      if (x_zero != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      if (sum) {
        dnnl::post_ops ops;
        ops.append_sum(1.0F);
        attr.set_post_ops(ops);
      }
      return attr;
    };
    const PD pd_hi = make_pd(make_attr(false)), pd_lo = make_pd(make_attr(true));
    impl_ = pd_hi.impl_info_str();
    if (reference_impl(impl_) || reference_impl(pd_lo.impl_info_str())) return false;
    if (pd_hi.weights_desc() != pd_lo.weights_desc()) return false;
    hi_ = dnnl::primitive(pd_hi);
    lo_ = dnnl::primitive(pd_lo);
    src_md_ = pd_hi.src_desc();
    dst_md_ = pd_hi.dst_desc();
    scratch_md_ = pd_hi.scratchpad_desc().get_size() >= pd_lo.scratchpad_desc().get_size()
                      ? pd_hi.scratchpad_desc()
                      : pd_lo.scratchpad_desc();
    const auto [hi, lo] = split_weights(weights);
    for (auto [from_t, to] : {std::pair{&hi, &w_hi_}, std::pair{&lo, &w_lo_}}) {
      *to = memory(pd_hi.weights_desc(), dnnl_engine());
      memory from(w_user, dnnl_engine(), const_cast<void*>(from_t->raw_data()));
      dnnl::reorder(from, *to).execute(dnnl_stream(), from, *to);
    }
    dnnl_stream().wait();
    x_zero_ = x_zero;
    requantize_ = std::move(requantize);
    return true;
  }

  void set_inputs(int weight_input, int bias_input) {
    weight_input_ = weight_input;
    bias_input_ = bias_input;
  }

  bool reads_input(int k) const override { return k != weight_input_; }
  std::string describe() const override {
    return "oneDNN int8 " + impl_ + " x2 (weights split in halves of at most 64: no VNNI)";
  }

  void run(KernelContext& ctx) const override {
    const int64_t total = ctx.outputs[0].numel();
    Tensor acc = Tensor::empty({total}, DType::kInt32);
    const size_t scratch_bytes = scratch_md_.get_size();
    Tensor scratch = Tensor::empty({static_cast<int64_t>(scratch_bytes) + 1}, DType::kUInt8);
    dnnl_call(where_, [&] {
      dnnl::engine& eng = dnnl_engine();
      const memory src(src_md_, eng, const_cast<void*>(ctx.inputs[0].raw_data()));
      const memory dst(dst_md_, eng, acc.raw_data());
      const memory::desc zp_md({1}, memory::data_type::s32, memory::format_tag::a);
      int32_t xz = x_zero_;
      for (const auto* part : {&hi_, &lo_}) {
        std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src},
                                                {DNNL_ARG_WEIGHTS, part == &hi_ ? w_hi_ : w_lo_},
                                                {DNNL_ARG_DST, dst}};
        if (x_zero_ != 0)
          args.emplace(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory(zp_md, eng, &xz));
        if (scratch_bytes)
          args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch_md_, eng, scratch.raw_data()));
        part->execute(dnnl_stream(), args);
      }
      dnnl_stream().wait();
    });
    const int32_t* bias = bias_input_ >= 0 &&
                                  static_cast<size_t>(bias_input_) < ctx.inputs.size() &&
                                  ctx.inputs[bias_input_].defined()
                              ? ctx.inputs[bias_input_].data<int32_t>()
                              : nullptr;
    requantize_.run(acc.data<int32_t>(), bias, ctx.outputs[0].raw_data(), total);
  }

  std::string where_;

 private:
  dnnl::primitive hi_, lo_;
  memory w_hi_, w_lo_;
  memory::desc src_md_, dst_md_, scratch_md_;
  int32_t x_zero_ = 0;
  Requantize requantize_;
  int weight_input_ = 3, bias_input_ = -1;
  std::string impl_;
};

// Per-channel x_scale * w_scale[c] / y_scale in double, as the reference kernels compute it.
std::vector<double> requantize_scales(const NodeContext& ctx, int xs, int ws, int ys, int64_t m) {
  const double x = ctx.input_value(xs)->data<float>()[0], y = ctx.input_value(ys)->data<float>()[0];
  const Tensor& w = *ctx.input_value(ws);
  std::vector<double> out(static_cast<size_t>(m));
  for (int64_t c = 0; c < m; ++c) out[c] = x * w.data<float>()[w.numel() == 1 ? 0 : c] / y;
  return out;
}

// The attributes shared by both primitives: user scratchpad, output scales (per channel along
// dimension `channel_dim` of y when there are several), runtime zero points for x and y.
dnnl::primitive_attr int8_attr(const std::vector<float>& out_scales, int channel_dim, bool src_zp,
                               bool dst_zp) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(out_scales.size() > 1 ? 1 << channel_dim : 0, out_scales);
  if (src_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (dst_zp) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  return attr;
}

// x_scale * w_scale[m] / y_scale for each of `m` output channels (one value when w is per tensor).
std::optional<std::vector<float>> output_scales(const NodeContext& ctx, int xs, int ws, int ys,
                                                int64_t m) {
  const Tensor* x = ctx.input_value(xs);
  const Tensor* w = ctx.input_value(ws);
  const Tensor* y = ctx.input_value(ys);
  if (!x || !w || !y || x->numel() != 1 || y->numel() != 1) return std::nullopt;
  const double xv = x->data<float>()[0], yv = y->data<float>()[0];
  std::vector<float> out;
  for (int64_t c = 0; c < (w->numel() == 1 ? 1 : m); ++c)
    out.push_back(static_cast<float>(xv * w->data<float>()[c] / yv));
  return out;
}

// QLinearMatMul of two activations (B not a constant: attention's Q.K^T and P.V), per-tensor
// parameters, the same batch dims on A and B. oneDNN multiplies A (with its zero point) by
// B' = B - 128 as s8 when B is u8 (an exact re-centring) into int32; the product with B's zero
// point is then P - (b_zero - 128) * sum_k (a - a_zero) per row, and the requantize is the
// reference kernel's (quant_gemm.cc): acc * (double(a_scale) * b_scale / y_scale) rounded to float.
class DnnlActivationMatMul final : public Kernel {
 public:
  DnnlActivationMatMul(const NodeContext& ctx, int64_t batch, int64_t m, int64_t k, int64_t n)
      : batch_(batch), m_(m), k_(k), n_(n) {
    const memory::data_type at = dnnl_type(ctx.input(0).dtype);
    b_unsigned_ = ctx.input(3).dtype == DType::kUInt8;
    out_ = ctx.output(0).dtype;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::matmul::desc desc(plain({batch, m, k}, at), plain({batch, k, n}, memory::data_type::s8),
                            plain({batch, m, n}, memory::data_type::s32));
    dnnl::matmul::primitive_desc pd(desc, attr, dnnl_engine());
    impl_ = pd.impl_info_str();
    prim_ = dnnl::matmul(pd);
    // Without VNNI B' (all of s8) is split in halves of at most 64, the second product added to
    // the first through a sum post-op (as DnnlInt8SplitKernel's weights).
    split_ = !dnnl_int8_exact(128, at == memory::data_type::s8);
    if (split_) {
      dnnl::post_ops ops;
      ops.append_sum(1.0F);
      attr.set_post_ops(ops);
      dnnl::matmul::primitive_desc pd_lo(desc, attr, dnnl_engine());
      if (reference_impl(pd_lo.impl_info_str()) ||
          pd_lo.scratchpad_desc().get_size() > pd.scratchpad_desc().get_size())
        impl_ = "ref";  // not usable
      else
        prim_lo_ = dnnl::matmul(pd_lo);
    }
    src_md_ = pd.src_desc();
    wei_md_ = pd.weights_desc();
    dst_md_ = pd.dst_desc();
    scratch_md_ = pd.scratchpad_desc();
    a_signed_ = at == memory::data_type::s8;
  }

  bool usable() const { return !reference_impl(impl_); }
  std::string describe() const override {
    return "oneDNN int8 " + impl_ + " (B at run time" +
           (split_ ? ", split in halves: no VNNI)" : ")");
  }

  void run(KernelContext& ctx) const override {
    const int32_t az = int_at(ctx.inputs[2], 0), yz = int_at(ctx.inputs[7], 0);
    const int32_t bz = int_at(ctx.inputs[5], 0) - (b_unsigned_ ? 128 : 0);
    const double scale = static_cast<double>(ctx.inputs[1].data<float>()[0]) *
                         ctx.inputs[4].data<float>()[0] / ctx.inputs[6].data<float>()[0];
    // B as s8: a uint8 B re-centred (B ^ 0x80 is B - 128), an int8 one as it is; without VNNI
    // split in halves in the same pass.
    const int64_t nb = batch_ * k_ * n_;
    const auto* b = static_cast<const uint8_t*>(ctx.inputs[3].raw_data());
    const uint8_t flip = b_unsigned_ ? 0x80 : 0;
    Tensor b_s8 = ctx.inputs[3];
    Tensor b_lo;
    if (split_) {
      b_s8 = Tensor::empty({nb}, DType::kInt8);
      b_lo = Tensor::empty({nb}, DType::kInt8);
      split_halves(b, flip, b_s8.data<int8_t>(), b_lo.data<int8_t>(), nb);
    } else if (b_unsigned_) {
      b_s8 = Tensor::empty({nb}, DType::kInt8);
      auto* bs = static_cast<uint8_t*>(b_s8.raw_data());
      for (int64_t i = 0; i < nb; ++i) bs[i] = b[i] ^ flip;
    }
    Tensor acc = Tensor::empty({batch_ * m_ * n_}, DType::kInt32);
    Tensor scratch =
        Tensor::empty({static_cast<int64_t>(scratch_md_.get_size()) + 1}, DType::kUInt8);
    dnnl_call(where_, [&] {
      dnnl::engine& eng = dnnl_engine();
      int32_t zp = az;
      const memory::desc zp_md({1}, memory::data_type::s32, memory::format_tag::a);
      auto product = [&](const dnnl::matmul& prim, const Tensor& b_part) {
        prim.execute(
            dnnl_stream(),
            {{DNNL_ARG_SRC, memory(src_md_, eng, const_cast<void*>(ctx.inputs[0].raw_data()))},
             {DNNL_ARG_WEIGHTS, memory(wei_md_, eng, const_cast<void*>(b_part.raw_data()))},
             {DNNL_ARG_DST, memory(dst_md_, eng, acc.raw_data())},
             {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory(zp_md, eng, &zp)},
             {DNNL_ARG_SCRATCHPAD, memory(scratch_md_, eng, scratch.raw_data())}});
      };
      product(prim_, b_s8);
      if (split_) product(prim_lo_, b_lo);
      dnnl_stream().wait();
    });
    const int32_t* p = acc.data<int32_t>();
    const void* a = ctx.inputs[0].raw_data();
    void* y = ctx.outputs[0].raw_data();
    if (a_signed_)
      epilogue(static_cast<const int8_t*>(a), p, y, az, bz, scale, yz);
    else
      epilogue(static_cast<const uint8_t*>(a), p, y, az, bz, scale, yz);
  }

  // y = requantize(P - b_zero' * rowsum(A - a_zero)) for every row, in parallel blocks of rows,
  // each through isa_call (vectorised for AVX2 where the CPU has it).
  template <typename AT>
  void epilogue(const AT* a, const int32_t* p, void* y, int32_t az, int32_t bz, double scale,
                int32_t yz) const {
    if (out_ == DType::kInt8)
      epilogue(a, p, static_cast<int8_t*>(y), az, bz, scale, yz);
    else
      epilogue(a, p, static_cast<uint8_t*>(y), az, bz, scale, yz);
  }

  template <typename AT, typename YT>
  void epilogue(const AT* a, const int32_t* p, YT* y, int32_t az, int32_t bz, double scale,
                int32_t yz) const {
    const int64_t rows = batch_ * m_, k = k_, n = n_;
    const float lo = static_cast<float>(quant_min(out_)), hi = static_cast<float>(quant_max(out_));
    const float zf = static_cast<float>(yz);
    auto body = [=](int64_t r0, int64_t r1) {
      // Locals: the byte stores to y may alias anything the lambda holds, which would reload
      // every capture per element and keep the loop scalar.
      const double sc = scale;
      const float flo = lo, fhi = hi, fz = zf;
      const int64_t kk = k, nn = n;
      const int32_t bzl = bz, corr_az = static_cast<int32_t>(k) * az;
      const AT* const al = a;
      const int32_t* const pl = p;
      YT* const yl = y;
      for (int64_t r = r0; r < r1; ++r) {
        int32_t sum = 0;
        for (int64_t j = 0; j < kk; ++j) sum += static_cast<int32_t>(al[r * kk + j]);
        const int32_t correction = bzl * (sum - corr_az);
        const int32_t* pr = pl + r * nn;
        YT* yr = yl + r * nn;
        // quantize_value (quant_math.h) without its NaN case: the scale is finite.
        for (int64_t j = 0; j < nn; ++j) {
          const float v = static_cast<float>((pr[j] - correction) * sc);
          const float q = std::nearbyint(v) + fz;
          yr[j] = static_cast<YT>(static_cast<int32_t>(std::min(std::max(q, flo), fhi)));
        }
      }
    };
    const int64_t block = std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1));
    const int64_t blocks = (rows + block - 1) / block;
#pragma omp parallel for schedule(static) if (rows * n > (1 << 15))
    for (int64_t t = 0; t < blocks; ++t) isa_call(body, t * block, std::min(rows, (t + 1) * block));
  }

 public:
  std::string where_;

 private:
  int64_t batch_, m_, k_, n_;
  bool b_unsigned_ = false, a_signed_ = false, split_ = false;
  DType out_ = DType::kUInt8;
  dnnl::matmul prim_, prim_lo_;
  memory::desc src_md_, wei_md_, dst_md_, scratch_md_;
  std::string impl_;
};

// The split kernel of a node (DnnlInt8SplitKernel), or nullptr where oneDNN has only its
// reference implementation for it.
template <typename PD, typename MakePd>
std::unique_ptr<Kernel> make_split_kernel(const NodeContext& ctx, MakePd make_pd,
                                          const memory::desc& w_user, const Tensor& weights,
                                          int32_t x_zero, Requantize requantize, int bias_input) {
  auto kernel = std::make_unique<DnnlInt8SplitKernel>();
  try {
    if (!kernel->init<PD>(make_pd, w_user, weights, x_zero, std::move(requantize))) return nullptr;
  } catch (const dnnl::error&) {
    return nullptr;
  }
  kernel->set_inputs(3, bias_input);
  kernel->where_ = ctx.where();
  return kernel;
}

// Whether oneDNN's depthwise int8 convolutions are exact at any weight range on this CPU without
// VNNI: its AVX2 depthwise kernels widen to int32 before multiplying (no pairwise int16 sum),
// checked at the saturating extremes by QdqKernels.DepthwiseExtremesMatchReference. Other levels
// without VNNI (AVX-512 before VNNI) are not assumed so: they take the split.
bool dnnl_depthwise_int8_exact() {
  return dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx2;
}

}  // namespace

bool dnnl_int8_exact(int max_abs_weight, bool signed_activations) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const unsigned vnni = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_vnni) & ~0x27u;
  const unsigned avx_vnni = static_cast<unsigned>(dnnl_cpu_isa_avx2_vnni) & ~0x7u;
  if ((isa & (vnni | avx_vnni)) != 0) return true;
  return max_abs_weight <= 64 && !signed_activations;
}

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
std::unique_ptr<Kernel> make_dnnl_qlinear_conv(const NodeContext& ctx) {
  const Tensor* w = ctx.input_value(3);
  if (!w || w->dtype() != DType::kInt8 || !all_zero(ctx, 5)) return nullptr;
  const bool nhwc = is_channels_last(ctx);
  const Shape x = nhwc ? to_channels_first(ctx.input_shape(0)) : ctx.input_shape(0);
  const Shape y = nhwc ? to_channels_first(ctx.output(0).shape) : ctx.output(0).shape;
  if (x.numel() == 0 || y.numel() == 0 || x.rank() < 3 || x.rank() > 5) return nullptr;
  const std::optional<int32_t> xz = const_zero_point(ctx, 2), yz = const_zero_point(ctx, 7);
  const int64_t m = y[1];
  const std::optional<std::vector<float>> scales = output_scales(ctx, 1, 4, 6, m);
  const bool signed_x = ctx.input(0).dtype == DType::kInt8;
  const int64_t group_count = ctx.attr_int("group", 1);
  const bool depthwise = group_count > 1 && group_count == x[1] && group_count == m;
  const bool exact = dnnl_int8_exact(max_abs_s8(*w), signed_x) ||
                     (depthwise && !signed_x && dnnl_depthwise_int8_exact());
  if (!xz || !yz || !scales || (!exact && signed_x)) return nullptr;
  const Shape& ws = w->shape();
  const int64_t group = ctx.attr_int("group", 1);
  std::vector<int64_t> kernel(ws.dims().begin() + 2, ws.dims().end());
  const ConvGeometry g = window_geometry(ctx, x, kernel, false);
  memory::dims w_dims = {ws[0] / group, ws[1]};
  if (group > 1) w_dims.insert(w_dims.begin(), group);
  w_dims.insert(w_dims.end(), kernel.begin(), kernel.end());
  const memory::desc w_user = plain(w_dims, memory::data_type::s8);
  const memory::dims x_dims = to_dnnl_dims(x), y_dims = to_dnnl_dims(y);
  const auto layout = nhwc ? &channels_last : &plain;
  const memory::desc src_user = layout(x_dims, dnnl_type(ctx.input(0).dtype));
  const memory::desc dst_user = layout(y_dims, dnnl_type(ctx.output(0).dtype));
  const bool has_bias = ctx.has_input(8);
  memory::dims strides(g.strides.begin(), g.strides.end()),
      pad_l(g.pad_begin.begin(), g.pad_begin.end()), pad_r(g.pad_end.begin(), g.pad_end.end()),
      dil(g.dilations.begin(), g.dilations.end());
  for (auto& d : dil) d -= 1;
  for (auto p : pad_r)
    if (p < 0) return nullptr;
  if (!exact) {
    Requantize requantize{requantize_scales(ctx, 1, 4, 6, m), m, nhwc ? 1 : y.numel() / (y[0] * m),
                          *yz, ctx.output(0).dtype};
    const memory::desc dst_s32 = layout(y_dims, memory::data_type::s32);
    auto make_pd = [&](const dnnl::primitive_attr& attr) {
      dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_user,
          memory::desc(w_dims, memory::data_type::s8, memory::format_tag::any), memory::desc(),
          dst_s32, strides, dil, pad_l, pad_r);
      return dnnl::convolution_forward::primitive_desc(desc, attr, dnnl_engine());
    };
    return make_split_kernel<dnnl::convolution_forward::primitive_desc>(
        ctx, make_pd, w_user, *w, *xz, std::move(requantize), 8);
  }
  auto kernel_ptr = std::make_unique<DnnlInt8Kernel>();
  try {
    const bool src_zp = *xz != 0, dst_zp = *yz != 0;
    dnnl::primitive_attr attr = int8_attr(*scales, 1, src_zp, dst_zp);
    auto any = [](const memory::dims& d, memory::data_type t) {
      return memory::desc(d, t, memory::format_tag::any);
    };
    const memory::desc bias_md = has_bias ? plain({m}, memory::data_type::s32) : memory::desc();
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        any(x_dims, src_user.data_type()), any(w_dims, memory::data_type::s8), bias_md,
        any(y_dims, dst_user.data_type()), strides, dil, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, dnnl_engine());
    if (reference_impl(pd.impl_info_str())) return nullptr;
    kernel_ptr->init(pd, src_user, w_user, dst_user, *w, has_bias, *xz, *yz, src_zp, dst_zp);
  } catch (const dnnl::error&) {
    return nullptr;
  }
  kernel_ptr->set_weight_input(3, 8);
  kernel_ptr->where_ = ctx.where();
  return kernel_ptr;
}

namespace {

// QLinearMatMul with B at run time (DnnlActivationMatMul), or nullptr: parameters not per-tensor
// constants, batch dims that differ, or s8 A on a CPU without VNNI.
std::unique_ptr<Kernel> make_dnnl_activation_matmul(const NodeContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(3);
  if (a.rank() < 2 || b.rank() != a.rank() || a.numel() == 0 || b.numel() == 0) return nullptr;
  for (int d = 0; d + 2 < a.rank(); ++d)
    if (a[d] != b[d]) return nullptr;
  for (int k : {1, 2, 4, 5, 6, 7}) {
    const Tensor* t = ctx.input_value(k);
    if (!ctx.has_input(k) || !t || t->numel() != 1) return nullptr;
  }
  // Without VNNI, Lumen's GEMM with B packed per call (int8_gemm.h): one exact product for u8 or
  // s8 A, where oneDNN needs two split ones (u8 A) or has none (s8 A: it halves the weights).
  if (!dnnl_int8_exact(128, false) && has_avx2())
    return make_int8_gemm_activation_matmul(ctx.input(0).dtype == DType::kInt8,
                                            ctx.input(3).dtype == DType::kUInt8,
                                            ctx.output(0).dtype);
  // Below AVX2 without VNNI: oneDNN's split products for u8 A; s8 A has no exact oneDNN form.
  if (!dnnl_int8_exact(128, false) && ctx.input(0).dtype == DType::kInt8) return nullptr;
  const int64_t m = a[-2], k = a[-1], n = b[-1];
  const int64_t batch = a.numel() / (m * k);
  try {
    auto kernel = std::make_unique<DnnlActivationMatMul>(ctx, batch, m, k, n);
    if (!kernel->usable()) return nullptr;
    kernel->where_ = ctx.where();
    return kernel;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

}  // namespace

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
std::unique_ptr<Kernel> make_dnnl_qlinear_matmul(const NodeContext& ctx) {
  const Tensor* b = ctx.input_value(3);
  if (!b) return make_dnnl_activation_matmul(ctx);
  if (b->dtype() != DType::kInt8 || b->shape().rank() != 2 || !all_zero(ctx, 5)) return nullptr;
  const Shape& a = ctx.input_shape(0);
  if (a.rank() < 2 || a.numel() == 0) return nullptr;
  const int64_t k = b->shape()[0], n = b->shape()[1], rows = a.numel() / k;
  if (ctx.input_shape(1).numel() != 1) return nullptr;  // per-row a_scale
  const std::optional<int32_t> az = const_zero_point(ctx, 2), yz = const_zero_point(ctx, 7);
  const std::optional<std::vector<float>> scales = output_scales(ctx, 1, 4, 6, n);
  const bool signed_a = ctx.input(0).dtype == DType::kInt8;
  if (!az || !yz || !scales) return nullptr;
  // Without VNNI, Lumen's GEMM (int8_gemm.h): exact at every weight and for s8 A in one product,
  // and as fast as oneDNN's AVX2 gemm where that is exact (7-bit weights, u8 A; faster on one
  // core).
  if (has_avx2() && !dnnl_int8_exact(128, false) && k <= 65536)
    return make_int8_gemm_matmul(*b, signed_a, *az, requantize_scales(ctx, 1, 4, 6, n), *yz,
                                 ctx.output(0).dtype);
  const bool exact = dnnl_int8_exact(max_abs_s8(*b), signed_a);
  if (!exact && signed_a) return nullptr;
  const memory::desc src_user = plain({rows, k}, dnnl_type(ctx.input(0).dtype));
  const memory::desc dst_user = plain({rows, n}, dnnl_type(ctx.output(0).dtype));
  const memory::desc w_user = plain({k, n}, memory::data_type::s8);
  if (!exact) {
    auto make_pd = [&](const dnnl::primitive_attr& attr) {
      dnnl::matmul::desc desc(src_user,
                              memory::desc({k, n}, memory::data_type::s8, memory::format_tag::any),
                              plain({rows, n}, memory::data_type::s32));
      return dnnl::matmul::primitive_desc(desc, attr, dnnl_engine());
    };
    return make_split_kernel<dnnl::matmul::primitive_desc>(
        ctx, make_pd, w_user, *b, *az,
        Requantize{requantize_scales(ctx, 1, 4, 6, n), n, 1, *yz, ctx.output(0).dtype}, -1);
  }
  auto kernel_ptr = std::make_unique<DnnlInt8Kernel>();
  try {
    const bool src_zp = *az != 0, dst_zp = *yz != 0;
    dnnl::primitive_attr attr = int8_attr(*scales, 1, src_zp, dst_zp);
    dnnl::matmul::desc desc(
        src_user, memory::desc({k, n}, memory::data_type::s8, memory::format_tag::any), dst_user);
    dnnl::matmul::primitive_desc pd(desc, attr, dnnl_engine());
    if (reference_impl(pd.impl_info_str())) return nullptr;
    kernel_ptr->init(pd, src_user, w_user, dst_user, *b, false, *az, *yz, src_zp, dst_zp);
  } catch (const dnnl::error&) {
    return nullptr;
  }
  kernel_ptr->set_weight_input(3, -1);
  kernel_ptr->where_ = ctx.where();
  return kernel_ptr;
}

}  // namespace lumen::cpu
