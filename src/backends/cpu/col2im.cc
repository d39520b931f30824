// CPU kernel of Col2Im over float16, float32, float64 and the integer dtypes. Each (n, c) image
// plane is one task: zeroed, then every block offset k adds its row of L column values, walking
// the block grid row by row (the last spatial axis innermost, where consecutive blocks read
// consecutive inputs) and skipping positions that fall in the padding.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/numeric_types.h"
#include "graph/schemas/col2im.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 15;

template <typename T>
class Col2ImKernel final : public Kernel {
 public:
  explicit Col2ImKernel(const NodeContext& ctx) : g_(col2im_geometry(ctx)) {
    batch_ = ctx.input_shape(0)[0];
    const int n = static_cast<int>(g_.image.size());
    image_strides_.assign(n, 1);
    for (int i = n - 2; i >= 0; --i) image_strides_[i] = image_strides_[i + 1] * g_.image[i + 1];
    for (int i = 0; i < n; ++i) {
      plane_ *= g_.image[i];
      block_size_ *= g_.block[i];
      blocks_ *= g_.counts[i];
    }
  }

  void run(KernelContext& ctx) const override {
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    const int n = static_cast<int>(g_.image.size());
    const int64_t planes = batch_ * g_.channels;
    const int64_t row_len = g_.counts[n - 1];
    const int64_t rows = blocks_ / row_len;
    const bool parallel = planes * block_size_ * blocks_ > kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < planes; ++p) {
      T* out = y + p * plane_;
      std::fill(out, out + plane_, T(0));
      std::vector<int64_t> k_idx(n), b_idx(n);
      for (int64_t k = 0; k < block_size_; ++k) {
        int64_t rest = k;
        for (int i = n - 1; i >= 0; --i) {
          k_idx[i] = rest % g_.block[i];
          rest /= g_.block[i];
        }
        const T* in = x + (p * block_size_ + k) * blocks_;
        // Along the last axis, block b lands at b * stride + first; the blocks in [b_lo, b_hi)
        // land inside the image.
        const int64_t s = g_.strides[n - 1];
        const int64_t first = k_idx[n - 1] * g_.dilations[n - 1] - g_.pad_begin[n - 1];
        const int64_t width = g_.image[n - 1];
        const int64_t b_lo = first >= 0 ? 0 : (-first + s - 1) / s;
        const int64_t b_hi = first >= width ? 0 : std::min(row_len, (width - 1 - first) / s + 1);
        for (int64_t r = 0; r < rows; ++r) {
          int64_t base = 0;
          bool inside = true;
          int64_t rr = r;
          for (int i = n - 2; i >= 0 && inside; --i) {
            const int64_t b = rr % g_.counts[i];
            rr /= g_.counts[i];
            const int64_t pos = b * g_.strides[i] + k_idx[i] * g_.dilations[i] - g_.pad_begin[i];
            inside = pos >= 0 && pos < g_.image[i];
            base += pos * image_strides_[i];
          }
          if (!inside) continue;
          const T* src = in + r * row_len;
          for (int64_t b = b_lo; b < b_hi; ++b) {
            T& dst = out[base + first + b * s];
            dst = static_cast<T>(dst + src[b]);
          }
        }
      }
    }
  }

 private:
  Col2ImGeometry g_;
  int64_t batch_ = 0;
  int64_t plane_ = 1, block_size_ = 1, blocks_ = 1;
  std::vector<int64_t> image_strides_;
};

std::string check_col2im(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (in_numeric_set<kWithFloat16>(t)) return "";
  return std::string("input is ") + dtype_name(t) + "; the CPU kernel takes " +
         numeric_set_names<kWithFloat16>();
}

std::unique_ptr<Kernel> make_col2im(const NodeContext& ctx) {
  const std::string reason = check_col2im(ctx);
  if (!reason.empty()) ctx.fail_unsupported("CPU: " + reason);
  return visit_numeric<kWithFloat16>(ctx.input_dtype(0),
                                     [&]<typename T>(T) -> std::unique_ptr<Kernel> {
                                       return std::make_unique<Col2ImKernel<T>>(ctx);
                                     });
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Col2Im, &make_col2im, &check_col2im);

}  // namespace lumen::cpu
