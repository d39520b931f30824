// CPU kernel of CumProd over float16, float32, float64, int32, int64, uint32 and uint64. The
// tensor is seen as [outer, n, inner] around the axis; each slab is walked along n (forward or
// reversed) with a running product per column, kept for a chunk of contiguous inner columns so
// the inner loop vectorises. Integer products wrap around (two's complement); float16 rounds the
// running product to float16 at every step, as a float16 cumulative product does.
#include <algorithm>
#include <memory>
#include <string>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

// Columns of one slab that one task carries.
constexpr int64_t kColumns = 512;
// Elements below which the kernel runs on one thread.
constexpr int64_t kParallelWork = 1 << 15;

struct MulOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(Wide<T>(a) * Wide<T>(b));
    } else {
      return static_cast<T>(a * b);
    }
  }
};

template <typename T>
class CumProdKernel final : public Kernel {
 public:
  CumProdKernel(const NodeContext& ctx, int axis)
      : exclusive_(ctx.attr_int("exclusive", 0) == 1), reverse_(ctx.attr_int("reverse", 0) == 1) {
    const Shape& x = ctx.input_shape(0);
    for (int d = 0; d < axis; ++d) outer_ *= x[d];
    n_ = x[axis];
    for (int d = axis + 1; d < x.rank(); ++d) inner_ *= x[d];
  }

  void run(KernelContext& ctx) const override {
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    const int64_t outer = outer_, n = n_, inner = inner_;
    const int64_t total = outer * n * inner;
    if (total == 0) return;
    const int64_t chunks = (inner + kColumns - 1) / kColumns;
    const MulOp mul;
#pragma omp parallel for schedule(static) if (total > kParallelWork)
    for (int64_t t = 0; t < outer * chunks; ++t) {
      const int64_t o = t / chunks;
      const int64_t j0 = (t % chunks) * kColumns;
      const int64_t len = std::min(kColumns, inner - j0);
      T acc[kColumns];
      std::fill(acc, acc + len, T(1));
      for (int64_t step = 0; step < n; ++step) {
        const int64_t r = reverse_ ? n - 1 - step : step;
        const T* in = x + (o * n + r) * inner + j0;
        T* out = y + (o * n + r) * inner + j0;
        if (exclusive_) {
          for (int64_t j = 0; j < len; ++j) {
            const T v = in[j];  // read first: the output may be the input itself
            out[j] = acc[j];
            acc[j] = mul(acc[j], v);
          }
        } else {
          for (int64_t j = 0; j < len; ++j) {
            acc[j] = mul(acc[j], in[j]);
            out[j] = acc[j];
          }
        }
      }
    }
  }
  int in_place_input() const override {
    return 0;
  }

 private:
  bool exclusive_;
  bool reverse_;
  int64_t outer_ = 1, n_ = 1, inner_ = 1;
};

std::string check_cum_prod(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt32:
    case DType::kUInt64:
      return "";
    default:
      return std::string("input is ") + dtype_name(ctx.input_dtype(0)) +
             "; the CPU kernel takes float16, float32, float64, int32, int64, uint32, uint64";
  }
}

std::unique_ptr<Kernel> make_cum_prod(const NodeContext& ctx) {
  const std::string reason = check_cum_prod(ctx);
  if (!reason.empty()) ctx.fail_unsupported("CPU: " + reason);
  const int axis = normalize_axis(ctx.input_ints(1, "axis")[0], ctx.input_shape(0).rank());
  return visit_numeric<kWithFloat16>(ctx.input_dtype(0),
                                     [&]<typename T>(T) -> std::unique_ptr<Kernel> {
                                       return std::make_unique<CumProdKernel<T>>(ctx, axis);
                                     });
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(CumProd, &make_cum_prod, &check_cum_prod);

}  // namespace lumen::cpu
