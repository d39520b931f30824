// The depthwise convolution's tasks at AVX-512 (depthwise_conv_body.inc over 16-float vectors;
// channels past the last whole vector through mask registers). DepthwiseConv::run
// (depthwise_conv.cc) calls them where the level in use is AVX-512.
#include <algorithm>

#include "backends/cpu/depthwise_conv.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/simd_math.h"

#if LUMEN_X86
#include <immintrin.h>

LUMEN_AVX512_BEGIN
namespace lumen::cpu {
namespace {

struct V {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr int64_t kLanes = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static Reg load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, Reg v, Mask m) { _mm512_mask_storeu_ps(p, m, v); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg activate(Reg v, const GemmEpilogue& e) { return activate16(v, e); }
  static Mask mask(int64_t n) {
    return n >= kLanes ? static_cast<Mask>(0xFFFF) : static_cast<Mask>((1u << n) - 1);
  }
};

#include "backends/cpu/depthwise_conv_body.inc"

}  // namespace

void depthwise_task_avx512(const DepthwiseArgs& a, const GemmEpilogue& e, bool in_registers,
                           int64_t task) {
  run_depthwise_task(a, e, in_registers, task);
}

}  // namespace lumen::cpu
LUMEN_ISA_END

#endif  // LUMEN_X86
