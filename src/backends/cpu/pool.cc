// CPU kernels of MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool on plain NCHW
// (MaxPool's Indices output and int8 / uint8 inputs run max_pool_direct.cc instead).
// MaxPool and AveragePool run as a oneDNN pooling_v2 primitive made at compile time (its JIT is
// 1.5-7x faster than a direct loop on one core), with the end padding stretched to cover
// ceil_mode's overhang. oneDNN would count that overhang in count_include_pad's divisor, which
// ONNX does not, so that one case (and anything oneDNN rejects) runs a direct OpenMP kernel.
// Channels-last 2-D pooling runs a direct kernel that reduces each window's channel vectors:
// oneDNN 2.6's avx2 pooling took 0.43 ms on squeezenet's first MaxPool (64 channels, 111x111,
// 3x3 stride 2) where the direct kernel takes about a tenth of that.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/dnnl_util.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/max_pool_direct.h"
#include "graph/schemas/conv_geometry.h"

#if LUMEN_X86
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 15;

#if LUMEN_X86
LUMEN_AVX2_BEGIN
// max(in, acc) keeps acc where in is NaN, as `in > acc ? in : acc` does. (A function, not a
// lambda in the template below: its instantiation would not be compiled for AVX2.)
template <bool kMax>
inline __m256 pool_reduce8(__m256 in, __m256 acc) {
  return kMax ? _mm256_max_ps(in, acc) : _mm256_add_ps(in, acc);
}

// out[i] = max (or scale * sum) over t < count of taps[t][i], for i < c - c % 8: blocks of 32
// channels, then of 8, reduced over every tap in registers. Returns c - c % 8.
template <bool kMax>
int64_t reduce_taps_avx2(const float* const* taps, int64_t count, int64_t c, float scale,
                         float* out) {
  const auto reduce = pool_reduce8<kMax>;
  const float init = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  const __m256 vscale = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 32 <= c; i += 32) {
    __m256 a0 = _mm256_set1_ps(init), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t t = 0; t < count; ++t) {
      const float* in = taps[t];
      a0 = reduce(_mm256_loadu_ps(in + i), a0);
      a1 = reduce(_mm256_loadu_ps(in + i + 8), a1);
      a2 = reduce(_mm256_loadu_ps(in + i + 16), a2);
      a3 = reduce(_mm256_loadu_ps(in + i + 24), a3);
    }
    if constexpr (!kMax) {
      a0 = _mm256_mul_ps(a0, vscale), a1 = _mm256_mul_ps(a1, vscale);
      a2 = _mm256_mul_ps(a2, vscale), a3 = _mm256_mul_ps(a3, vscale);
    }
    _mm256_storeu_ps(out + i, a0), _mm256_storeu_ps(out + i + 8, a1);
    _mm256_storeu_ps(out + i + 16, a2), _mm256_storeu_ps(out + i + 24, a3);
  }
  for (; i + 8 <= c; i += 8) {
    __m256 a = _mm256_set1_ps(init);
    for (int64_t t = 0; t < count; ++t) a = reduce(_mm256_loadu_ps(taps[t] + i), a);
    _mm256_storeu_ps(out + i, kMax ? a : _mm256_mul_ps(a, vscale));
  }
  return i;
}
LUMEN_ISA_END
#endif

// One spatial axis of a pooling window; missing leading axes (1-D, 2-D) are size-1 axes.
struct Axis {
  int64_t in = 1, out = 1, k = 1, s = 1, d = 1, pad_begin = 0, pad_end = 0;
};

// The outputs o in [lo, hi) for which o * s + off lies in [0, n).
inline void valid_range(int64_t off, int64_t s, int64_t n, int64_t out, int64_t* lo, int64_t* hi) {
  *lo = off >= 0 ? 0 : (-off + s - 1) / s;
  *hi = n - 1 - off < 0 ? 0 : std::min(out, (n - 1 - off) / s + 1);
  *lo = std::min(*lo, *hi);
}

// Accumulates taps of one input row into one output row: out[o] op= in[o * S + off].
template <bool kMax, int kStride>
inline void accumulate_row(float* out, const float* in, int64_t lo, int64_t hi, int64_t off,
                           int64_t stride) {
  const int64_t s = kStride > 0 ? kStride : stride;
  for (int64_t o = lo; o < hi; ++o) {
    float v = in[o * s + off];
    if constexpr (kMax) {
      out[o] = v > out[o] ? v : out[o];
    } else {
      out[o] += v;
    }
  }
}

class PoolKernel final : public Kernel {
 public:
  PoolKernel(const NodeContext& ctx, bool is_max)
      : where_(ctx.where()), is_max_(is_max), channels_last_(is_channels_last(ctx)) {
    const Shape x = channels_last_ ? to_channels_first(ctx.input_shape(0)) : ctx.input_shape(0);
    ConvGeometry g =
        window_geometry(ctx, x, ctx.attr_ints("kernel_shape"), ctx.attr_int("ceil_mode", 0) != 0);
    planes_ = x[0] * x[1];
    for (int i = 0; i < g.spatial; ++i) {
      Axis& a = axes_[3 - g.spatial + i];
      a = {g.in[i],        g.out[i],       g.kernel[i], g.strides[i],
           g.dilations[i], g.pad_begin[i], g.pad_end[i]};
    }
    bool include_pad = !is_max_ && ctx.attr_int("count_include_pad", 0) != 0;
    direct_channels_last_ = channels_last_ && g.spatial == 2;
    channels_ = x[1];
    if (x.numel() > 0 && ctx.output(0).shape.numel() > 0 && !direct_channels_last_)
      make_primitive(ctx, g, include_pad);
    // The direct kernel below reads (N, C, spatial...) only.
    if (channels_last_ && !direct_channels_last_ && !has_primitive_ && x.numel() > 0)
      ctx.fail_unsupported("CPU: this channels-last pooling geometry has no oneDNN primitive");
    if (is_max_ || has_primitive_) return;
    // Divisor of each output position, per axis (window counts multiply across axes).
    for (int ax = 0; ax < 3; ++ax) {
      const Axis& a = axes_[ax];
      counts_[ax].resize(a.out);
      for (int64_t o = 0; o < a.out; ++o) {
        int64_t n = 0;
        for (int64_t k = 0; k < a.k; ++k) {
          int64_t pos = o * a.s - a.pad_begin + k * a.d;
          n += include_pad ? (pos >= -a.pad_begin && pos < a.in + a.pad_end)
                           : (pos >= 0 && pos < a.in);
        }
        counts_[ax][o] = static_cast<float>(n);
      }
    }
  }

  void run(KernelContext& ctx) const override {
    if (direct_channels_last_) {
      if (ctx.outputs[0].numel() == 0) return;
      is_max_ ? pool_channels_last<true>(ctx) : pool_channels_last<false>(ctx);
      return;
    }
    if (has_primitive_) {
      if (ctx.outputs[0].numel() == 0) return;
      dnnl_call(where_, [&] {
        dnnl::engine& eng = dnnl_engine();
        std::unordered_map<int, dnnl::memory> args = {
            {DNNL_ARG_SRC, dnnl::memory(src_md_, eng, ctx.inputs[0].raw_data())},
            {DNNL_ARG_DST, dnnl::memory(dst_md_, eng, ctx.outputs[0].raw_data())}};
        Tensor scratch;
        if (scratch_md_.get_size() > 0) {
          scratch = Tensor::empty({static_cast<int64_t>(scratch_md_.get_size())}, DType::kUInt8);
          args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratch_md_, eng, scratch.raw_data()));
        }
        prim_.execute(dnnl_stream(), args);
        dnnl_stream().wait();
      });
      return;
    }
    int64_t sw = axes_[2].s;
    if (is_max_) {
      sw == 1 ? pool<true, 1>(ctx) : sw == 2 ? pool<true, 2>(ctx) : pool<true, 0>(ctx);
    } else {
      sw == 1 ? pool<false, 1>(ctx) : sw == 2 ? pool<false, 2>(ctx) : pool<false, 0>(ctx);
    }
  }

 private:
  template <bool kMax, int kStride>
  void pool(KernelContext& ctx) const {
    const Axis &ad = axes_[0], &ah = axes_[1], &aw = axes_[2];
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    int64_t rows = planes_ * ad.out * ah.out;
    int64_t work = rows * aw.out * ad.k * ah.k * aw.k;
    const float init = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t oh = r % ah.out, od = (r / ah.out) % ad.out, p = r / (ah.out * ad.out);
      float* out = y + r * aw.out;
      std::fill(out, out + aw.out, init);
      const float* plane = x + p * ad.in * ah.in * aw.in;
      for (int64_t kd = 0; kd < ad.k; ++kd) {
        int64_t id = od * ad.s - ad.pad_begin + kd * ad.d;
        if (id < 0 || id >= ad.in) continue;
        for (int64_t kh = 0; kh < ah.k; ++kh) {
          int64_t ih = oh * ah.s - ah.pad_begin + kh * ah.d;
          if (ih < 0 || ih >= ah.in) continue;
          const float* in = plane + (id * ah.in + ih) * aw.in;
          for (int64_t kw = 0; kw < aw.k; ++kw) {
            int64_t off = kw * aw.d - aw.pad_begin, lo, hi;
            valid_range(off, aw.s, aw.in, aw.out, &lo, &hi);
            accumulate_row<kMax, kStride>(out, in, lo, hi, off, aw.s);
          }
        }
      }
      if constexpr (!kMax) {
        float outer = counts_[0][od] * counts_[1][oh];
        const float* cw = counts_[2].data();
        for (int64_t o = 0; o < aw.out; ++o) out[o] /= outer * cw[o];
      }
    }
  }

  // (N, H, W, C) input and output: each output pixel is the max (or mean) of its window's channel
  // vectors. Per pixel the window's valid taps are listed once; then each block of 32 channels
  // (8 at the end, then single channels) is reduced over every tap in registers and stored once
  // (reducing into the output in memory, tap by tap, took 3 memory operations per tap and vector:
  // GoogLeNet's 3x3 stride-1 pools of 192-832 channels ran at 50-115 us each).
  template <bool kMax>
  void pool_channels_last(KernelContext& ctx) const {
    const Axis &ah = axes_[1], &aw = axes_[2];
    const int64_t c = channels_;
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t rows = planes_ / c * ah.out;  // images x output rows
    const int64_t work = rows * aw.out * ah.k * aw.k * c;
    const bool avx2 = has_avx2();  // once per run, not per pixel
    const float init = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
    // Each thread lists its taps on its stack (windows of up to kStackTaps taps) or in a vector
    // made once per call: a thread_local vector cost a __tls_get_addr call per use in the shared
    // library, several per output pixel (SqueezeNet's 3x3 stride-2 pool over 111 x 111 x 64:
    // 0.121 -> 0.076 ms, profile medians, interleaved).
    constexpr int64_t kStackTaps = 64;
    const int64_t max_taps = ah.k * aw.k;
#pragma omp parallel if (work > kParallelWork)
    {
      std::vector<const float*> spill(static_cast<size_t>(max_taps > kStackTaps ? max_taps : 0));
      std::array<const float*, kStackTaps> stack{};
      const float** const taps = max_taps > kStackTaps ? spill.data() : stack.data();
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t oh = r % ah.out;
        const float* image = x + (r / ah.out) * ah.in * aw.in * c;
        for (int64_t ow = 0; ow < aw.out; ++ow) {
          float* out = y + (r * aw.out + ow) * c;
          int64_t count = 0;
          for (int64_t kh = 0; kh < ah.k; ++kh) {
            const int64_t ih = oh * ah.s - ah.pad_begin + kh * ah.d;
            if (ih < 0 || ih >= ah.in) continue;
            for (int64_t kw = 0; kw < aw.k; ++kw) {
              const int64_t iw = ow * aw.s - aw.pad_begin + kw * aw.d;
              if (iw >= 0 && iw < aw.in) taps[count++] = image + (ih * aw.in + iw) * c;
            }
          }
          const float scale = kMax ? 1.0f : 1.0f / (counts_[1][oh] * counts_[2][ow]);
          int64_t i = 0;
#if LUMEN_X86
          if (avx2) i = reduce_taps_avx2<kMax>(taps, count, c, scale, out);
#endif
          for (; i < c; ++i) {
            float a = init;
            for (int64_t t = 0; t < count; ++t) {
              const float v = taps[t][i];
              a = kMax ? (v > a ? v : a) : a + v;
            }
            out[i] = a * scale;
          }
        }
      }
    }
  }

  // Sets up the oneDNN primitive when it computes exactly what ONNX asks for.
  void make_primitive(const NodeContext& ctx, const ConvGeometry& g, bool include_pad) {
    dnnl::memory::dims strides, kernel, dilation, pad_l, pad_r;
    bool overhang = false;
    for (int i = 0; i < g.spatial; ++i) {
      // End padding the ceil_mode windows reach: (out - 1) * s + extent - in - pad_begin.
      int64_t reach = (g.out[i] - 1) * g.strides[i] + g.extent(i) - g.in[i] - g.pad_begin[i];
      overhang = overhang || reach > g.pad_end[i];
      strides.push_back(g.strides[i]);
      kernel.push_back(g.kernel[i]);
      dilation.push_back(g.dilations[i] - 1);  // oneDNN counts the gaps
      pad_l.push_back(g.pad_begin[i]);
      pad_r.push_back(std::max(reach, g.pad_end[i]));
    }
    if (include_pad && overhang) return;
    // Strides of the memory order: (N, C, spatial...) row-major, or C fastest for channels_last.
    auto desc = [this](const Shape& memory_shape) {
      Shape s = channels_last_ ? to_channels_first(memory_shape) : memory_shape;
      dnnl::memory::dims dims = to_dnnl_dims(s), st(dims.size(), 1);
      if (channels_last_) {
        dnnl::memory::dim step = dims[1];
        for (int i = static_cast<int>(dims.size()) - 1; i >= 2; --i) {
          st[i] = step;
          step *= dims[i];
        }
        st[0] = step;
      } else {
        for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
          st[i] = st[i + 1] * dims[i + 1];
      }
      return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, st);
    };
    src_md_ = desc(ctx.input_shape(0));
    dst_md_ = desc(ctx.output(0).shape);
    dnnl::algorithm alg = is_max_       ? dnnl::algorithm::pooling_max
                          : include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                        : dnnl::algorithm::pooling_avg_exclude_padding;
    try {
      dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, src_md_, dst_md_,
                                          strides, kernel, dilation, pad_l, pad_r);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::pooling_v2_forward::primitive_desc pd(desc, attr, dnnl_engine());
      scratch_md_ = pd.scratchpad_desc();
      prim_ = dnnl::pooling_v2_forward(pd);
      has_primitive_ = true;
    } catch (const dnnl::error&) {
      has_primitive_ = false;  // a geometry oneDNN does not take: the direct kernel runs it
    }
  }

  std::string where_;
  bool is_max_;
  bool channels_last_;
  bool direct_channels_last_ = false;  // 2-D (N, H, W, C): pool_channels_last runs it
  bool has_primitive_ = false;
  dnnl::primitive prim_;
  dnnl::memory::desc src_md_, dst_md_, scratch_md_;
  int64_t planes_ = 0;
  int64_t channels_ = 0;
  Axis axes_[3];
  std::vector<float> counts_[3];
};

// GlobalAveragePool / GlobalMaxPool: one reduction per (n, c) plane.
class GlobalPoolKernel final : public Kernel {
 public:
  GlobalPoolKernel(const NodeContext& ctx, bool is_max) : is_max_(is_max) {
    const Shape& x = ctx.input_shape(0);
    planes_ = x[0] * x[1];
    size_ = 1;
    for (int i = 2; i < x.rank(); ++i) size_ *= x[i];
  }

  void run(KernelContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const int64_t n = size_;
    if (is_max_) {
#pragma omp parallel for if (planes_ * n > kParallelWork)
      for (int64_t p = 0; p < planes_; ++p) {
        const float* in = x + p * n;
        float m = n > 0 ? in[0] : -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
        for (int64_t i = 0; i < n; ++i) m = in[i] > m ? in[i] : m;
        y[p] = m;
      }
    } else {
#pragma omp parallel for if (planes_ * n > kParallelWork)
      for (int64_t p = 0; p < planes_; ++p) {
        const float* in = x + p * n;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < n; ++i) s += in[i];
        y[p] = n > 0 ? s / static_cast<float>(n) : std::nanf("");
      }
    }
  }

 private:
  bool is_max_;
  int64_t planes_ = 0;
  int64_t size_ = 0;
};

// The Indices output and integer inputs run the direct kernel of max_pool_direct.cc.
bool needs_direct_max_pool(const NodeContext& ctx) {
  return ctx.num_outputs() > 1 || ctx.input_dtype(0) != DType::kFloat32;
}

std::string check_max_pool(const NodeContext& ctx) {
  if (needs_direct_max_pool(ctx) && is_channels_last(ctx))
    return "channels_last MaxPool runs float32 without Indices only";
  return needs_direct_max_pool(ctx) ? check_direct_max_pool(ctx) : require_float32(ctx);
}

std::unique_ptr<Kernel> make_max_pool(const NodeContext& ctx) {
  if (needs_direct_max_pool(ctx)) return make_direct_max_pool(ctx);
  return std::make_unique<PoolKernel>(ctx, true);
}
std::unique_ptr<Kernel> make_average_pool(const NodeContext& ctx) {
  return std::make_unique<PoolKernel>(ctx, false);
}
std::unique_ptr<Kernel> make_global_average_pool(const NodeContext& ctx) {
  return std::make_unique<GlobalPoolKernel>(ctx, false);
}
std::unique_ptr<Kernel> make_global_max_pool(const NodeContext& ctx) {
  return std::make_unique<GlobalPoolKernel>(ctx, true);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(MaxPool, &make_max_pool, &check_max_pool);
LUMEN_REGISTER_CPU_KERNEL(AveragePool, &make_average_pool, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(GlobalAveragePool, &make_global_average_pool, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(GlobalMaxPool, &make_global_max_pool, &require_float32);

}  // namespace lumen::cpu
