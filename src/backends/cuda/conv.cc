// Conv and FusedConv (2-D, float32) through cuDNN 9's convolution API. The algorithm is measured
// once at compile time (cudnnFindConvolutionForwardAlgorithm) among FMA-only kernels, so float32
// stays exact (no TF32). Bias + ReLU run inside cudnnConvolutionBiasActivationForward; other
// fused activations (Clip, HardSwish, ...) are one element-wise launch over the output.
#include <mutex>
#include <optional>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::cuda {
namespace {

constexpr size_t kMaxWorkspace = size_t{256} << 20;

class CudnnConvKernel final : public Kernel {
 public:
  explicit CudnnConvKernel(const NodeContext& ctx) : where_(ctx.where()) {
    CudaBackend& be = require_cuda_backend();
    const Shape& x = ctx.input_shape(0);
    const Shape& w = ctx.input_shape(1);
    const Shape& y = ctx.output(0).shape;
    if (y.numel() == 0) return;
    std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
    ConvGeometry g = window_geometry(ctx, x, kernel, false);
    for (int i = 0; i < 2; ++i)
      if (g.pad_begin[i] != g.pad_end[i]) ctx.fail_unsupported("CUDA: asymmetric padding");
    has_bias_ = ctx.has_input(2);
    std::string act = ctx.op() == OpKind::kFusedConv ? ctx.attr_string("activation", "") : "";
    relu_ = act == "Relu";
    if (!act.empty() && !relu_) {
      float a = ctx.attr_float("activation_alpha", 0.f), b = ctx.attr_float("activation_beta", 0.f);
      if (act == "LeakyRelu")
        post_ = {UnaryOp::kLeakyRelu, a, 0.f};
      else if (act == "Clip")
        post_ = {UnaryOp::kClip, a, b};
      else if (act == "Sigmoid")
        post_ = {UnaryOp::kSigmoid, 0.f, 0.f};
      else if (act == "Tanh")
        post_ = {UnaryOp::kTanh, 0.f, 0.f};
      else if (act == "HardSwish")
        post_ = {UnaryOp::kHardSwish, 0.f, 0.f};
      else
        ctx.fail_unsupported("CUDA: activation '" + act + "'");
    }
    out_numel_ = y.numel();
    auto d = [](int64_t v) { return static_cast<int>(v); };
    check(cudnnCreateTensorDescriptor(&x_), where_);
    check(cudnnCreateTensorDescriptor(&y_), where_);
    check(cudnnCreateTensorDescriptor(&b_), where_);
    check(cudnnCreateFilterDescriptor(&w_), where_);
    check(cudnnCreateConvolutionDescriptor(&conv_), where_);
    check(cudnnCreateActivationDescriptor(&act_), where_);
    check(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d(x[0]), d(x[1]),
                                     d(x[2]), d(x[3])),
          where_);
    check(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d(y[0]), d(y[1]),
                                     d(y[2]), d(y[3])),
          where_);
    check(cudnnSetTensor4dDescriptor(b_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, d(y[1]), 1, 1),
          where_);
    check(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d(w[0]), d(w[1]),
                                     d(w[2]), d(w[3])),
          where_);
    check(cudnnSetConvolution2dDescriptor(
              conv_, d(g.pad_begin[0]), d(g.pad_begin[1]), d(g.strides[0]), d(g.strides[1]),
              d(g.dilations[0]), d(g.dilations[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          where_);
    check(cudnnSetConvolutionGroupCount(conv_, d(ctx.attr_int("group", 1))), where_);
    check(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH), where_);
    check(cudnnSetActivationDescriptor(act_,
                                       relu_ ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                       CUDNN_NOT_PROPAGATE_NAN, 0.0),
          where_);

    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    check(cudnnFindConvolutionForwardAlgorithm(be.cudnn(), x_, w_, conv_, y_,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf),
          where_ + ": find algorithm");
    // The fastest usable algorithm, and the fastest implicit-precomp-GEMM one:
    // cudnnConvolutionBiasActivationForward runs an identity activation only with the latter, so
    // a bias with no ReLU is fused only when that costs less than one more launch (cudnnAddTensor).
    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    const cudnnConvolutionFwdAlgoPerf_t* precomp = nullptr;
    for (int i = 0; i < found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
      if (perf[i].mathType != CUDNN_FMA_MATH && perf[i].mathType != CUDNN_DEFAULT_MATH) continue;
      if (best == nullptr) best = &perf[i];
      if (precomp == nullptr && perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
        precomp = &perf[i];
    }
    constexpr float kLaunchMs = 0.003f;
    bool chosen = best != nullptr;
    if (chosen) {
      const cudnnConvolutionFwdAlgoPerf_t* use = best;
      if (has_bias_ && !relu_) {
        if (precomp != nullptr && precomp->time <= best->time + kLaunchMs)
          use = precomp;
        else
          separate_bias_ = true;
      }
      algo_ = use->algo;
      workspace_ = use->memory;
    }
    if (!chosen) ctx.fail_unsupported("CUDA: cuDNN found no algorithm");
    be.workspace().reserve(workspace_);
  }

  ~CudnnConvKernel() override {
    if (x_) cudnnDestroyTensorDescriptor(x_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (b_) cudnnDestroyTensorDescriptor(b_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (act_) cudnnDestroyActivationDescriptor(act_);
  }

  void run(KernelContext& ctx) const override {
    if (out_numel_ == 0) return;
    CudaBackend& be = require_cuda_backend();
    cudaStream_t stream = stream_of(ctx);
    check(cudnnSetStream(be.cudnn(), stream), where_);
    const float one = 1.f, zero = 0.f;
    void* y = ctx.outputs[0].raw_data();
    if (separate_bias_) {
      check(cudnnConvolutionForward(be.cudnn(), &one, x_, ctx.inputs[0].raw_data(), w_,
                                    ctx.inputs[1].raw_data(), conv_, algo_, be.workspace().ptr(),
                                    workspace_, &zero, y_, y),
            where_);
      check(cudnnAddTensor(be.cudnn(), &one, b_, ctx.inputs[2].raw_data(), &one, y_, y), where_);
    } else if (has_bias_ || relu_) {
      // With no bias, a ReLU still fuses: the bias is a zero-length add (z = y, alpha2 = 0).
      const void* bias = has_bias_ ? ctx.inputs[2].raw_data() : zero_bias(ctx);
      check(cudnnConvolutionBiasActivationForward(
                be.cudnn(), &one, x_, ctx.inputs[0].raw_data(), w_, ctx.inputs[1].raw_data(), conv_,
                algo_, be.workspace().ptr(), workspace_, &zero, y_, y, b_, bias, act_, y_, y),
            where_);
    } else {
      check(cudnnConvolutionForward(be.cudnn(), &one, x_, ctx.inputs[0].raw_data(), w_,
                                    ctx.inputs[1].raw_data(), conv_, algo_, be.workspace().ptr(),
                                    workspace_, &zero, y_, y),
            where_);
    }
    if (post_.has_value()) {
      launch_unary(post_->op, post_->alpha, post_->beta, static_cast<float*>(y),
                   static_cast<float*>(y), out_numel_, stream);
      check_launch(where_);
    }
  }

 private:
  struct Post {
    UnaryOp op;
    float alpha, beta;
  };

  const void* zero_bias(const KernelContext& ctx) const {
    std::call_once(zero_once_, [&] {
      int64_t channels = ctx.outputs[0].shape()[1];
      zero_bias_ = Tensor::zeros(Shape{channels}, DType::kFloat32, Device::cuda());
    });
    return zero_bias_.raw_data();
  }

  std::string where_;
  bool has_bias_ = false, relu_ = false;
  bool separate_bias_ = false;  // bias added by cudnnAddTensor after the convolution
  std::optional<Post> post_;
  int64_t out_numel_ = 0;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, b_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_ = 0;
  mutable std::once_flag zero_once_;
  mutable Tensor zero_bias_;
};

std::string check_conv(const NodeContext& ctx) {
  std::string why = require_float32(ctx);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() != 4) return "2-D convolution only";
  if (ctx.attr_int("channels_last", 0) != 0) return "the channels-last form is the CPU's";
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) return "no residual input";
  if (ctx.op() == OpKind::kFusedConv && ctx.attr_string("activation", "") == "Swish")
    return "no Swish activation";
  if (!ctx.output(0).shape.is_static()) return "the output shape is known only at run time";
  return "";
}

std::unique_ptr<Kernel> make_conv(const NodeContext& ctx) {
  return std::make_unique<CudnnConvKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(Conv, &make_conv, &check_conv);
LUMEN_REGISTER_CUDA_KERNEL(FusedConv, &make_conv, &check_conv);

}  // namespace lumen::cuda
