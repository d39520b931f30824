// The CUDA cell kernels of RNN, GRU and LSTM: a thread per (batch entry, hidden unit), which reads
// that unit's column of every gate, so h and c update in place.
#include "backends/cuda/any_types.cuh"
#include "backends/cuda/index_check.cuh"
#include "backends/cuda/recurrent.h"

namespace lumen::cuda {
namespace {

// RnnActKind's values (graph/schemas/recurrent.h).
enum : int {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus,
};

__device__ __forceinline__ float activate(const RnnAct& a, float x) {
  switch (a.kind) {
    case kRelu:
      return x > 0.f ? x : 0.f;
    case kTanh:
      return tanhf(x);
    case kSigmoid:
      return 1.f / (1.f + expf(-x));
    case kAffine:
      return a.alpha * x + a.beta;
    case kLeakyRelu:
      return x >= 0.f ? x : a.alpha * x;
    case kThresholdedRelu:
      return x > a.alpha ? x : 0.f;
    case kScaledTanh:
      return a.alpha * tanhf(a.beta * x);
    case kHardSigmoid:
      return fmaxf(0.f, fminf(1.f, a.alpha * x + a.beta));
    case kElu:
      return x >= 0.f ? x : a.alpha * (expf(x) - 1.f);
    case kSoftsign:
      return x / (1.f + fabsf(x));
    default:
      return log1pf(expf(x));  // softplus
  }
}

__device__ __forceinline__ float clipped(const RnnCellDesc& d, float x) {
  return d.has_clip ? fmaxf(-d.clip, fminf(d.clip, x)) : x;
}

// The steps batch entry b runs (sequence_lens), or -1 (reported) when its length is invalid.
__device__ __forceinline__ int64_t steps_of(const RnnCellDesc& d, int64_t b, bool report) {
  if (d.lens == nullptr) return d.seq;
  const int64_t v = d.lens_int64 ? static_cast<const int64_t*>(d.lens)[b]
                                 : static_cast<const int32_t*>(d.lens)[b];
  if (v < 0 || v > d.seq) {
    if (report) report_bad_index(d.check, v, 0, d.seq + 1);
    return -1;
  }
  return v;
}

// The time index of `step` for entry b, or -1 when the entry has no such step.
__device__ __forceinline__ int64_t time_of(const RnnCellDesc& d, int64_t b, int64_t step,
                                           bool report) {
  const int64_t len = steps_of(d, b, report);
  if (step >= len) return -1;
  return d.reverse ? len - 1 - step : step;
}

// Row of (t, b) in X's order (and so in xw's).
__device__ __forceinline__ int64_t x_row(const RnnCellDesc& d, int64_t t, int64_t b) {
  return d.batch_major ? b * d.seq + t : t * d.batch + b;
}

// Offset of (b, unit 0) of this direction in the initial and final states.
__device__ __forceinline__ int64_t state_offset(const RnnCellDesc& d, int64_t b) {
  return d.batch_major ? (b * d.dirs + d.dir) * d.hidden : (d.dir * d.batch + b) * d.hidden;
}

__global__ void init_kernel(RnnCellDesc d, const float* init_h, const float* init_c, float* h,
                            float* c) {
  ANY_GRID_LOOP(i, d.batch * d.hidden) {
    const int64_t b = i / d.hidden, j = i - b * d.hidden;
    const int64_t s = state_offset(d, b) + j;
    h[i] = init_h != nullptr ? init_h[s] : 0.f;
    if (c != nullptr) c[i] = init_c != nullptr ? init_c[s] : 0.f;
  }
}

__global__ void gru_reset_kernel(RnnCellDesc d, int64_t step, const float* xw, const float* hr,
                                 const float* bias, const float* h, float* rh) {
  const int64_t hid = d.hidden, gh = 3 * hid;
  ANY_GRID_LOOP(i, d.batch * hid) {
    const int64_t b = i / hid, j = i - b * hid;
    const int64_t t = time_of(d, b, step, false);
    if (t < 0) {
      rh[i] = 0.f;
      continue;
    }
    const float* wb = bias != nullptr ? bias + d.dir * 2 * gh : nullptr;
    float r = hr[b * gh + hid + j] + xw[x_row(d, t, b) * gh + hid + j];
    if (wb != nullptr) r += wb[hid + j] + wb[gh + hid + j];
    r = activate(d.acts[0], clipped(d, r));
    rh[i] = r * h[i];
  }
}

__global__ void cell_kernel(RnnCellDesc d, int64_t step, const float* xw, const float* hr,
                            const float* hh, const float* bias, const float* peep, float* h,
                            float* c, float* y) {
  const int64_t hid = d.hidden, gh = d.gates * hid;
  ANY_GRID_LOOP(i, d.batch * hid) {
    const int64_t b = i / hid, j = i - b * hid;
    const int64_t t = time_of(d, b, step, step == 0 && j == 0);
    if (t < 0) continue;
    const float* x = xw + x_row(d, t, b) * gh;
    const float* g = hr + b * gh;
    const float* wb = bias != nullptr ? bias + d.dir * 2 * gh : nullptr;
    // Gate k's pre-activation: X W^T + H R^T + Wb + Rb.
    auto pre = [&](int k) {
      float v = x[k * hid + j] + g[k * hid + j];
      if (wb != nullptr) v += wb[k * hid + j] + wb[gh + k * hid + j];
      return v;
    };
    float out;
    if (d.gates == 1) {
      out = activate(d.acts[0], clipped(d, pre(0)));
    } else if (d.gates == 3) {
      const float z = activate(d.acts[0], clipped(d, pre(0)));
      float hcand;
      if (d.linear_before_reset) {
        const float r = activate(d.acts[0], clipped(d, pre(1)));
        const float rbh = wb != nullptr ? wb[gh + 2 * hid + j] : 0.f;
        const float wbh = wb != nullptr ? wb[2 * hid + j] : 0.f;
        hcand = x[2 * hid + j] + wbh + r * (g[2 * hid + j] + rbh);
      } else {
        hcand = x[2 * hid + j] + hh[b * hid + j];
        if (wb != nullptr) hcand += wb[2 * hid + j] + wb[gh + 2 * hid + j];
      }
      hcand = activate(d.acts[1], clipped(d, hcand));
      out = (1.f - z) * hcand + z * h[i];
    } else {
      const float* p = peep != nullptr ? peep + d.dir * 3 * hid : nullptr;
      const float c_prev = c[i];
      float ig = pre(0), og = pre(1), fg = pre(2), cg = pre(3);
      if (p != nullptr) {
        ig += p[j] * c_prev;
        fg += p[2 * hid + j] * c_prev;
      }
      ig = activate(d.acts[0], clipped(d, ig));
      fg = d.input_forget ? 1.f - ig : activate(d.acts[0], clipped(d, fg));
      cg = activate(d.acts[1], clipped(d, cg));
      const float c_new = fg * c_prev + ig * cg;
      c[i] = c_new;
      if (p != nullptr) og += p[hid + j] * c_new;
      og = activate(d.acts[0], clipped(d, og));
      out = og * activate(d.acts[2], c_new);
    }
    h[i] = out;
    if (y != nullptr) {
      const int64_t row =
          d.batch_major ? (b * d.seq + t) * d.dirs + d.dir : (t * d.dirs + d.dir) * d.batch + b;
      y[row * hid + j] = out;
    }
  }
}

__global__ void final_kernel(RnnCellDesc d, const float* h, const float* c, float* y_h,
                             float* y_c) {
  ANY_GRID_LOOP(i, d.batch * d.hidden) {
    const int64_t b = i / d.hidden, j = i - b * d.hidden;
    const int64_t s = state_offset(d, b) + j;
    if (y_h != nullptr) y_h[s] = h[i];
    if (y_c != nullptr) y_c[s] = c[i];
  }
}

}  // namespace

void launch_rnn_init(const RnnCellDesc& d, const float* init_h, const float* init_c, float* h,
                     float* c, cudaStream_t stream) {
  if (d.batch * d.hidden == 0) return;
  init_kernel<<<any_blocks(d.batch * d.hidden), kAnyThreads, 0, stream>>>(d, init_h, init_c, h, c);
}

void launch_gru_reset(const RnnCellDesc& d, int64_t step, const float* xw, const float* hr,
                      const float* bias, const float* h, float* rh, cudaStream_t stream) {
  if (d.batch * d.hidden == 0) return;
  gru_reset_kernel<<<any_blocks(d.batch * d.hidden), kAnyThreads, 0, stream>>>(d, step, xw, hr,
                                                                               bias, h, rh);
}

void launch_rnn_cell(const RnnCellDesc& d, int64_t step, const float* xw, const float* hr,
                     const float* hh, const float* bias, const float* peep, float* h, float* c,
                     float* y, cudaStream_t stream) {
  if (d.batch * d.hidden == 0) return;
  cell_kernel<<<any_blocks(d.batch * d.hidden), kAnyThreads, 0, stream>>>(d, step, xw, hr, hh, bias,
                                                                          peep, h, c, y);
}

void launch_rnn_final(const RnnCellDesc& d, const float* h, const float* c, float* y_h, float* y_c,
                      cudaStream_t stream) {
  if (d.batch * d.hidden == 0) return;
  final_kernel<<<any_blocks(d.batch * d.hidden), kAnyThreads, 0, stream>>>(d, h, c, y_h, y_c);
}

}  // namespace lumen::cuda
