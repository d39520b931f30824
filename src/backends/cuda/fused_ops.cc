// CUDA kernels of the optimizer's fused element-wise and attention nodes (FusedElementwise,
// FusedAttention): the node's program or geometry is read once at compile time into the
// descriptor its launch takes; attention also chooses between two ways by timing them.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/lt_matmul.h"
#include "graph/fused_elementwise.h"

namespace lumen::cuda {
namespace {

// ---- FusedElementwise ----

std::string check_fused_elementwise(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  if (ctx.num_inputs() > kEwMaxInputs)
    return std::to_string(ctx.num_inputs()) + " inputs (the CUDA kernel takes " +
           std::to_string(kEwMaxInputs) + ")";
  if (ctx.output(0).shape.rank() > kMaxRank) return "rank above 8";
  const size_t code = ctx.attr_ints("code").size() / kEwFields;
  if (code > static_cast<size_t>(kEwMaxCode))
    return std::to_string(code) + " instructions (the CUDA kernel takes " +
           std::to_string(kEwMaxCode) + ")";
  if (ctx.attr_floats("consts", {}).size() > static_cast<size_t>(kEwMaxConsts))
    return "more than " + std::to_string(kEwMaxConsts) + " immediates";
  return "";
}

class FusedElementwiseKernel final : public Kernel {
 public:
  explicit FusedElementwiseKernel(const NodeContext& ctx) : where_(ctx.where()) {
    std::vector<float> consts = ctx.attr_floats("consts", {});
    std::string error;
    std::vector<EwInstr> program =
        decode_ew_program(ctx.attr_ints("code"), consts.size(), ctx.num_inputs(), &error);
    if (program.empty()) ctx.fail_model(error);
    const Shape& y = ctx.output(0).shape;
    n_ = y.numel();
    d_.num_inputs = ctx.num_inputs();
    d_.num_code = static_cast<int>(program.size());
    d_.rank = y.rank();
    for (int j = 0; j < y.rank(); ++j) d_.dims[j] = y[j];
    std::vector<int> ranks;
    ranks.reserve(static_cast<size_t>(d_.num_inputs));
    for (int k = 0; k < d_.num_inputs; ++k) ranks.push_back(ctx.input_shape(k).rank());
    std::vector<std::vector<int64_t>> perms;
    if (!decode_ew_perms(ctx.attr_ints("perms", {}), ranks, &perms, &error)) ctx.fail_model(error);
    for (int k = 0; k < d_.num_inputs; ++k) {
      const Shape& s = ctx.input_shape(k);
      if (!perms[k].empty()) {  // read through a transpose, in place
        d_.mode[k] = 2;
        const std::vector<int64_t> strides = ew_input_strides(s.dims(), perms[k], y.dims());
        for (int j = 0; j < y.rank(); ++j) d_.strides[k][j] = strides[j];
      } else if (s == y) {
        d_.mode[k] = 0;
      } else if (s.numel() == 1) {
        d_.mode[k] = 1;
      } else {
        d_.mode[k] = 2;
        broadcast_strides(s, y, d_.strides[k]);
      }
    }
    compact_dims();
    for (size_t c = 0; c < program.size(); ++c) {
      const EwInstr& in = program[c];
      d_.code[c] = {static_cast<int8_t>(in.op), static_cast<int8_t>(in.dst),
                    static_cast<int8_t>(in.a), static_cast<int8_t>(in.b)};
    }
    for (size_t i = 0; i < consts.size(); ++i) d_.consts[i] = consts[i];
    storage_ = storage_of(ctx.output(0).dtype);
  }

  void run(KernelContext& ctx) const override {
    const void* inputs[kEwMaxInputs] = {};
    for (int k = 0; k < d_.num_inputs; ++k) inputs[k] = ctx.inputs[k].raw_data();
    launch_fused_elementwise(storage_, d_, inputs, ctx.outputs[0].raw_data(), n_, stream_of(ctx));
    check_launch(where_);
  }

  // Each thread reads an input read in place at its own index before writing that index.
  int in_place_input() const override {
    for (int k = 0; k < d_.num_inputs; ++k)
      if (d_.mode[k] == 0) return k;
    return -1;
  }

 private:
  // Drops the output's size-1 dims and merges each dim into the one before it where every strided
  // input reads the two as one evenly strided run (a per-channel operand over (H, W), a transposed
  // input's (H, W)): fewer divisions per element and input in the kernel.
  void compact_dims() {
    int r = 0;
    for (int j = 0; j < d_.rank; ++j) {
      if (d_.dims[j] == 1) continue;
      bool merge = r > 0;
      for (int k = 0; merge && k < d_.num_inputs; ++k)
        merge = d_.mode[k] != 2 || d_.strides[k][r - 1] == d_.strides[k][j] * d_.dims[j];
      const int to = merge ? r - 1 : r;
      d_.dims[to] = merge ? d_.dims[to] * d_.dims[j] : d_.dims[j];
      for (int k = 0; k < d_.num_inputs; ++k) d_.strides[k][to] = d_.strides[k][j];
      if (!merge) ++r;
    }
    if (r == 0) {  // one element
      d_.dims[0] = 1;
      r = 1;
    }
    d_.rank = r;
  }

  std::string where_;
  EwDesc d_;
  int64_t n_ = 0;
  Storage storage_ = Storage::kFloat32;
};

std::unique_ptr<Kernel> make_fused_elementwise(const NodeContext& ctx) {
  return std::make_unique<FusedElementwiseKernel>(ctx);
}

// ---- FusedAttention ----

std::string check_attention(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  const Shape& q = ctx.input_shape(0);
  const Shape& v = ctx.input_shape(2);
  const bool kt = ctx.attr_int("k_transposed", 0) == 1;
  const Shape& k = ctx.input_shape(1);
  if (q.rank() - 2 > kMaxRank) return "more than 8 leading dims";
  if (q[-1] > kAttentionMaxDepth || v[-1] > kAttentionMaxDepth)
    return "head size above " + std::to_string(kAttentionMaxDepth);
  if ((kt ? k[-1] : k[-2]) == 0) return "no keys";
  return "";
}

// Two ways, the faster kept (timed at compile time as CUDA-graph replays): the fused kernel, or
// scores = Q K^T by a batched cuBLASLt GEMM into the workspace, the scaled and masked softmax in
// place, then Y = P V by a second GEMM. Which wins depends on the shapes (the fused kernel has
// fewer launches and no scores in memory; the GEMMs use the GPU better on long sequences). With
// at most kAttentionSplitMaxRows query rows per head, the fused kernel's split-key form, untimed.
class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(const NodeContext& ctx) : where_(ctx.where()) {
    const Shape& q = ctx.input_shape(0);
    const Shape& k = ctx.input_shape(1);
    const Shape& v = ctx.input_shape(2);
    storage_ = storage_of(ctx.input_dtype(0));
    const bool k_transposed = ctx.attr_int("k_transposed", 0) == 1;
    has_mask_ = ctx.num_inputs() > 3 && ctx.has_input(3);
    d_ = attention_desc(q, k_transposed ? k[-1] : k[-2], v[-1], ctx.attr_float("scale", 1.0f),
                        has_mask_ ? &ctx.input_shape(3) : nullptr);
    d_.k_transposed = k_transposed;
    d_.kv_group = ctx.attr_int("kv_group", 1);
    // Decoding (a few query rows per head): the split-key kernel, with no GEMM way to time (two
    // launches against three, and no scores in memory).
    if (d_.sq <= kAttentionSplitMaxRows) {
      split_ = true;
      scratch_bytes_ = attention_scratch_bytes(d_);
      if (scratch_bytes_ > 0) require_cuda_backend().workspace().reserve(scratch_bytes_);
      return;
    }
    tensor_cores_ = flash_attention_fits(storage_, d_);
    const size_t score_bytes =
        static_cast<size_t>(d_.batch * d_.sq * d_.sk) * storage_bytes(storage_);
    // Grouped key/value heads: the fused kernel (the GEMMs' batches would need K and V repeated).
    if (d_.kv_group > 1 || score_bytes == 0 || score_bytes > kMaxScoreBytes) return;
    GemmShape qk;  // [sq, depth] x [depth, sk] per head
    qk.m = d_.sq;
    qk.k = d_.depth;
    qk.n = d_.sk;
    qk.trans_w = !d_.k_transposed;
    qk.batch = d_.batch;
    qk.stride_x = d_.sq * d_.depth;
    qk.stride_w = d_.sk * d_.depth;
    qk.stride_y = d_.sq * d_.sk;
    GemmShape pv;  // [sq, sk] x [sk, depth_v] per head
    pv.m = d_.sq;
    pv.k = d_.sk;
    pv.n = d_.depth_v;
    pv.batch = d_.batch;
    pv.stride_x = d_.sq * d_.sk;
    pv.stride_w = d_.sk * d_.depth_v;
    pv.stride_y = d_.sq * d_.depth_v;
    try {
      qk_ = std::make_unique<LtMatmul>(ctx, qk, false);
      pv_ = std::make_unique<LtMatmul>(ctx, pv, false);
    } catch (const UnsupportedOp&) {
      qk_.reset();
      pv_.reset();
      return;
    }
    CudaBackend& be = require_cuda_backend();
    score_offset_ = (std::max(qk_->workspace_size(), pv_->workspace_size()) + 255) / 256 * 256;
    be.workspace().reserve(score_offset_ + score_bytes);
    choose(be, q, k, v, ctx);
  }

  void run(KernelContext& ctx) const override {
    auto in = [&](int i) { return ctx.inputs[i].raw_data(); };
    launch(stream_of(ctx), in(0), in(1), in(2), has_mask_ ? in(3) : nullptr,
           ctx.outputs[0].raw_data(), qk_ != nullptr);
  }

  std::string describe() const override {
    if (split_) return "keys split over warps (decoding)";
    const char* fused = tensor_cores_ ? "fused kernel (tensor cores)" : "fused kernel";
    if (!qk_ && gemm_ms_ < 0) return tensor_cores_ ? fused : "";
    char text[200];
    std::snprintf(text, sizeof text, "%s; measured: %s %.4f ms, gemm + softmax + gemm %.4f ms",
                  qk_ ? "gemm + softmax + gemm" : fused, fused, fused_ms_, gemm_ms_);
    return text;
  }

 private:
  static constexpr size_t kMaxScoreBytes = size_t{64} << 20;
  static constexpr float kClearly = 2.f;

  // One attention, the GEMM way (qk_ and pv_ set) or the fused kernel.
  void launch(cudaStream_t stream, const void* q, const void* k, const void* v, const void* mask,
              void* y, bool gemm) const {
    if (!gemm) {
      void* scratch = scratch_bytes_ > 0 ? require_cuda_backend().workspace().ptr() : nullptr;
      launch_attention(storage_, d_, q, k, v, mask, y, scratch, stream);
      check_launch(where_);
      return;
    }
    CudaBackend& be = require_cuda_backend();
    void* scores = static_cast<char*>(be.workspace().ptr()) + score_offset_;
    qk_->run(stream, q, k, nullptr, nullptr, scores, 1.f, 0.f);
    launch_attention_softmax(storage_, d_, scores, mask, stream);
    check_launch(where_);
    pv_->run(stream, scores, v, nullptr, nullptr, y, 1.f, 0.f);
  }

  // Keeps the GEMMs only when they are faster. Times the two ways once per geometry (the dtype, Q,
  // K, V and mask shapes, K's layout): a model's layers share one, and a plan for each new sequence
  // length (a shape family's) times it once, not once per layer (MeasuredPairs).
  void choose(CudaBackend& be, const Shape& q, const Shape& k, const Shape& v,
              const NodeContext& ctx) {
    static MeasuredPairs measured;  // (gemm, fused) ms
    const std::string key = std::string(dtype_name(ctx.input_dtype(0))) + q.to_string() +
                            k.to_string() + v.to_string() +
                            (has_mask_ ? ctx.input_shape(3).to_string() : "-") +
                            (d_.k_transposed ? "T" : "");
    std::tie(gemm_ms_, fused_ms_) = measured.get(key, [&] {
      time_both(be, q, k, v, ctx);
      return std::make_pair(gemm_ms_, fused_ms_);
    });
    if (gemm_ms_ >= fused_ms_) {
      qk_.reset();
      pv_.reset();
    }
  }

  // Times both ways on scratch tensors into gemm_ms_ and fused_ms_: one launch each, then, unless
  // one way is clearly faster, repeated launches as a CUDA graph.
  void time_both(CudaBackend& be, const Shape& q, const Shape& k, const Shape& v,
                 const NodeContext& ctx) {
    const Device dev = Device::cuda();
    const DType t = ctx.input_dtype(0);
    Tensor sq = Tensor::zeros(q, t, dev), sk = Tensor::zeros(k, t, dev);
    Tensor sv = Tensor::zeros(v, t, dev);
    Tensor sy = Tensor::zeros(ctx.output(0).shape, t, dev);
    Tensor sm = has_mask_ ? Tensor::zeros(ctx.input_shape(3), t, dev) : Tensor();
    check(cudaStreamSynchronize(be.stream().handle()), where_);
    TimingStream own(where_);
    // One warm launch of each way first: where one takes more than kClearly times the other (long
    // sequences, where the fused kernel falls far behind), that settles it without the repeated
    // timing, which would spend most of its time running the slow way.
    auto time = [&](bool gemm, bool repeated) {
      const std::function<void()> run = [&] {
        launch(own.handle, sq.raw_data(), sk.raw_data(), sv.raw_data(),
               has_mask_ ? sm.raw_data() : nullptr, sy.raw_data(), gemm);
      };
      return repeated ? time_on_stream(own.handle, run, where_.c_str())
                      : time_once_on_stream(own.handle, run, where_.c_str());
    };
    fused_ms_ = time(false, false);
    gemm_ms_ = time(true, false);
    if (gemm_ms_ * kClearly >= fused_ms_ && fused_ms_ * kClearly >= gemm_ms_) {
      gemm_ms_ = time(true, true);
      fused_ms_ = time(false, true);
    }
    check(cudaStreamSynchronize(own.handle), where_);
  }

  std::string where_;
  AttentionDesc d_;
  Storage storage_ = Storage::kFloat32;
  bool has_mask_ = false;
  std::unique_ptr<LtMatmul> qk_, pv_;  // set when the GEMM way runs
  size_t score_offset_ = 0;
  bool split_ = false;         // the split-key kernel (decoding)
  bool tensor_cores_ = false;  // the fused kernel is flash_attention.cu's
  size_t scratch_bytes_ = 0;   // its partial results in the workspace
  float fused_ms_ = -1.f, gemm_ms_ = -1.f;
};

std::unique_ptr<Kernel> make_attention(const NodeContext& ctx) {
  return std::make_unique<AttentionKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(FusedElementwise, &make_fused_elementwise, &check_fused_elementwise);
LUMEN_REGISTER_CUDA_KERNEL(FusedAttention, &make_attention, &check_attention);

}  // namespace lumen::cuda
