// Launchers of the backend's own CUDA kernels (kernels.cu), in plain C++ types so that the kernel
// classes (.cc, compiled by the host compiler) need no CUDA C++.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cuda/index_check.h"

namespace lumen::cuda {

inline constexpr int kMaxRank = 8;

// The element type of a node's floating-point tensors on the GPU: every float input and output of
// one node has the same (the kernels compute in float32 and round once on store). Pointers to
// such tensors are `void*` below, read as float, __half or __nv_bfloat16 by `storage`.
enum class Storage : uint8_t { kFloat32, kFloat16, kBFloat16 };
inline size_t storage_bytes(Storage s) {
  return s == Storage::kFloat32 ? 4 : 2;
}

enum class UnaryOp {
  kIdentity,
  kRelu,
  kLeakyRelu,
  kSigmoid,
  kTanh,
  kGelu,
  kErf,
  kExp,
  kLog,
  kSqrt,
  kNeg,
  kAbs,
  kReciprocal,
  kClip,
  kHardSigmoid,
  kHardSwish,
  kFloor,
  kCeil,
  kSin,
  kCos,
  kSoftplus,
  kElu,
  kSwish,     // x * sigmoid(x)
  kGeluTanh,  // Gelu's tanh approximation (kGelu is the exact, erf form)
};
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kPow, kMin, kMax };

// y[i] = op(x[i]); alpha and beta are the op's parameters (LeakyRelu/Elu slope, Clip min/max,
// HardSigmoid alpha/beta).
void launch_unary(Storage st, UnaryOp op, float alpha, float beta, const void* x, void* y,
                  int64_t n, cudaStream_t stream);

// y[i] = x[i] converted from one storage to the other (Cast between float32, float16 and
// bfloat16; narrowing rounds to nearest even, overflowing to infinity).
void launch_cast(Storage from, const void* x, Storage to, void* y, int64_t n, cudaStream_t stream);

// The three TF32 parts of a float32 operand of a 3xTF32 product (lt_matmul.h, tf32_split.cu):
// src is rows x cols, rows ld apart (0: cols); each value v becomes big = tf32(v) and
// small = tf32(v - big), written as part p = small where bit p of small_mask is set, else big;
// the parts side by side along columns (dst rows x 3 cols) or along rows (3 rows x cols), packed.
void launch_tf32_split3(const float* src, int64_t rows, int64_t cols, int64_t ld, bool k_along_cols,
                        unsigned small_mask, float* dst, cudaStream_t stream);

// Broadcast binary op over an output of `rank` dims; a_strides/b_strides are element strides per
// output dim (0 where the input is broadcast).
struct BroadcastDesc {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};
void launch_binary(Storage st, BinaryOp op, const void* a, const void* b, void* y, int64_t n,
                   const BroadcastDesc& desc, cudaStream_t stream);

// y[o, c, i] = x[o, c, i] * scale[c] + shift[c]   (inference BatchNormalization; scale and
// shift are float32 whatever x's storage)
void launch_channel_affine(Storage st, const void* x, const float* scale, const float* shift,
                           void* y, int64_t outer, int64_t channels, int64_t inner,
                           cudaStream_t stream);

// What a convolution's output gets as it is finished: y = op(y + bias[c] + residual), each part
// optional (nullptr: none; kIdentity: no activation). bias and residual have y's storage.
struct ConvEpilogue {
  const void* bias = nullptr;      // [channels]
  const void* residual = nullptr;  // shaped like y
  UnaryOp op = UnaryOp::kIdentity;
  float alpha = 0.f, beta = 0.f;
};

// The epilogue over y in place, y being (outer, channels, inner).
void launch_conv_epilogue(Storage st, void* y, int64_t outer, int64_t channels, int64_t inner,
                          const ConvEpilogue& epilogue, cudaStream_t stream);

// y = op(sum of the `slices` float32 partial results + bias[c] + residual), y (outer, channels,
// inner) float32 and each partial shaped like it, packed one after another (slices * y's
// elements): the epilogue of a product whose inner dimension ran as `slices` products. The
// slices are summed in order.
void launch_slice_sum(const float* partials, int slices, float* y, int64_t outer, int64_t channels,
                      int64_t inner, const ConvEpilogue& epilogue, cudaStream_t stream);

// A LayerNormalization of each row after an epilogue: y = (v - mean) / sqrt(var + epsilon) *
// scale + bias over the row's n values (scale and bias float32 [n]; bias may be null).
struct RowNorm {
  const void* scale = nullptr;
  const void* bias = nullptr;
  float epsilon = 1e-5f;
};

// The largest row launch_slice_sum_norm takes.
inline constexpr int64_t kSliceNormMaxColumns = 1024;

// launch_slice_sum for y [rows, n] (the bias over n), then `norm` of each row: a block per row,
// the row in registers. n at most kSliceNormMaxColumns.
void launch_slice_sum_norm(const float* partials, int slices, float* y, int64_t rows, int64_t n,
                           const ConvEpilogue& epilogue, const RowNorm& norm, cudaStream_t stream);

// The geometry of a 2-D convolution over NCHW input (symmetric padding).
struct Conv2dDesc {
  int64_t batch = 0, in_channels = 0, multiplier = 1;  // multiplier: depthwise only
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int k_h = 0, k_w = 0, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
};

// A depthwise convolution (group == input channels; `multiplier` output channels per input
// channel), with its epilogue applied as each output is written.
void launch_depthwise_conv(Storage st, const Conv2dDesc& desc, const void* x, const void* w,
                           void* y, const ConvEpilogue& epilogue, cudaStream_t stream);

// The patches of a one-group convolution as columns, per image: col[n][(c, kh, kw)][(oh, ow)]
// (zeros where the window is over the padding), so that Y[n] = W[Cout, C*KH*KW] x col[n].
void launch_im2col(Storage st, const Conv2dDesc& desc, const void* x, void* col,
                   cudaStream_t stream);

struct Pool2dDesc {
  int64_t planes = 0;  // N * C
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t k_h = 1, k_w = 1, s_h = 1, s_w = 1, d_h = 1, d_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  bool max = true;
  bool count_include_pad = false;
};
void launch_pool2d(Storage st, const Pool2dDesc& desc, const void* x, void* y, cudaStream_t stream);

// y[r] = mean (or max) of x[r, 0..n)   (global pooling, ReduceMean over trailing axes)
void launch_row_reduce(Storage st, const void* x, void* y, int64_t rows, int64_t n, bool max,
                       cudaStream_t stream);

// Softmax (or LogSoftmax) of x seen as [outer, n, inner] along n.
void launch_softmax(Storage st, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                    bool log, cudaStream_t stream);

// LayerNormalization over rows of n: y = (x - mean) / sqrt(var + eps) * scale + bias (bias may be
// null); scale and bias have x's storage.
void launch_layer_norm(Storage st, const void* x, const void* scale, const void* bias, void* y,
                       int64_t rows, int64_t n, float epsilon, cudaStream_t stream);

// y[out index] = x[...] with out dims `dims` and, per output dim, the input's element stride.
// Dims that read one run together are merged, and a contiguous innermost run is moved 8 or 16
// bytes at a time where its length, the strides and both pointers allow.
void launch_permute(const void* x, void* y, int element_bytes, int rank, const int64_t* dims,
                    const int64_t* in_strides, int64_t n, cudaStream_t stream);

// y[o, j, i] = x[o, idx[j], i] for x [outer, axis_n, inner]; negative indices count from the end.
// Out-of-range indices write zeros and are reported through `check` (index_check.h).
void launch_gather(const void* x, const void* indices, bool indices_int64, void* y,
                   int element_bytes, int64_t outer, int64_t axis_n, int64_t inner,
                   int64_t num_indices, const IndexCheck& check, cudaStream_t stream);

// A FusedElementwise program (graph/fused_elementwise.h) as a kernel parameter: at most
// kEwMaxInputs inputs, kEwMaxCode instructions and kEwMaxConsts immediates, so that the whole
// program travels with the launch (no device memory, nothing to bind in a CUDA graph).
inline constexpr int kEwMaxInputs = 8;
inline constexpr int kEwMaxCode = 96;
inline constexpr int kEwMaxConsts = 48;
inline constexpr int kEwMaxRegs = 32;  // registers a program may use, inputs included
struct EwInstruction {
  int8_t op = 0;   // EwOp
  int8_t dst = 0;  // register
  int8_t a = 0;    // register, or -(k+1) for consts[k]
  int8_t b = 0;
};
struct EwDesc {
  int num_inputs = 0, num_code = 0, rank = 0;
  int64_t dims[kMaxRank] = {};  // the output's
  // Per input: 0 read at the output index, 1 one value, 2 through strides[input].
  int8_t mode[kEwMaxInputs] = {};
  int64_t strides[kEwMaxInputs][kMaxRank] = {};
  EwInstruction code[kEwMaxCode];
  float consts[kEwMaxConsts] = {};
};
// y[i] = program(inputs at i) for i < n (n = product of desc.dims).
void launch_fused_elementwise(Storage st, const EwDesc& desc, const void* const* inputs, void* y,
                              int64_t n, cudaStream_t stream);

// FusedAttention: Y[b, i, :] = softmax_j(scale * Q[b, i, :] . K[b, j, :] + mask[b, i, j]) V[b, j,
// :] over `batch` (the leading dims, flattened) independent heads, every operand contiguous; K is
// [batch, D, Sk] when k_transposed. The mask (optional) is read at
// mask_offset(b) + i * mask_q_stride + j * mask_k_stride, where mask_offset sums the leading
// coordinates of b (dims lead_dims) times mask_lead_strides (0 where broadcast).
inline constexpr int kAttentionMaxDepth = 128;
struct AttentionDesc {
  int64_t batch = 0, sq = 0, sk = 0, depth = 0, depth_v = 0;
  float scale = 1.f;
  bool k_transposed = false;
  int64_t kv_group =
      1;  // query heads per key/value head: batch index b reads K's and V's b / kv_group
  int lead_rank = 0;
  int64_t lead_dims[kMaxRank] = {};
  int64_t mask_lead_strides[kMaxRank] = {};
  int64_t mask_q_stride = 0, mask_k_stride = 0;
};
// Up to this many query rows per head (decoding), the keys are split over several warps whose
// partial results a second kernel merges, through `scratch` (attention_scratch_bytes(desc) bytes;
// 0 where one warp takes a whole row). With scratch null where it is needed, the one-warp-per-row
// kernel runs instead. With more rows, the tensor-core kernel where it fits (below), else the
// one-warp-per-row kernel.
inline constexpr int64_t kAttentionSplitMaxRows = 4;
size_t attention_scratch_bytes(const AttentionDesc& desc);
void launch_attention(Storage st, const AttentionDesc& desc, const void* q, const void* k,
                      const void* v, const void* mask, void* y, void* scratch, cudaStream_t stream);
// FusedAttention on tensor cores (flash_attention.cu), for float16 and bfloat16 storage: K as is
// (not K^T), heads of 64 or 128 for Q, K and V alike, more than kAttentionSplitMaxRows query rows
// per head, at most 65535 heads. flash_attention_fits says whether `desc` qualifies and, the first
// time, sets the kernels up (call it when a kernel is built, before any capture); the launchers
// follow HeadStrides below.
bool flash_attention_fits(Storage st, const AttentionDesc& desc);
// Strided row copies (rows x width bytes, each side with its own pitch; src null writes zeros),
// every one of `count` enqueued on `stream` in a launch per kRowCopyBatch. The fields of
// core/device_ops.h's RowCopy, which nvcc's C++17 cannot include (lumen's headers are C++20).
struct RowCopyDesc {
  void* dst = nullptr;
  size_t dst_pitch = 0;
  const void* src = nullptr;
  size_t src_pitch = 0;
  size_t width = 0;
  size_t rows = 0;
};
inline constexpr size_t kRowCopyBatch = 32;
void launch_copy_rows(const RowCopyDesc* copies, size_t count, cudaStream_t stream);

// Per row r < rows of float32 values data[r * stride + j], j < cols (cols >= 1): index[r] = the
// index of the largest (the first of equals; 0 for a row of -inf), nan[r] = whether it holds a NaN.
// `scratch`: row_argmax_scratch_bytes(rows, cols) of device memory.
size_t row_argmax_scratch_bytes(int64_t rows, int64_t cols);
void launch_row_argmax(const float* data, int64_t rows, int64_t cols, int64_t stride,
                       int64_t* index, int* nan, void* scratch, cudaStream_t stream);
// The same, all on the device, as std::max_element chooses (a row starting with a NaN gives 0,
// other NaNs are passed over): chosen[r] (int64) and ids[r] (int32 where ids32, else int64).
void launch_row_argmax_into(const float* data, int64_t rows, int64_t cols, int64_t stride,
                            void* ids, bool ids32, int64_t* chosen, void* scratch,
                            cudaStream_t stream);

// Skinny float32 products, Y[M, N] = act(X[M, K] W[K, N] + bias + Z) with M <= kGemvWideRows
// (decoding, and short sequences): X, W, Y and Z row-major, N a multiple of 4, W, bias (a row of
// N, or null), Z (a residual [M, N], or null) and Y 16-byte aligned. Up to kGemvMaxRows rows one
// launch layer; above, groups of kGemvMaxRows rows, one grid layer each (W read once per group,
// from L2 after the first): callers take those only where measured faster. With `ln.scale`, each
// row of Y is then normalized over its N columns (LayerNormalization: scale, optional bias).
// The plan splits K over blocks (splits 0: the shape does not qualify); the splits' partial rows go
// to `scratch` (gemv_scratch_bytes), and `counters` (gemv_counters(plan) zeros, left zero after
// each launch) tell the last block of each column range to finish it.
inline constexpr int64_t kGemvMaxRows = 8;
inline constexpr int64_t kGemvWideRows = 32;
struct GemvPlan {
  int64_t col_tiles = 0, splits = 0, rows_per_split = 0, groups = 1;
};
struct GemvLayerNorm {
  const float* scale = nullptr;  // [N], or null: no normalization
  const float* bias = nullptr;   // [N], or null
  float epsilon = 0.f;
};
GemvPlan gemv_plan(int64_t m, int64_t n, int64_t k, int multiprocessors);
size_t gemv_scratch_bytes(const GemvPlan& plan, int64_t m);
size_t gemv_counters(const GemvPlan& plan);
void launch_gemv(const GemvPlan& plan, int64_t m, int64_t n, int64_t k, const float* x,
                 const float* w, const float* bias, const float* residual, UnaryOp act, float alpha,
                 float beta, float* y, float* scratch, unsigned* counters, cudaStream_t stream,
                 const GemvLayerNorm& ln = {});
// Up to kGemvMaxProducts products of one X (at most kGemvMaxRows rows), Y_p = X W_p + bias_p + Z_p
// (W_p [K, N_p]; no activation), in one launch: the plan for the column counts N_p (each a multiple
// of 4), the products' pointers filled into gemv_products(N)'s tiles, with the alignment above.
inline constexpr int kGemvMaxProducts = 4;
struct GemvProducts {
  int count = 0;
  const float* w[kGemvMaxProducts] = {};
  const float* bias[kGemvMaxProducts] = {};
  const float* residual[kGemvMaxProducts] = {};
  float* y[kGemvMaxProducts] = {};
  int64_t n[kGemvMaxProducts] = {};
  int64_t first_tile[kGemvMaxProducts + 1] = {};  // product p's column tiles [first_tile[p], [p+1])
  // With norm_scale (gamma [K]), X's rows are RMS-normalized first: X / sqrt(mean(X^2) + eps) *
  // gamma.
  const float* norm_scale = nullptr;
  float norm_epsilon = 0.f;
};
GemvPlan gemv_plan(int64_t m, const std::vector<int64_t>& n, int64_t k, int multiprocessors);
GemvProducts gemv_products(const std::vector<int64_t>& n);
void launch_gemv(const GemvPlan& plan, int64_t m, int64_t k, const float* x,
                 const GemvProducts& products, float* scratch, unsigned* counters,
                 cudaStream_t stream);

// The softmax step of attention computed the plain way, in place over the scores
// [batch, sq, sk] = Q K^T: s = softmax(desc.scale * s + mask) along sk, the mask read as above.
void launch_attention_softmax(Storage st, const AttentionDesc& desc, void* scores, const void* mask,
                              cudaStream_t stream);

// StridedAttention's fused kernel (strided_attention.cu), for key sequences of at most
// kStridedAttentionMaxKeys and heads of 32, 64 or 128 (depth_v == depth): Q, K, V and Y read and
// written through each view's element strides between heads and between rows (depth contiguous),
// the pointers at one batch index's views (outer_index: that index, for the mask), or at the first
// of `outers` batch indices whose views lie the outer strides apart (one launch for all of them).
// aligned16: K's and V's pointers and their outer, head and row strides are multiples of 16 bytes.
inline constexpr int64_t kStridedAttentionMaxKeys = 128;
struct HeadStrides {
  int64_t heads = 1;
  int64_t q_head = 0, q_row = 0, k_head = 0, k_row = 0, v_head = 0, v_row = 0, y_head = 0,
          y_row = 0;
  int64_t outers = 1;  // the fused kernel only; the tensor-core one takes one batch index
  int64_t q_outer = 0, k_outer = 0, v_outer = 0, y_outer = 0;
};
// launch_flash_attention launches it and returns true, or returns false and launches nothing where
// `desc` does not qualify or a pointer is not 16-byte aligned. Q, K, V and Y contiguous: heads
// desc.batch; or through views: `strides.heads` heads (grid index h reads Q at q + h * q_head +
// row * q_row, K and V at head h / desc.kv_group, and writes Y the same way; every stride a
// multiple of 8 elements), whose mask is that of head first_head + h of desc's leading dims.
bool launch_flash_attention(Storage st, const AttentionDesc& desc, const void* q, const void* k,
                            const void* v, const void* mask, void* y, cudaStream_t stream);
bool launch_flash_attention(Storage st, const AttentionDesc& desc, const HeadStrides& strides,
                            int64_t first_head, const void* q, const void* k, const void* v,
                            const void* mask, void* y, cudaStream_t stream);
// Whether the fused kernel runs `desc` on this device (shape and shared memory); sets up its
// launches. Called at kernel build time, before any capture.
bool prepare_strided_attention(const AttentionDesc& desc);
void launch_strided_attention(Storage st, const AttentionDesc& desc, const HeadStrides& s,
                              const void* q, const void* k, const void* v, const void* mask,
                              void* y, int64_t outer_index, bool aligned16, cudaStream_t stream);

}  // namespace lumen::cuda
