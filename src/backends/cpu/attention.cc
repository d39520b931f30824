// CPU kernel of FusedAttention (float32): Y = softmax(scale * Q @ K^T + mask) @ V.
//
// The work is split into tasks of (batch-and-head index, block of kRowBlock query rows), run in
// parallel with OpenMP. A task computes the scores of its rows against every key into a
// thread-local [kRowBlock, Sk] buffer, applies the mask and a per-row softmax there, and multiplies
// the probabilities by V straight into Y: no more than one block of scores per thread ever exists,
// never the [B, H, Sq, Sk] tensor the unfused graph writes and reads three times.
//
// Both products use register-blocked micro-kernels sized for AVX2 (the build's x86-64-v3
// baseline, or AVX-512 where the CPU has it): kPanel query rows times two vectors of columns
// (12 vector accumulators, GCC vector extensions) advanced by one rank-1 update per step. The
// scores read K^T rows contiguously; when K arrives as [Sk, D], the task first transposes its
// head's K into a thread-local [D, Sk] buffer.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kRowBlock = 48;  // query rows per task
constexpr int kPanel = 6;          // query rows per full micro-kernel call
constexpr int64_t kMaxLanes = 32;  // widest tile: two AVX-512 vectors

// Eight and sixteen floats. Loaded and stored through memcpy (an unaligned vector move): an
// alignment attribute on the typedef would be dropped when it is passed as a template argument.
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));

template <typename V>
[[gnu::always_inline]] inline void load(V* v, const float* p) {
  std::memcpy(v, p, sizeof(V));
}

template <typename V>
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

// out[r][j] = scales[r] * sum_d a[r][d] * b[d][j] for kRows rows of a (stride lda) and two
// vectors' worth of columns of b (stride ldb); out has stride ldo. The kRows x 2 accumulators (12
// registers for kRows = 6) stay in registers across the depth loop. Always inlined, so that it is
// compiled for the instruction set of the block_product it serves.
template <typename V, int kRows>
[[gnu::always_inline]] inline void panel_full(const float* a, int64_t lda, const float* b,
                                              int64_t ldb, int64_t depth, const float* scales,
                                              float* out, int64_t ldo) {
  constexpr int kW = sizeof(V) / sizeof(float);
  V acc[kRows][2];
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = V{};
  for (int64_t d = 0; d < depth; ++d) {
    V b0, b1;
    load(&b0, b + d * ldb);
    load(&b1, b + d * ldb + kW);
    for (int r = 0; r < kRows; ++r) {
      const float av = a[r * lda + d];
      acc[r][0] += av * b0;
      acc[r][1] += av * b1;
    }
  }
  for (int r = 0; r < kRows; ++r) {
    store<V>(out + r * ldo, acc[r][0] * scales[r]);
    store<V>(out + r * ldo + kW, acc[r][1] * scales[r]);
  }
}

// The same for one row and len (< kMaxLanes) columns: the right edge of a product.
[[gnu::always_inline]] inline void panel_edge(const float* a, const float* b, int64_t ldb,
                                              int64_t depth, int64_t len, float scale, float* out) {
  float acc[kMaxLanes] = {};
  for (int64_t d = 0; d < depth; ++d) {
    const float av = a[d];
    const float* brow = b + d * ldb;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) acc[j] += av * brow[j];
  }
  for (int64_t j = 0; j < len; ++j) out[j] = acc[j] * scale;
}

// out[r][c] = scales[r] * sum_d a[r][d] * b[d][c] for `rows` rows and `cols` columns: full
// kPanel-row tiles two vectors wide, then smaller row panels, then the column edge row by row.
template <typename V>
[[gnu::always_inline]] inline void block_product(const float* a, int64_t lda, const float* b,
                                                 int64_t ldb, int64_t rows, int64_t depth,
                                                 int64_t cols, const float* scales, float* out,
                                                 int64_t ldo) {
  constexpr int64_t kLanes = 2 * sizeof(V) / sizeof(float);
  const int64_t full_cols = cols / kLanes * kLanes;
  for (int64_t c = 0; c < full_cols; c += kLanes) {
    int64_t r = 0;
    for (; r + kPanel <= rows; r += kPanel)
      panel_full<V, kPanel>(a + r * lda, lda, b + c, ldb, depth, scales + r, out + r * ldo + c,
                            ldo);
    for (; r + 3 <= rows; r += 3)
      panel_full<V, 3>(a + r * lda, lda, b + c, ldb, depth, scales + r, out + r * ldo + c, ldo);
    for (; r < rows; ++r)
      panel_full<V, 1>(a + r * lda, lda, b + c, ldb, depth, scales + r, out + r * ldo + c, ldo);
  }
  if (full_cols < cols)
    for (int64_t r = 0; r < rows; ++r)
      panel_edge(a + r * lda, b + full_cols, ldb, depth, cols - full_cols, scales[r],
                 out + r * ldo + full_cols);
}

using BlockProduct = void (*)(const float*, int64_t, const float*, int64_t, int64_t, int64_t,
                              int64_t, const float*, float*, int64_t);

// The build's baseline (x86-64-v3: AVX2 + FMA).
void block_product_avx2(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows,
                        int64_t depth, int64_t cols, const float* scales, float* out, int64_t ldo) {
  block_product<Vec8>(a, lda, b, ldb, rows, depth, cols, scales, out, ldo);
}

// AVX-512, chosen at kernel build time where the CPU has it: twice the width, as oneDNN's own
// matmul uses on such machines (measured on [12, 128, 64] causal attention, one thread: AVX2
// 0.77 ms against 0.55 ms for oneDNN MatMul + Softmax + MatMul).
[[gnu::target("avx512f")]] void block_product_avx512(const float* a, int64_t lda, const float* b,
                                                     int64_t ldb, int64_t rows, int64_t depth,
                                                     int64_t cols, const float* scales, float* out,
                                                     int64_t ldo) {
  block_product<Vec16>(a, lda, b, ldb, rows, depth, cols, scales, out, ldo);
}

class FusedAttentionKernel final : public Kernel {
 public:
  explicit FusedAttentionKernel(const NodeContext& ctx)
      : product_(__builtin_cpu_supports("avx512f") ? &block_product_avx512 : &block_product_avx2),
        scale_(ctx.attr_float("scale", 1.0f)),
        k_transposed_(ctx.attr_int("k_transposed", 0) == 1) {
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
    // Taken dynamically: a thread held up (a shared VM's steal time) leaves its tasks to others.
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
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
    product_(qb, depth, kt, sk, rows, depth, sk, scales, scores, sk);
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
    product_(scores, sk, v + b * sk * dv_, dv_, rows, sk, dv_, scales, y + (b * sq_ + row0) * dv_,
             dv_);
  }

  BlockProduct product_;
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
