// StridedAttention on CUDA: attention over strided views of its inputs and output (the optimizer's
// attention-views pass: Q, K and V read in place from one projection, Y written in place into the
// layout the next product reads), so the Transposes around attention never run. Short key
// sequences (at most kStridedAttentionMaxKeys, heads of 32, 64 or 128) run one fused kernel
// (strided_attention.cu), one launch for every batch index where their views lie evenly apart, else
// one per batch index. Otherwise the scores scale * Q K^T come from a cuBLASLt
// product reading the views through their row and head strides, the masked softmax runs in place
// over them, and Y = P V is written through Y's view. The innermost leading dim (the heads) is
// cuBLASLt's batch; each index of the dims before it (the batch) is one pair of products.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/lt_matmul.h"
#include "graph/schemas/strided_attention.h"

namespace lumen::cuda {
namespace {

// The scores of all heads live in the backend's workspace: at most this many bytes.
constexpr size_t kMaxScoreBytes = size_t{256} << 20;

std::string check_strided_attention(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  const AttentionViews v = attention_views(ctx);
  const Shape& q = v.q.shape;
  if (q.rank() - 2 > kMaxRank) return "more than 8 leading dims";
  const int64_t sk = v.k.shape[-2];
  if (sk == 0) return "no keys";
  const size_t scores = static_cast<size_t>(q.numel() / std::max<int64_t>(q[-1], 1) * sk) *
                        storage_bytes(storage_of(ctx.input_dtype(0)));
  if (scores > kMaxScoreBytes) return "scores above 256 MB";
  return "";
}

class StridedAttentionKernel final : public Kernel {
 public:
  explicit StridedAttentionKernel(const NodeContext& ctx)
      : where_(ctx.where()), storage_(storage_of(ctx.input_dtype(0))) {
    const int64_t es = static_cast<int64_t>(storage_bytes(storage_));
    const AttentionViews v = attention_views(ctx);
    const Shape& q = v.q.shape;
    const int r = q.rank();
    const int64_t sq = q[-2], depth = q[-1], sk = v.k.shape[-2], dv = v.v.shape[-1];
    const int64_t heads = r >= 3 ? q[r - 3] : 1;
    auto head_stride = [&](const TensorView& t) { return r >= 3 ? t.strides[r - 3] : 0; };
    // Every element offset, stride and row stride in bytes bounds the alignment cuBLASLt may
    // assume (the tensors themselves start at least 16-byte aligned).
    int64_t align = 16;
    for (const TensorView* t : {&v.q, &v.k, &v.v, &v.y}) {
      align = std::gcd(align, t->offset * es);
      for (int64_t s : t->strides) align = std::gcd(align, s * es);
    }
    // One [sq, sk] block of scores per head, contiguous: [lead..., sq, sk].
    GemmShape qk;
    qk.m = sq;
    qk.k = depth;
    qk.n = sk;
    qk.batch = heads;
    qk.stride_x = head_stride(v.q);
    qk.ld_x = v.q.strides[r - 2];
    const bool depth_contiguous = v.k.strides[r - 1] == 1;
    qk.trans_w = depth_contiguous;  // K stored [sk, depth]; else K^T stored [depth, sk]
    qk.ld_w = depth_contiguous ? v.k.strides[r - 2] : v.k.strides[r - 1];
    qk.stride_w = head_stride(v.k);
    qk.stride_y = sq * sk;
    qk.align = static_cast<int>(align);
    GemmShape pv;
    pv.m = sq;
    pv.k = sk;
    pv.n = dv;
    pv.batch = heads;
    pv.stride_x = sq * sk;
    pv.stride_w = head_stride(v.v);
    pv.ld_w = v.v.strides[r - 2];
    pv.stride_y = head_stride(v.y);
    pv.ld_y = v.y.strides[r - 2];
    pv.align = static_cast<int>(align);
    has_mask_ = ctx.num_inputs() > 3 && ctx.has_input(3);
    d_ = attention_desc(q, sk, dv, ctx.attr_float("scale", 1.0f),
                        has_mask_ ? &ctx.input_shape(3) : nullptr);
    const bool depth_packed = v.q.strides[r - 1] == 1 && depth_contiguous &&
                              v.v.strides[r - 1] == 1 && v.y.strides[r - 1] == 1;
    fused_ = depth_packed && prepare_strided_attention(d_);
    // 16-bit storage: the tensor-core kernel, where the views' strides and starts suit it.
    flash_ = depth_packed && flash_attention_fits(storage_, d_);
    for (const TensorView* t : {&v.q, &v.k, &v.v, &v.y}) {
      flash_ = flash_ && t->offset % 8 == 0;
      for (int64_t e : t->strides) flash_ = flash_ && (e == 1 || e % 8 == 0);
    }
    if (fused_ || flash_) {
      strides_.heads = heads;
      strides_.q_head = head_stride(v.q);
      strides_.q_row = v.q.strides[r - 2];
      strides_.k_head = head_stride(v.k);
      strides_.k_row = v.k.strides[r - 2];
      strides_.v_head = head_stride(v.v);
      strides_.v_row = v.v.strides[r - 2];
      strides_.y_head = head_stride(v.y);
      strides_.y_row = v.y.strides[r - 2];
      strides16_ = true;
      for (int64_t e : {strides_.k_head, strides_.k_row, strides_.v_head, strides_.v_row})
        strides16_ = strides16_ && (e * es) % 16 == 0;
    }
    if (!fused_) {
      qk_ = std::make_unique<LtMatmul>(ctx, qk, false);
      pv_ = std::make_unique<LtMatmul>(ctx, pv, false);
    }
    // Each index of the leading dims before the heads: where its views and scores start.
    std::vector<int64_t> outer_dims(q.dims().begin(), q.dims().begin() + std::max(r - 3, 0));
    int64_t outer = 1;
    for (int64_t d : outer_dims) outer *= d;
    for (int64_t o = 0; o < outer; ++o) {
      Starts s{v.q.offset, v.k.offset, v.v.offset, v.y.offset, o * heads * sq * sk};
      int64_t rest = o;
      for (int d = static_cast<int>(outer_dims.size()) - 1; d >= 0; --d) {
        const int64_t i = rest % outer_dims[d];
        rest /= outer_dims[d];
        s.q += i * v.q.strides[d];
        s.k += i * v.k.strides[d];
        s.v += i * v.v.strides[d];
        s.y += i * v.y.strides[d];
      }
      starts_.push_back(s);
    }
    // The fused kernel takes every batch index in one launch where their views lie evenly apart
    // (Swin's windows: dozens of batch indices of a few heads each).
    if (fused_ && starts_.size() > 1) {
      const Starts& a = starts_[0];
      const Starts& b = starts_[1];
      bool even = true;
      for (size_t o = 2; o < starts_.size() && even; ++o) {
        const Starts& s = starts_[o];
        const int64_t n = static_cast<int64_t>(o);
        even = s.q == a.q + n * (b.q - a.q) && s.k == a.k + n * (b.k - a.k) &&
               s.v == a.v + n * (b.v - a.v) && s.y == a.y + n * (b.y - a.y);
      }
      if (even) {
        all_outers_ = strides_;
        all_outers_.outers = static_cast<int64_t>(starts_.size());
        all_outers_.q_outer = b.q - a.q;
        all_outers_.k_outer = b.k - a.k;
        all_outers_.v_outer = b.v - a.v;
        all_outers_.y_outer = b.y - a.y;
        all_outers16_ = strides16_ && (all_outers_.k_outer * es) % 16 == 0 &&
                        (all_outers_.v_outer * es) % 16 == 0;
      }
    }
    if (!fused_) {
      // The softmax over the scores of every head, with the mask broadcast onto them.
      CudaBackend& be = require_cuda_backend();
      score_offset_ = (std::max(qk_->workspace_size(), pv_->workspace_size()) + 255) / 256 * 256;
      be.workspace().reserve(score_offset_ + static_cast<size_t>(d_.batch * sq * sk * es));
    }
    // The tensor-core kernel against the other way (the fused kernel or the products): the faster,
    // measured.
    if (flash_) choose(ctx);
  }

  void run(KernelContext& ctx) const override {
    enqueue(stream_of(ctx), ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(),
            ctx.inputs[2].raw_data(), has_mask_ ? ctx.inputs[3].raw_data() : nullptr,
            ctx.outputs[0].raw_data(), flash_);
  }

  std::string describe() const override {
    std::string way = flash_   ? "tensor-core flash attention"
                      : fused_ ? "fused strided attention"
                               : "strided gemm + softmax + gemm";
    if (flash_ms_ >= 0) {
      char text[160];
      std::snprintf(text, sizeof text, "; measured: tensor cores %.4f ms, %s %.4f ms", flash_ms_,
                    fused_ ? "fused" : "gemm + softmax + gemm", other_ms_);
      way += text;
    }
    return way;
  }

 private:
  struct Starts {
    int64_t q, k, v, y, scores;  // elements
  };

  // One attention over the views of the tensors at q, k, v and y: by the tensor-core kernel
  // (flash), else the fused kernel or the products.
  void enqueue(cudaStream_t stream, const void* q_data, const void* k_data, const void* v_data,
               const void* mask, void* y_data, bool flash) const {
    if (d_.batch == 0 || d_.sq == 0 || d_.depth_v == 0) return;
    const size_t es = storage_bytes(storage_);
    // Element e of a tensor's data, as a byte address.
    auto at = [es](const void* data, int64_t e) {
      return static_cast<char*>(const_cast<void*>(data)) + static_cast<size_t>(e) * es;
    };
    if (flash) {
      bool all = true;
      for (size_t o = 0; o < starts_.size() && all; ++o) {
        const Starts& s = starts_[o];
        all = launch_flash_attention(
            storage_, d_, strides_, static_cast<int64_t>(o) * strides_.heads, at(q_data, s.q),
            at(k_data, s.k), at(v_data, s.v), mask, at(y_data, s.y), stream);
      }
      check_launch(where_);
      if (all) return;  // else (a start off 16-byte alignment) the other way redoes every index
    }
    if (fused_ && all_outers_.outers > 1) {
      const Starts& s = starts_[0];
      const char* k = at(k_data, s.k);
      const char* v = at(v_data, s.v);
      const bool aligned16 = all_outers16_ && reinterpret_cast<uintptr_t>(k) % 16 == 0 &&
                             reinterpret_cast<uintptr_t>(v) % 16 == 0;
      launch_strided_attention(storage_, d_, all_outers_, at(q_data, s.q), k, v, mask,
                               at(y_data, s.y), 0, aligned16, stream);
      check_launch(where_);
      return;
    }
    if (fused_) {
      for (size_t o = 0; o < starts_.size(); ++o) {
        const Starts& s = starts_[o];
        const char* k = at(k_data, s.k);
        const char* v = at(v_data, s.v);
        const bool aligned16 = strides16_ && reinterpret_cast<uintptr_t>(k) % 16 == 0 &&
                               reinterpret_cast<uintptr_t>(v) % 16 == 0;
        launch_strided_attention(storage_, d_, strides_, at(q_data, s.q), k, v, mask,
                                 at(y_data, s.y), static_cast<int64_t>(o), aligned16, stream);
      }
      check_launch(where_);
      return;
    }
    char* scores = static_cast<char*>(require_cuda_backend().workspace().ptr()) + score_offset_;
    for (const Starts& s : starts_)
      qk_->run(stream, at(q_data, s.q), at(k_data, s.k), nullptr, nullptr,
               scores + static_cast<size_t>(s.scores) * es, 1.f, 0.f);
    launch_attention_softmax(storage_, d_, scores, mask, stream);
    check_launch(where_);
    for (const Starts& s : starts_)
      pv_->run(stream, scores + static_cast<size_t>(s.scores) * es, at(v_data, s.v), nullptr,
               nullptr, at(y_data, s.y), 1.f, 0.f);
  }

  // Times the tensor-core kernel against the other way (CUDA-graph replays on scratch tensors of
  // the node's shapes) and keeps the faster; once per geometry for the process (MeasuredPairs).
  void choose(const NodeContext& ctx) {
    static MeasuredPairs measured;  // (flash, other) ms
    std::string key = dtype_name(ctx.input_dtype(0));
    for (int i = 0; i < ctx.num_inputs(); ++i)
      key += ctx.has_input(i) ? ctx.input_shape(i).to_string() : "-";
    for (const auto& [name, value] : ctx.node().attrs) key += name + value.to_string();
    std::tie(flash_ms_, other_ms_) = measured.get(key, [&] { return time_both(ctx); });
    flash_ = flash_ms_ < other_ms_;
  }

  // The tensor-core kernel's time and the other way's, in milliseconds.
  std::pair<float, float> time_both(const NodeContext& ctx) const {
    const Device dev = Device::cuda();
    const DType t = ctx.input_dtype(0);
    Tensor in[4];  // Q, K, V and the mask (where the node has one)
    for (int i = 0; i < 4; ++i)
      if (i < ctx.num_inputs() && ctx.has_input(i))
        in[i] = Tensor::zeros(ctx.input_shape(i), t, dev);
    Tensor out = Tensor::zeros(ctx.output(0).shape, t, dev);
    CudaBackend& be = require_cuda_backend();
    check(cudaStreamSynchronize(be.stream().handle()), where_);
    TimingStream own(where_);
    auto time = [&](bool flash) {
      return time_on_stream(
          own.handle,
          [&] {
            enqueue(own.handle, in[0].raw_data(), in[1].raw_data(), in[2].raw_data(),
                    has_mask_ ? in[3].raw_data() : nullptr, out.raw_data(), flash);
          },
          where_.c_str());
    };
    const std::pair<float, float> ms{time(true), time(false)};
    check(cudaStreamSynchronize(own.handle), where_);
    return ms;
  }

  std::string where_;
  Storage storage_;
  std::unique_ptr<LtMatmul> qk_, pv_;
  std::vector<Starts> starts_;
  AttentionDesc d_;
  bool has_mask_ = false;
  bool fused_ = false;      // the fused kernel, not the products
  HeadStrides all_outers_;  // with outers > 1: the fused kernel's one launch over every index
  bool all_outers16_ = false;
  bool flash_ = false;                       // the tensor-core kernel first (16-bit storage)
  float flash_ms_ = -1.f, other_ms_ = -1.f;  // its time and the other way's, as measured
  HeadStrides strides_;
  bool strides16_ = false;  // K's and V's head and row strides are multiples of 16 bytes
  size_t score_offset_ = 0;
};

std::unique_ptr<Kernel> make_strided_attention(const NodeContext& ctx) {
  return std::make_unique<StridedAttentionKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(StridedAttention, &make_strided_attention, &check_strided_attention);

}  // namespace lumen::cuda
