// CPU kernels of RNN, GRU and LSTM (float32). Per direction, the input projection of all time
// steps is one sgemm (X * W^T for the whole sequence); each step then adds one sgemm of the
// previous hidden state with R^T (two for GRU with linear_before_reset=0, where the reset gate
// multiplies the state first) and applies the gate equations row by row.
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/norm_math.h"
#include "graph/schemas/recurrent.h"

namespace lumen::cpu {
namespace {

// Per-step gate work (batch * gates * hidden) above which the batch rows run in parallel.
constexpr int64_t kParallelCells = 16384;

// sigmoid(x) = 1 / (1 + exp(-x)), vectorised through exp_in_range (clamped in its own loop).
void sigmoid_in_place(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = clamp_exp_arg(-x[i]);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + exp_in_range(x[i]));
}

// tanh(x) = 1 - 2 / (exp(2x) + 1), with a short odd series near zero where that form cancels.
void tanh_in_place(float* x, int64_t n) {
  constexpr int64_t kChunk = 256;
  float t[kChunk];
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t len = std::min(kChunk, n - b);
    float* p = x + b;
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) t[i] = clamp_exp_arg(2.0f * p[i]);
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) {
      const float v = p[i];
      const float v2 = v * v;
      const float series =
          v * (1.0f + v2 * (-1.0f / 3.0f + v2 * (2.0f / 15.0f + v2 * (-17.0f / 315.0f))));
      const float wide = 1.0f - 2.0f / (exp_in_range(t[i]) + 1.0f);
      p[i] = std::fabs(v) < 0.125f ? series : wide;
    }
  }
}

// Applies an activation to x[0, n) in place; the switch sits outside the element loops.
void activate(const RnnActivation& act, float* x, int64_t n) {
  const float a = act.alpha, b = act.beta;
  switch (act.kind) {
    case RnnActKind::kRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
      break;
    case RnnActKind::kTanh:
      tanh_in_place(x, n);
      break;
    case RnnActKind::kSigmoid:
      sigmoid_in_place(x, n);
      break;
    case RnnActKind::kAffine:
      for (int64_t i = 0; i < n; ++i) x[i] = a * x[i] + b;
      break;
    case RnnActKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0.0f ? x[i] : a * x[i];
      break;
    case RnnActKind::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] > a ? x[i] : 0.0f;
      break;
    case RnnActKind::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) x[i] = a * std::tanh(b * x[i]);
      break;
    case RnnActKind::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) x[i] = std::max(0.0f, std::min(1.0f, a * x[i] + b));
      break;
    case RnnActKind::kElu:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0.0f ? x[i] : a * (std::exp(x[i]) - 1.0f);
      break;
    case RnnActKind::kSoftsign:
      for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::fabs(x[i]));
      break;
    case RnnActKind::kSoftplus:
      for (int64_t i = 0; i < n; ++i) x[i] = std::log1p(std::exp(x[i]));
      break;
  }
}

void clip_to(float* x, int64_t n, float c) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::max(-c, std::min(c, x[i]));
}

// Row-major C[m, n] = A[m, k] * B^T (B stored [n, k], rows ldb apart) + beta * C.
void gemm_bt(const std::string& where, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    }
    return;
  }
  if (dnnl_sgemm('N', 'T', m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc) != dnnl_success)
    throw DeviceError(where + ": oneDNN sgemm failed");
}

class RecurrentKernel final : public Kernel {
 public:
  explicit RecurrentKernel(const NodeContext& ctx)
      : where_(ctx.where()), spec_(recurrent_spec(ctx)), lstm_(ctx.op() == OpKind::kLSTM) {}

  void run(KernelContext& ctx) const override {
    const RecurrentSpec& s = spec_;
    const int64_t seq = s.seq_length, batch = s.batch, hid = s.hidden, gh = s.gates * hid;
    const int64_t dirs = s.num_directions;
    auto input = [&](int i) -> const float* {
      return static_cast<int>(ctx.inputs.size()) > i && ctx.inputs[i].defined()
                 ? ctx.inputs[i].data<float>()
                 : nullptr;
    };
    auto output = [&](int i) -> float* {
      return static_cast<int>(ctx.outputs.size()) > i && ctx.outputs[i].defined()
                 ? ctx.outputs[i].data<float>()
                 : nullptr;
    };
    const float* x = input(0);
    const float* w = input(1);
    const float* r = input(2);
    const float* bias = input(3);
    const float* init_h = input(5);
    const float* init_c = lstm_ ? input(6) : nullptr;
    const float* peep = lstm_ ? input(7) : nullptr;
    float* y = output(0);
    float* y_h = output(1);
    float* y_c = lstm_ ? output(2) : nullptr;

    std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
    if (ctx.inputs.size() > 4 && ctx.inputs[4].defined()) {
      const Tensor& t = ctx.inputs[4];
      for (int64_t b = 0; b < batch; ++b) {
        int64_t v = t.dtype() == DType::kInt32 ? t.data<int32_t>()[b] : t.data<int64_t>()[b];
        if (v < 0 || v > seq)
          throw InvalidArgument(where_ + ": sequence_lens[" + std::to_string(b) + "] = " +
                                std::to_string(v) + " is outside [0, " + std::to_string(seq) + "]");
        lens[b] = v;
      }
    }
    if (y != nullptr) std::fill(y, y + seq * dirs * batch * hid, 0.0f);
    if (batch == 0) return;
    int64_t max_len = 0;
    for (int64_t v : lens) max_len = std::max(max_len, v);

    // Scratch: the input projection of every (t, b) row, the per-step recurrent product, and the
    // hidden and cell states.
    Tensor xw_t = Tensor::empty({std::max<int64_t>(seq * batch * gh, 1)});
    Tensor hr_t = Tensor::empty({batch * gh});
    Tensor state_t = Tensor::empty({4 * batch * hid});
    float* xw = xw_t.data<float>();
    float* hr = hr_t.data<float>();
    float* h = state_t.data<float>();
    float* c = h + batch * hid;
    float* h_new = c + batch * hid;
    float* tmp = h_new + batch * hid;  // GRU: r (.) H_prev
    std::vector<float> wbias(static_cast<size_t>(gh)), rbias_h(static_cast<size_t>(hid), 0.0f);

    for (int64_t d = 0; d < dirs; ++d) {
      const bool reverse = s.reverse || d == 1;
      const float* wd = w + d * gh * s.input_size;
      const float* rd = r + d * gh * hid;
      // Biases: Wb + Rb per gate, except GRU's Rbh under linear_before_reset (added inside).
      for (int64_t j = 0; j < gh; ++j) {
        wbias[j] = bias ? bias[d * 2 * gh + j] + bias[d * 2 * gh + gh + j] : 0.0f;
      }
      if (s.gates == 3 && s.linear_before_reset && bias) {
        for (int64_t j = 0; j < hid; ++j) {
          rbias_h[j] = bias[d * 2 * gh + gh + 2 * hid + j];
          wbias[2 * hid + j] -= rbias_h[j];
        }
      }
      gemm_bt(where_, seq * batch, gh, s.input_size, x, s.input_size, wd, s.input_size, 0.0f, xw,
              gh);
      // Initial state.
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t st = s.batch_major ? (b * dirs + d) * hid : (d * batch + b) * hid;
        for (int64_t j = 0; j < hid; ++j) {
          h[b * hid + j] = init_h ? init_h[st + j] : 0.0f;
          c[b * hid + j] = init_c ? init_c[st + j] : 0.0f;
        }
      }
      const RnnActivation* acts = &s.activations[d * s.activations_per_dir];
      const float* pd = peep ? peep + d * 3 * hid : nullptr;
      const bool parallel_cells = batch * gh >= kParallelCells;
      for (int64_t step = 0; step < max_len; ++step) {
        const int64_t rec_cols = s.gates == 3 && !s.linear_before_reset ? 2 * hid : gh;
        gemm_bt(where_, batch, rec_cols, hid, h, hid, rd, hid, 0.0f, hr, gh);
        if (s.gates == 3 && !s.linear_before_reset) {
          // r first, then (r (.) H_prev) * Rh^T into hr's h-gate columns.
#pragma omp parallel for schedule(static) if (parallel_cells)
          for (int64_t b = 0; b < batch; ++b) {
            if (step >= lens[b]) continue;
            float* g = hr + b * gh;
            const float* xr = xw + row(reverse ? lens[b] - 1 - step : step, b) * gh;
            float* rg = g + hid;
            for (int64_t j = 0; j < hid; ++j) rg[j] += xr[hid + j] + wbias[hid + j];
            if (s.has_clip) clip_to(rg, hid, s.clip);
            activate(acts[0], rg, hid);
            for (int64_t j = 0; j < hid; ++j) tmp[b * hid + j] = rg[j] * h[b * hid + j];
          }
          gemm_bt(where_, batch, hid, hid, tmp, hid, rd + 2 * hid * hid, hid, 0.0f, hr + 2 * hid,
                  gh);
        }
#pragma omp parallel for schedule(static) if (parallel_cells)
        for (int64_t b = 0; b < batch; ++b) {
          if (step >= lens[b]) continue;
          const int64_t t = reverse ? lens[b] - 1 - step : step;
          float* g = hr + b * gh;
          const float* xr = xw + row(t, b) * gh;
          float* hb = h + b * hid;
          float* cb = c + b * hid;
          float* out = h_new + b * hid;
          if (s.gates == 1) {
            for (int64_t j = 0; j < hid; ++j) g[j] += xr[j] + wbias[j];
            if (s.has_clip) clip_to(g, hid, s.clip);
            activate(acts[0], g, hid);
            std::copy(g, g + hid, out);
          } else if (s.gates == 3) {
            gru_cell(g, xr, wbias.data(), rbias_h.data(), hb, acts, out);
          } else {
            lstm_cell(g, xr, wbias.data(), pd, hb, cb, acts, out);
          }
          std::copy(out, out + hid, hb);
          if (y != nullptr) {
            float* yrow = y + (s.batch_major ? ((b * seq + t) * dirs + d) * hid
                                             : ((t * dirs + d) * batch + b) * hid);
            std::copy(out, out + hid, yrow);
          }
        }
      }
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t st = s.batch_major ? (b * dirs + d) * hid : (d * batch + b) * hid;
        if (y_h != nullptr) std::copy(h + b * hid, h + (b + 1) * hid, y_h + st);
        if (y_c != nullptr) std::copy(c + b * hid, c + (b + 1) * hid, y_c + st);
      }
    }
  }

 private:
  // The projection row of time t, batch entry b (X's own row order).
  int64_t row(int64_t t, int64_t b) const {
    return spec_.batch_major ? b * spec_.seq_length + t : t * spec_.batch + b;
  }

  // g holds H_prev * R^T per gate (z, r, h); for linear_before_reset=0 the r gate is already
  // activated and g's h columns hold (r (.) H_prev) * Rh^T.
  void gru_cell(float* g, const float* xr, const float* wbias, const float* rbias_h,
                const float* h_prev, const RnnActivation* acts, float* out) const {
    const int64_t hid = spec_.hidden;
    float* z = g;
    float* rg = g + hid;
    float* hh = g + 2 * hid;
    for (int64_t j = 0; j < hid; ++j) z[j] += xr[j] + wbias[j];
    if (spec_.has_clip) clip_to(z, hid, spec_.clip);
    activate(acts[0], z, hid);
    if (spec_.linear_before_reset) {
      for (int64_t j = 0; j < hid; ++j) rg[j] += xr[hid + j] + wbias[hid + j];
      if (spec_.has_clip) clip_to(rg, hid, spec_.clip);
      activate(acts[0], rg, hid);
      for (int64_t j = 0; j < hid; ++j)
        hh[j] = xr[2 * hid + j] + wbias[2 * hid + j] + rg[j] * (hh[j] + rbias_h[j]);
    } else {
      for (int64_t j = 0; j < hid; ++j) hh[j] += xr[2 * hid + j] + wbias[2 * hid + j];
    }
    if (spec_.has_clip) clip_to(hh, hid, spec_.clip);
    activate(acts[1], hh, hid);
    for (int64_t j = 0; j < hid; ++j) out[j] = (1.0f - z[j]) * hh[j] + z[j] * h_prev[j];
  }

  // Gates in g: i, o, f, c. Updates c in place; writes the new hidden state to out.
  void lstm_cell(float* g, const float* xr, const float* wbias, const float* peep,
                 const float* h_prev, float* c, const RnnActivation* acts, float* out) const {
    const int64_t hid = spec_.hidden, gh = 4 * hid;
    for (int64_t j = 0; j < gh; ++j) g[j] += xr[j] + wbias[j];
    float* ig = g;
    float* og = g + hid;
    float* fg = g + 2 * hid;
    float* cg = g + 3 * hid;
    if (peep != nullptr) {
      for (int64_t j = 0; j < hid; ++j) {
        ig[j] += peep[j] * c[j];
        fg[j] += peep[2 * hid + j] * c[j];
      }
    }
    if (spec_.has_clip) {
      clip_to(ig, hid, spec_.clip);
      clip_to(fg, 2 * hid, spec_.clip);  // f and c
    }
    activate(acts[0], ig, hid);
    if (spec_.input_forget) {
      for (int64_t j = 0; j < hid; ++j) fg[j] = 1.0f - ig[j];
    } else {
      activate(acts[0], fg, hid);
    }
    activate(acts[1], cg, hid);
    for (int64_t j = 0; j < hid; ++j) c[j] = fg[j] * c[j] + ig[j] * cg[j];
    if (peep != nullptr) {
      for (int64_t j = 0; j < hid; ++j) og[j] += peep[hid + j] * c[j];
    }
    if (spec_.has_clip) clip_to(og, hid, spec_.clip);
    activate(acts[0], og, hid);
    std::copy(c, c + hid, out);
    activate(acts[2], out, hid);
    for (int64_t j = 0; j < hid; ++j) out[j] *= og[j];
  }

  std::string where_;
  RecurrentSpec spec_;
  bool lstm_;
};

std::unique_ptr<Kernel> make_recurrent(const NodeContext& ctx) {
  return std::make_unique<RecurrentKernel>(ctx);
}

// float32 for X, W, R, B, initial states and P; sequence_lens is an integer tensor.
std::string check_recurrent(const NodeContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (i == 4 || !ctx.has_input(i)) continue;
    if (ctx.input_dtype(i) != DType::kFloat32)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
             "; only float32 is supported";
  }
  return "";
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(RNN, &make_recurrent, &check_recurrent);
LUMEN_REGISTER_CPU_KERNEL(GRU, &make_recurrent, &check_recurrent);
LUMEN_REGISTER_CPU_KERNEL(LSTM, &make_recurrent, &check_recurrent);

}  // namespace lumen::cpu
