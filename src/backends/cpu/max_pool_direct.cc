// Direct MaxPool with the Indices output and integer inputs (see max_pool_direct.h). Walks each
// output position's window in row-major order; the first maximum wins ties.
#include "backends/cpu/max_pool_direct.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "graph/schemas/conv_geometry.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 15;

// One spatial axis of the window; missing leading axes (1-D, 2-D) are size-1 axes.
struct Axis {
  int64_t in = 1, out = 1, k = 1, s = 1, d = 1, pad = 0;
};

template <typename T>
class DirectMaxPoolKernel final : public Kernel {
 public:
  explicit DirectMaxPoolKernel(const NodeContext& ctx) {
    const Shape& x = ctx.input_shape(0);
    ConvGeometry g =
        window_geometry(ctx, x, ctx.attr_ints("kernel_shape"), ctx.attr_int("ceil_mode", 0) != 0);
    planes_ = x[0] * x[1];
    for (int i = 0; i < g.spatial; ++i)
      axes_[3 - g.spatial + i] = {g.in[i],      g.out[i],       g.kernel[i],
                                  g.strides[i], g.dilations[i], g.pad_begin[i]};
    with_indices_ = ctx.num_outputs() > 1;
    column_major_ = ctx.attr_int("storage_order", 0) != 0;
  }

  void run(KernelContext& ctx) const override {
    const Axis &ad = axes_[0], &ah = axes_[1], &aw = axes_[2];
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    int64_t* ind = with_indices_ ? ctx.outputs[1].data<int64_t>() : nullptr;
    int64_t in_plane = ad.in * ah.in * aw.in;
    int64_t rows = planes_ * ad.out * ah.out;
    int64_t work = rows * aw.out * ad.k * ah.k * aw.k;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t oh = r % ah.out, od = (r / ah.out) % ad.out, p = r / (ah.out * ad.out);
      const T* plane = x + p * in_plane;
      for (int64_t ow = 0; ow < aw.out; ++ow) {
        T best = std::numeric_limits<T>::lowest();
        int64_t best_d = -1, best_h = 0, best_w = 0;
        for (int64_t kd = 0; kd < ad.k; ++kd) {
          int64_t id = od * ad.s - ad.pad + kd * ad.d;
          if (id < 0 || id >= ad.in) continue;
          for (int64_t kh = 0; kh < ah.k; ++kh) {
            int64_t ih = oh * ah.s - ah.pad + kh * ah.d;
            if (ih < 0 || ih >= ah.in) continue;
            const T* row = plane + (id * ah.in + ih) * aw.in;
            for (int64_t kw = 0; kw < aw.k; ++kw) {
              int64_t iw = ow * aw.s - aw.pad + kw * aw.d;
              if (iw < 0 || iw >= aw.in) continue;
              if (best_d < 0 || row[iw] > best) {
                best = row[iw];
                best_d = id;
                best_h = ih;
                best_w = iw;
              }
            }
          }
        }
        y[r * aw.out + ow] = best;
        if (ind == nullptr) continue;
        int64_t pos = column_major_ ? best_d + (best_h + best_w * ah.in) * ad.in
                                    : (best_d * ah.in + best_h) * aw.in + best_w;
        ind[r * aw.out + ow] = best_d < 0 ? -1 : p * in_plane + pos;
      }
    }
  }

 private:
  int64_t planes_ = 0;
  Axis axes_[3];
  bool with_indices_ = false;
  bool column_major_ = false;
};

}  // namespace

std::string check_direct_max_pool(const NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (t != DType::kFloat32 && t != DType::kInt8 && t != DType::kUInt8)
    return std::string("input X is ") + dtype_name(t) +
           "; the CPU kernel takes float32, int8 or uint8";
  if (ctx.input_shape(0).rank() > 5) return "MaxPool takes 1 to 3 spatial axes";
  return "";
}

std::unique_ptr<Kernel> make_direct_max_pool(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kInt8:
      return std::make_unique<DirectMaxPoolKernel<int8_t>>(ctx);
    case DType::kUInt8:
      return std::make_unique<DirectMaxPoolKernel<uint8_t>>(ctx);
    default:
      return std::make_unique<DirectMaxPoolKernel<float>>(ctx);
  }
}

}  // namespace lumen::cpu
