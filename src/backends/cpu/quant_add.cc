// CPU kernel of QLinearAdd (com.microsoft; also made by the fuse-qdq pass from DequantizeLinear ->
// Add -> QuantizeLinear):
//   C = saturate(round((dq(A) + dq(B)) / C_scale) + C_zero_point),  dq(X) = (X - X_zp) * X_scale
// with every step in float32 as the unfused ops take it (DequantizeLinear's product, Add's sum,
// QuantizeLinear's quotient rounded half to even), so the fusion changes no output. This file is
// compiled with -ffp-contract=off: no product is fused with the sum.
//
// Contiguous operands on AVX-512 machines run 16 elements per step (the same operations, in
// order); everything else runs the plain loop, vectorised for AVX2 by isa_call.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/quant_math.h"

#if LUMEN_X86
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

struct QAddParams {
  float as, bs, cs;
  int32_t az, bz;
  float cz, lo, hi;
};

// n elements; A's and B's steps along them are 1 (kA, kB) or 0 (one value repeated).
template <typename T, bool kA, bool kB>
void add_run(const T* a, const T* b, T* c, int64_t n, const QAddParams& params) {
  // A copy: byte stores to c may alias `params`, which would reload it per element.
  const QAddParams p = params;
  for (int64_t i = 0; i < n; ++i) {
    const float fa = static_cast<float>(static_cast<int32_t>(a[kA ? i : 0]) - p.az) * p.as;
    const float fb = static_cast<float>(static_cast<int32_t>(b[kB ? i : 0]) - p.bz) * p.bs;
    const float r = std::nearbyint((fa + fb) / p.cs);
    const float q = r != r ? p.cz : r + p.cz;  // NaN: the zero point, as QuantizeLinear
    c[i] = static_cast<T>(static_cast<int32_t>(std::min(std::max(q, p.lo), p.hi)));
  }
}

#if LUMEN_X86
// GCC 12 takes the undefined pass-through register of AVX-512's unmasked intrinsics for an
// uninitialised read (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
LUMEN_AVX512_BEGIN
// 16 8-bit values at x as int32.
template <typename T>
__m512i widen16(const T* x) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  if constexpr (std::is_same_v<T, int8_t>) return _mm512_cvtepi8_epi32(v);
  return _mm512_cvtepu8_epi32(v);
}

// add_run<T, true, true>, 16 elements per step; the last n % 16 by add_run.
template <typename T>
void add_run_avx512(const T* a, const T* b, T* c, int64_t n, const QAddParams& p) {
  const __m512i az = _mm512_set1_epi32(p.az), bz = _mm512_set1_epi32(p.bz);
  const __m512 as = _mm512_set1_ps(p.as), bs = _mm512_set1_ps(p.bs), cs = _mm512_set1_ps(p.cs);
  const __m512 cz = _mm512_set1_ps(p.cz), lo = _mm512_set1_ps(p.lo), hi = _mm512_set1_ps(p.hi);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 fa = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(widen16(a + i), az)), as);
    const __m512 fb = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(widen16(b + i), bz)), bs);
    const __m512 r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_add_ps(fa, fb), cs),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __mmask16 nan = _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
    const __m512 q = _mm512_mask_blend_ps(nan, _mm512_add_ps(r, cz), cz);
    const __m512i v = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(q, lo), hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(c + i), _mm512_cvtepi32_epi8(v));
  }
  add_run<T, true, true>(a + i, b + i, c + i, n - i, p);
}
LUMEN_ISA_END
#pragma GCC diagnostic pop
#endif

// Inputs: A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point.
class QLinearAddKernel final : public Kernel {
 public:
  explicit QLinearAddKernel(const NodeContext& ctx)
      : plan_(ctx.output(0).shape, {ctx.input_shape(0), ctx.input_shape(3)}),
        type_(ctx.output(0).dtype) {}

  void run(KernelContext& ctx) const override {
    const QAddParams p = {ctx.inputs[1].data<float>()[0],
                          ctx.inputs[4].data<float>()[0],
                          ctx.inputs[6].data<float>()[0],
                          zero_point(ctx, 2),
                          zero_point(ctx, 5),
                          static_cast<float>(zero_point(ctx, 7)),
                          static_cast<float>(quant_min(type_)),
                          static_cast<float>(quant_max(type_))};
    if (type_ == DType::kInt8)
      add<int8_t>(ctx, p);
    else
      add<uint8_t>(ctx, p);
  }

 private:
  // Input k's zero point, else 0.
  static int32_t zero_point(const KernelContext& ctx, size_t k) {
    return k < ctx.inputs.size() && ctx.inputs[k].defined() ? int_at(ctx.inputs[k], 0) : 0;
  }

  template <typename T>
  void add(KernelContext& ctx, const QAddParams& p) const {
    const T* a = ctx.inputs[0].data<T>();
    const T* b = ctx.inputs[3].data<T>();
    T* c = ctx.outputs[0].data<T>();
    const bool sa = plan_.inner_stride(0) != 0, sb = plan_.inner_stride(1) != 0;
#if LUMEN_X86
    const bool wide = sa && sb && has_avx512();
#else
    const bool wide = false;
#endif
    for_each_row(plan_, [&](int64_t out, const int64_t* in, int64_t n) {
      if (wide) {
#if LUMEN_X86
        add_run_avx512<T>(a + in[0], b + in[1], c + out, n, p);
#endif
      } else if (sa && sb) {
        add_run<T, true, true>(a + in[0], b + in[1], c + out, n, p);
      } else if (sa) {
        add_run<T, true, false>(a + in[0], b + in[1], c + out, n, p);
      } else if (sb) {
        add_run<T, false, true>(a + in[0], b + in[1], c + out, n, p);
      } else {
        add_run<T, false, false>(a + in[0], b + in[1], c + out, n, p);
      }
    });
  }

  BroadcastPlan plan_;
  DType type_;
};

std::unique_ptr<Kernel> make_qlinear_add(const NodeContext& ctx) {
  return std::make_unique<QLinearAddKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(QLinearAdd, &make_qlinear_add);

}  // namespace lumen::cpu
