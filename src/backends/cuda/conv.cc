// Conv and FusedConv (2-D, float32 or float16 with float32 accumulation; 1-D, 3-D and asymmetric
// padding go to conv_nd.cc). FusedConv's bias,
// residual (fourth input, added before the activation) and activation make an epilogue. At compile
// time each node measures its ways to run on its own shapes and keeps the fastest:
//   - cuDNN's convolution (the algorithm found by cudnnFindConvolutionForwardAlgorithm among
//     FMA-only kernels, so float32 stays exact: no TF32 unless the compile asks for it), then the
//     epilogue as one launch of our own kernel (none when there is nothing to add);
//   - cudnnConvolutionBiasActivationForward, which applies bias, residual and ReLU (or nothing) in
//     the same call, with the found algorithm or implicit-precomp GEMM (the only one it takes
//     without an activation);
//   - our direct depthwise kernel (group == input channels) with the epilogue fused, and for
//     3x3, 5x5 and 7x7 windows at stride 1 another that stages each block's input tile in shared
//     memory first (depthwise_staged.h; ConvNeXt's 7x7);
//   - for pointwise convolutions (1x1, stride 1, no padding, one group), a cuBLASLt GEMM per image
//     (W[Cout, Cin] x X[Cin, H*W]) and then the epilogue;
//   - for other one-group convolutions, im2col into the workspace, that GEMM, the epilogue;
//   - for float32 pointwise convolutions, our tiled GEMM with the epilogue in the same launch
//     (pointwise_conv.h), in two tile shapes; and at batch 1 with a long input-channel axis, the
//     GEMM's K in 2, 4, 8 or 16 slices as one batched cuBLASLt product whose partial results one
//     launch sums with the epilogue (sliced_matmul.h): a 7x7 image's 960 -> 160 channels keep
//     few blocks busy as one product.
// Each way is timed as a CUDA graph replay, as the Executable runs it, so host launch costs
// (large for cuDNN's calls) do not count. Measured on an H100, the fused cuDNN call is much slower
// than conv + epilogue on some shapes (1x1 convolutions at batch 1) and faster on others, and
// cuDNN's float32 kernels lose to a GEMM on 1x1 convolutions over small images, so no one way is
// right everywhere.
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/cuda/conv_nd.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/depthwise_staged.h"
#include "backends/cuda/launch.h"
#include "backends/cuda/lt_matmul.h"
#include "backends/cuda/pointwise_conv.h"
#include "backends/cuda/sliced_matmul.h"
#include "graph/schemas/conv_geometry.h"

namespace lumen::cuda {
namespace {

constexpr size_t kMaxWorkspace = size_t{256} << 20;
constexpr size_t kMaxColumnBytes = size_t{64} << 20;

enum class ConvPath {
  kCudnnThenEpilogue,
  kCudnnFused,
  kDepthwise,
  kDepthwiseStaged,
  kPointwiseGemm,
  kIm2colGemm,
  kPointwiseWide,
  kPointwiseTall,
  kPointwiseSliced
};

// One way to run a convolution: the path, cuDNN's algorithm (for the cuDNN paths), the workspace
// it needs and, for kPointwiseSliced, its slice count.
struct ConvWay {
  ConvPath path;
  cudnnConvolutionFwdAlgo_t algo;
  size_t workspace;
  int slices = 0;
};

class ConvKernel final : public Kernel {
 public:
  explicit ConvKernel(const NodeContext& ctx) : where_(ctx.where()) {
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
    has_residual_ = ctx.num_inputs() > 3 && ctx.has_input(3);
    act_ = {UnaryOp::kIdentity, 0.f, 0.f};
    if (ctx.op() == OpKind::kFusedConv && !fused_activation(ctx, &act_.op, &act_.alpha, &act_.beta))
      ctx.fail_unsupported("CUDA: activation '" + ctx.attr_string("activation", "") + "'");
    channels_ = y[1];
    spatial_ = y[2] * y[3];
    batch_ = y[0];
    const int64_t group = ctx.attr_int("group", 1);
    storage_ = storage_of(ctx.input_dtype(0));
    const bool half = storage_ != Storage::kFloat32;
    const cudnnDataType_t type = storage_ == Storage::kFloat16    ? CUDNN_DATA_HALF
                                 : storage_ == Storage::kBFloat16 ? CUDNN_DATA_BFLOAT16
                                                                  : CUDNN_DATA_FLOAT;

    auto d = [](int64_t v) { return static_cast<int>(v); };
    check(cudnnCreateTensorDescriptor(&x_), where_);
    check(cudnnCreateTensorDescriptor(&y_), where_);
    check(cudnnCreateTensorDescriptor(&b_), where_);
    check(cudnnCreateFilterDescriptor(&w_), where_);
    check(cudnnCreateConvolutionDescriptor(&conv_), where_);
    check(cudnnCreateActivationDescriptor(&relu_desc_), where_);
    check(
        cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, type, d(x[0]), d(x[1]), d(x[2]), d(x[3])),
        where_);
    check(
        cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, type, d(y[0]), d(y[1]), d(y[2]), d(y[3])),
        where_);
    check(cudnnSetTensor4dDescriptor(b_, CUDNN_TENSOR_NCHW, type, 1, d(y[1]), 1, 1), where_);
    check(
        cudnnSetFilter4dDescriptor(w_, type, CUDNN_TENSOR_NCHW, d(w[0]), d(w[1]), d(w[2]), d(w[3])),
        where_);
    check(cudnnSetConvolution2dDescriptor(
              conv_, d(g.pad_begin[0]), d(g.pad_begin[1]), d(g.strides[0]), d(g.strides[1]),
              d(g.dilations[0]), d(g.dilations[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          where_);
    check(cudnnSetConvolutionGroupCount(conv_, d(group)), where_);
    // TF32 (CompileOptions::precision) lets cuDNN take its tensor-core algorithms; float16 data
    // (accumulated in float32, the convolution's compute type above) always may.
    const bool tensor_ops = half || ctx.precision() == Precision::kTF32;
    check(cudnnSetConvolutionMathType(conv_, tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
          where_);
    const bool relu = act_.op == UnaryOp::kRelu;
    check(cudnnSetActivationDescriptor(relu_desc_,
                                       relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                       CUDNN_NOT_PROPAGATE_NAN, 0.0),
          where_);

    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    // For 16-bit storage cuDNN may have no algorithm for some geometry (bfloat16 in particular):
    // the other ways below remain.
    const cudnnStatus_t find = cudnnFindConvolutionForwardAlgorithm(
        be.cudnn(), x_, w_, conv_, y_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf);
    if (find != CUDNN_STATUS_SUCCESS) {
      if (!half) check(find, where_ + ": find algorithm");
      found = 0;
    }
    // The fastest usable algorithm, and the fastest implicit-precomp-GEMM one.
    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    const cudnnConvolutionFwdAlgoPerf_t* precomp = nullptr;
    for (int i = 0; i < found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
      const bool exact =
          perf[i].mathType == CUDNN_FMA_MATH || perf[i].mathType == CUDNN_DEFAULT_MATH;
      if (!exact && !(tensor_ops && perf[i].mathType == CUDNN_TENSOR_OP_MATH)) continue;
      if (best == nullptr) best = &perf[i];
      if (precomp == nullptr && perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
        precomp = &perf[i];
    }
    const bool depthwise = group == x[1] && group > 1 && w[1] == 1 && y[1] % x[1] == 0;
    {
      geo_.batch = x[0];
      geo_.in_channels = x[1];
      geo_.multiplier = depthwise ? y[1] / x[1] : 1;
      geo_.in_h = x[2];
      geo_.in_w = x[3];
      geo_.out_h = y[2];
      geo_.out_w = y[3];
      geo_.k_h = d(w[2]);
      geo_.k_w = d(w[3]);
      geo_.stride_h = d(g.strides[0]);
      geo_.stride_w = d(g.strides[1]);
      geo_.pad_h = d(g.pad_begin[0]);
      geo_.pad_w = d(g.pad_begin[1]);
      geo_.dil_h = d(g.dilations[0]);
      geo_.dil_w = d(g.dilations[1]);
    }

    // The candidates, each timed on scratch tensors of the node's shapes.
    std::vector<ConvWay> candidates;
    if (best != nullptr) {
      candidates.push_back({ConvPath::kCudnnThenEpilogue, best->algo, best->memory});
      // The fused call applies bias, residual and ReLU only; without ReLU it takes implicit
      // precomp GEMM alone. Offered for float32 and float16 (bias in y's type), not bfloat16.
      const bool fusable =
          storage_ != Storage::kBFloat16 && (act_.op == UnaryOp::kIdentity || relu);
      if (fusable && (has_bias_ || has_residual_ || relu)) {
        if (relu) candidates.push_back({ConvPath::kCudnnFused, best->algo, best->memory});
        if (precomp != nullptr && (precomp != best || !relu))
          candidates.push_back({ConvPath::kCudnnFused, precomp->algo, precomp->memory});
      }
    }
    if (depthwise) candidates.push_back({ConvPath::kDepthwise, algo_, 0});
    if (depthwise && depthwise_staged_supports(geo_))
      candidates.push_back({ConvPath::kDepthwiseStaged, algo_, 0});
    // One-group convolutions as one GEMM per image, Y[Cout, HW] = W[Cout, C*KH*KW] X'[C*KH*KW, HW]:
    // pointwise ones read X itself; the others read its patches as columns (im2col) in the
    // workspace after the GEMM's own, while those stay within kMaxColumnBytes. Grouped ones
    // (other than depthwise) as one GEMM per image batched over the groups, group g's weights
    // times its block of the columns, so that every grouped convolution has a way that does not
    // depend on cuDNN (which refuses some in 16-bit storage).
    const bool pointwise = group == 1 && w[2] == 1 && w[3] == 1 && g.strides[0] == 1 &&
                           g.strides[1] == 1 && g.pad_begin[0] == 0 && g.pad_begin[1] == 0;
    const int64_t patch = x[1] * w[2] * w[3];
    const size_t col_bytes =
        static_cast<size_t>(batch_ * patch * spatial_) * storage_bytes(storage_);
    group_ = group;
    if (!depthwise && (pointwise || col_bytes <= kMaxColumnBytes)) {
      GemmShape gs;
      gs.m = y[1] / group;
      gs.k = patch / group;
      gs.n = spatial_;
      if (group == 1) {
        gs.batch = batch_;
        gs.stride_x = 0;
        gs.stride_w = patch * spatial_;
        gs.stride_y = y[1] * spatial_;
      } else {
        gs.batch = group;
        gs.stride_x = gs.m * gs.k;
        gs.stride_w = gs.k * spatial_;
        gs.stride_y = gs.m * spatial_;
      }
      try {
        gemm_ = std::make_unique<LtMatmul>(ctx, gs, false);
        if (pointwise) {
          candidates.push_back({ConvPath::kPointwiseGemm, algo_, gemm_->workspace_size()});
        } else {
          col_offset_ = (gemm_->workspace_size() + 255) / 256 * 256;
          candidates.push_back({ConvPath::kIm2colGemm, algo_, col_offset_ + col_bytes});
        }
      } catch (const UnsupportedOp&) {
        gemm_.reset();
      }
    }
    if (pointwise && storage_ == Storage::kFloat32 && batch_ < 65536) {
      candidates.push_back({ConvPath::kPointwiseWide, algo_, 0});
      candidates.push_back({ConvPath::kPointwiseTall, algo_, 0});
    }
    if (pointwise && gemm_) {
      for (int slices : {2, 4, 8, 16}) {
        std::unique_ptr<SlicedMatmul> sliced =
            SlicedMatmul::with_slices(*gemm_, slices, true, act_.op, act_.alpha, act_.beta);
        if (!sliced) continue;
        candidates.push_back(
            {ConvPath::kPointwiseSliced, algo_, sliced->workspace_bytes(), slices});
        sliced_.push_back(std::move(sliced));
      }
    }
    if (candidates.empty()) ctx.fail_unsupported("CUDA: cuDNN found no algorithm");
    size_t most = 0;
    for (const ConvWay& c : candidates) most = std::max(most, c.workspace);
    be.workspace().reserve(most);
    use(candidates.size() == 1 ? candidates.front() : fastest(be, candidates, x, w, y));
    if (path_ != ConvPath::kPointwiseGemm && path_ != ConvPath::kIm2colGemm) gemm_.reset();
    // Only the slicing taken stays.
    std::erase_if(sliced_,
                  [&](const std::unique_ptr<SlicedMatmul>& m) { return m.get() != slicing_; });
  }

  ~ConvKernel() override {
    if (x_) cudnnDestroyTensorDescriptor(x_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (b_) cudnnDestroyTensorDescriptor(b_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (relu_desc_) cudnnDestroyActivationDescriptor(relu_desc_);
  }

  // The way chosen, then every way measured (graph-replay time per run).
  std::string describe() const override {
    std::string out = path_name(path_, algo_, slicing_ != nullptr ? slicing_->slices() : 0);
    if (measured_.size() > 1) {
      out += "; measured:";
      for (const Measured& m : measured_) {
        char ms[32];
        std::snprintf(ms, sizeof ms, " %.4f ms", m.ms);
        out += " " + path_name(m.path, m.algo, m.slices) + ms + ",";
      }
      out.pop_back();
    }
    return out;
  }

  void run(KernelContext& ctx) const override {
    if (batch_ * channels_ * spatial_ == 0) return;
    CudaBackend& be = require_cuda_backend();
    cudaStream_t stream = stream_of(ctx);
    if (path_ == ConvPath::kCudnnFused || path_ == ConvPath::kCudnnThenEpilogue)
      check(cudnnSetStream(be.cudnn(), stream), where_);
    launch(be, stream, ctx.inputs[0].raw_data(), ctx.inputs[1].raw_data(),
           has_bias_ ? ctx.inputs[2].raw_data() : nullptr,
           has_residual_ ? ctx.inputs[3].raw_data() : nullptr, ctx.outputs[0].raw_data());
  }

 private:
  // The candidates, each timed on scratch tensors of the node's shapes, on a stream of its own so
  // that a capture there cannot catch other work; returns the fastest (and keeps every time for
  // describe()).
  ConvWay fastest(CudaBackend& be, const std::vector<ConvWay>& candidates, const Shape& x,
                  const Shape& w, const Shape& y) {
    const Device dev = Device::cuda();
    const DType t = dtype_of(storage_);
    Tensor sx = Tensor::zeros(x, t, dev), sw = Tensor::zeros(w, t, dev);
    Tensor sy = Tensor::zeros(y, t, dev);
    Tensor sb = has_bias_ ? Tensor::zeros(Shape{y[1]}, t, dev) : Tensor();
    Tensor sz = has_residual_ ? Tensor::zeros(y, t, dev) : Tensor();
    if (!has_bias_) zero_bias_ = Tensor::zeros(Shape{y[1]}, t, dev);
    check(cudaStreamSynchronize(be.stream().handle()), where_);  // the scratch zeros
    TimingStream own(where_);
    check(cudnnSetStream(be.cudnn(), own.handle), where_);
    size_t chosen = 0;
    for (size_t k = 0; k < candidates.size(); ++k) {
      use(candidates[k]);
      float ms = std::numeric_limits<float>::infinity();
      try {
        ms = time_on_stream(
            own.handle,
            [&] {
              launch(be, own.handle, sx.raw_data(), sw.raw_data(),
                     has_bias_ ? sb.raw_data() : nullptr, has_residual_ ? sz.raw_data() : nullptr,
                     sy.raw_data());
            },
            where_.c_str());
      } catch (const DeviceError&) {
        // cuDNN refused this way's parameters (its fused call takes fewer 16-bit geometries than
        // it reports): not a candidate. The refusal comes before any work is enqueued; leave the
        // stream out of capture in any case.
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(own.handle, &capturing) == cudaSuccess &&
            capturing != cudaStreamCaptureStatusNone) {
          cudaGraph_t partial = nullptr;
          cudaStreamEndCapture(own.handle, &partial);
          if (partial != nullptr) cudaGraphDestroy(partial);
        }
        cudaGetLastError();
      }
      measured_.push_back({candidates[k].path, candidates[k].algo, ms, candidates[k].slices});
      if (ms < measured_[chosen].ms) chosen = k;
    }
    if (!(measured_[chosen].ms < std::numeric_limits<float>::infinity()))
      throw DeviceError(where_ + ": no way to run this convolution worked");
    check(cudaStreamSynchronize(own.handle), where_);
    check(cudnnSetStream(be.cudnn(), be.stream().handle()), where_);
    return candidates[chosen];
  }

  // Runs `way` from now on (launch() reads these).
  void use(const ConvWay& way) {
    path_ = way.path;
    algo_ = way.algo;
    workspace_ = way.workspace;
    slicing_ = nullptr;
    for (const std::unique_ptr<SlicedMatmul>& m : sliced_)
      if (way.path == ConvPath::kPointwiseSliced && m->slices() == way.slices) slicing_ = m.get();
  }

  void launch(CudaBackend& be, cudaStream_t stream, const void* x, const void* w, const void* bias,
              const void* residual, void* y) const {
    const float one = 1.f, zero = 0.f;
    ConvEpilogue e{bias, residual, act_.op, act_.alpha, act_.beta};
    switch (path_) {
      case ConvPath::kDepthwise:
        launch_depthwise_conv(storage_, geo_, x, w, y, e, stream);
        check_launch(where_);
        return;
      case ConvPath::kDepthwiseStaged:
        launch_depthwise_staged(storage_, geo_, x, w, y, e, stream);
        check_launch(where_);
        return;
      case ConvPath::kPointwiseSliced:
        slicing_->run(stream, w, x, bias, residual, y);
        check_launch(where_);
        return;
      case ConvPath::kPointwiseWide:
      case ConvPath::kPointwiseTall:
        launch_pointwise_conv(
            path_ == ConvPath::kPointwiseWide ? PointwiseTile::kWide : PointwiseTile::kTall,
            static_cast<const float*>(x), static_cast<const float*>(w), static_cast<float*>(y),
            batch_, channels_, geo_.in_channels, spatial_, e, stream);
        check_launch(where_);
        return;
      case ConvPath::kCudnnFused: {
        // y = act(conv(x) + alpha2 * z + bias); with no residual, z is y and alpha2 is 0.
        const float alpha2 = residual != nullptr ? 1.f : 0.f;
        const void* z = residual != nullptr ? residual : y;
        check(cudnnConvolutionBiasActivationForward(
                  be.cudnn(), &one, x_, x, w_, w, conv_, algo_, be.workspace().ptr(), workspace_,
                  &alpha2, y_, z, b_, bias != nullptr ? bias : zero_bias_.raw_data(), relu_desc_,
                  y_, y),
              where_);
        return;
      }
      case ConvPath::kIm2colGemm: {
        void* col = static_cast<char*>(be.workspace().ptr()) + col_offset_;
        launch_im2col(storage_, geo_, x, col, stream);
        check_launch(where_);
        if (group_ == 1) {
          gemm_->run(stream, w, col, nullptr, nullptr, y, 1.f, 0.f);
          break;
        }
        // Grouped: one GEMM batched over the groups per image.
        const size_t es = storage_bytes(storage_);
        const size_t col_image =
            static_cast<size_t>(geo_.in_channels * geo_.k_h * geo_.k_w * spatial_) * es;
        const size_t y_image = static_cast<size_t>(channels_ * spatial_) * es;
        for (int64_t n = 0; n < batch_; ++n)
          gemm_->run(stream, w, static_cast<const char*>(col) + n * col_image, nullptr, nullptr,
                     static_cast<char*>(y) + n * y_image, 1.f, 0.f);
        break;
      }
      case ConvPath::kPointwiseGemm:
        gemm_->run(stream, w, x, nullptr, nullptr, y, 1.f, 0.f);
        break;
      case ConvPath::kCudnnThenEpilogue:
        check(cudnnConvolutionForward(be.cudnn(), &one, x_, x, w_, w, conv_, algo_,
                                      be.workspace().ptr(), workspace_, &zero, y_, y),
              where_);
        break;
    }
    // The GEMM and plain-cuDNN ways finish with the epilogue, when there is one.
    if (bias != nullptr || residual != nullptr || act_.op != UnaryOp::kIdentity) {
      launch_conv_epilogue(storage_, y, batch_, channels_, spatial_, e, stream);
      check_launch(where_);
    }
  }

  static std::string path_name(ConvPath path, cudnnConvolutionFwdAlgo_t algo, int slices) {
    static const char* const kAlgos[] = {
        "implicit-gemm", "implicit-precomp-gemm", "gemm", "direct", "fft", "fft-tiling",
        "winograd",      "winograd-nonfused"};
    const int a = static_cast<int>(algo);
    const std::string cudnn =
        std::string("cudnn ") + (a >= 0 && a < 8 ? kAlgos[a] : std::to_string(a).c_str());
    switch (path) {
      case ConvPath::kCudnnThenEpilogue:
        return cudnn + " + epilogue";
      case ConvPath::kCudnnFused:
        return cudnn + " fused bias/residual/relu";
      case ConvPath::kDepthwise:
        return "depthwise kernel";
      case ConvPath::kDepthwiseStaged:
        return "depthwise kernel staged in shared memory";
      case ConvPath::kPointwiseGemm:
        return "cublasLt gemm + epilogue";
      case ConvPath::kIm2colGemm:
        return "im2col + cublasLt gemm + epilogue";
      case ConvPath::kPointwiseWide:
        return "pointwise kernel 32x64";
      case ConvPath::kPointwiseTall:
        return "pointwise kernel 64x16";
      case ConvPath::kPointwiseSliced:
        return "cublasLt gemm in " + std::to_string(slices) + " k slices + summing epilogue";
    }
    return "";
  }

  struct Measured {
    ConvPath path;
    cudnnConvolutionFwdAlgo_t algo;
    float ms;
    int slices;
  };

  struct Activation {
    UnaryOp op;
    float alpha, beta;
  };

  std::string where_;
  bool has_bias_ = false, has_residual_ = false;
  Activation act_{UnaryOp::kIdentity, 0.f, 0.f};
  int64_t batch_ = 0, channels_ = 0, spatial_ = 0, group_ = 1;
  Storage storage_ = Storage::kFloat32;
  ConvPath path_ = ConvPath::kCudnnThenEpilogue;
  Conv2dDesc geo_;
  size_t col_offset_ = 0;  // im2col: where the columns start in the workspace
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, b_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t relu_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_ = 0;
  Tensor zero_bias_;  // for the fused cuDNN call when the node has no bias
  std::vector<Measured> measured_;
  std::unique_ptr<LtMatmul> gemm_;                     // pointwise convolutions: the GEMM candidate
  std::vector<std::unique_ptr<SlicedMatmul>> sliced_;  // its slicings (the one taken, once chosen)
  const SlicedMatmul* slicing_ = nullptr;              // kPointwiseSliced: the one in use
};

std::string check_conv(const NodeContext& ctx) {
  if (conv_takes_nd(ctx)) return check_conv_nd(ctx);
  std::string why = require_float(ctx);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() != 4) return "2-D convolution only";
  if (ctx.attr_int("channels_last", 0) != 0) return "the channels-last form is the CPU's";
  UnaryOp op{};
  float a = 0.f, b = 0.f;
  if (ctx.op() == OpKind::kFusedConv && !fused_activation(ctx, &op, &a, &b))
    return "no activation '" + ctx.attr_string("activation", "") + "'";
  if (!ctx.output(0).shape.is_static()) return "the output shape is known only at run time";
  const Shape& w = ctx.input_shape(1);
  if (w.rank() != 4) return "a 4-D weight";
  ConvGeometry g = window_geometry(ctx, ctx.input_shape(0), {w[2], w[3]}, false);
  for (int i = 0; i < 2; ++i)
    if (g.pad_begin[i] != g.pad_end[i]) return "asymmetric padding";
  return "";
}

std::unique_ptr<Kernel> make_conv(const NodeContext& ctx) {
  if (conv_takes_nd(ctx)) return make_conv_nd(ctx);
  return std::make_unique<ConvKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(Conv, &make_conv, &check_conv);
LUMEN_REGISTER_CUDA_KERNEL(FusedConv, &make_conv, &check_conv);

}  // namespace lumen::cuda
