// Convolutions through cuDNN's N-d descriptors, float32 or float16 storage (float32 compute; no
// TF32 unless the compile asks for it, as conv.cc); bfloat16 through float32 copies:
//   - Conv and FusedConv of 1-D (as 2-D with a unit height), 3-D, and 2-D with asymmetric padding:
//     cudnnConvolutionForward, then conv.cc's epilogue (bias, residual, activation). Asymmetric
//     padding copies X zero-padded into the workspace first and convolves that without padding.
//   - ConvTranspose of 1-D to 3-D (pads, strides, dilations, output_padding, output_shape,
//     auto_pad, group, bias) as cuDNN's backward-data convolution. With symmetric padding and no
//     output_padding it writes Y directly (then the bias epilogue); otherwise it writes the whole
//     unpadded result, strides * (in - 1) + extent per axis, into the workspace and cuts Y from it
//     (positions past it, from output_padding or a larger output_shape, get the bias alone).
// The algorithm is the fastest cudnnFind* reports among those that keep float32 exact.
#include "backends/cuda/conv_nd.h"

#include <cudnn.h>

#include <algorithm>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/image_ops.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::cuda {
namespace {

constexpr size_t kMaxWorkspace = size_t{256} << 20;

size_t align256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// cuDNN's descriptors of one convolution: X and Y tensors, the filter and the convolution, made
// from (N, C, spatial...) dims; 1-D convolutions get a unit height in front of their one axis.
class CudnnConv {
 public:
  CudnnConv(const std::string& where, cudnnDataType_t type, bool tensor_ops, std::vector<int64_t> x,
            std::vector<int64_t> w, std::vector<int64_t> y, std::vector<int64_t> pads,
            std::vector<int64_t> strides, std::vector<int64_t> dilations, int64_t group)
      : where_(where) {
    if (x.size() == 3) {
      x.insert(x.begin() + 2, 1);
      w.insert(w.begin() + 2, 1);
      y.insert(y.begin() + 2, 1);
      pads.insert(pads.begin(), 0);
      strides.insert(strides.begin(), 1);
      dilations.insert(dilations.begin(), 1);
    }
    auto ints = [](const std::vector<int64_t>& v) { return std::vector<int>(v.begin(), v.end()); };
    const std::vector<int> xd = ints(x), wd = ints(w), yd = ints(y);
    const std::vector<int> p = ints(pads), s = ints(strides), d = ints(dilations);
    check(cudnnCreateTensorDescriptor(&x_), where_);
    check(cudnnCreateTensorDescriptor(&y_), where_);
    check(cudnnCreateFilterDescriptor(&w_), where_);
    check(cudnnCreateConvolutionDescriptor(&conv_), where_);
    const int nb = static_cast<int>(xd.size());
    check(cudnnSetTensorNdDescriptorEx(x_, CUDNN_TENSOR_NCHW, type, nb, xd.data()), where_);
    check(cudnnSetTensorNdDescriptorEx(y_, CUDNN_TENSOR_NCHW, type, nb, yd.data()), where_);
    check(cudnnSetFilterNdDescriptor(w_, type, CUDNN_TENSOR_NCHW, nb, wd.data()), where_);
    check(cudnnSetConvolutionNdDescriptor(conv_, nb - 2, p.data(), s.data(), d.data(),
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          where_);
    check(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(group)), where_);
    check(cudnnSetConvolutionMathType(conv_, tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
          where_);
  }
  ~CudnnConv() {
    if (x_) cudnnDestroyTensorDescriptor(x_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
  }
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;

 private:
  std::string where_;
};

// Whether a found algorithm may run: it succeeded, fits the workspace and keeps float32 exact
// (tensor-core math only where `tensor_ops` allows it).
template <typename Perf>
bool usable(const Perf& p, bool tensor_ops) {
  if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) return false;
  const bool exact = p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH;
  return exact || (tensor_ops && p.mathType == CUDNN_TENSOR_OP_MATH);
}

// cuDNN's type of float32 or float16 storage (bfloat16 computes in float32: Widening below).
cudnnDataType_t cudnn_type(Storage st) {
  return st == Storage::kFloat16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

int64_t product(const std::vector<int64_t>& v, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

// "" when the node's data is float with static shapes, 1-D to 3-D, else why not.
std::string check_common(const NodeContext& ctx) {
  std::string why = require_float_static(ctx);
  if (!why.empty()) return why;
  const int rank = ctx.input_shape(0).rank();
  if (rank < 3 || rank > 5) return "1-D to 3-D convolutions only";
  if (ctx.input_shape(1).rank() != rank) return "a weight of X's rank";
  return "";
}

// Regions of the backend's workspace after cuDNN's own: each 256-byte aligned.
class WorkspacePlan {
 public:
  // Reserves `bytes` (0: none) and returns its offset.
  size_t add(size_t bytes) {
    const size_t at = end_;
    end_ = align256(end_ + bytes);
    return at;
  }
  size_t end() const { return end_; }
  void start_after(size_t cudnn_bytes) { base_ = align256(cudnn_bytes); }
  void* at(size_t offset) const {
    return static_cast<char*>(require_cuda_backend().workspace().ptr()) + base_ + offset;
  }
  size_t total() const { return base_ + end_; }

 private:
  size_t base_ = 0, end_ = 0;
};

// bfloat16 nodes compute through float32 copies (cuDNN lacks N-d bfloat16 algorithms for many
// geometries): X and W are widened into the workspace and the result narrowed into Y.
struct Widening {
  bool on = false;
  size_t x = 0, w = 0, y = 0;  // workspace offsets of the float32 copies
  int64_t x_n = 0, w_n = 0, y_n = 0;
};

void plan_widening(Widening& wd, WorkspacePlan& plan, Storage st, int64_t x_n, int64_t w_n,
                   int64_t y_n) {
  wd.on = st == Storage::kBFloat16;
  if (!wd.on) return;
  wd.x_n = x_n;
  wd.w_n = w_n;
  wd.y_n = y_n;
  wd.x = plan.add(static_cast<size_t>(x_n) * 4);
  wd.w = plan.add(static_cast<size_t>(w_n) * 4);
  wd.y = plan.add(static_cast<size_t>(y_n) * 4);
}

// ---- Conv and FusedConv ----

class ConvNdKernel final : public Kernel {
 public:
  explicit ConvNdKernel(const NodeContext& ctx) : where_(ctx.where()) {
    CudaBackend& be = require_cuda_backend();
    const Shape& xs = ctx.input_shape(0);
    const Shape& ws = ctx.input_shape(1);
    const Shape& ys = ctx.output(0).shape;
    storage_ = storage_of(ctx.input_dtype(0));
    compute_ = storage_ == Storage::kBFloat16 ? Storage::kFloat32 : storage_;
    std::vector<int64_t> x = xs.dims(), w = ws.dims(), y = ys.dims();
    const ConvGeometry g = window_geometry(ctx, xs, {w.begin() + 2, w.end()}, false);
    has_bias_ = ctx.has_input(2);
    has_residual_ = ctx.num_inputs() > 3 && ctx.has_input(3);
    if (ctx.op() == OpKind::kFusedConv &&
        !fused_activation(ctx, &epilogue_.op, &epilogue_.alpha, &epilogue_.beta))
      ctx.fail_unsupported("CUDA: activation '" + ctx.attr_string("activation", "") + "'");
    batch_ = y[0];
    channels_ = y[1];
    spatial_ = product(y, 2);
    if (ys.numel() == 0) return;
    plan_widening(wide_, plan_, storage_, xs.numel(), ws.numel(), ys.numel());
    std::vector<int64_t> pads = g.pad_begin;
    if (g.pad_begin != g.pad_end) {
      // Zero-pad X into the workspace, then convolve without padding.
      padded_ = true;
      pad_.spatial = g.spatial;
      pad_.batch = x[0];
      pad_.channels = x[1];
      for (int i = 0; i < g.spatial; ++i) {
        pad_.full[i] = x[2 + i];
        pad_.begin[i] = -g.pad_begin[i];
        x[2 + i] += g.pad_begin[i] + g.pad_end[i];
        pad_.out[i] = x[2 + i];
        pads[i] = 0;
      }
      pad_at_ = plan_.add(static_cast<size_t>(product(x, 0)) * storage_bytes(compute_));
    }
    const bool tensor_ops = storage_ != Storage::kFloat32 || ctx.precision() == Precision::kTF32;
    desc_ = std::make_unique<CudnnConv>(where_, cudnn_type(compute_), tensor_ops, x, w, y, pads,
                                        g.strides, g.dilations, ctx.attr_int("group", 1));
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    check(cudnnFindConvolutionForwardAlgorithm(be.cudnn(), desc_->x_, desc_->w_, desc_->conv_,
                                               desc_->y_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found,
                                               perf),
          where_ + ": find algorithm");
    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    for (int i = 0; i < found && best == nullptr; ++i)
      if (usable(perf[i], tensor_ops)) best = &perf[i];
    if (best == nullptr) ctx.fail_unsupported("CUDA: cuDNN found no algorithm");
    algo_ = best->algo;
    workspace_ = best->memory;
    plan_.start_after(workspace_);
    be.workspace().reserve(plan_.total());
  }

  void run(KernelContext& ctx) const override {
    if (batch_ * channels_ * spatial_ == 0) return;
    CudaBackend& be = require_cuda_backend();
    cudaStream_t stream = stream_of(ctx);
    const void* x = ctx.inputs[0].raw_data();
    const void* w = ctx.inputs[1].raw_data();
    void* y = ctx.outputs[0].raw_data();
    if (wide_.on) {
      launch_cast(storage_, x, compute_, plan_.at(wide_.x), wide_.x_n, stream);
      launch_cast(storage_, w, compute_, plan_.at(wide_.w), wide_.w_n, stream);
      check_launch(where_);
      x = plan_.at(wide_.x);
      w = plan_.at(wide_.w);
    }
    if (padded_) {
      launch_crop_bias(compute_, pad_, x, nullptr, plan_.at(pad_at_), stream);
      check_launch(where_);
      x = plan_.at(pad_at_);
    }
    void* dst = wide_.on ? plan_.at(wide_.y) : y;
    const float one = 1.f, zero = 0.f;
    check(cudnnSetStream(be.cudnn(), stream), where_);
    check(cudnnConvolutionForward(be.cudnn(), &one, desc_->x_, x, desc_->w_, w, desc_->conv_, algo_,
                                  be.workspace().ptr(), workspace_, &zero, desc_->y_, dst),
          where_);
    if (wide_.on) {
      launch_cast(compute_, dst, storage_, y, wide_.y_n, stream);
      check_launch(where_);
    }
    ConvEpilogue e = epilogue_;
    e.bias = has_bias_ ? ctx.inputs[2].raw_data() : nullptr;
    e.residual = has_residual_ ? ctx.inputs[3].raw_data() : nullptr;
    if (e.bias != nullptr || e.residual != nullptr || e.op != UnaryOp::kIdentity) {
      launch_conv_epilogue(storage_, y, batch_, channels_, spatial_, e, stream);
      check_launch(where_);
    }
  }

 private:
  std::string where_;
  Storage storage_ = Storage::kFloat32, compute_ = Storage::kFloat32;
  bool has_bias_ = false, has_residual_ = false;
  ConvEpilogue epilogue_;
  int64_t batch_ = 0, channels_ = 0, spatial_ = 0;
  WorkspacePlan plan_;
  Widening wide_;
  bool padded_ = false;  // asymmetric padding: X goes through its zero-padded copy
  CropDesc pad_;
  size_t pad_at_ = 0;
  std::unique_ptr<CudnnConv> desc_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_ = 0;
};

// ---- ConvTranspose ----

class ConvTransposeKernel final : public Kernel {
 public:
  explicit ConvTransposeKernel(const NodeContext& ctx) : where_(ctx.where()) {
    CudaBackend& be = require_cuda_backend();
    const Shape& xs = ctx.input_shape(0);
    const Shape& ws = ctx.input_shape(1);
    const Shape& ys = ctx.output(0).shape;
    storage_ = storage_of(ctx.input_dtype(0));
    compute_ = storage_ == Storage::kBFloat16 ? Storage::kFloat32 : storage_;
    const std::vector<int64_t> x = xs.dims(), w = ws.dims(), y = ys.dims();
    const ConvGeometry g = conv_transpose_geometry(ctx, xs, {w.begin() + 2, w.end()});
    has_bias_ = ctx.has_input(2);
    batch_ = y[0];
    channels_ = y[1];
    spatial_ = product(y, 2);
    if (ys.numel() == 0) return;
    plan_widening(wide_, plan_, storage_, xs.numel(), ws.numel(), ys.numel());
    bool direct = true;
    for (int i = 0; i < g.spatial; ++i)
      direct = direct && g.pad_begin[i] == g.pad_end[i] && g.pad_begin[i] >= 0;
    std::vector<int64_t> full = y, pads = g.pad_begin;
    if (!direct) {
      cropped_ = true;
      crop_.spatial = g.spatial;
      crop_.batch = y[0];
      crop_.channels = y[1];
      for (int i = 0; i < g.spatial; ++i) {
        full[2 + i] = g.strides[i] * (x[2 + i] - 1) + g.extent(i);
        crop_.full[i] = full[2 + i];
        crop_.out[i] = y[2 + i];
        crop_.begin[i] = g.pad_begin[i];
        pads[i] = 0;
      }
      full_at_ = plan_.add(static_cast<size_t>(product(full, 0)) * storage_bytes(compute_));
    }
    const bool tensor_ops = storage_ != Storage::kFloat32 || ctx.precision() == Precision::kTF32;
    // The forward convolution this one transposes maps `full` (its X) to our X (its Y).
    desc_ = std::make_unique<CudnnConv>(where_, cudnn_type(compute_), tensor_ops, full, w, x, pads,
                                        g.strides, g.dilations, ctx.attr_int("group", 1));
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int found = 0;
    check(cudnnFindConvolutionBackwardDataAlgorithm(
              be.cudnn(), desc_->w_, desc_->y_, desc_->conv_, desc_->x_,
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf),
          where_ + ": find algorithm");
    const cudnnConvolutionBwdDataAlgoPerf_t* best = nullptr;
    for (int i = 0; i < found && best == nullptr; ++i)
      if (usable(perf[i], tensor_ops)) best = &perf[i];
    if (best == nullptr) ctx.fail_unsupported("CUDA: cuDNN found no algorithm");
    algo_ = best->algo;
    workspace_ = best->memory;
    plan_.start_after(workspace_);
    be.workspace().reserve(plan_.total());
  }

  void run(KernelContext& ctx) const override {
    if (batch_ * channels_ * spatial_ == 0) return;
    CudaBackend& be = require_cuda_backend();
    cudaStream_t stream = stream_of(ctx);
    const void* x = ctx.inputs[0].raw_data();
    const void* w = ctx.inputs[1].raw_data();
    void* y = ctx.outputs[0].raw_data();
    const void* bias = has_bias_ ? ctx.inputs[2].raw_data() : nullptr;
    if (wide_.on) {
      launch_cast(storage_, x, compute_, plan_.at(wide_.x), wide_.x_n, stream);
      launch_cast(storage_, w, compute_, plan_.at(wide_.w), wide_.w_n, stream);
      check_launch(where_);
      x = plan_.at(wide_.x);
      w = plan_.at(wide_.w);
    }
    // Where Y in the compute storage goes: Y itself, or its float32 copy (bfloat16).
    void* y_compute = wide_.on ? plan_.at(wide_.y) : y;
    void* dst = cropped_ ? plan_.at(full_at_) : y_compute;
    const float one = 1.f, zero = 0.f;
    check(cudnnSetStream(be.cudnn(), stream), where_);
    check(cudnnConvolutionBackwardData(be.cudnn(), &one, desc_->w_, w, desc_->y_, x, desc_->conv_,
                                       algo_, be.workspace().ptr(), workspace_, &zero, desc_->x_,
                                       dst),
          where_);
    // The bias in the crop where the storage allows, else in the epilogue on Y.
    const bool bias_in_crop = cropped_ && !wide_.on;
    if (cropped_) {
      launch_crop_bias(compute_, crop_, dst, bias_in_crop ? bias : nullptr, y_compute, stream);
      check_launch(where_);
    }
    if (wide_.on) {
      launch_cast(compute_, y_compute, storage_, y, wide_.y_n, stream);
      check_launch(where_);
    }
    if (bias != nullptr && !bias_in_crop) {
      ConvEpilogue e;
      e.bias = bias;
      launch_conv_epilogue(storage_, y, batch_, channels_, spatial_, e, stream);
      check_launch(where_);
    }
  }

 private:
  std::string where_;
  Storage storage_ = Storage::kFloat32, compute_ = Storage::kFloat32;
  bool has_bias_ = false;
  int64_t batch_ = 0, channels_ = 0, spatial_ = 0;
  WorkspacePlan plan_;
  Widening wide_;
  bool cropped_ = false;  // cuDNN writes the unpadded result, Y is cut from it
  CropDesc crop_;
  size_t full_at_ = 0;
  std::unique_ptr<CudnnConv> desc_;
  cudnnConvolutionBwdDataAlgo_t algo_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  size_t workspace_ = 0;
};

std::string check_conv_transpose(const NodeContext& ctx) {
  std::string why = check_common(ctx);
  if (!why.empty()) return why;
  const Shape& w = ctx.input_shape(1);
  const ConvGeometry g =
      conv_transpose_geometry(ctx, ctx.input_shape(0), {w.dims().begin() + 2, w.dims().end()});
  for (int i = 0; i < g.spatial; ++i)
    if (g.pad_begin[i] < 0) return "negative begin padding";
  return "";
}

std::unique_ptr<Kernel> make_conv_transpose(const NodeContext& ctx) {
  return std::make_unique<ConvTransposeKernel>(ctx);
}

}  // namespace

bool conv_takes_nd(const NodeContext& ctx) {
  if (ctx.attr_int("channels_last", 0) != 0) return false;
  const Shape& x = ctx.input_shape(0);
  const Shape& w = ctx.input_shape(1);
  if (x.rank() != 4) return true;
  if (w.rank() != 4 || !w.is_static() || !x.is_static()) return false;
  const ConvGeometry g = window_geometry(ctx, x, {w[2], w[3]}, false);
  return g.pad_begin != g.pad_end;
}

std::string check_conv_nd(const NodeContext& ctx) {
  std::string why = check_common(ctx);
  if (!why.empty()) return why;
  UnaryOp op{};
  float a = 0.f, b = 0.f;
  if (ctx.op() == OpKind::kFusedConv && !fused_activation(ctx, &op, &a, &b))
    return "no activation '" + ctx.attr_string("activation", "") + "'";
  const Shape& w = ctx.input_shape(1);
  const ConvGeometry g =
      window_geometry(ctx, ctx.input_shape(0), {w.dims().begin() + 2, w.dims().end()}, false);
  for (int i = 0; i < g.spatial; ++i)
    if (g.pad_begin[i] < 0 || g.pad_end[i] < 0) return "negative padding";
  return "";
}

std::unique_ptr<Kernel> make_conv_nd(const NodeContext& ctx) {
  return std::make_unique<ConvNdKernel>(ctx);
}

LUMEN_REGISTER_CUDA_KERNEL(ConvTranspose, &make_conv_transpose, &check_conv_transpose);

}  // namespace lumen::cuda
