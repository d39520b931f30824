// Im2colConv (im2col_conv.h). Per image, the patch rows are gathered in parallel over output
// rows (a patch row is kh * kw runs of C contiguous channels, or zeros where the window hangs
// over the padding), then one packed_gemm computes the image's output with the epilogue.
#include "backends/cpu/im2col_conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_choice.h"
#include "lumen/tensor.h"

namespace lumen::cpu {

bool im2col_conv_applies(int64_t in_channels, int64_t group, const std::vector<int64_t>& kernel,
                         const std::vector<int64_t>& strides,
                         const std::vector<int64_t>& dilations) {
  if (!lumen_kernel_candidate() || group != 1 || in_channels < 64 || kernel.size() != 2 ||
      strides.size() != 2 || dilations.size() != 2)
    return false;
  return dilations[0] == 1 && dilations[1] == 1 && kernel[0] * kernel[1] > 1 &&
         std::max(strides[0], strides[1]) >= 2;
}

// The kernel is AVX2 code throughout on x86: im2col_conv_applies admits it only where the CPU has
// AVX2. On arm64 the region is plain code over packed_gemm's NEON form, chosen per node against
// oneDNN by measurement (kernel_choice.h).
LUMEN_AVX2_BEGIN

Im2colConv::Im2colConv(const float* weights, int64_t out_channels, int64_t in_channels,
                       int64_t kernel_h, int64_t kernel_w)
    : channels_(in_channels), kernel_h_(kernel_h), kernel_w_(kernel_w) {
  const int64_t taps = kernel_h * kernel_w, rows = taps * in_channels;
  std::vector<float> b(static_cast<size_t>(rows * out_channels));
  for (int64_t o = 0; o < out_channels; ++o)
    for (int64_t c = 0; c < in_channels; ++c)
      for (int64_t t = 0; t < taps; ++t)
        b[static_cast<size_t>((t * in_channels + c) * out_channels + o)] =
            weights[(o * in_channels + c) * taps + t];
  weights_ = PackedMatrix(b.data(), rows, out_channels, out_channels, 1);
}

void Im2colConv::run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t stride_h,
                     int64_t stride_w, int64_t pad_top, int64_t pad_left, int64_t out_h,
                     int64_t out_w, float* y, const GemmEpilogue& epilogue) const {
  const int64_t c = channels_, k = weights_.k(), o = weights_.n(), pixels = out_h * out_w;
  Tensor patches = Tensor::empty(Shape{std::max<int64_t>(pixels * k, 1)}, DType::kFloat32);
  float* a = patches.data<float>();
  const size_t run_bytes = static_cast<size_t>(c) * sizeof(float);
  for (int64_t n = 0; n < batch; ++n) {
    const float* image = x + n * in_h * in_w * c;
#pragma omp parallel for schedule(static) if (pixels * k > (int64_t{1} << 16))
    for (int64_t oh = 0; oh < out_h; ++oh)
      for (int64_t ow = 0; ow < out_w; ++ow) {
        float* row = a + (oh * out_w + ow) * k;
        for (int64_t i = 0; i < kernel_h_; ++i) {
          const int64_t ih = oh * stride_h - pad_top + i;
          for (int64_t j = 0; j < kernel_w_; ++j, row += c) {
            const int64_t iw = ow * stride_w - pad_left + j;
            if (ih < 0 || ih >= in_h || iw < 0 || iw >= in_w)
              std::memset(row, 0, run_bytes);
            else
              std::memcpy(row, image + (ih * in_w + iw) * c, run_bytes);
          }
        }
      }
    packed_gemm(pixels, a, k, weights_, y + n * pixels * o, o, epilogue);
  }
}

LUMEN_ISA_END
}  // namespace lumen::cpu

namespace lumen::cpu {

void Im2colConv::evict() const {
  weights_.evict();
}

}  // namespace lumen::cpu
