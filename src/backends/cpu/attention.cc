// CPU kernel of FusedAttention (float32): Y = softmax(scale * Q @ K^T + mask) @ V.
//
// The work is split into tasks of (batch-and-head index, block of kRowBlock query rows), run in
// parallel with OpenMP. A task computes the scores of its rows against every key into a
// thread-local [kRowBlock, Sk] buffer, applies the mask and a per-row softmax there, and multiplies
// the probabilities by V straight into Y: no more than one block of scores per thread ever exists,
// never the [B, H, Sq, Sk] tensor the unfused graph writes and reads three times.
//
// Both products use register-blocked micro-kernels sized for AVX2 (the build's x86-64-v3
// baseline): kPanel query rows times kLanes columns (12 vector accumulators, GCC vector
// extensions) advanced by one rank-1 update per step. The scores read K^T
// rows contiguously; when K arrives as [Sk, D], the task first transposes its head's K into a
// thread-local [D, Sk] buffer.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kRowBlock = 48;  // query rows per task
constexpr int kPanel = 6;          // query rows per full micro-kernel call
constexpr int64_t kLanes = 16;     // output columns per micro-kernel call (two AVX2 vectors)

// Eight floats, read and written at any float alignment.
typedef float Vec8 __attribute__((vector_size(32), aligned(4)));

// out[r][j] = scales[r] * sum_d a[r][d] * b[d][j] for kRows rows of a (stride lda) and kLanes
// columns of b (stride ldb); out has stride ldo. The kRows x 2 vector accumulators (12 of the 16
// AVX2 registers for kRows = 6) stay in registers across the depth loop.
template <int kRows>
inline void panel_full(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t depth,
                       const float* scales, float* out, int64_t ldo) {
  Vec8 acc[kRows][2];
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = Vec8{};
  for (int64_t d = 0; d < depth; ++d) {
    const Vec8 b0 = *reinterpret_cast<const Vec8*>(b + d * ldb);
    const Vec8 b1 = *reinterpret_cast<const Vec8*>(b + d * ldb + 8);
    for (int r = 0; r < kRows; ++r) {
      const float av = a[r * lda + d];
      acc[r][0] += av * b0;
      acc[r][1] += av * b1;
    }
  }
  for (int r = 0; r < kRows; ++r) {
    *reinterpret_cast<Vec8*>(out + r * ldo) = acc[r][0] * scales[r];
    *reinterpret_cast<Vec8*>(out + r * ldo + 8) = acc[r][1] * scales[r];
  }
}

// The same for one row and len (< kLanes) columns: the right edge of a product.
inline void panel_edge(const float* a, const float* b, int64_t ldb, int64_t depth, int64_t len,
                       float scale, float* out) {
  float acc[kLanes] = {};
  for (int64_t d = 0; d < depth; ++d) {
    const float av = a[d];
    const float* brow = b + d * ldb;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) acc[j] += av * brow[j];
  }
  for (int64_t j = 0; j < len; ++j) out[j] = acc[j] * scale;
}

// out[r][c] = scales[r] * sum_d a[r][d] * b[d][c] for `rows` rows and `cols` columns: full
// kPanel x kLanes tiles, then smaller row panels, then the column edge row by row.
void block_product(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows,
                   int64_t depth, int64_t cols, const float* scales, float* out, int64_t ldo) {
  const int64_t full_cols = cols / kLanes * kLanes;
  for (int64_t c = 0; c < full_cols; c += kLanes) {
    int64_t r = 0;
    for (; r + kPanel <= rows; r += kPanel)
      panel_full<kPanel>(a + r * lda, lda, b + c, ldb, depth, scales + r, out + r * ldo + c, ldo);
    for (; r + 3 <= rows; r += 3)
      panel_full<3>(a + r * lda, lda, b + c, ldb, depth, scales + r, out + r * ldo + c, ldo);
    for (; r < rows; ++r)
      panel_full<1>(a + r * lda, lda, b + c, ldb, depth, scales + r, out + r * ldo + c, ldo);
  }
  if (full_cols < cols)
    for (int64_t r = 0; r < rows; ++r)
      panel_edge(a + r * lda, b + full_cols, ldb, depth, cols - full_cols, scales[r],
                 out + r * ldo + full_cols);
}

class FusedAttentionKernel final : public Kernel {
 public:
  explicit FusedAttentionKernel(const NodeContext& ctx)
      : scale_(ctx.attr_float("scale", 1.0f)), k_transposed_(ctx.attr_int("k_transposed", 0) == 1) {
    const Shape& q = ctx.input_shape(0);
    const Shape& v = ctx.input_shape(2);
    const int rank = q.rank();
    for (int d = 0; d < rank - 2; ++d) batch_ *= q.dims()[d];
    sq_ = q.dims()[rank - 2];
    depth_ = q.dims()[rank - 1];
    sk_ = v.dims()[rank - 2];
    dv_ = v.dims()[rank - 1];
    if (!ctx.has_input(3)) return;
    // Mask strides over the scores' dims [..., Sq, Sk], 0 where the mask broadcasts.
    has_mask_ = true;
    const Shape& m = ctx.input_shape(3);
    std::vector<int64_t> strides(rank, 0);
    int64_t acc = 1;
    for (int i = 1; i <= m.rank(); ++i) {
      const int64_t md = m.dims()[m.rank() - i];
      if (md != 1) strides[rank - i] = acc;
      acc *= md;
    }
    mask_row_stride_ = strides[rank - 2];
    mask_col_stride_ = strides[rank - 1];
    mask_offsets_.assign(static_cast<size_t>(batch_), 0);
    for (int64_t b = 0; b < batch_; ++b) {
      int64_t rest = b, offset = 0;
      for (int d = rank - 3; d >= 0; --d) {
        offset += (rest % q.dims()[d]) * strides[d];
        rest /= q.dims()[d];
      }
      mask_offsets_[b] = offset;
    }
  }

  void run(KernelContext& ctx) const override {
    const float* q = ctx.inputs[0].data<float>();
    const float* k = ctx.inputs[1].data<float>();
    const float* v = ctx.inputs[2].data<float>();
    const float* mask = has_mask_ ? ctx.inputs[3].data<float>() : nullptr;
    float* y = ctx.outputs[0].data<float>();
    const int64_t blocks = (sq_ + kRowBlock - 1) / kRowBlock;
    const int64_t tasks = batch_ * blocks;
    const bool parallel = tasks > 1 && batch_ * sq_ * sk_ * (depth_ + dv_) > kNormParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < tasks; ++t)
      run_task(t / blocks, (t % blocks) * kRowBlock, q, k, v, mask, y);
  }

 private:
  // Rows [row0, row0 + kRowBlock) of batch-and-head index b.
  void run_task(int64_t b, int64_t row0, const float* q, const float* k, const float* v,
                const float* mask, float* y) const {
    // Per-thread scratch that keeps its capacity from run to run, so steady-state runs allocate
    // nothing.
    thread_local std::vector<float> scores_buf, kt_buf;
    const int64_t rows = std::min(kRowBlock, sq_ - row0);
    const int64_t sk = sk_, depth = depth_;
    if (scores_buf.size() < static_cast<size_t>(kRowBlock * sk))
      scores_buf.resize(static_cast<size_t>(kRowBlock * sk));
    float* scores = scores_buf.data();
    const float* kt = k + b * depth * sk;
    if (!k_transposed_) {
      if (kt_buf.size() < static_cast<size_t>(depth * sk))
        kt_buf.resize(static_cast<size_t>(depth * sk));
      const float* kb = k + b * sk * depth;
      for (int64_t j = 0; j < sk; ++j)
        for (int64_t d = 0; d < depth; ++d) kt_buf[d * sk + j] = kb[j * depth + d];
      kt = kt_buf.data();
    }
    const float* qb = q + (b * sq_ + row0) * depth;
    float scales[kRowBlock];
    for (int64_t r = 0; r < rows; ++r) scales[r] = scale_;
    block_product(qb, depth, kt, sk, rows, depth, sk, scales, scores, sk);
    if (mask != nullptr) {
      const float* mb = mask + mask_offsets_[b] + row0 * mask_row_stride_;
      const int64_t cs = mask_col_stride_;
      for (int64_t r = 0; r < rows; ++r) {
        const float* mr = mb + r * mask_row_stride_;
        float* s = scores + r * sk;
        if (cs == 1) {
#pragma omp simd
          for (int64_t j = 0; j < sk; ++j) s[j] += mr[j];
        } else {
          const float m0 = mr[0];
#pragma omp simd
          for (int64_t j = 0; j < sk; ++j) s[j] += m0;
        }
      }
    }
    // Softmax numerators in place; the 1/sum goes into the second product's row scales.
    for (int64_t r = 0; r < rows; ++r) {
      float* s = scores + r * sk;
      float m = max_floats(s, sk);
      // An all -inf row has no finite shift; 0 keeps IEEE results (NaN), as Softmax gives.
      if (!std::isfinite(m)) m = std::isnan(m) ? m : 0.0f;
      scales[r] = 1.0f / exp_shifted_sum(s, m, s, sk);
    }
    block_product(scores, sk, v + b * sk * dv_, dv_, rows, sk, dv_, scales,
                  y + (b * sq_ + row0) * dv_, dv_);
  }

  float scale_;
  bool k_transposed_;
  bool has_mask_ = false;
  int64_t batch_ = 1;
  int64_t sq_ = 0;
  int64_t depth_ = 0;
  int64_t sk_ = 0;
  int64_t dv_ = 0;
  int64_t mask_row_stride_ = 0;
  int64_t mask_col_stride_ = 0;
  std::vector<int64_t> mask_offsets_;  // per batch-and-head index
};

std::unique_ptr<Kernel> make_fused_attention(const NodeContext& ctx) {
  return std::make_unique<FusedAttentionKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(FusedAttention, &make_fused_attention, &require_float32);

}  // namespace lumen::cpu
