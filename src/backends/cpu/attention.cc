// CPU kernel of FusedAttention and StridedAttention (float32):
//   Y = softmax(scale * Q @ K^T + mask) @ V
// FusedAttention's Q, K (or K^T) and V are contiguous; StridedAttention reads them, and writes Y,
// through the strided views of its attributes (strided_attention.h): slices of one projection,
// heads in any order. Both run the same kernel over views.
//
// The work is split into tasks of one batch-and-head index and a run of kRowBlock-row blocks of
// queries (whole heads where there are enough heads to keep every thread busy), run in parallel
// with OpenMP. A task gathers its head's K^T into a thread-local [D, Sk] buffer, its columns padded
// with zeros to whole micro-kernel tiles, and V into [Sk, Dv] when V's rows are not adjacent. Per
// row block it computes the scores against every key into a thread-local buffer, applies the mask
// and a per-row softmax there, and multiplies the probabilities by V straight into Y: no more than
// one block of scores per thread ever exists, never the [B, H, Sq, Sk] tensor the unfused graph
// writes and reads three times.
//
// Both products use the register-blocked micro-kernels of attention_block.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <omp.h>

#include "backends/cpu/attention_block.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"
#include "backends/cpu/simd_transpose.h"
#include "graph/schemas/strided_attention.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kRowBlock = 48;  // query rows per task

// Contiguous views of FusedAttention's inputs and output (K^T [..., D, Sk] when k_transposed).
AttentionViews contiguous_views(const NodeContext& ctx) {
  const auto view = [](const Shape& s) {
    TensorView v{s, 0, std::vector<int64_t>(s.rank(), 1)};
    for (int d = s.rank() - 2; d >= 0; --d) v.strides[d] = v.strides[d + 1] * s.dims()[d + 1];
    return v;
  };
  AttentionViews views{view(ctx.input_shape(0)), view(ctx.input_shape(1)), view(ctx.input_shape(2)),
                       view(ctx.output(0).shape)};
  if (ctx.attr_int("k_transposed", 0) == 1) {  // the logical K is K^T with its last dims swapped
    const int r = views.k.shape.rank();
    std::swap(views.k.shape.dims()[r - 2], views.k.shape.dims()[r - 1]);
    std::swap(views.k.strides[r - 2], views.k.strides[r - 1]);
  }
  return views;
}

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(const NodeContext& ctx, const AttentionViews& views)
      : product_(attention_block_product()),
        lanes_(attention_block_lanes()),
        scale_(ctx.attr_float("scale", 1.0f)) {
    const Shape& q = views.q.shape;
    const int rank = q.rank();
    for (int d = 0; d < rank - 2; ++d) batch_ *= q.dims()[d];
    sq_ = q.dims()[rank - 2];
    depth_ = q.dims()[rank - 1];
    sk_ = views.k.shape.dims()[rank - 2];
    dv_ = views.v.shape.dims()[rank - 1];
    q_row_ = views.q.strides[rank - 2];
    k_row_ = views.k.strides[rank - 2];
    k_col_ = views.k.strides[rank - 1];
    v_row_ = views.v.strides[rank - 2];
    y_row_ = views.y.strides[rank - 2];
    // Per batch-and-head index: where each view's [S, D] matrix starts.
    const auto offsets = [&](const TensorView& v) {
      std::vector<int64_t> out(static_cast<size_t>(batch_), v.offset);
      for (int64_t b = 0; b < batch_; ++b) {
        int64_t rest = b;
        for (int d = rank - 3; d >= 0; --d) {
          out[b] += (rest % q.dims()[d]) * v.strides[d];
          rest /= q.dims()[d];
        }
      }
      return out;
    };
    q_off_ = offsets(views.q);
    k_off_ = offsets(views.k);
    v_off_ = offsets(views.v);
    y_off_ = offsets(views.y);
    // Grouped-query FusedAttention (contiguous K and V with 1 / kv_group of Q's heads): index b
    // reads K's and V's matrix b / kv_group.
    const int64_t group = ctx.op() == OpKind::kFusedAttention ? ctx.attr_int("kv_group", 1) : 1;
    if (group > 1)
      for (int64_t b = 0; b < batch_; ++b) {
        k_off_[b] = b / group * sk_ * depth_;
        v_off_[b] = b / group * sk_ * dv_;
      }
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
    TensorView mask_view{q, 0, strides};
    mask_offsets_ = offsets(mask_view);
  }

  void run(KernelContext& ctx) const override {
    const float* q = ctx.inputs[0].data<float>();
    const float* k = ctx.inputs[1].data<float>();
    const float* v = ctx.inputs[2].data<float>();
    const float* mask = has_mask_ ? ctx.inputs[3].data<float>() : nullptr;
    float* y = ctx.outputs[0].data<float>();
    // A task is a run of row blocks of one batch-and-head index, which gathers that head's K^T
    // once: whole heads where there are enough of them to keep every thread busy.
    const int64_t blocks = (sq_ + kRowBlock - 1) / kRowBlock;
    const int64_t wanted = 4 * static_cast<int64_t>(omp_get_max_threads());
    const int64_t per_task = std::clamp<int64_t>(batch_ * blocks / wanted, 1, blocks);
    const int64_t head_tasks = (blocks + per_task - 1) / per_task;
    const int64_t tasks = batch_ * head_tasks;
    const bool parallel = tasks > 1 && batch_ * sq_ * sk_ * (depth_ + dv_) > kNormParallelWork;
    // Taken dynamically: a thread held up (a shared VM's steal time) leaves its tasks to others.
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t row0 = (t % head_tasks) * per_task * kRowBlock;
      run_task(t / head_tasks, row0, std::min(sq_, row0 + per_task * kRowBlock), q, k, v, mask, y);
    }
  }

 private:
  // Rows [row0, row_end) of batch-and-head index b.
  void run_task(int64_t b, int64_t row0, int64_t row_end, const float* q, const float* k,
                const float* v, const float* mask, float* y) const {
    // Per-thread scratch that keeps its capacity from run to run, so steady-state runs allocate
    // nothing.
    thread_local std::vector<float> scores_buf, kt_buf, v_buf;
    const int64_t sk = sk_, depth = depth_;
    // K^T [D, skp] with its columns padded to whole micro-kernel tiles (zeros), so the scores
    // product has no column edge; the padded scores are computed and never read.
    const int64_t skp = (sk + lanes_ - 1) / lanes_ * lanes_;
    if (scores_buf.size() < static_cast<size_t>(kRowBlock * skp))
      scores_buf.resize(static_cast<size_t>(kRowBlock * skp));
    if (kt_buf.size() < static_cast<size_t>(depth * skp))
      kt_buf.resize(static_cast<size_t>(depth * skp));
    float* kt = kt_buf.data();
    gather_kt(k + k_off_[b], kt, skp);
    // V rows far apart (a slice of a wider projection) would share a few cache sets and evict
    // each other in the second product's depth loop: they are gathered into [Sk, Dv] first.
    const float* vb = v + v_off_[b];
    int64_t v_row = v_row_;
    if (v_row_ != dv_) {
      if (v_buf.size() < static_cast<size_t>(sk * dv_)) v_buf.resize(static_cast<size_t>(sk * dv_));
      for (int64_t j = 0; j < sk; ++j)
        std::memcpy(v_buf.data() + j * dv_, vb + j * v_row_,
                    static_cast<size_t>(dv_) * sizeof(float));
      vb = v_buf.data();
      v_row = dv_;
    }
    float* scores = scores_buf.data();
    for (int64_t r0 = row0; r0 < row_end; r0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, row_end - r0);
      float scales[kRowBlock];
      for (int64_t r = 0; r < rows; ++r) scales[r] = scale_;
      product_(q + q_off_[b] + r0 * q_row_, q_row_, kt, skp, rows, depth, skp, scales, scores, skp);
      if (mask != nullptr) {
        const float* mb = mask + mask_offsets_[b] + r0 * mask_row_stride_;
        const int64_t cs = mask_col_stride_;
        for (int64_t r = 0; r < rows; ++r) {
          const float* mr = mb + r * mask_row_stride_;
          float* s = scores + r * skp;
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
        float* s = scores + r * skp;
        float m = max_floats(s, sk);
        // An all -inf row has no finite shift; 0 keeps IEEE results (NaN), as Softmax gives.
        if (!std::isfinite(m)) m = std::isnan(m) ? m : 0.0f;
        scales[r] = 1.0f / exp_shifted_sum8(s, m, sk);
      }
      product_(scores, skp, vb, v_row, rows, sk, dv_, scales, y + y_off_[b] + r0 * y_row_, y_row_);
    }
  }

  // K^T [D, skp] of one head from K's view at kb: rows copied when K^T is what is stored,
  // otherwise 8x8 tiles transposed in registers; the columns past Sk are zeros.
  void gather_kt(const float* kb, float* kt, int64_t skp) const {
    const int64_t sk = sk_, depth = depth_;
    if (k_row_ == 1) {
      for (int64_t d = 0; d < depth; ++d)
        std::memcpy(kt + d * skp, kb + d * k_col_, static_cast<size_t>(sk) * sizeof(float));
    } else {
      const int64_t sk8 = k_col_ == 1 ? sk / 8 * 8 : 0;
      for (int64_t j = 0; j < sk8; j += 8) {
        const float* rows[8];
        for (int r = 0; r < 8; ++r) rows[r] = kb + (j + r) * k_row_;
        transpose_rows8(rows, depth, kt + j, skp);
      }
      for (int64_t d = 0; d < depth; ++d)
        for (int64_t j = sk8; j < sk; ++j) kt[d * skp + j] = kb[j * k_row_ + d * k_col_];
    }
    for (int64_t d = 0; d < depth; ++d) std::fill(kt + d * skp + sk, kt + (d + 1) * skp, 0.0f);
  }

  BlockProduct product_;
  int64_t lanes_;  // columns per micro-kernel tile
  float scale_;
  bool has_mask_ = false;
  int64_t batch_ = 1;
  int64_t sq_ = 0;
  int64_t depth_ = 0;
  int64_t sk_ = 0;
  int64_t dv_ = 0;
  // Strides in elements: rows of Q, V and Y; K's sequence (row) and depth (col) dims.
  int64_t q_row_ = 0, k_row_ = 0, k_col_ = 0, v_row_ = 0, y_row_ = 0;
  std::vector<int64_t> q_off_, k_off_, v_off_, y_off_;  // per batch-and-head index
  int64_t mask_row_stride_ = 0;
  int64_t mask_col_stride_ = 0;
  std::vector<int64_t> mask_offsets_;  // per batch-and-head index
};

std::unique_ptr<Kernel> make_fused_attention(const NodeContext& ctx) {
  return std::make_unique<AttentionKernel>(ctx, contiguous_views(ctx));
}

std::unique_ptr<Kernel> make_strided_attention(const NodeContext& ctx) {
  return std::make_unique<AttentionKernel>(ctx, attention_views(ctx));
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(FusedAttention, &make_fused_attention, &require_float32);
LUMEN_REGISTER_CPU_KERNEL(StridedAttention, &make_strided_attention, &require_float32);

}  // namespace lumen::cpu
