// CPU kernel of CenterCropPad for every dtype (a byte copy; zero bytes are the zero of every
// dtype). Output coordinate o along an axis reads input coordinate o + shift, where shift is
// (in - out) / 2 rounded toward zero: a crop starts at floor((in - out) / 2) and a pad puts
// floor((out - in) / 2) zeros first (the odd one goes last). Output rows (the last dimension)
// are filled as zeros, one contiguous copy, zeros, in parallel.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelBytes = 1 << 18;

class CenterCropPadKernel final : public Kernel {
 public:
  explicit CenterCropPadKernel(const NodeContext& ctx)
      : elem_(static_cast<int64_t>(dtype_size(ctx.input_dtype(0)))),
        in_(ctx.input_shape(0).dims()),
        out_(ctx.output(0).shape.dims()),
        in_strides_(ctx.input_shape(0).strides()) {
    for (size_t d = 0; d < in_.size(); ++d) shift_.push_back((in_[d] - out_[d]) / 2);
  }

  void run(KernelContext& ctx) const override {
    const auto* x = static_cast<const char*>(ctx.inputs[0].raw_data());
    auto* y = static_cast<char*>(ctx.outputs[0].raw_data());
    const int rank = static_cast<int>(out_.size());
    if (rank == 0) {
      std::memcpy(y, x, elem_);
      return;
    }
    const int64_t width = out_.back();
    int64_t rows = 1;
    for (int d = 0; d + 1 < rank; ++d) rows *= out_[d];
    if (rows == 0 || width == 0) return;
    // The columns of a row that come from the input: [lo, hi), reading from lo + shift.
    const int64_t last_shift = shift_.back();
    const int64_t lo = std::clamp<int64_t>(-last_shift, 0, width);
    const int64_t hi = std::clamp<int64_t>(in_.back() - last_shift, lo, width);
    const bool parallel = rows * width * elem_ > kParallelBytes;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < rows; ++r) {
      char* dst = y + r * width * elem_;
      // The input row under output row r, or none when it falls in the padding.
      int64_t src = 0;
      bool inside = true;
      int64_t rest = r;
      for (int d = rank - 2; d >= 0 && inside; --d) {
        const int64_t o = rest % out_[d];
        rest /= out_[d];
        const int64_t i = o + shift_[d];
        inside = i >= 0 && i < in_[d];
        src += i * in_strides_[d];
      }
      if (!inside || lo == hi) {
        std::memset(dst, 0, width * elem_);
        continue;
      }
      std::memset(dst, 0, lo * elem_);
      std::memcpy(dst + lo * elem_, x + (src + lo + last_shift) * elem_, (hi - lo) * elem_);
      std::memset(dst + hi * elem_, 0, (width - hi) * elem_);
    }
  }

 private:
  int64_t elem_;
  std::vector<int64_t> in_, out_, in_strides_, shift_;
};

std::unique_ptr<Kernel> make_center_crop_pad(const NodeContext& ctx) {
  return std::make_unique<CenterCropPadKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(CenterCropPad, &make_center_crop_pad);

}  // namespace lumen::cpu
