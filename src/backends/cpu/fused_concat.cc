// CPU kernel of FusedConcat (schema in graph/schemas/fused_concat.cc): each piece is read once
// and written into its slice of the output as activation(x * scale[c] + shift[c]). Where the
// pieces used to be concatenated into a tensor that the element-wise pass then read again
// (DenseNet's every layer: Concat -> BatchNormalization -> ReLU), the whole is one pass.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelElements = int64_t{1} << 15;

class FusedConcatKernel final : public Kernel {
 public:
  explicit FusedConcatKernel(const NodeContext& ctx)
      : relu_(ctx.attr_string("activation", "") == "Relu") {
    const Shape& y = ctx.output(0).shape;
    const int rank = y.rank();
    const int64_t axis_attr = ctx.attr_int("axis");
    const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
    for (int d = 0; d < axis; ++d) outer_ *= y.dims()[d];
    for (int d = axis + 1; d < rank; ++d) inner_ *= y.dims()[d];
    channels_ = y.dims()[axis];
    int64_t offset = 0;
    for (int k = 2; k < ctx.num_inputs(); ++k) {
      const int64_t c = ctx.input_shape(k).dims()[axis];
      for (int64_t i = 0; i < c; ++i) {
        piece_of_.push_back(k - 2);
        local_.push_back(i);
      }
      pieces_.push_back({offset, c});
      offset += c;
    }
  }

  void run(KernelContext& ctx) const override {
    const float* scale = ctx.inputs[0].data<float>();
    const float* shift = ctx.inputs[1].data<float>();
    float* y = ctx.outputs[0].data<float>();
    std::vector<const float*> x(pieces_.size());
    for (size_t k = 0; k < x.size(); ++k) x[k] = ctx.inputs[k + 2].data<float>();
    const bool parallel = outer_ * channels_ * inner_ > kParallelElements;
    if (inner_ == 1) {
      // Channels last: one row of every piece per outer index, the channels contiguous.
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t p = 0; p < outer_; ++p)
        for (size_t k = 0; k < pieces_.size(); ++k) {
          const auto [offset, count] = pieces_[k];
          row(x[k] + p * count, scale + offset, shift + offset, y + p * channels_ + offset, count);
        }
      return;
    }
    // Channels first: a run of `inner` values per (outer index, channel), one scale each.
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t c = 0; c < channels_; ++c) {
        const auto k = static_cast<size_t>(piece_of_[c]);
        const float* src = x[k] + (o * pieces_[k].count + local_[c]) * inner_;
        float* dst = y + (o * channels_ + c) * inner_;
        const float s = scale[c], b = shift[c];
        if (relu_) {
#pragma omp simd
          for (int64_t i = 0; i < inner_; ++i) dst[i] = std::max(src[i] * s + b, 0.0f);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < inner_; ++i) dst[i] = src[i] * s + b;
        }
      }
  }

 private:
  struct Piece {
    int64_t offset;  // first output channel
    int64_t count;   // channels
  };

  void row(const float* src, const float* s, const float* b, float* dst, int64_t n) const {
    if (relu_) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) dst[i] = std::max(src[i] * s[i] + b[i], 0.0f);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * s[i] + b[i];
    }
  }

  bool relu_;
  int64_t outer_ = 1, inner_ = 1, channels_ = 0;
  std::vector<Piece> pieces_;
  std::vector<int> piece_of_;   // output channel -> its piece
  std::vector<int64_t> local_;  // output channel -> its channel within the piece
};

std::unique_ptr<Kernel> make_fused_concat(const NodeContext& ctx) {
  return std::make_unique<FusedConcatKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(FusedConcat, &make_fused_concat, nullptr);

}  // namespace lumen::cpu
