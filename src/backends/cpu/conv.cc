// CPU kernels of Conv and ConvTranspose: one oneDNN (de)convolution primitive per node, made at
// compile time, with constant weights reordered once into the primitive's preferred layout.
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/depthwise_conv.h"
#include "backends/cpu/dnnl_util.h"
#include "backends/cpu/grouped_conv.h"
#include "backends/cpu/im2col_conv.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_choice.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/packed_gemm.h"
#include "backends/cpu/winograd.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::cpu {
namespace {

using dnnl::memory;

// Row-major descriptor of float32 `dims`.
memory::desc plain_desc(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  return memory::desc(dims, memory::data_type::f32, strides);
}

// Channels-last descriptor of float32 (N, C, spatial...) `dims`: C varies fastest.
memory::desc channels_last_desc(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  memory::dim step = dims[1];
  for (int i = static_cast<int>(dims.size()) - 1; i >= 2; --i) {
    strides[i] = step;
    step *= dims[i];
  }
  strides[0] = step;
  return memory::desc(dims, memory::data_type::f32, strides);
}

memory::desc any_desc(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

memory::dims to_dims(const std::vector<int64_t>& v) {
  return memory::dims(v.begin(), v.end());
}

// A layout change made once at compile time and run per call (user scratchpad, so concurrent
// runs never share library state).
struct Reorder {
  dnnl::reorder prim;
  size_t scratch_bytes = 0;

  Reorder(const memory::desc& from, const memory::desc& to) {
    dnnl::reorder::primitive_desc pd(dnnl_engine(), from, dnnl_engine(), to,
                                     user_scratchpad_attr());
    scratch_bytes = pd.scratchpad_desc().get_size();
    prim = dnnl::reorder(pd);
  }
};

// X (N, H, W, C) times S (N or 1, 1, 1, C), per image and channel, into a per-run buffer: the
// channel scale for the paths that cannot apply it themselves (oneDNN's).
Tensor scaled_copy(const Tensor& x, const Tensor& s) {
  Tensor out = Tensor::empty(x.shape(), DType::kFloat32);
  const int64_t c = x.shape()[3], images = x.shape()[0], pixels = x.numel() / (c * images);
  const bool per_image = s.shape()[0] > 1;
  const float* in = x.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for schedule(static) if (x.numel() >= (int64_t{1} << 16))
  for (int64_t p = 0; p < images * pixels; ++p) {
    const float* sc = s.data<float>() + (per_image ? p / pixels * c : 0);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) dst[p * c + j] = in[p * c + j] * sc[j];
  }
  return out;
}

// A per-run float32 buffer of at least `bytes` bytes (scratch comes from the caching pool).
Tensor scratch(size_t bytes) {
  return Tensor::empty(Shape{static_cast<int64_t>((bytes + 3) / 4)}, DType::kFloat32);
}

// Activations that Lumen applies in a pass of its own after the primitive (finish_row, with
// simd_math.h's logistic function): oneDNN 2.6's AVX2 post-ops for them cost more than the
// convolution. 16 -> 96 channels at 112x112 on 2 cores, interleaved in one process: no post-op
// 0.38 ms, ReLU 0.37, swish 1.10, logistic 0.96, tanh 4.26 (hard-swish 0.49, clip 0.45: those stay
// post-ops); Lumen's pass over those 1.2 M outputs: swish 0.42, logistic 0.40, tanh 0.90 ms.
bool applied_after(const std::string& act) {
  return act == "Swish" || act == "Sigmoid" || act == "Tanh";
}

// A FusedConv's residual (a sum post-op: the primitive adds what Y holds) and activation (an
// eltwise post-op), applied to each output as it is written.
dnnl::post_ops activation_post_ops(const NodeContext& ctx, bool residual) {
  dnnl::post_ops ops;
  if (residual) ops.append_sum(1.0f);
  std::string act = ctx.attr_string("activation", "");
  if (applied_after(act)) return ops;
  float alpha = ctx.attr_float("activation_alpha", 0.0f);
  float beta = ctx.attr_float("activation_beta", 0.0f);
  if (act == "Relu") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  } else if (act == "LeakyRelu") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, alpha, 0.0f);
  } else if (act == "Clip") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, alpha, beta);
  } else if (act == "Sigmoid") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
  } else if (act == "Tanh") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0.0f, 0.0f);
  } else if (act == "HardSwish") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f);
  } else if (act == "Swish") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
  } else if (act == "GeluErf") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  } else if (act == "GeluTanh") {
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
  } else if (!act.empty()) {
    ctx.fail_unsupported("activation '" + act + "' has no oneDNN post-op");
  }
  return ops;
}

// Everything a (de)convolution node needs at run time. Weights given at build time are packed
// once; otherwise they are reordered per run when the primitive wants another layout.
class ConvKernel final : public Kernel {
 public:
  ConvKernel(const NodeContext& ctx, bool transposed) : where_(ctx.where()) {
    // channels_last: X and Y are (N, H, W, C) in memory; oneDNN still sees (N, C, H, W) dims.
    const bool channels_last = !transposed && is_channels_last(ctx);
    const Shape x = channels_last ? to_channels_first(ctx.input_shape(0)) : ctx.input_shape(0);
    const Shape& w = ctx.input_shape(1);
    const Shape y = channels_last ? to_channels_first(ctx.output(0).shape) : ctx.output(0).shape;
    out_shape_ = y;
    has_bias_ = ctx.has_input(2);
    residual_ = !transposed && ctx.num_inputs() > 3 && ctx.has_input(3);
    scale_ = !transposed && ctx.num_inputs() > 4 && ctx.has_input(4);
    scale_per_image_ = scale_ && ctx.input_shape(4)[0] > 1;
    if (y.numel() == 0) return;  // nothing to compute
    if (x.numel() == 0 || w.numel() == 0)
      ctx.fail_unsupported("CPU: empty input with a non-empty output");
    int64_t group = ctx.attr_int("group", 1);
    std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
    ConvGeometry g = transposed ? conv_transpose_geometry(ctx, x, kernel)
                                : window_geometry(ctx, x, kernel, false);
    int64_t channels = x[1], out_channels = y[1];
    memory::dims k_dims = to_dims(kernel);

    // Logical oneDNN weight dims ([g,] O/g, I/g, k...) and the strides of ONNX's layout:
    // Conv W is (O, I/g, k...) = row-major goik; ConvTranspose W is (I, O/g, k...) = g,i,o,k.
    int64_t kvol = 1;
    for (int64_t k : kernel) kvol *= k;
    int64_t og = out_channels / group, ig = channels / group;
    memory::dims w_dims = {og, ig};
    memory::dims w_strides =
        transposed ? memory::dims{kvol, og * kvol} : memory::dims{ig * kvol, kvol};
    if (group > 1) {
      w_dims.insert(w_dims.begin(), group);
      w_strides.insert(w_strides.begin(), og * ig * kvol);
    }
    w_dims.insert(w_dims.end(), k_dims.begin(), k_dims.end());
    memory::dims k_strides(kernel.size(), 1);
    int64_t step = 1;
    for (int i = static_cast<int>(kernel.size()) - 1; i >= 0; --i) {
      k_strides[i] = step;
      step *= kernel[i];
    }
    w_strides.insert(w_strides.end(), k_strides.begin(), k_strides.end());
    w_user_ = memory::desc(w_dims, memory::data_type::f32, w_strides);

    // Negative end padding (ConvTranspose output_padding beyond pad_end): the primitive writes
    // the smaller output it can reach and the rest gets only the bias.
    std::vector<int64_t> prim_out = g.out;
    std::vector<int64_t> pad_end = g.pad_end;
    for (int i = 0; i < g.spatial; ++i) {
      if (pad_end[i] < 0) {
        prim_out[i] += pad_end[i];
        pad_end[i] = 0;
        shortfall_ = true;
      }
    }
    memory::dims x_dims = to_dnnl_dims(x);
    memory::dims y_dims = {y[0], y[1]};
    y_dims.insert(y_dims.end(), prim_out.begin(), prim_out.end());
    prim_out_shape_ = Shape(std::vector<int64_t>(y_dims.begin(), y_dims.end()));
    src_user_ = channels_last ? channels_last_desc(x_dims) : plain_desc(x_dims);
    dst_user_ = channels_last ? channels_last_desc(y_dims) : plain_desc(y_dims);

    const Tensor* w_value = ctx.input_value(1);
    // Whether Lumen's own kernels can apply the activation in their epilogue.
    const bool epilogue_ok = parse_gemm_epilogue(
        ctx.attr_string("activation", ""), ctx.attr_float("activation_alpha", 0.0f),
        ctx.attr_float("activation_beta", 0.0f), &epilogue_);
    // One pixel in, one out (the squeeze-and-excitation layers of EfficientNet, RegNet and
    // MobileNet-V3, on globally pooled channels): a matrix-vector product per image through
    // packed_gemm with its epilogue. oneDNN's fixed cost per call was about 11 us for a product of
    // a few thousand multiply-adds (32 such layers: 0.35 ms of EfficientNet-B0's 8.4).
    bool one_pixel = !transposed && group == 1 && w_value && kvol == 1 && epilogue_ok && !scale_;
    for (int i = 0; i < g.spatial; ++i) one_pixel = one_pixel && x[2 + i] == 1 && y[2 + i] == 1;
    if (one_pixel) {
      // B[i][o] = W[o][i]: rows 1 apart, columns `channels` apart.
      pointwise_ = PackedMatrix::shared(*w_value, w_value->data<float>(), channels, out_channels, 1,
                                        channels);
      epilogue_.accumulate = residual_;
      use_one_pixel_ = true;
      return;
    }
    // Lumen's own kernels take channels-last 2-D convolutions with known weights and an
    // activation an epilogue can apply: Winograd for 3x3 stride-1 dense ones where a form pays,
    // GroupedConv8 for 3x3 ones with 8 channels per group, Im2colConv for strided dense ones,
    // DepthwiseConv for depthwise ones whose activation oneDNN would leave to a pass of its own
    // (on arm64 for every activation: depthwise_conv_for_every_activation).
    const bool own = channels_last && g.spatial == 2 && w_value && epilogue_ok;
    const std::optional<WinogradForm> form =
        own && !scale_ ? winograd_form(g.out[0], g.out[1], channels, out_channels) : std::nullopt;
    if (scale_) {
      // A channel scale S (fuse-channel-scale): packed_gemm applies it as it packs the pixels;
      // oneDNN's convolutions have no per-channel input scale, so their path scales a copy of X
      // first. At AVX-512 the faster of the two is kept (below); below it oneDNN's path, at the
      // cost of the separate Mul it replaces (on AVX2 oneDNN's 1x1 convolutions beat
      // packed_gemm's; on a Zen 5 with Lumen's kernels limited to AVX2, EfficientNet-B0's steps
      // took 7.0-7.3 ms with every scaled projection on packed_gemm, 6.5-6.6 with the Mul).
      if (own && has_avx512() && pointwise_stride1(group, kernel, g)) {
        pointwise_ = PackedMatrix::shared(*w_value, w_value->data<float>(), channels, out_channels,
                                          1, channels);
        use_pointwise_ = true;
      }
    } else if (own && group == 1 && kernel[0] == 3 && kernel[1] == 3 && g.strides[0] == 1 &&
               g.strides[1] == 1 && g.dilations[0] == 1 && g.dilations[1] == 1 && form) {
      winograd_ = WinogradConv(w_value->data<float>(), out_channels, channels, *form);
      use_winograd_ = true;
    } else if (own && grouped_conv8_applies(channels, out_channels, group, kernel, g.strides,
                                            g.dilations)) {
      grouped_ = GroupedConv8(w_value->data<float>(), out_channels);
      use_grouped_ = true;
    } else if (own && im2col_conv_applies(channels, group, kernel, g.strides, g.dilations)) {
      im2col_ = Im2colConv(w_value->data<float>(), out_channels, channels, kernel[0], kernel[1]);
      use_im2col_ = true;
    } else if (own &&
               (applied_after(ctx.attr_string("activation", "")) ||
                depthwise_conv_for_every_activation()) &&
               depthwise_conv_applies(channels, out_channels, group, kernel, g.dilations)) {
      depthwise_ = DepthwiseConv(w_value->data<float>(), out_channels, kernel[0], kernel[1]);
      use_depthwise_ = true;
    } else if (own && has_avx512() && pointwise_stride1(group, kernel, g)) {
      // At AVX-512, a pointwise convolution is also a candidate as one product of the (N*H*W) x C
      // pixels by the transposed weights on packed_gemm (on AVX2 oneDNN's 1x1 kernels were
      // faster: 16 -> 96 channels at 112x112, 0.33-0.36 against 0.52-0.54 ms).
      pointwise_ = PackedMatrix::shared(*w_value, w_value->data<float>(), channels, out_channels, 1,
                                        channels);
      use_pointwise_ = true;
    }
    if (own_kernel()) {
      epilogue_.accumulate = residual_;
      in_hw_ = {x[2], x[3]};
      pad_ = {g.pad_begin[0], g.pad_begin[1]};
      strides_ = {g.strides[0], g.strides[1]};
      // At AVX-512 and on arm64 oneDNN's primitive is built too, and the faster of the two kept
      // (below).
      if (!kernel_choice_measured()) return;
    }

    // Pointwise stride-1 convolutions run fastest as a plain GEMM on NCHW (measured with
    // oneDNN 2.6 on AVX-512: 0.26 ms plain vs 0.58 ms blocked + reorders for 256->64 at 56x56);
    // everything else is faster in oneDNN's blocked layout even counting the reorders (3x3
    // 64->64 at 56x56: 1.28 ms plain vs 0.68 ms; depthwise 3x3: 1.07 ms vs 0.27 ms).
    bool pointwise = !transposed && group == 1;
    for (int i = 0; i < g.spatial; ++i)
      pointwise = pointwise && kernel[i] == 1 && g.strides[i] == 1 && g.pad_begin[i] == 0 &&
                  g.pad_end[i] == 0;
    // In channels-last form the activations stay as they are (oneDNN's brgemm convolutions
    // read and write NHWC directly), so no layout changes run per call.
    memory::desc src_req = pointwise || channels_last ? src_user_ : any_desc(x_dims);
    // The sum post-op reads Z where Y lies, so with a residual Y is written in its own layout.
    memory::desc dst_req = pointwise || channels_last || residual_ ? dst_user_ : any_desc(y_dims);
    memory::desc bias_md = has_bias_ ? plain_desc({out_channels}) : memory::desc();
    memory::dims strides = to_dims(g.strides), pad_l = to_dims(g.pad_begin),
                 pad_r = to_dims(pad_end), dilates = to_dims(g.dilations);
    for (auto& d : dilates) d -= 1;  // oneDNN counts the gaps, ONNX the step

    const std::string act = ctx.attr_string("activation", "");
    if (!transposed && applied_after(act)) parse_gemm_epilogue(act, 0.0f, 0.0f, &after_);
    dnnl_call(where_, [&] {
      dnnl::primitive_attr attr = user_scratchpad_attr();
      if (!transposed) attr.set_post_ops(activation_post_ops(ctx, residual_));
      if (transposed) {
        dnnl::deconvolution_forward::desc desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src_req,
            any_desc(w_dims), bias_md, dst_req, strides, dilates, pad_l, pad_r);
        dnnl::deconvolution_forward::primitive_desc pd(desc, attr, dnnl_engine());
        set_primitive(pd, dnnl::deconvolution_forward(pd));
      } else {
        dnnl::convolution_forward::desc desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_req,
            any_desc(w_dims), bias_md, dst_req, strides, dilates, pad_l, pad_r);
        dnnl::convolution_forward::primitive_desc pd(desc, attr, dnnl_engine());
        set_primitive(pd, dnnl::convolution_forward(pd));
      }
      if (src_md_ != src_user_) src_reorder_.emplace(src_user_, src_md_);
      if (dst_md_ != dst_user_) {
        // The sum post-op reads Y in the primitive's layout: only the plain layouts take Z.
        if (residual_) ctx.fail_unsupported("CPU: a residual input needs Y in its own layout");
        dst_reorder_.emplace(dst_md_, dst_user_);
      }
      if (w_md_ != w_user_) {
        if (const Tensor* wv = ctx.input_value(1)) {
          // Known weights: pack once, keep only the packed copy.
          packed_w_ = memory(w_md_, dnnl_engine());
          memory from(w_user_, dnnl_engine(), wv->raw_data());
          dnnl::reorder(from, packed_w_).execute(dnnl_stream(), from, packed_w_);
          dnnl_stream().wait();
        } else {
          w_reorder_.emplace(w_user_, w_md_);
        }
      }
    });
    for (const auto& r : {&src_reorder_, &dst_reorder_, &w_reorder_})
      if (r->has_value()) scratch_bytes_ = std::max(scratch_bytes_, (*r)->scratch_bytes);
    if (own_kernel()) choose_own_or_onednn(ctx, g, group);
  }

  std::string describe() const override {
    if (scale_ && !has_avx512()) return "oneDNN on a channel-scaled copy";
    return describe_choice(choice_, own_name_);
  }

  // Y may be written over a dying residual Z: the sum post-op then reads Z where it lies.
  int in_place_input() const override { return residual_ ? 3 : -1; }
  // Weights packed at compile time are never read again.
  bool reads_input(int k) const override {
    return k != 1 || (!packed_w_ && !own_kernel() && !use_one_pixel_);
  }

  void run(KernelContext& ctx) const override {
    Tensor& y = ctx.outputs[0];
    if (out_shape_.numel() == 0) return;
    const Tensor& x = ctx.inputs[0];
    const Tensor* bias = has_bias_ ? &ctx.inputs[2] : nullptr;
    // The residual is summed from Y: copied there unless Y was planned over it (in place).
    if (residual_ && ctx.inputs[3].raw_data() != y.raw_data())
      std::memcpy(y.raw_data(), ctx.inputs[3].raw_data(), y.nbytes());
    if (use_one_pixel_) {
      GemmEpilogue e = epilogue_;
      e.bias = bias ? bias->data<float>() : nullptr;
      packed_gemm(out_shape_[0], x.data<float>(), pointwise_.k(), pointwise_, y.data<float>(),
                  pointwise_.n(), e);
      return;
    }
    compute(x, ctx.inputs[1], bias, y, own_kernel(), scale_ ? &ctx.inputs[4] : nullptr);
  }

 private:
  // y = the convolution of x (y holds the residual where there is one) by Lumen's own kernel or by
  // oneDNN's primitive; w is read only where the weights were not packed at build time.
  void compute(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, bool own,
               const Tensor* scale) const {
    if (own) {
      GemmEpilogue e = epilogue_;
      e.bias = bias ? bias->data<float>() : nullptr;
      if (use_pointwise_) {
        // One product of every pixel; one per image where S has a row per image, each image's
        // pixels times its row of S.
        const int64_t images = scale != nullptr && scale_per_image_ ? out_shape_[0] : 1;
        const int64_t rows = out_shape_[0] * out_shape_[2] * out_shape_[3] / images;
        const int64_t c = pointwise_.k(), o = pointwise_.n();
        for (int64_t n = 0; n < images; ++n) {
          e.a_scale = scale != nullptr ? scale->data<float>() + n * c : nullptr;
          packed_gemm(rows, x.data<float>() + n * rows * c, c, pointwise_,
                      y.data<float>() + n * rows * o, o, e);
        }
      } else if (use_depthwise_)
        depthwise_.run(x.data<float>(), out_shape_[0], in_hw_[0], in_hw_[1], strides_[0],
                       strides_[1], pad_[0], pad_[1], out_shape_[2], out_shape_[3], y.data<float>(),
                       e);
      else if (use_im2col_)
        im2col_.run(x.data<float>(), out_shape_[0], in_hw_[0], in_hw_[1], strides_[0], strides_[1],
                    pad_[0], pad_[1], out_shape_[2], out_shape_[3], y.data<float>(), e);
      else if (use_winograd_)
        winograd_.run(x.data<float>(), out_shape_[0], in_hw_[0], in_hw_[1], pad_[0], pad_[1],
                      out_shape_[2], out_shape_[3], y.data<float>(), e);
      else
        grouped_.run(x.data<float>(), out_shape_[0], in_hw_[0], in_hw_[1], strides_[0], strides_[1],
                     pad_[0], pad_[1], out_shape_[2], out_shape_[3], y.data<float>(), e);
      return;
    }
    dnnl_call(where_, [&] {
      dnnl::engine& eng = dnnl_engine();
      dnnl::stream& strm = dnnl_stream();
      Tensor scratchpad = scratch_bytes_ ? scratch(scratch_bytes_) : Tensor();
      void* scratch_ptr = scratch_bytes_ ? scratchpad.raw_data() : nullptr;
      auto reorder = [&](const Reorder& r, const memory& from, const memory& to) {
        std::unordered_map<int, memory> args = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        if (r.scratch_bytes)
          args.emplace(DNNL_ARG_SCRATCHPAD,
                       memory(scratchpad_md(r.scratch_bytes), eng, scratch_ptr));
        r.prim.execute(strm, args);
      };

      Tensor scaled;
      if (scale != nullptr) scaled = scaled_copy(x, *scale);
      memory src(src_user_, eng, scale != nullptr ? scaled.raw_data() : x.raw_data());
      Tensor src_tmp;
      if (src_reorder_) {
        src_tmp = scratch(src_md_.get_size());
        memory packed(src_md_, eng, src_tmp.raw_data());
        reorder(*src_reorder_, src, packed);
        src = packed;
      }
      memory weights = packed_w_;
      Tensor w_tmp;
      if (!weights) {
        weights = memory(w_user_, eng, w.raw_data());
        if (w_reorder_) {
          w_tmp = scratch(w_md_.get_size());
          memory packed(w_md_, eng, w_tmp.raw_data());
          reorder(*w_reorder_, weights, packed);
          weights = packed;
        }
      }
      // The primitive writes straight into y unless a layout change or a shortfall is needed.
      Tensor full_tmp = shortfall_ ? Tensor::empty(prim_out_shape_) : y;
      memory dst_plain(dst_user_, eng, full_tmp.raw_data());
      memory dst = dst_plain;
      Tensor dst_tmp;
      if (dst_reorder_) {
        dst_tmp = scratch(dst_md_.get_size());
        dst = memory(dst_md_, eng, dst_tmp.raw_data());
      }
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
      if (bias)
        args.emplace(DNNL_ARG_BIAS, memory(plain_desc({out_shape_[1]}), eng, bias->raw_data()));
      if (prim_scratch_bytes_)
        args.emplace(DNNL_ARG_SCRATCHPAD, memory(prim_scratch_md_, eng, scratch_ptr));
      prim_.execute(strm, args);
      if (dst_reorder_) reorder(*dst_reorder_, dst, dst_plain);
      strm.wait();
      if (after_.activation != GemmActivation::kNone) apply_after(full_tmp);
      if (shortfall_) place_with_bias(full_tmp, y, bias);
    });
  }

  // Flushes one side's weights from the caches (kernel_choice.h): Lumen's kernel's transformed
  // copy, or oneDNN's packed one (or w, where the primitive reads it as given).
  void evict_weights(const Tensor& w, bool lumen) const {
    if (lumen) {
      if (use_pointwise_) pointwise_.evict();
      if (use_winograd_) winograd_.evict();
      if (use_grouped_) grouped_.evict();
      if (use_im2col_) im2col_.evict();
      if (use_depthwise_) depthwise_.evict();
    } else if (packed_w_) {
      evict_from_caches(packed_w_.get_data_handle(), w_md_.get_size());
    } else {
      evict_from_caches(w.raw_data(), w.nbytes());
    }
  }

  // At AVX-512, where both Lumen's kernel and oneDNN's primitive were built: times both on random
  // data of the node's shapes (kernel_choice.h) and keeps the faster, releasing the other.
  void choose_own_or_onednn(const NodeContext& ctx, const ConvGeometry& g, int64_t group) {
    own_name_ = use_winograd_    ? "Winograd"
                : use_grouped_   ? "GroupedConv8"
                : use_im2col_    ? "Im2colConv"
                : use_pointwise_ ? "packed_gemm"
                                 : "DepthwiseConv";
    std::string key = "Conv " + own_name_ + " x " + ctx.input_shape(0).to_string() + " w " +
                      ctx.input_shape(1).to_string() + " y " + ctx.output(0).shape.to_string() +
                      " group " + std::to_string(group) + " " + ctx.attr_string("activation", "") +
                      (has_bias_ ? " bias" : "") + (residual_ ? " residual" : "") +
                      (scale_ ? " scale " + ctx.input_shape(4).to_string() : "");
    for (size_t i = 0; i < g.strides.size(); ++i)
      key += " s" + std::to_string(g.strides[i]) + " p" + std::to_string(g.pad_begin[i]) + "," +
             std::to_string(g.pad_end[i]);
    const Tensor& w = *ctx.input_value(1);
    const bool cold = w.nbytes() > kColdWeightBytes && weights_stream_from_memory(ctx.graph());
    if (cold) key += " cold-weights";
    Tensor x, y, bias, scale;
    const auto random = [](const Shape& shape) {
      Tensor t = Tensor::empty(shape, DType::kFloat32);
      const std::vector<float> values = timing_data(t.numel());
      std::copy(values.begin(), values.begin() + t.numel(), t.data<float>());
      return t;
    };
    choice_ = pick_lumen_kernel(
        key,
        [&] {
          x = random(ctx.input_shape(0));
          y = random(ctx.output(0).shape);
          if (has_bias_) bias = random(ctx.input_shape(2));
          if (scale_) scale = random(ctx.input_shape(4));
        },
        [&](bool lumen) {
          if (cold) evict_weights(w, lumen);
        },
        [&] { compute(x, w, has_bias_ ? &bias : nullptr, y, true, scale_ ? &scale : nullptr); },
        [&] { compute(x, w, has_bias_ ? &bias : nullptr, y, false, scale_ ? &scale : nullptr); });
    if (choice_.lumen) {
      prim_ = dnnl::primitive();
      packed_w_ = memory();
      src_reorder_.reset();
      dst_reorder_.reset();
      w_reorder_.reset();
      scratch_bytes_ = 0;
      return;
    }
    use_winograd_ = use_grouped_ = use_im2col_ = use_depthwise_ = use_pointwise_ = false;
    pointwise_ = PackedMatrix();
    winograd_ = WinogradConv();
    grouped_ = GroupedConv8();
    im2col_ = Im2colConv();
    depthwise_ = DepthwiseConv();
  }

  // Whether one of Lumen's own convolution kernels runs this node (not oneDNN).
  bool own_kernel() const {
    return use_winograd_ || use_grouped_ || use_im2col_ || use_depthwise_ || use_pointwise_;
  }

  // A 2-D convolution with one group, a 1x1 kernel, stride 1 and no padding.
  static bool pointwise_stride1(int64_t group, const std::vector<int64_t>& kernel,
                                const ConvGeometry& g) {
    bool out = group == 1 && kernel.size() == 2;
    for (size_t i = 0; out && i < kernel.size(); ++i)
      out = kernel[i] == 1 && g.strides[i] == 1 && g.dilations[i] == 1 && g.pad_begin[i] == 0 &&
            g.pad_end[i] == 0;
    return out;
  }

  static memory::desc scratchpad_md(size_t bytes) {
    return memory::desc({static_cast<memory::dim>(bytes)}, memory::data_type::u8,
                        memory::format_tag::a);
  }

  template <typename PD>
  void set_primitive(const PD& pd, dnnl::primitive prim) {
    prim_ = std::move(prim);
    src_md_ = pd.src_desc();
    dst_md_ = pd.dst_desc();
    w_md_ = pd.weights_desc();
    prim_scratch_md_ = pd.scratchpad_desc();
    prim_scratch_bytes_ = prim_scratch_md_.get_size();
    scratch_bytes_ = std::max(scratch_bytes_, prim_scratch_bytes_);
  }

  // The activation oneDNN was not given, over all of y, in blocks shared by the threads.
  void apply_after(Tensor& y) const {
    constexpr int64_t kBlock = 1 << 14;
    float* p = y.data<float>();
    const int64_t n = y.numel(), blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t b = 0; b < blocks; ++b)
      finish_row(p + b * kBlock, std::min(kBlock, n - b * kBlock), 0, after_);
  }

  // Copies `part` (N, M, t...) into the leading corner of `y` (N, M, o...), and fills the rest of
  // y with the bias (or zero).
  void place_with_bias(const Tensor& part, Tensor& y, const Tensor* bias) const {
    const std::vector<int64_t>& od = y.shape().dims();
    const std::vector<int64_t>& td = part.shape().dims();
    int rank = static_cast<int>(od.size());
    int64_t planes = od[0] * od[1], channels = od[1];
    int64_t out_plane = 1, part_plane = 1;
    for (int i = 2; i < rank; ++i) {
      out_plane *= od[i];
      part_plane *= td[i];
    }
    int64_t row = td[rank - 1];
    int64_t rows = part_plane / std::max<int64_t>(row, 1);
    const float* src = part.data<float>();
    float* dst = y.data<float>();
    const float* b = bias ? bias->data<float>() : nullptr;
#pragma omp parallel for if (planes * out_plane > (1 << 15))
    for (int64_t p = 0; p < planes; ++p) {
      float* out = dst + p * out_plane;
      std::fill(out, out + out_plane, b ? b[p % channels] : 0.0f);
      for (int64_t r = 0; r < rows; ++r) {
        // Unravel r over the part's leading spatial dims and ravel it into y's.
        int64_t rem = r, offset = 0, scale = od[rank - 1];
        for (int i = rank - 2; i >= 2; --i) {
          offset += (rem % td[i]) * scale;
          rem /= td[i];
          scale *= od[i];
        }
        std::memcpy(out + offset, src + p * part_plane + r * row, row * sizeof(float));
      }
    }
  }

  std::string where_;
  Shape out_shape_;
  Shape prim_out_shape_;
  bool has_bias_ = false;
  bool residual_ = false;
  bool shortfall_ = false;
  // 3x3 stride-1 channels-last convolutions where a Winograd form pays (winograd.h).
  bool use_winograd_ = false;
  WinogradConv winograd_;
  // 3x3 channels-last convolutions with 8 channels per group (grouped_conv.h).
  bool use_grouped_ = false;
  GroupedConv8 grouped_;
  // Strided channels-last convolutions with 64 or more input channels (im2col_conv.h).
  bool use_im2col_ = false;
  Im2colConv im2col_;
  // Depthwise channels-last convolutions (depthwise_conv.h).
  bool use_depthwise_ = false;
  DepthwiseConv depthwise_;
  // Where both could run (AVX-512): Lumen's kernel or oneDNN's, and why; the kernel's name.
  KernelChoice choice_;
  std::string own_name_;
  // 1x1 convolutions of one-pixel images (and, use_pointwise_, channels-last pointwise ones at
  // AVX-512): the weights transposed for packed_gemm.
  bool use_one_pixel_ = false;
  // At AVX-512, channels-last pointwise convolutions on packed_gemm (pointwise_ the weights),
  // with or without a channel scale S (input 4; per image where scale_per_image_).
  bool use_pointwise_ = false;
  bool scale_ = false, scale_per_image_ = false;
  PackedMatrix pointwise_;
  // For the three: the activation and residual (the bias is bound per run); for the two 3x3
  // kernels the input's height and width, the top and left padding and the strides.
  GemmEpilogue epilogue_;
  // oneDNN's path: the activation applied after the primitive (applied_after()), or none.
  GemmEpilogue after_;
  std::array<int64_t, 2> in_hw_{};
  std::array<int64_t, 2> pad_{};
  std::array<int64_t, 2> strides_{};
  dnnl::primitive prim_;
  memory::desc src_user_, dst_user_, w_user_;
  memory::desc src_md_, dst_md_, w_md_, prim_scratch_md_;
  std::optional<Reorder> src_reorder_, dst_reorder_, w_reorder_;
  memory packed_w_;
  size_t prim_scratch_bytes_ = 0;
  size_t scratch_bytes_ = 0;
};

std::unique_ptr<Kernel> make_conv(const NodeContext& ctx) {
  return std::make_unique<ConvKernel>(ctx, false);
}

std::unique_ptr<Kernel> make_conv_transpose(const NodeContext& ctx) {
  return std::make_unique<ConvKernel>(ctx, true);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Conv, &make_conv, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(FusedConv, &make_conv, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(ConvTranspose, &make_conv_transpose, &require_float32);

}  // namespace lumen::cpu
