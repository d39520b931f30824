// Optimizer passes and the PassManager that runs them to a fixed point.
#pragma once

#include <memory>
#include <vector>

#include "lumen/graph.h"

namespace lumen {

// One graph rewrite. run() edits the graph in place and returns whether it changed anything; it
// leaves the graph valid (Graph::verify passes) and every graph output's name and value unchanged.
class Pass {
 public:
  virtual ~Pass() = default;
  // A short stable name for reports ("dead-code").
  virtual const char* name() const = 0;
  // Rewrites `graph`; true when something changed.
  virtual bool run(Graph& graph) = 0;
};

// Runs its passes in order, round after round, until a round changes nothing or kMaxRounds is
// reached; verifies the graph after each pass in debug builds and records PassStats per pass and
// round.
class PassManager {
 public:
  static constexpr int kMaxRounds = 8;
  // Appends a pass to the pipeline.
  void add(std::unique_ptr<Pass> pass);
  // Runs the pipeline on `graph`; returns one entry per pass run.
  std::vector<PassStats> run(Graph& graph);

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

// The passes, one per file in src/passes.
std::unique_ptr<Pass> make_dead_code_pass();
std::unique_ptr<Pass> make_identity_pass();
std::unique_ptr<Pass> make_cse_pass();
std::unique_ptr<Pass> make_conv_bn_fold_pass();
std::unique_ptr<Pass> make_constant_fold_pass();
// Conv followed by an activation (Relu, LeakyRelu, Clip with constant bounds, Sigmoid, Tanh,
// HardSwish) that is its only reader becomes one FusedConv: one kernel call, no extra pass over
// the output.
// With `cpu_only` (the graph runs on the CPU alone), pointwise convolutions in plain layout stay
// unfused (oneDNN runs them as a GEMM, where a post-op is a slow second pass); otherwise every
// convolution fuses. With `gated` (every backend has Swish and HardSwish epilogues: the CPU and
// CUDA), the gated forms exporters write, SiLU as Mul(y, Sigmoid(y)) and HardSwish as
// Mul(y, HardSigmoid(y)), fuse too.
std::unique_ptr<Pass> make_fuse_activation_pass(bool cpu_only = true, bool gated = true);
// Regions of two or more convolutions, with the element-wise ops, pools and concats between them,
// run on (N, H, W, C) tensors (channels_last=1), with a Transpose where a region begins or ends,
// so oneDNN reorders no activation per convolution.
std::unique_ptr<Pass> make_channels_last_pass();
// Mul(x, s), s one value per image and channel ([N or 1, 1, 1, C], a squeeze-and-excitation's
// gate), read only by a channels-last 1x1 stride-1 FusedConv with known weights, becomes that
// convolution with s as its fifth input: the CPU scales the pixels as its GEMM packs them, instead
// of a pass of its own over them (CPU-only graphs).
std::unique_ptr<Pass> make_fuse_channel_scale_pass();
// Add(conv(x), z) over a convolution without activation becomes a FusedConv with z as a residual
// input. With `cpu_only` only channels-last FusedConvs take it (a oneDNN sum post-op); otherwise
// any 2-D convolution does (the CUDA kernel's epilogue). With `matmul_residual` (always with
// `cpu_only`) a FusedMatMul without activation takes z too.
std::unique_ptr<Pass> make_fuse_residual_pass(bool cpu_only = true, bool matmul_residual = false);
// LayerNormalization over the last axis of a FusedMatMul's output, reached directly or through
// Reshapes only it reads (the product of [S N, E] rows seen as [S, N, E]), with its statistics
// outputs unused, becomes that FusedMatMul's norm epilogue (inputs 4 and 5, `norm_epsilon`): one
// launch on CUDA sums the product's K slices and normalizes each row. For graphs whose every
// backend has the epilogue (the CPU and CUDA).
std::unique_ptr<Pass> make_fuse_matmul_norm_pass();
// BatchNormalization with constant parameters that no convolution absorbed becomes a per-channel
// Mul and Add (so it joins channels-last regions and element-wise fusion).
std::unique_ptr<Pass> make_bn_to_affine_pass();
// The decomposed LayerNormalization exporters write for opsets before 17 (ReduceMean, Sub, Pow,
// ReduceMean, Add eps, Sqrt, Div, [Mul gamma], [Add beta]) becomes one LayerNormalization.
std::unique_ptr<Pass> make_fuse_layer_norm_pass();
// GELU written with Erf (exact) or Tanh (approximation) and elementary ops becomes one Gelu.
std::unique_ptr<Pass> make_fuse_gelu_pass();
// torch.roll's export, Concat(Slice(x, s:), Slice(x, :s)) on one axis, becomes one Gather through
// a constant index (fuse_roll.cc).
std::unique_ptr<Pass> make_fuse_roll_pass();
// Reshape(Add(Reshape(Y), C)) back to Y's shape, C a constant, becomes Add(Y, C as Y's shape),
// merged with a constant Y adds itself (fold_reshaped_add.cc): Swin's shifted-window mask.
std::unique_ptr<Pass> make_fold_reshaped_add_pass();
// Rotary embeddings written with rotate_half (x * cos + Concat(-x2, x1) * sin, the cos and sin of
// doubled angles) become one RotaryEmbedding (fuse_rotary.cc says which forms).
std::unique_ptr<Pass> make_fuse_rotary_pass();
// MatMul(Q, K^T) -> scale -> [Add mask] -> Softmax -> MatMul(., V) becomes one FusedAttention.
std::unique_ptr<Pass> make_fuse_attention_pass();
// MatMul -> Add(row bias) -> activation, and Gemm (alpha 1, row or no C) -> activation, become one
// FusedMatMul: bias and activation applied as the product is written (oneDNN bias + post-op).
std::unique_ptr<Pass> make_fuse_matmul_pass();
// A Transpose swapping the last two dimensions of a MatMul/FusedMatMul operand is dropped; the
// product reads that operand transposed (FusedMatMul trans_a / trans_b, strided, no copy).
std::unique_ptr<Pass> make_fold_transpose_pass();
// ConvNeXt's layout Transposes: LayerNormalization over the last axis of a Transpose that moved
// one axis last becomes AxisLayerNorm (writing channels-last, or the input's layout where the
// inverse Transpose follows it, which goes too); a FusedElementwise input made by a Transpose
// only it reads is read through it in place (`perms`). Where CUDA is among the backends.
std::unique_ptr<Pass> make_fold_layout_transposes_pass();
// ConvNeXt's channels-last MLP (Transpose -> LayerNorm -> FusedMatMul -> FusedMatMul -> Transpose
// back [-> layer-scale Mul]) as AxisLayerNorm over the channel axis and two 1x1 convolutions in
// the input's own layout, the layer scale folded into the second; its residual Add then fuses into
// that convolution. Where CUDA is among the backends.
std::unique_ptr<Pass> make_fold_channels_last_mlp_pass();
// Convolutions of one input whose outputs only a channel Concat reads, in order (SqueezeNet's
// expand 1x1 and 3x3), become one convolution with each weight centred in the largest kernel, where
// that at most doubles their multiply-adds. Where CUDA is among the backends (a launch and the
// Concat's copy saved; on the CPU the extra multiply-adds cost more).
std::unique_ptr<Pass> make_fuse_sibling_convs_pass();
// ShuffleNet's channel shuffle ([Concat] -> Reshape -> Transpose -> Reshape [-> equal Slices or
// Split] along one axis) becomes one ChannelShuffle: a single copy instead of four or five.
std::unique_ptr<Pass> make_fuse_channel_shuffle_pass();
// FusedAttention whose Q, K and V are Slices, Reshapes and Transposes of other tensors, or whose
// result is transposed and reshaped, becomes a StridedAttention that reads and writes those
// layouts in place. With `whole_batches_only` (CUDA among the backends), only where Q has one index
// before its heads and more than a decoding step's few rows.
std::unique_ptr<Pass> make_attention_views_pass(bool whole_batches_only = false);

// Grouped-query attention: a FusedAttention whose K and V are both key/value heads repeated G
// times (Unsqueeze, Expand, Reshape: Llama's repeat_kv) reads the unrepeated heads with
// kv_group = G instead.
std::unique_ptr<Pass> make_fold_kv_group_pass();

// MatMuls of one input by constant 2-D weights (query, key and value projections) become one
// GroupedMatMul with an output per weight.
std::unique_ptr<Pass> make_group_matmuls_pass();
// Concat -> per-channel Mul -> per-channel Add [-> Relu] (DenseNet's Concat -> BatchNormalization
// -> ReLU once bn-to-affine has run) becomes one FusedConcat: the pieces read once, written
// scaled, shifted and rectified.
std::unique_ptr<Pass> make_fuse_concat_pass();
// Trees of two or more float32 element-wise ops whose inner values have one reader each become
// one FusedElementwise: the whole tree computed in one pass over the output.
std::unique_ptr<Pass> make_fuse_elementwise_pass();
// DequantizeLinear(x_q), DequantizeLinear(w_q) [, bias] -> Conv | MatMul | Gemm [-> Relu] ->
// QuantizeLinear (ONNX Runtime's QDQ format) becomes one QLinearConv or QLinearMatMul where the
// rewrite is exact (fuse_qdq.cc says when); runs before constant folding, which would otherwise
// turn the weights' DequantizeLinear into float constants.
std::unique_ptr<Pass> make_fuse_qdq_pass();
// MatMul(A, DequantizeLinear(w_q, scale, zero_point) with block_size, blocks along K) over a
// constant 2-D int4/uint4/int8/uint8 weight becomes one MatMulNBits (fuse_block_dequant.cc says
// when); runs before constant folding, which would otherwise make the weights float constants.
// A MatMulNBits whose only reader adds a constant row bias then takes it as its bias input.
std::unique_ptr<Pass> make_fuse_block_dequant_pass();

}  // namespace lumen
