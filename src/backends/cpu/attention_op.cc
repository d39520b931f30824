// CPU kernel of ONNX Attention (schema: graph/schemas/attention.h), on the fused attention
// kernel's blocks (attention_block.h): per query block, the scores against every key, the bias and
// a per-row softmax, then the product with V, in one pass per block; the [B, H, Sq, T] scores
// tensor never exists (unless qk_matmul_output asks for it).
//
// Work is split into tasks of one batch index, one kv head and a run of kRowBlock-row blocks of
// that kv head's query rows: the rows of all G = Hq / Hkv query heads that share the kv head (head
// by head), so that grouped- and multi-query attention gather each kv head's K^T once for all its
// query heads (and decoding, one query per head, still fills the micro-kernel's rows). A task
// gathers K^T [D, T] (past keys first, then K's) into a thread-local buffer padded to whole tiles,
// and V [T, Dv] where it cannot be read in place; per block it gathers the query rows, computes the
// scores, adds the bias, takes the softmax and multiplies by V into a row buffer, then stores Y's
// rows. Operands of other float types (float16, bfloat16, float64) are converted to float32 as
// they are gathered and Y is rounded once as it is stored: every type runs the float32 kernel.
// Where a kv head has at most kDirectRows query rows (decoding) over float32 keys and values,
// run_direct reads them in place instead, each once.
//
// The bias of query i (of a batch) is -inf outside its key range [lo, hi) (causal frontier,
// sliding window, nonpad_kv_seqlen, the mask's length: attention_key_range) and attn_mask inside
// it. A block computes only the columns some row of it may attend (a causal block stops at its
// last row's frontier), unless qk_matmul_output wants every score. A row with no key left is a
// zero row, as the spec has it (not NaN).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cpu/attention_block.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"
#include "backends/cpu/simd_convert.h"
#include "backends/cpu/simd_transpose.h"
#include "core/half.h"
#include "graph/schemas/attention.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kRowBlock = 48;   // query rows per block
constexpr int64_t kDirectRows = 4;  // at most this many rows per kv head: run_direct

// dst[0..n) = src[0..n) of dtype t (float32, float16, bfloat16 or float64) as float32.
void load_floats(const void* src, DType t, int64_t n, float* dst) {
  switch (t) {
    case DType::kFloat32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kFloat16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t j = halves_to_floats_f16c(s, dst, n); j < n; ++j) dst[j] = half_to_float(s[j]);
      return;
    }
    case DType::kBFloat16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t j = 0; j < n; ++j) dst[j] = bfloat16_to_float(s[j]);
      return;
    }
    default: {
      const double* s = static_cast<const double*>(src);
      for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(s[j]);
      return;
    }
  }
}

// dst[0..n) of dtype t = src[0..n), rounded to nearest even.
void store_floats(const float* src, DType t, int64_t n, void* dst) {
  switch (t) {
    case DType::kFloat32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t j = 0; j < n; ++j) d[j] = float_to_half(src[j]);
      return;
    }
    case DType::kBFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t j = 0; j < n; ++j) d[j] = float_to_bfloat16(src[j]);
      return;
    }
    default: {
      double* d = static_cast<double*>(dst);
      for (int64_t j = 0; j < n; ++j) d[j] = src[j];
      return;
    }
  }
}

// Adds attn_mask's row `m` (dtype t; bool: false masks the key out) to scores s over [lo, hi).
void apply_mask(float* s, int64_t lo, int64_t hi, const void* m, DType t) {
  switch (t) {
    case DType::kBool: {
      const uint8_t* b = static_cast<const uint8_t*>(m);
      for (int64_t j = lo; j < hi; ++j)
        if (b[j] == 0) s[j] = -INFINITY;
      return;
    }
    case DType::kFloat32: {
      const float* f = static_cast<const float*>(m);
#pragma omp simd
      for (int64_t j = lo; j < hi; ++j) s[j] += f[j];
      return;
    }
    default: {
      thread_local std::vector<float> row;
      if (row.size() < static_cast<size_t>(hi)) row.resize(static_cast<size_t>(hi));
      load_floats(static_cast<const char*>(m) + lo * static_cast<int64_t>(dtype_size(t)), t,
                  hi - lo, row.data());
      for (int64_t j = lo; j < hi; ++j) s[j] += row[j - lo];
      return;
    }
  }
}

// Tensor pointers of one run, as bytes.
struct Operands {
  const char *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  const char *past_k = nullptr, *past_v = nullptr;
  const int64_t* nonpad = nullptr;
  char *y = nullptr, *present_k = nullptr, *present_v = nullptr, *qk = nullptr;
};

const char* bytes(const Tensor& t) {
  return t.defined() ? static_cast<const char*>(t.raw_data()) : nullptr;
}

class AttentionOpKernel final : public Kernel {
 public:
  explicit AttentionOpKernel(const NodeContext& ctx)
      : g_(attention_geometry(ctx)),
        product_(attention_block_product()),
        lanes_(attention_block_lanes()),
        t_qk_(ctx.input_dtype(kAttnQ)),
        t_v_(ctx.input_dtype(kAttnV)),
        t_mask_(ctx.has_input(kAttnMask) ? ctx.input_dtype(kAttnMask) : DType::kFloat32),
        es_qk_(static_cast<int64_t>(dtype_size(t_qk_))),
        es_v_(static_cast<int64_t>(dtype_size(t_v_))),
        es_mask_(static_cast<int64_t>(dtype_size(t_mask_))) {}

  void run(KernelContext& ctx) const override {
    Operands op;
    op.q = bytes(ctx.inputs[kAttnQ]);
    op.k = bytes(ctx.inputs[kAttnK]);
    op.v = bytes(ctx.inputs[kAttnV]);
    const auto input = [&](int i) {
      return static_cast<int>(ctx.inputs.size()) > i ? bytes(ctx.inputs[i]) : nullptr;
    };
    op.mask = input(kAttnMask);
    op.past_k = input(kAttnPastKey);
    op.past_v = input(kAttnPastValue);
    op.nonpad = reinterpret_cast<const int64_t*>(input(kAttnNonpad));
    const auto output = [&](int i, bool has) {
      return has ? static_cast<char*>(ctx.outputs[i].raw_data()) : nullptr;
    };
    op.y = output(kAttnY, true);
    op.present_k = output(kAttnPresentKey, g_.has_present_key);
    op.present_v = output(kAttnPresentValue, g_.has_present_value);
    op.qk = output(kAttnQk, g_.has_qk);
    write_present(op);
    const int64_t group_rows = g_.q_heads / g_.kv_heads * g_.q_len;
    if (g_.batch == 0 || group_rows == 0 || g_.v_head_size == 0) return;
    const int64_t blocks = (group_rows + kRowBlock - 1) / kRowBlock;
    const int64_t heads = g_.batch * g_.kv_heads;
    const int64_t wanted = 4 * static_cast<int64_t>(omp_get_max_threads());
    const int64_t per_task = std::clamp<int64_t>(heads * blocks / wanted, 1, blocks);
    const int64_t head_tasks = (blocks + per_task - 1) / per_task;
    const int64_t tasks = heads * head_tasks;
    const bool parallel =
        tasks > 1 &&
        heads * group_rows * g_.total_len * (g_.head_size + g_.v_head_size) > kNormParallelWork;
    if (group_rows <= kDirectRows && t_qk_ == DType::kFloat32 && t_v_ == DType::kFloat32 &&
        op.qk == nullptr) {
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
      for (int64_t t = 0; t < heads; ++t) run_direct(op, t / g_.kv_heads, t % g_.kv_heads);
      return;
    }
    // Taken dynamically: a thread held up (a shared VM's steal time) leaves its tasks to others.
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t head = t / head_tasks;
      const int64_t row0 = (t % head_tasks) * per_task * kRowBlock;
      run_task(op, head / g_.kv_heads, head % g_.kv_heads, row0,
               std::min(group_rows, row0 + per_task * kRowBlock));
    }
  }

 private:
  // Key (or value) j of kv head `h` of batch b: past_key's rows, then K's.
  const char* key_row(const Operands& op, int64_t b, int64_t h, int64_t j) const {
    if (j < g_.past_len)
      return op.past_k + (b * g_.past_k.batch + h * g_.past_k.head + j * g_.past_k.row) * es_qk_;
    j -= g_.past_len;
    return op.k + (b * g_.k.batch + h * g_.k.head + j * g_.k.row) * es_qk_;
  }
  const char* value_row(const Operands& op, int64_t b, int64_t h, int64_t j) const {
    if (j < g_.past_len)
      return op.past_v + (b * g_.past_v.batch + h * g_.past_v.head + j * g_.past_v.row) * es_v_;
    j -= g_.past_len;
    return op.v + (b * g_.v.batch + h * g_.v.head + j * g_.v.row) * es_v_;
  }

  // present_key and present_value, where asked for: past rows, then the new ones.
  void write_present(const Operands& op) const {
    const int64_t rows = g_.batch * g_.kv_heads * g_.total_len;
    const bool parallel = rows * (g_.head_size + g_.v_head_size) > kNormParallelWork;
#pragma omp parallel for if (parallel)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t j = r % g_.total_len, bh = r / g_.total_len;
      const int64_t b = bh / g_.kv_heads, h = bh % g_.kv_heads;
      if (op.present_k != nullptr)
        std::memcpy(op.present_k + r * g_.head_size * es_qk_, key_row(op, b, h, j),
                    static_cast<size_t>(g_.head_size * es_qk_));
      if (op.present_v != nullptr)
        std::memcpy(op.present_v + r * g_.v_head_size * es_v_, value_row(op, b, h, j),
                    static_cast<size_t>(g_.v_head_size * es_v_));
    }
  }

  // K^T [D, skp] of kv head h of batch b as float32, the columns past T zeros: eight keys at a
  // time through 8x8 register transposes (float32 keys read in place, others converted into tmp).
  void gather_kt(const Operands& op, int64_t b, int64_t h, float* kt, int64_t skp,
                 float* tmp) const {
    const int64_t total = g_.total_len, depth = g_.head_size;
    const bool f32 = t_qk_ == DType::kFloat32;
    const auto row = [&](int64_t j, float* buf) {
      const char* p = key_row(op, b, h, j);
      if (f32) return reinterpret_cast<const float*>(p);
      load_floats(p, t_qk_, depth, buf);
      return static_cast<const float*>(buf);
    };
    int64_t j = 0;
    for (; j + 8 <= total; j += 8) {
      const float* rows[8];
      for (int r = 0; r < 8; ++r) rows[r] = row(j + r, tmp + r * depth);
      transpose_rows8(rows, depth, kt + j, skp);
    }
    for (; j < total; ++j) {
      const float* kr = row(j, tmp);
      for (int64_t d = 0; d < depth; ++d) kt[d * skp + j] = kr[d];
    }
    for (int64_t d = 0; d < depth; ++d) std::fill(kt + d * skp + total, kt + (d + 1) * skp, 0.0f);
  }

  // Stores row s[0..T) of the scores (times `mul`) into qk_matmul_output's row of query i of
  // query head qh in batch b.
  void store_qk(const Operands& op, int64_t b, int64_t qh, int64_t i, float* s, float mul) const {
    char* dst = op.qk + ((b * g_.q_heads + qh) * g_.q_len + i) * g_.total_len * es_qk_;
    if (mul != 1.0f) {
      thread_local std::vector<float> row;
      if (row.size() < static_cast<size_t>(g_.total_len))
        row.resize(static_cast<size_t>(g_.total_len));
      for (int64_t j = 0; j < g_.total_len; ++j) row[j] = s[j] * mul;
      s = row.data();
    }
    store_floats(s, t_qk_, g_.total_len, dst);
  }

  // All group rows of kv head h of batch b when there are at most kDirectRows (decoding: one
  // query per head) and K and V are float32: each key and value row is read once, in place, for
  // all of them (dot products against the keys, then the value rows accumulated with the
  // probabilities). The K^T gather of run_task would cost as much as the products themselves.
  void run_direct(const Operands& op, int64_t b, int64_t h) const {
    thread_local std::vector<float> buf;
    const int64_t total = g_.total_len, depth = g_.head_size, dv = g_.v_head_size;
    const int64_t group = g_.q_heads / g_.kv_heads, rows = group * g_.q_len;
    const int64_t ld = total + 8;  // room for exp_shifted_sum8's last 8 lanes
    const size_t need = static_cast<size_t>(rows * (ld + depth + dv));
    if (buf.size() < need) buf.resize(need);
    float* scores = buf.data();
    float* qv = scores + rows * ld;
    float* acc = qv + rows * depth;
    const int64_t nonpad = op.nonpad != nullptr ? op.nonpad[b] : 0;
    int64_t qh[kDirectRows], qi[kDirectRows];
    AttentionKeyRange range[kDirectRows];
    int64_t c0 = total, c1 = 0;
    for (int64_t r = 0; r < rows; ++r) {
      qh[r] = h * group + r / g_.q_len;
      qi[r] = r % g_.q_len;
      const float* src = reinterpret_cast<const float*>(
          op.q + (b * g_.q.batch + qh[r] * g_.q.head + qi[r] * g_.q.row) * es_qk_);
      for (int64_t d = 0; d < depth; ++d) qv[r * depth + d] = src[d] * g_.scale;
      range[r] = attention_key_range(g_, qi[r], nonpad);
      range[r].lo = std::max<int64_t>(range[r].lo, 0);
      if (range[r].lo < range[r].hi) {
        c0 = std::min(c0, range[r].lo);
        c1 = std::max(c1, range[r].hi);
      }
    }
    std::fill(acc, acc + rows * dv, 0.0f);
    if (c0 < c1) {
      for (int64_t j = c0; j < c1; ++j) {
        const float* k = reinterpret_cast<const float*>(key_row(op, b, h, j));
        for (int64_t r = 0; r < rows; ++r) {
          const float* q = qv + r * depth;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int64_t d = 0; d < depth; ++d) dot += q[d] * k[d];
          scores[r * ld + j] = dot;
        }
      }
      float inv[kDirectRows];
      for (int64_t r = 0; r < rows; ++r)
        inv[r] = finish_row(op, b, qh[r], qi[r], range[r], scores + r * ld, c0, c1);
      for (int64_t j = c0; j < c1; ++j) {
        const float* v = reinterpret_cast<const float*>(value_row(op, b, h, j));
        for (int64_t r = 0; r < rows; ++r) {
          const float p = scores[r * ld + j] * inv[r];
          if (p == 0.0f) continue;  // a masked key adds nothing, whatever its value row holds
          float* a = acc + r * dv;
#pragma omp simd
          for (int64_t d = 0; d < dv; ++d) a[d] += p * v[d];
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r)
      store_floats(acc + r * dv, t_qk_, dv,
                   op.y + (b * g_.y.batch + qh[r] * g_.y.head + qi[r] * g_.y.row) * es_qk_);
  }

  // Group rows [row0, row_end) of kv head h of batch b: row r is query r % Sq of query head
  // h * G + r / Sq.
  void run_task(const Operands& op, int64_t b, int64_t h, int64_t row0, int64_t row_end) const {
    // Per-thread scratch that keeps its capacity from run to run.
    thread_local std::vector<float> scores_buf, kt_buf, v_buf, q_buf, y_buf, tmp_buf;
    const int64_t total = g_.total_len, depth = g_.head_size, dv = g_.v_head_size;
    const int64_t group = g_.q_heads / g_.kv_heads;
    const auto grow = [](std::vector<float>& v, int64_t n) {
      if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
      return v.data();
    };
    const int64_t skp = (total + lanes_ - 1) / lanes_ * lanes_;
    float* scores = grow(scores_buf, kRowBlock * std::max<int64_t>(skp, 1));
    float* kt = grow(kt_buf, depth * skp);
    float* qb = grow(q_buf, kRowBlock * depth);
    float* yb = grow(y_buf, kRowBlock * dv);
    float* tmp = grow(tmp_buf, 8 * std::max(depth, dv));
    gather_kt(op, b, h, kt, skp, tmp);
    // V as float32 [T, Dv]: read in place when it is one contiguous float32 run, else gathered
    // (converted, past rows first; the rows of a 3-D V lie apart and would share cache sets).
    const float* vb;
    if (t_v_ == DType::kFloat32 && !g_.has_past && !g_.three_d) {
      vb = reinterpret_cast<const float*>(value_row(op, b, h, 0));
    } else {
      float* vg = grow(v_buf, std::max<int64_t>(total, 1) * dv);
      for (int64_t j = 0; j < total; ++j)
        load_floats(value_row(op, b, h, j), t_v_, dv, vg + j * dv);
      vb = vg;
    }
    const int64_t nonpad = op.nonpad != nullptr ? op.nonpad[b] : 0;
    for (int64_t r0 = row0; r0 < row_end; r0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, row_end - r0);
      int64_t qh[kRowBlock], qi[kRowBlock];
      AttentionKeyRange range[kRowBlock];
      int64_t c0 = total, c1 = 0;  // the columns any row of the block attends
      for (int64_t r = 0; r < rows; ++r) {
        qh[r] = h * group + (r0 + r) / g_.q_len;
        qi[r] = (r0 + r) % g_.q_len;
        load_floats(op.q + (b * g_.q.batch + qh[r] * g_.q.head + qi[r] * g_.q.row) * es_qk_, t_qk_,
                    depth, qb + r * depth);
        range[r] = attention_key_range(g_, qi[r], nonpad);
        range[r].lo = std::max<int64_t>(range[r].lo, 0);
        if (range[r].lo < range[r].hi) {
          c0 = std::min(c0, range[r].lo);
          c1 = std::max(c1, range[r].hi);
        }
      }
      if (op.qk != nullptr) {  // every score is wanted
        c0 = 0;
        c1 = total;
      }
      float scales[kRowBlock];
      if (c0 < c1) {
        c0 = c0 / lanes_ * lanes_;  // whole tiles
        const int64_t cols = std::min((c1 - c0 + lanes_ - 1) / lanes_ * lanes_, skp - c0);
        for (int64_t r = 0; r < rows; ++r) scales[r] = g_.scale;
        product_(qb, depth, kt + c0, skp, rows, depth, cols, scales, scores + c0, skp);
        for (int64_t r = 0; r < rows; ++r)
          scales[r] = finish_row(op, b, qh[r], qi[r], range[r], scores + r * skp, c0, c1);
        product_(scores + c0, skp, vb + c0 * dv, dv, rows, c1 - c0, dv, scales, yb, dv);
      } else {  // no row attends any key
        std::fill(yb, yb + rows * dv, 0.0f);
      }
      for (int64_t r = 0; r < rows; ++r)
        store_floats(yb + r * dv, t_qk_, dv,
                     op.y + (b * g_.y.batch + qh[r] * g_.y.head + qi[r] * g_.y.row) * es_qk_);
    }
  }

  // Turns row s of scale * QK^T, computed over columns [c0, c1), into softmax numerators there
  // (softcap, bias, exponentials) and returns the row's 1 / sum (0 for a row with no key left,
  // whose numerators are then zeros). Stores qk_matmul_output's row on the way.
  float finish_row(const Operands& op, int64_t b, int64_t qh, int64_t i, AttentionKeyRange range,
                   float* s, int64_t c0, int64_t c1) const {
    if (op.qk != nullptr && g_.qk_mode == 0) store_qk(op, b, qh, i, s, 1.0f);
    if (g_.softcap > 0.0f) {
      const float cap = g_.softcap, inv = 1.0f / g_.softcap;
      for (int64_t j = c0; j < c1; ++j) s[j] = cap * std::tanh(s[j] * inv);
    }
    if (op.qk != nullptr && g_.qk_mode == 1) store_qk(op, b, qh, i, s, 1.0f);
    const int64_t lo = std::clamp(range.lo, c0, c1), hi = std::clamp(range.hi, lo, c1);
    std::fill(s + c0, s + lo, -INFINITY);
    std::fill(s + hi, s + c1, -INFINITY);
    if (op.mask != nullptr && lo < hi)
      apply_mask(s, lo, hi,
                 op.mask + (b * g_.mask_batch + qh * g_.mask_head + i * g_.mask_row) * es_mask_,
                 t_mask_);
    if (op.qk != nullptr && g_.qk_mode == 2) store_qk(op, b, qh, i, s, 1.0f);
    float m = max_floats(s + c0, c1 - c0);
    float inv_sum = 0.0f;
    if (m == -INFINITY) {  // nothing attended: a zero row
      std::fill(s + c0, s + c1, 0.0f);
    } else {
      // +inf has no finite shift; 0 keeps IEEE results (NaN), as Softmax gives.
      if (!std::isfinite(m)) m = std::isnan(m) ? m : 0.0f;
      inv_sum = 1.0f / exp_shifted_sum8(s + c0, m, c1 - c0);
    }
    if (op.qk != nullptr && g_.qk_mode == 3) store_qk(op, b, qh, i, s, inv_sum);
    return inv_sum;
  }

  AttentionGeometry g_;
  BlockProduct product_;
  int64_t lanes_;  // columns per micro-kernel tile
  DType t_qk_, t_v_, t_mask_;
  int64_t es_qk_, es_v_, es_mask_;  // element sizes in bytes
};

std::unique_ptr<Kernel> make_attention_op(const NodeContext& ctx) {
  return std::make_unique<AttentionOpKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Attention, &make_attention_op);

}  // namespace lumen::cpu
