// The CUDA kernel class of RNN, GRU and LSTM (float32). Per direction, the input projection of
// every step is one cuBLASLt product (X W^T); each step then takes one product of the hidden
// state with R^T (two for GRU with linear_before_reset = 0, whose reset gate multiplies the state
// first) and one cell launch (recurrent.cu). Scratch lives in the backend's workspace after the
// products' own.
#include <algorithm>
#include <memory>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/lt_matmul.h"
#include "backends/cuda/recurrent.h"
#include "graph/schemas/recurrent.h"

namespace lumen::cuda {
namespace {

constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

class RecurrentKernel final : public Kernel {
 public:
  explicit RecurrentKernel(const NodeContext& ctx)
      : where_(ctx.where()), spec_(recurrent_spec(ctx)), lstm_(ctx.op() == OpKind::kLSTM) {
    const RecurrentSpec& s = spec_;
    const int64_t gh = s.gates * s.hidden;
    base_.gates = s.gates;
    base_.seq = s.seq_length;
    base_.batch = s.batch;
    base_.hidden = s.hidden;
    base_.dirs = s.num_directions;
    base_.batch_major = s.batch_major;
    base_.has_clip = s.has_clip;
    base_.clip = s.clip;
    base_.linear_before_reset = s.linear_before_reset;
    base_.input_forget = s.input_forget;
    base_.lens_int64 =
        ctx.num_inputs() > 4 && ctx.has_input(4) && ctx.input_dtype(4) == DType::kInt64;
    base_.check = index_check(ctx);
    size_t lt_bytes = 0;
    if (s.seq_length * s.batch > 0 && gh > 0) {
      GemmShape xs;  // X [seq * batch, input] W^T -> [seq * batch, gates * hidden]
      xs.m = s.seq_length * s.batch;
      xs.n = gh;
      xs.k = s.input_size;
      xs.trans_w = true;
      input_ = std::make_unique<LtMatmul>(ctx, xs, false);
      GemmShape hs;  // h [batch, hidden] R^T -> [batch, gates * hidden]
      hs.m = s.batch;
      hs.n = gh;
      hs.k = s.hidden;
      hs.trans_w = true;
      recurrent_ = std::make_unique<LtMatmul>(ctx, hs, false);
      lt_bytes = std::max(input_->workspace_size(), recurrent_->workspace_size());
      if (s.gates == 3 && !s.linear_before_reset) {
        GemmShape rs;  // (r (.) h) [batch, hidden] Rh^T -> [batch, hidden]
        rs.m = s.batch;
        rs.n = s.hidden;
        rs.k = s.hidden;
        rs.trans_w = true;
        reset_ = std::make_unique<LtMatmul>(ctx, rs, false);
        lt_bytes = std::max(lt_bytes, reset_->workspace_size());
      }
    }
    const size_t state = aligned(static_cast<size_t>(s.batch * s.hidden) * sizeof(float));
    xw_at_ = aligned(lt_bytes);
    hr_at_ = xw_at_ + aligned(static_cast<size_t>(s.seq_length * s.batch * gh) * sizeof(float));
    h_at_ = hr_at_ + aligned(static_cast<size_t>(s.batch * gh) * sizeof(float));
    c_at_ = h_at_ + state;
    rh_at_ = c_at_ + state;
    hh_at_ = rh_at_ + state;
    require_cuda_backend().workspace().reserve(hh_at_ + state);
  }

  void run(KernelContext& ctx) const override {
    const RecurrentSpec& s = spec_;
    const int64_t gh = s.gates * s.hidden;
    const cudaStream_t stream = stream_of(ctx);
    auto input = [&](int i) -> const float* {
      return static_cast<int>(ctx.inputs.size()) > i && ctx.inputs[i].defined()
                 ? static_cast<const float*>(ctx.inputs[i].raw_data())
                 : nullptr;
    };
    auto output = [&](int i) -> float* {
      return static_cast<int>(ctx.outputs.size()) > i && ctx.outputs[i].defined()
                 ? static_cast<float*>(ctx.outputs[i].raw_data())
                 : nullptr;
    };
    const float* x = input(0);
    const float* w = input(1);
    const float* r = input(2);
    const float* bias = input(3);
    const float* peep = lstm_ ? input(7) : nullptr;
    float* y = output(0);
    float* y_h = output(1);
    float* y_c = lstm_ ? output(2) : nullptr;
    if (y != nullptr)
      check(cudaMemsetAsync(y, 0, ctx.outputs[0].nbytes(), stream), where_ + ": clear Y");
    char* ws = static_cast<char*>(require_cuda_backend().workspace().ptr());
    auto at = [&](size_t offset) { return reinterpret_cast<float*>(ws + offset); };
    float *xw = at(xw_at_), *hr = at(hr_at_), *h = at(h_at_), *c = at(c_at_);
    float *rh = at(rh_at_), *hh = at(hh_at_);
    RnnCellDesc d = base_;
    d.lens = ctx.inputs.size() > 4 && ctx.inputs[4].defined() ? ctx.inputs[4].raw_data() : nullptr;
    for (int64_t dir = 0; dir < s.num_directions; ++dir) {
      d.dir = dir;
      d.reverse = s.reverse || dir == 1;
      for (int k = 0; k < s.activations_per_dir; ++k) {
        const RnnActivation& a = s.activations[dir * s.activations_per_dir + k];
        d.acts[k] = RnnAct{static_cast<int>(a.kind), a.alpha, a.beta};
      }
      const float* rd = r + dir * gh * s.hidden;
      launch_rnn_init(d, input(5), lstm_ ? input(6) : nullptr, h, lstm_ ? c : nullptr, stream);
      if (input_) {
        input_->run(stream, x, w + dir * gh * s.input_size, nullptr, nullptr, xw, 1.f, 0.f);
        for (int64_t step = 0; step < s.seq_length; ++step) {
          recurrent_->run(stream, h, rd, nullptr, nullptr, hr, 1.f, 0.f);
          if (reset_) {
            launch_gru_reset(d, step, xw, hr, bias, h, rh, stream);
            reset_->run(stream, rh, rd + 2 * s.hidden * s.hidden, nullptr, nullptr, hh, 1.f, 0.f);
          }
          launch_rnn_cell(d, step, xw, hr, hh, bias, peep, h, c, y, stream);
        }
      }
      launch_rnn_final(d, h, lstm_ ? c : nullptr, y_h, y_c, stream);
    }
    check_launch(where_);
  }

 private:
  std::string where_;
  RecurrentSpec spec_;
  bool lstm_;
  RnnCellDesc base_;
  std::unique_ptr<LtMatmul> input_, recurrent_, reset_;  // null when there are no steps
  size_t xw_at_ = 0, hr_at_ = 0, h_at_ = 0, c_at_ = 0, rh_at_ = 0, hh_at_ = 0;
};

// float32 X, W, R, B, initial states and P with static shapes; sequence_lens int32 or int64.
std::string check_recurrent(const NodeContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (!ctx.input_shape(i).is_static()) return "shapes known only at run time";
    if (i == 4) continue;
    if (ctx.input_dtype(i) != DType::kFloat32)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
             "; only float32 is supported";
  }
  return "";
}

std::unique_ptr<Kernel> make_recurrent(const NodeContext& ctx) {
  return std::make_unique<RecurrentKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(RNN, &make_recurrent, &check_recurrent);
LUMEN_REGISTER_CUDA_KERNEL(GRU, &make_recurrent, &check_recurrent);
LUMEN_REGISTER_CUDA_KERNEL(LSTM, &make_recurrent, &check_recurrent);

}  // namespace lumen::cuda
