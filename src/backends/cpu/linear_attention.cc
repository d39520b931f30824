// CPU kernel of LinearAttention (opset 27): the recurrent form, token by token, for every update
// rule (linear, gated, delta, gated_delta), GQA, per-key or per-head decay, float32 / float16 /
// bfloat16 storage computed in float32.
//
// Every column j of a head's state S (d_k x d_v) evolves on its own: the retrieval S^T k, the
// write k (x) u and the read q^T S each touch column j only through u[j], v[j] and o[j]. So the
// work splits into tasks of (batch, KV head, block of kCols state columns), run in parallel with
// OpenMP. A task keeps its d_k x kCols slice of the state in a thread-local buffer (16 KB for
// d_k = 128, in L1) for the whole sequence and makes two passes over it per token: decay and
// retrieve (delta rules), then write and read for the group's first query head; each further
// query head of the group adds a read-only pass. Each pass's inner loop is a fixed-length,
// contiguous kCols loop that the compiler vectorises, with its accumulators in registers;
// columns past d_v are zero padding that stays zero. The next token's rows of q, k and v are
// prefetched (they sit a whole packed row apart, too far for the hardware prefetchers).
//
// The chunk-parallel (WY) form that chunk_size tunes would trade these passes for GEMMs on long
// prefills; the recurrence does the same number of multiply-adds per token and is exact to the
// spec's sequential definition, so it is what runs here.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "backends/cpu/float_rows.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"
#include "graph/schemas/linear_attention.h"

namespace lumen::cpu {
namespace {

// State columns per task: 4 AVX2 / 2 AVX-512 vectors per state row.
constexpr int64_t kCols = 32;
// Multiply-adds below which one thread runs the node.
constexpr double kParallelWork = 1 << 16;

// The tensors of one run; `has_past` and `has_present` say whether the optional ones are there
// (decay and beta are there exactly when the update rule uses them).
struct Operands {
  FloatRows query, key, value, past, decay, beta, output, present;
  bool has_past = false, has_present = false;
  int64_t batch = 0, seq = 0;
};

// One thread's buffers, sized for a task.
struct Scratch {
  std::vector<float> state, k, q, v, e;
  std::vector<const float*> q_rows;
  Scratch(int64_t dk, int64_t group)
      : state(dk * kCols), k(dk), q(group * dk), v(kCols), e(dk), q_rows(group) {}
};

class LinearAttentionKernel final : public Kernel {
 public:
  explicit LinearAttentionKernel(const NodeContext& ctx) : spec_(linear_attention_spec(ctx)) {}

  void run(KernelContext& ctx) const override {
    auto given = [&](int i) {
      return i < static_cast<int>(ctx.inputs.size()) && ctx.inputs[i].defined();
    };
    Operands ops;
    ops.query = FloatRows(ctx.inputs[0]);
    ops.key = FloatRows(ctx.inputs[1]);
    ops.value = FloatRows(ctx.inputs[2]);
    ops.has_past = given(3);
    if (ops.has_past) ops.past = FloatRows(ctx.inputs[3]);
    if (spec_.gated) ops.decay = FloatRows(ctx.inputs[4]);
    if (spec_.delta) ops.beta = FloatRows(ctx.inputs[5]);
    ops.output = FloatRows(ctx.outputs[0]);
    ops.has_present = ctx.outputs.size() > 1 && ctx.outputs[1].defined();
    if (ops.has_present) ops.present = FloatRows(ctx.outputs[1]);
    ops.batch = ctx.inputs[0].shape()[0];
    ops.seq = ctx.inputs[0].shape()[1];
    const int64_t group = spec_.q_heads / spec_.kv_heads;
    const int64_t blocks = (spec_.dv + kCols - 1) / kCols;
    const int64_t tasks = ops.batch * spec_.kv_heads * blocks;
    const double work = static_cast<double>(tasks) * static_cast<double>(ops.seq + 1) *
                        static_cast<double>(spec_.dk * kCols * (group + 2));
#pragma omp parallel if (work > kParallelWork && tasks > 1)
    {
      Scratch scratch(spec_.dk, group);
#pragma omp for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t b = task / (spec_.kv_heads * blocks);
        const int64_t h = task / blocks % spec_.kv_heads;
        const int64_t col = task % blocks * kCols;
        run_block(ops, b, h, col, std::min(kCols, spec_.dv - col), scratch);
      }
    }
  }

 private:
  // Runs the recurrence of batch b, KV head h, state columns [col, col + width) over the whole
  // sequence.
  void run_block(const Operands& ops, int64_t b, int64_t h, int64_t col, int64_t width,
                 Scratch& s) const {
    const int64_t dk = spec_.dk, dv = spec_.dv, hq = spec_.q_heads, hkv = spec_.kv_heads;
    const int64_t group = hq / hkv;
    const bool gated = spec_.gated, delta = spec_.delta, per_key = spec_.per_key_decay;
    float* __restrict state = s.state.data();
    float* __restrict v = s.v.data();
    float* __restrict e = s.e.data();
    const int64_t state_at = (b * hkv + h) * dk * dv + col;
    std::fill(s.state.begin(), s.state.end(), 0.0f);
    if (ops.has_past) {
      for (int64_t i = 0; i < dk; ++i) ops.past.read(state_at + i * dv, width, state + i * kCols);
    }
    std::fill(s.v.begin(), s.v.end(), 0.0f);

    for (int64_t t = 0; t < ops.seq; ++t) {
      const int64_t bt = b * ops.seq + t;
      if (t + 1 < ops.seq) {
        const int64_t next = bt + 1;
        ops.key.prefetch((next * hkv + h) * dk, dk);
        ops.query.prefetch((next * hq + h * group) * dk, group * dk);
        ops.value.prefetch((next * hkv + h) * dv + col, width);
        if (gated && per_key) ops.decay.prefetch((next * hkv + h) * dk, dk);
      }
      const float* k = ops.key.view((bt * hkv + h) * dk, dk, s.k.data());
      ops.value.read((bt * hkv + h) * dv + col, width, v);
      for (int64_t g = 0; g < group; ++g)
        s.q_rows[g] = ops.query.view((bt * hq + h * group + g) * dk, dk, s.q.data() + g * dk);
      float head_decay = 1.0f;
      if (gated) {
        if (per_key) {
          ops.decay.read((bt * hkv + h) * dk, dk, e);
          for (int64_t i = 0; i < dk; ++i) e[i] = clamp_exp_arg(e[i]);
#pragma omp simd
          for (int64_t i = 0; i < dk; ++i) e[i] = exp_in_range(e[i]);
        } else {
          head_decay = exp_in_range(clamp_exp_arg(ops.decay.get(bt * hkv + h)));
        }
      }

      // Pass 1: S = exp(g) * S, and r = S^T k with the decayed S (delta rules). The
      // accumulators are local arrays, which the compiler keeps in registers (through a pointer
      // they would go to memory and back on every row, one store-to-load latency per row).
      alignas(32) float u[kCols];
      if (delta) {
        alignas(32) float r[kCols] = {};
        for (int64_t i = 0; i < dk; ++i) {
          float* __restrict row = state + i * kCols;
          const float ki = k[i];
          if (gated) {
            const float ei = per_key ? e[i] : head_decay;
#pragma omp simd
            for (int64_t j = 0; j < kCols; ++j) {
              row[j] *= ei;
              r[j] += ki * row[j];
            }
          } else {
#pragma omp simd
            for (int64_t j = 0; j < kCols; ++j) r[j] += ki * row[j];
          }
        }
        const float beta = ops.beta.get(spec_.beta_per_head ? bt * hkv + h : bt);
#pragma omp simd
        for (int64_t j = 0; j < kCols; ++j) u[j] = beta * (v[j] - r[j]);
      } else {
        std::copy(v, v + kCols, u);
      }

      // Pass 2: S += k (x) u (decaying S first for 'gated', which had no pass 1), and
      // o = q^T S for the group's first query head; one read-only pass for each other head.
      const bool decay_here = gated && !delta;
      alignas(32) float o[kCols] = {};
      const float* q0 = s.q_rows[0];
      for (int64_t i = 0; i < dk; ++i) {
        float* __restrict row = state + i * kCols;
        const float ki = k[i], qi = q0[i];
        if (decay_here) {
          const float ei = per_key ? e[i] : head_decay;
#pragma omp simd
          for (int64_t j = 0; j < kCols; ++j) {
            row[j] = row[j] * ei + ki * u[j];
            o[j] += qi * row[j];
          }
        } else {
#pragma omp simd
          for (int64_t j = 0; j < kCols; ++j) {
            row[j] += ki * u[j];
            o[j] += qi * row[j];
          }
        }
      }
      const float scale = spec_.scale;
      for (int64_t g = 0; g < group; ++g) {
        if (g > 0) {
          std::fill(o, o + kCols, 0.0f);
          const float* qg = s.q_rows[g];
          for (int64_t i = 0; i < dk; ++i) {
            const float* __restrict row = state + i * kCols;
            const float qi = qg[i];
#pragma omp simd
            for (int64_t j = 0; j < kCols; ++j) o[j] += qi * row[j];
          }
        }
#pragma omp simd
        for (int64_t j = 0; j < kCols; ++j) o[j] *= scale;
        ops.output.write(o, width, (bt * hq + h * group + g) * dv + col);
      }
    }

    if (ops.has_present) {
      for (int64_t i = 0; i < dk; ++i)
        ops.present.write(state + i * kCols, width, state_at + i * dv);
    }
  }

  LinearAttentionSpec spec_;
};

std::unique_ptr<Kernel> make_linear_attention(const NodeContext& ctx) {
  return std::make_unique<LinearAttentionKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(LinearAttention, &make_linear_attention);

}  // namespace lumen::cpu
