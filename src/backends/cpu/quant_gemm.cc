// CPU kernels of MatMulInteger and QLinearMatMul: numpy.matmul of 8-bit operands with zero points
// (per tensor, per row of A or per column of B), accumulated exactly in int32. QLinearMatMul then
// requantizes: y = saturate(round(acc * a_scale * b_scale / y_scale) + y_zero_point).
#include <algorithm>
#include <memory>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/quant_dnnl.h"
#include "backends/cpu/quant_math.h"

namespace lumen::cpu {
namespace {

// Where each output matrix of a broadcast batched matmul reads its A and B matrices.
struct BatchPlan {
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> a_matrix;  // per output batch: index of A's matrix
  std::vector<int64_t> b_matrix;
};

BatchPlan plan_batches(const Shape& a, const Shape& b) {
  BatchPlan p;
  p.m = a.rank() >= 2 ? a[-2] : 1;
  p.k = a[-1];
  p.n = b.rank() >= 2 ? b[-1] : 1;
  std::vector<int64_t> ab(a.dims().begin(), a.dims().end() - std::min(a.rank(), 2));
  std::vector<int64_t> bb(b.dims().begin(), b.dims().end() - std::min(b.rank(), 2));
  const Shape out = broadcast_shapes(Shape(ab), Shape(bb));
  const int rank = out.rank();
  ab.insert(ab.begin(), rank - ab.size(), 1);
  bb.insert(bb.begin(), rank - bb.size(), 1);
  const int64_t count = out.numel();
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t rest = flat, ai = 0, bi = 0, a_stride = 1, b_stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t idx = rest % out[d];
      rest /= out[d];
      if (ab[d] != 1) ai += idx * a_stride;
      if (bb[d] != 1) bi += idx * b_stride;
      a_stride *= ab[d];
      b_stride *= bb[d];
    }
    p.a_matrix.push_back(ai);
    p.b_matrix.push_back(bi);
  }
  return p;
}

// acc[m, n] = sum_k (a[m, k] - a_zp[m]) * (b[k, n] - b_zp[n]) for one matrix pair. The
// zero-point-shifted operands fit int16 ([-255, 255]), so each output is a contiguous int16 dot
// product over k with int32 sums (dot_i16: pairs of products of at most 255 * 255 each, exact).
// Rows in parallel when `parallel` (a single product; batches are parallel otherwise).
void integer_matmul(const void* a, DType at, const void* b, DType bt, int64_t m, int64_t k,
                    int64_t n, const std::vector<int32_t>& a_zp, const std::vector<int32_t>& b_zp,
                    int32_t* acc, bool parallel) {
  std::vector<int16_t> b_cols(static_cast<size_t>(k * n));  // column c at c * k
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c)
      b_cols[c * k + r] = static_cast<int16_t>(load_8bit(b, bt, r * n + c) - b_zp[c]);
  std::vector<int16_t> a_rows(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < k; ++r)
      a_rows[i * k + r] = static_cast<int16_t>(load_8bit(a, at, i * k + r) - a_zp[i]);
  // Blocks of columns of about 64 KB of B, each multiplied by every row while it is in cache.
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(k, 1));
  const int64_t blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (parallel && blocks > 1 && m * n * k > (1 << 16))
  for (int64_t cb = 0; cb < blocks; ++cb) {
    const int64_t c0 = cb * block, c1 = std::min(n, c0 + block);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t c = c0; c < c1; ++c)
        acc[i * n + c] = dot_i16(a_rows.data() + i * k, b_cols.data() + c * k, k);
  }
}

// Runs the batched integer product of inputs a_in and b_in; calls `emit(batch, acc)` with each
// output matrix's int32 accumulators.
class IntegerMatMulBase : public Kernel {
 protected:
  IntegerMatMulBase(const NodeContext& ctx, int a_in, int b_in)
      : plan_(plan_batches(ctx.input_shape(a_in), ctx.input_shape(b_in))),
        a_in_(a_in),
        b_in_(b_in) {}

  template <typename Emit>
  void for_each_product(KernelContext& ctx, const Tensor& a_zp, const Tensor& b_zp,
                        Emit emit) const {
    const Tensor& a = ctx.inputs[a_in_];
    const Tensor& b = ctx.inputs[b_in_];
    const std::vector<int32_t> azp = zero_points(a_zp, plan_.m);
    const std::vector<int32_t> bzp = zero_points(b_zp, plan_.n);
    const int64_t m = plan_.m, k = plan_.k, n = plan_.n;
    const auto* ad = static_cast<const uint8_t*>(a.raw_data());
    const auto* bd = static_cast<const uint8_t*>(b.raw_data());
    const int64_t batches = static_cast<int64_t>(plan_.a_matrix.size());
    // One B for every batch, A's matrices in order (a 2-D B): one product of batches * m rows, so
    // B is converted once.
    bool one_b = batches > 1;
    for (int64_t t = 0; one_b && t < batches; ++t)
      one_b = plan_.b_matrix[t] == 0 && plan_.a_matrix[t] == t;
    if (one_b) {
      std::vector<int32_t> rows_zp(static_cast<size_t>(batches * m));
      for (int64_t r = 0; r < batches * m; ++r) rows_zp[r] = azp[r % m];
      std::vector<int32_t> acc(static_cast<size_t>(batches * m * n));
      integer_matmul(ad, a.dtype(), bd, b.dtype(), batches * m, k, n, rows_zp, bzp, acc.data(),
                     true);
      for (int64_t t = 0; t < batches; ++t) emit(t, acc.data() + t * m * n);
      return;
    }
#pragma omp parallel for schedule(static) if (batches > 1 && m * n * k * batches > (1 << 16))
    for (int64_t t = 0; t < batches; ++t) {
      std::vector<int32_t> acc(static_cast<size_t>(m * n));
      integer_matmul(ad + plan_.a_matrix[t] * m * k, a.dtype(), bd + plan_.b_matrix[t] * k * n,
                     b.dtype(), m, k, n, azp, bzp, acc.data(), batches == 1);
      emit(t, acc.data());
    }
  }

  BatchPlan plan_;
  int a_in_;
  int b_in_;
};

// Inputs: A, B, a_zero_point, b_zero_point.
class MatMulIntegerKernel final : public IntegerMatMulBase {
 public:
  explicit MatMulIntegerKernel(const NodeContext& ctx) : IntegerMatMulBase(ctx, 0, 1) {}

  void run(KernelContext& ctx) const override {
    int32_t* y = ctx.outputs[0].data<int32_t>();
    const int64_t size = plan_.m * plan_.n;
    auto input = [&](size_t i) { return i < ctx.inputs.size() ? ctx.inputs[i] : Tensor(); };
    for_each_product(ctx, input(2), input(3),
                     [&](int64_t t, const int32_t* acc) { std::copy_n(acc, size, y + t * size); });
  }
};

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
class QLinearMatMulKernel final : public IntegerMatMulBase {
 public:
  explicit QLinearMatMulKernel(const NodeContext& ctx)
      : IntegerMatMulBase(ctx, 0, 3), out_(ctx.output(0).dtype) {}

  void run(KernelContext& ctx) const override {
    const int64_t m = plan_.m, n = plan_.n;
    const std::vector<float> as = scales(ctx.inputs[1], m);
    const std::vector<float> bs = scales(ctx.inputs[4], n);
    const float ys = ctx.inputs[6].data<float>()[0];
    const int32_t yzp = int_at(ctx.inputs[7], 0);
    const int32_t lo = quant_min(out_), hi = quant_max(out_);
    void* y = ctx.outputs[0].raw_data();
    const DType out = out_;
    for_each_product(ctx, ctx.inputs[2], ctx.inputs[5], [&](int64_t t, const int32_t* acc) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const double scale = static_cast<double>(as[i]) * bs[j] / ys;
          const float v = static_cast<float>(acc[i * n + j] * scale);
          store_8bit(y, out, (t * m + i) * n + j, quantize_value(v, yzp, lo, hi));
        }
      }
    });
  }

 private:
  DType out_;
};

std::unique_ptr<Kernel> make_matmul_integer(const NodeContext& ctx) {
  return std::make_unique<MatMulIntegerKernel>(ctx);
}

// oneDNN's int8 primitive where it is exact (quant_dnnl.h), else the reference loops.
std::unique_ptr<Kernel> make_qlinear_matmul(const NodeContext& ctx) {
  if (std::unique_ptr<Kernel> fast = make_dnnl_qlinear_matmul(ctx)) return fast;
  return std::make_unique<QLinearMatMulKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(MatMulInteger, &make_matmul_integer);
LUMEN_REGISTER_CPU_KERNEL(QLinearMatMul, &make_qlinear_matmul);

}  // namespace lumen::cpu
