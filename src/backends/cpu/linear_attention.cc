// CPU kernel of LinearAttention (opset 27): the recurrent form, token by token, for every update
// rule (linear, gated, delta, gated_delta), GQA, per-key or per-head decay, float32 / float16 /
// bfloat16 storage computed in float32.
//
// Every column j of a head's state S (d_k x d_v) evolves on its own: the retrieval S^T k, the
// write k (x) u and the read q^T S each touch column j only through u[j], v[j] and o[j]. So the
// work splits into tasks of (batch, KV head, block of kCols state columns), run in parallel with
// OpenMP. A task keeps its d_k x kCols slice of the state in a thread-local buffer (16 KB for
// d_k = 128, in L1) for the whole sequence and makes two passes over it per token: decay and
// retrieve, then write and read for every query head of the group. Each pass's inner loop is a
// fixed-length, contiguous kCols loop that the compiler vectorises; columns past d_v are zero
// padding that stays zero.
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

// The tensors of one run; optional ones are nullptr when absent.
struct Operands {
  const Tensor* query;
  const Tensor* key;
  const Tensor* value;
  const Tensor* past;
  const Tensor* decay;
  const Tensor* beta;
  const Tensor* output;
  const Tensor* present;
  int64_t batch, seq;
};

// One thread's buffers, sized for a task.
struct Scratch {
  std::vector<float> state, k, q, v, e, r, u, o;
  std::vector<const float*> q_rows;
  Scratch(int64_t dk, int64_t group)
      : state(dk * kCols),
        k(dk),
        q(group * dk),
        v(kCols),
        e(dk),
        r(kCols),
        u(kCols),
        o(group * kCols),
        q_rows(group) {}
};

class LinearAttentionKernel final : public Kernel {
 public:
  explicit LinearAttentionKernel(const NodeContext& ctx) : spec_(linear_attention_spec(ctx)) {}

  void run(KernelContext& ctx) const override {
    auto optional = [&](int i) -> const Tensor* {
      return i < static_cast<int>(ctx.inputs.size()) && ctx.inputs[i].defined() ? &ctx.inputs[i]
                                                                               : nullptr;
    };
    const Tensor* present =
        ctx.outputs.size() > 1 && ctx.outputs[1].defined() ? &ctx.outputs[1] : nullptr;
    const Operands ops{&ctx.inputs[0],  &ctx.inputs[1], &ctx.inputs[2],
                       optional(3),     optional(4),    optional(5),
                       &ctx.outputs[0], present,        ctx.inputs[0].shape()[0],
                       ctx.inputs[0].shape()[1]};
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
    float* __restrict r = s.r.data();
    float* __restrict u = s.u.data();
    float* __restrict o = s.o.data();
    float* __restrict e = s.e.data();
    const int64_t state_at = (b * hkv + h) * dk * dv + col;
    std::fill(s.state.begin(), s.state.end(), 0.0f);
    if (ops.past != nullptr) {
      for (int64_t i = 0; i < dk; ++i)
        read_floats(*ops.past, state_at + i * dv, width, state + i * kCols);
    }
    std::fill(s.v.begin(), s.v.end(), 0.0f);

    for (int64_t t = 0; t < ops.seq; ++t) {
      const int64_t bt = b * ops.seq + t;
      const float* k = view_floats(*ops.key, (bt * hkv + h) * dk, dk, s.k.data());
      read_floats(*ops.value, (bt * hkv + h) * dv + col, width, v);
      for (int64_t g = 0; g < group; ++g)
        s.q_rows[g] =
            view_floats(*ops.query, (bt * hq + h * group + g) * dk, dk, s.q.data() + g * dk);
      float head_decay = 1.0f;
      if (gated) {
        if (per_key) {
          read_floats(*ops.decay, (bt * hkv + h) * dk, dk, e);
          for (int64_t i = 0; i < dk; ++i) e[i] = clamp_exp_arg(e[i]);
#pragma omp simd
          for (int64_t i = 0; i < dk; ++i) e[i] = exp_in_range(e[i]);
        } else {
          float g;
          read_floats(*ops.decay, bt * hkv + h, 1, &g);
          head_decay = exp_in_range(clamp_exp_arg(g));
        }
      }

      // Pass 1: S = exp(g) * S, and r = S^T k with the decayed S (delta rules).
      if (delta) {
        std::fill(r, r + kCols, 0.0f);
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
        float beta;
        read_floats(*ops.beta, spec_.beta_per_head ? bt * hkv + h : bt, 1, &beta);
#pragma omp simd
        for (int64_t j = 0; j < kCols; ++j) u[j] = beta * (v[j] - r[j]);
      } else {
        std::copy(v, v + kCols, u);
      }

      // Pass 2: S += k (x) u (decaying S first for 'gated', which had no pass 1), then
      // o_g = q_g^T S for each query head of the group.
      std::fill(o, o + group * kCols, 0.0f);
      const bool decay_here = gated && !delta;
      for (int64_t i = 0; i < dk; ++i) {
        float* __restrict row = state + i * kCols;
        const float ki = k[i];
        if (decay_here) {
          const float ei = per_key ? e[i] : head_decay;
#pragma omp simd
          for (int64_t j = 0; j < kCols; ++j) row[j] = row[j] * ei + ki * u[j];
        } else {
#pragma omp simd
          for (int64_t j = 0; j < kCols; ++j) row[j] += ki * u[j];
        }
        for (int64_t g = 0; g < group; ++g) {
          const float qi = s.q_rows[g][i];
          float* __restrict og = o + g * kCols;
#pragma omp simd
          for (int64_t j = 0; j < kCols; ++j) og[j] += qi * row[j];
        }
      }
      const float scale = spec_.scale;
      for (int64_t g = 0; g < group; ++g) {
        float* og = o + g * kCols;
        for (int64_t j = 0; j < width; ++j) og[j] *= scale;
        write_floats(og, width, *ops.output, (bt * hq + h * group + g) * dv + col);
      }
    }

    if (ops.present != nullptr) {
      for (int64_t i = 0; i < dk; ++i)
        write_floats(state + i * kCols, width, *ops.present, state_at + i * dv);
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
