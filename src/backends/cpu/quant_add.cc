// CPU kernel of QLinearAdd (com.microsoft; also made by the fuse-qdq pass from DequantizeLinear ->
// Add -> QuantizeLinear):
//   C = saturate(round((dq(A) + dq(B)) / C_scale) + C_zero_point),  dq(X) = (X - X_zp) * X_scale
// with every step in float32 as the unfused ops take it (DequantizeLinear's product, Add's sum,
// QuantizeLinear's quotient rounded half to even), so the fusion changes no output.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/quant_math.h"

namespace lumen::cpu {
namespace {

// Inputs: A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point.
class QLinearAddKernel final : public Kernel {
 public:
  explicit QLinearAddKernel(const NodeContext& ctx)
      : plan_(ctx.output(0).shape, {ctx.input_shape(0), ctx.input_shape(3)}),
        type_(ctx.output(0).dtype) {}

  void run(KernelContext& ctx) const override {
    const Params p = {ctx.inputs[1].data<float>()[0], ctx.inputs[4].data<float>()[0],
                      ctx.inputs[6].data<float>()[0], zero_point(ctx, 2), zero_point(ctx, 5),
                      static_cast<float>(zero_point(ctx, 7)),
                      static_cast<float>(quant_min(type_)), static_cast<float>(quant_max(type_))};
    if (type_ == DType::kInt8)
      add<int8_t>(ctx, p);
    else
      add<uint8_t>(ctx, p);
  }

 private:
  struct Params {
    float as, bs, cs;
    int32_t az, bz;
    float cz, lo, hi;
  };

  // Input k's zero point, else 0.
  static int32_t zero_point(const KernelContext& ctx, size_t k) {
    return k < ctx.inputs.size() && ctx.inputs[k].defined() ? int_at(ctx.inputs[k], 0) : 0;
  }

  // n elements; A's and B's steps along them are 1 (kA, kB) or 0 (one value repeated). The
  // products are not fused with the sum (this file is compiled with -ffp-contract=off).
  template <typename T, bool kA, bool kB>
  static void add_run(const T* a, const T* b, T* c, int64_t n, const Params& params) {
    // A copy: byte stores to c may alias `params`, which would reload it per element.
    const Params p = params;
    for (int64_t i = 0; i < n; ++i) {
      const float fa = static_cast<float>(static_cast<int32_t>(a[kA ? i : 0]) - p.az) * p.as;
      const float fb = static_cast<float>(static_cast<int32_t>(b[kB ? i : 0]) - p.bz) * p.bs;
      const float r = std::nearbyint((fa + fb) / p.cs);
      const float q = r != r ? p.cz : r + p.cz;  // NaN: the zero point, as QuantizeLinear
      c[i] = static_cast<T>(static_cast<int32_t>(std::min(std::max(q, p.lo), p.hi)));
    }
  }

  template <typename T>
  void add(KernelContext& ctx, const Params& p) const {
    const T* a = ctx.inputs[0].data<T>();
    const T* b = ctx.inputs[3].data<T>();
    T* c = ctx.outputs[0].data<T>();
    const bool sa = plan_.inner_stride(0) != 0, sb = plan_.inner_stride(1) != 0;
    for_each_row(plan_, [&](int64_t out, const int64_t* in, int64_t n) {
      if (sa && sb)
        add_run<T, true, true>(a + in[0], b + in[1], c + out, n, p);
      else if (sa)
        add_run<T, true, false>(a + in[0], b + in[1], c + out, n, p);
      else if (sb)
        add_run<T, false, true>(a + in[0], b + in[1], c + out, n, p);
      else
        add_run<T, false, false>(a + in[0], b + in[1], c + out, n, p);
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
