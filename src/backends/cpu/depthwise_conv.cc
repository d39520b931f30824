// Depthwise convolution, channels-last. A task is one output row of one image (or, where rows are
// too few to share, a range of its channels). Where every tap of a run of output pixels lies
// inside the input horizontally, the run goes in strips of 8, 4 or 2 pixels (6 for 7-wide
// kernels) per vector of channels: per kernel row the kernel's weight vectors stay in registers and
// each input column is loaded once for every sum it feeds. The pixels at the edges go one by one
// over the taps that fall inside the input (padding needs no copy and no zero reads). The sums
// start from the bias (and the residual) and get the activation in registers before their one
// store; a strip runs all the channels of its pixels before the next strip, so the input lines it
// reads serve every vector from L1. Channels past the last whole vector go through masked loads
// and stores. The tasks are depthwise_conv_body.inc, here at AVX2 and in depthwise_conv_avx512.cc
// at AVX-512 (chosen per run by the level in use).
#include "backends/cpu/depthwise_conv.h"

#include <omp.h>

#include <algorithm>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_choice.h"
#include "backends/cpu/simd_math.h"
#include "lumen/error.h"

#if LUMEN_X86
#include <immintrin.h>

// The tasks' AVX2 form; depthwise_conv_applies, which is not AVX2 code, admits the kernel only
// where the CPU has AVX2.
LUMEN_AVX2_BEGIN
namespace lumen::cpu {
namespace {

struct V {
  using Reg = __m256;
  using Mask = __m256i;
  static constexpr int64_t kLanes = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static Reg load(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, Reg v, Mask m) { _mm256_maskstore_ps(p, m, v); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg activate(Reg v, const GemmEpilogue& e) { return activate8(v, e); }
  static Mask mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};

#include "backends/cpu/depthwise_conv_body.inc"

}  // namespace

void depthwise_task_avx2(const DepthwiseArgs& a, const GemmEpilogue& e, bool in_registers,
                         int64_t task) {
  run_depthwise_task(a, e, in_registers, task);
}

}  // namespace lumen::cpu
LUMEN_ISA_END

namespace lumen::cpu {

bool depthwise_conv_applies(int64_t in_channels, int64_t out_channels, int64_t group,
                            const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& dilations) {
  return has_avx2() && group > 1 && in_channels == group && out_channels == group &&
         kernel.size() == 2 && dilations.size() == 2 && dilations[0] == 1 && dilations[1] == 1;
}

bool depthwise_conv_for_every_activation() {
  return has_avx512();
}

void DepthwiseConv::run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t stride_h,
                        int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t out_h,
                        int64_t out_w, float* y, const GemmEpilogue& e) const {
  const int64_t rows = batch * out_h;
  if (rows == 0 || out_w == 0 || channels_ == 0) return;
  const bool avx512 = has_avx512();
  const int64_t lanes = avx512 ? 16 : kDepthwiseLanes;  // floats per vector
  // Rows are the tasks; where there are fewer than 4 per thread, each row is cut into channel
  // ranges of whole vectors as well.
  const int64_t threads = omp_get_max_threads();
  int64_t chunks = std::min((4 * threads + rows - 1) / rows, channels_ / (4 * lanes));
  chunks = std::max<int64_t>(chunks, 1);
  const int64_t chunk = ((channels_ + lanes - 1) / lanes + chunks - 1) / chunks * lanes;
  chunks = (channels_ + chunk - 1) / chunk;
  const DepthwiseArgs a{x,       in_h,      in_w,   channels_, stride_h,  stride_w,
                        pad_top, pad_left,  out_h,  out_w,     kernel_h_, kernel_w_,
                        padded_, w_.data(), e.bias, y,         chunks,    chunk};
  const bool in_registers = activates_in_registers(e.activation);
  const auto task_fn = avx512 ? &depthwise_task_avx512 : &depthwise_task_avx2;
  const int64_t tasks = rows * chunks;
  const bool parallel = tasks > 1 && rows * out_w * channels_ * kernel_h_ * kernel_w_ > (1 << 15);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t task = 0; task < tasks; ++task) task_fn(a, e, in_registers, task);
}

}  // namespace lumen::cpu

#elif !defined(__aarch64__)
// Elsewhere than x86 and arm64 (depthwise_conv_neon.cc) the kernel does not exist: the gate admits
// nothing, so run is never reached.
namespace lumen::cpu {

bool depthwise_conv_applies(int64_t, int64_t, int64_t, const std::vector<int64_t>&,
                            const std::vector<int64_t>&) {
  return false;
}

bool depthwise_conv_for_every_activation() {
  return false;
}

void DepthwiseConv::run(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                        int64_t, int64_t, float*, const GemmEpilogue&) const {
  throw UnsupportedOp("DepthwiseConv: no kernel for this CPU");
}

}  // namespace lumen::cpu
#endif  // LUMEN_X86

namespace lumen::cpu {

DepthwiseConv::DepthwiseConv(const float* weights, int64_t channels, int64_t kernel_h,
                             int64_t kernel_w)
    : channels_(channels),
      padded_((channels + kDepthwiseLanes - 1) / kDepthwiseLanes * kDepthwiseLanes),
      kernel_h_(kernel_h),
      kernel_w_(kernel_w),
      w_(static_cast<size_t>(kernel_h * kernel_w * padded_), 0.0f) {
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t tap = 0; tap < kernel_h * kernel_w; ++tap)
      w_[tap * padded_ + c] = weights[c * kernel_h * kernel_w + tap];
}

void DepthwiseConv::evict() const {
  evict_from_caches(w_.data(), w_.size() * sizeof(float));
}

}  // namespace lumen::cpu
