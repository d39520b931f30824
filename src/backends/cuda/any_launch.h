// Launchers of the dtype-generic CUDA kernels (any_elementwise.cu, any_reduce.cu,
// any_movement.cu): one kernel template per concept, instantiated for every element type the
// backend keeps on the GPU (floats, signed and unsigned integers, bool), in plain C++ types so the
// kernel classes (.cc) need no CUDA C++.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// The element type of a tensor the generic kernels read or write.
enum class Elem : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF64,
  kI8,
  kU8,
  kI16,
  kU16,
  kI32,
  kU32,
  kI64,
  kU64,
  kBool
};

// Binary ops on two tensors of one element type, result of that type (And, Or, Xor: bool only;
// the bitwise ops: integers only; kMod follows ONNX's Mod with fmod=0 (the divisor's sign) and
// kFMod C's fmod; integer division truncates and division by zero gives 0).
enum class AnyBinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMin,
  kMax,
  kMod,
  kFMod,
  kAnd,
  kOr,
  kXor,
  kBitAnd,
  kBitOr,
  kBitXor,
  kPRelu,  // kPRelu: a < 0 ? a * b : a
  kShiftLeft,
  kShiftRight  // BitShift: shifts by the width or more (or negative) leave the sign
};
void launch_any_binary(Elem t, AnyBinaryOp op, const void* a, const void* b, void* y, int64_t n,
                       const BroadcastDesc& desc, cudaStream_t stream);

// Pow with the exponent of another type (float32, float64, int32 or int64) than the base: y has
// the base's type; integer results truncate.
void launch_pow_mixed(Elem base_t, Elem exp_t, const void* a, const void* b, void* y, int64_t n,
                      const BroadcastDesc& desc, cudaStream_t stream);

// Comparisons of two tensors of one element type; y is bool.
enum class CompareOp { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual };
void launch_compare(Elem t, CompareOp op, const void* a, const void* b, bool* y, int64_t n,
                    const BroadcastDesc& desc, cudaStream_t stream);

// Unary ops, result of the input's type except kIsNaN / kIsInf (bool). Float math computes in
// float32 (float64 for float64); alpha, beta and gamma are the op's attributes.
enum class AnyUnaryOp {
  kNot,
  kBitNot,
  kNeg,
  kAbs,
  kSign,
  kRound,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kSelu,
  kCelu,
  kSoftsign,
  kMish,
  kThresholdedRelu,
  kShrink,
  kIsNaN,
  kIsInf,
  kErf,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kFloor,
  kCeil,
  kSin,
  kCos,
  kRelu,
  kSigmoid,
  kTanh,
  kScale  // x * alpha (Mean's division)
};
struct UnaryParams {
  float alpha = 0.f, beta = 0.f, gamma = 0.f;
  bool detect_positive = true, detect_negative = true;  // IsInf
};
void launch_any_unary(Elem t, AnyUnaryOp op, const UnaryParams& p, const void* x, void* y,
                      int64_t n, cudaStream_t stream);

// y[i] = cond[i] ? a[i] : b[i] with NumPy broadcasting: c_strides/a_strides/b_strides per output
// dim as in BroadcastDesc.
struct WhereDesc {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t c_strides[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};
void launch_where(Elem t, const bool* cond, const void* a, const void* b, void* y, int64_t n,
                  const WhereDesc& desc, cudaStream_t stream);

// y[i] = x[i] converted (float to integer truncates toward zero, anything to bool is x != 0,
// bool is 0 or 1).
void launch_any_cast(Elem from, const void* x, Elem to, void* y, int64_t n, cudaStream_t stream);

// y[i] = min(max(x[i], *lo), *hi), lo and hi device scalars of x's type (nullptr: no bound);
// NaN stays NaN.
void launch_clip(Elem t, const void* x, const void* lo, const void* hi, void* y, int64_t n,
                 cudaStream_t stream);

// A reduction over any set of axes: the output (kept dims, in order) and the reduced dims, each
// with the input's element strides.
enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };
struct ReduceDesc {
  int out_rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t out_strides[kMaxRank] = {};
  int red_rank = 0;
  int64_t red_dims[kMaxRank] = {};
  int64_t red_strides[kMaxRank] = {};
  int64_t out_n = 1, red_n = 1;
};
void launch_reduce(Elem t, ReduceKind op, const void* x, void* y, const ReduceDesc& desc,
                   cudaStream_t stream);

// ArgMax / ArgMin of x [outer, n, inner] along n into int64 y [outer, inner]; NaN counts as the
// extreme; ties: the first index, or the last with select_last.
void launch_arg_reduce(Elem t, bool min, bool select_last, const void* x, int64_t* y, int64_t outer,
                       int64_t n, int64_t inner, cudaStream_t stream);

// TopK of x [outer, n, inner] along n into values [outer, k, inner] (x's type) and int64 indices
// (nullable): the k largest (or smallest) in order, NaN above every number, ties by the lower
// index. One thread per line, O(n * k) each.
void launch_top_k(Elem t, const void* x, void* values, int64_t* indices, int64_t outer, int64_t n,
                  int64_t inner, int64_t k, bool largest, cudaStream_t stream);

// Cumulative sum of x [outer, n, inner] along n (exclusive: without the element itself;
// reverse: from the end).
void launch_cumsum(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                   bool exclusive, bool reverse, cudaStream_t stream);

// Hardmax of x [outer, n, inner] along n: 1 at the first maximum, 0 elsewhere.
void launch_hardmax(Elem t, const void* x, void* y, int64_t outer, int64_t n, int64_t inner,
                    cudaStream_t stream);

// LayerNormalization over rows of n with its optional outputs: mean and inv_std_dev (one per row,
// of storage stat_st; each may be nullptr), scale and bias of x's storage (bias may be nullptr).
void launch_layer_norm_stats(Storage st, const void* x, const void* scale, const void* bias,
                             void* y, Storage stat_st, void* mean, void* inv_std_dev, int64_t rows,
                             int64_t n, float epsilon, cudaStream_t stream);

// Tile: y (dims) reads x at (index % x_dims) per dim, any element size.
struct TileDesc {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t x_dims[kMaxRank] = {};
  int64_t x_strides[kMaxRank] = {};
};
void launch_tile(const void* x, void* y, int element_bytes, const TileDesc& desc, int64_t n,
                 cudaStream_t stream);

// Trilu over x [batch, rows, cols]: keeps the elements with col - row >= k (upper) or
// col - row <= k (lower), zeros elsewhere; any element size.
void launch_trilu(const void* x, void* y, int element_bytes, int64_t batch, int64_t rows,
                  int64_t cols, int64_t k, bool upper, cudaStream_t stream);

// OneHot: y [outer, depth, inner] = values[1] where indices[outer, inner] (of element type
// `index_t`, negative counting from the end) equals the depth position, else values[0]; values
// is a device pair of y's element type `t`.
void launch_one_hot(Elem index_t, const void* indices, Elem t, const void* values, void* y,
                    int64_t outer, int64_t depth, int64_t inner, cudaStream_t stream);

// ScatterElements (reduction none) along `axis` of data's shape `dims`: y (a copy of data made
// beforehand) at the index with dim `axis` replaced by indices[j] gets updates[j]; indices and
// updates share the shape `idx_dims`. Out-of-range indices are skipped and reported through
// `check` (index_check.h), as by every index kernel below.
struct ScatterElementsDesc {
  int rank = 0, axis = 0;
  int64_t dims[kMaxRank] = {};
  int64_t idx_dims[kMaxRank] = {};
};
void launch_scatter_elements(const void* indices, bool indices_int64, const void* updates, void* y,
                             int element_bytes, const ScatterElementsDesc& desc, int64_t n,
                             const IndexCheck& check, cudaStream_t stream);

// ScatterND (reduction none): y (a copy of data) gets updates[u, :] at the slice
// indices[u, 0..k) of data, each slice `slice` elements; `strides` are data's element strides of
// its first k dims and `dims` their sizes. Out-of-range indices are skipped.
struct ScatterNDDesc {
  int k = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t num_updates = 0, slice = 0;
};
void launch_scatter_nd(const int64_t* indices, const void* updates, void* y, int element_bytes,
                       const ScatterNDDesc& desc, const IndexCheck& check, cudaStream_t stream);

// GatherElements along `axis`: y (indices' shape idx_dims) at index j reads data (shape dims) at
// j's index with dim `axis` replaced by indices[j] (negative from the end). Out-of-range indices
// give zero.
void launch_gather_elements(const void* data, const void* indices, bool indices_int64, void* y,
                            int element_bytes, const ScatterElementsDesc& desc, int64_t n,
                            const IndexCheck& check, cudaStream_t stream);

// GatherND: y[b, u, s] = data[b, indices[b, u, 0..k), s] over `batch` flattened batch dims, `num`
// index tuples per batch and slices of `slice` elements; `dims` and `strides` are the data's sizes
// and element strides of the k indexed dims (within one batch), batch_stride a batch's elements.
struct GatherNDDesc {
  int k = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t batch = 1, num = 0, slice = 1, batch_stride = 0;
};
void launch_gather_nd(const void* data, const int64_t* indices, void* y, int element_bytes,
                      const GatherNDDesc& desc, const IndexCheck& check, cudaStream_t stream);

// Pad: y (dims) at index c reads x (x_dims, contiguous) at c - pad_begin per dim. Negative pads
// crop first: each dim keeps the window [win_lo, win_lo + win_n) of x, and outside it kConstant
// writes *value (x's type; nullptr: zero), kEdge clamps, kReflect mirrors about the window's
// edges (the edge not repeated), kWrap wraps around within it.
enum class PadKind { kConstant, kEdge, kReflect, kWrap };
struct PadDesc {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t x_dims[kMaxRank] = {};
  int64_t pad_begin[kMaxRank] = {};
  int64_t win_lo[kMaxRank] = {};
  int64_t win_n[kMaxRank] = {};
  PadKind mode = PadKind::kConstant;
};
void launch_pad(Elem t, const void* x, const void* value, void* y, const PadDesc& desc, int64_t n,
                cudaStream_t stream);

// Range: y[i] = start + i * delta, start and delta device scalars of y's type.
void launch_range(Elem t, const void* start, const void* delta, void* y, int64_t n,
                  cudaStream_t stream);

// EyeLike: y [rows, cols] is 1 where col - row == k, else 0.
void launch_eye(Elem t, void* y, int64_t rows, int64_t cols, int64_t k, cudaStream_t stream);

// InstanceNormalization: x [rows = N * C, n] normalised per row, then * scale[row % channels] +
// bias[row % channels]; scale and bias of x's storage.
void launch_instance_norm(Storage st, const void* x, const void* scale, const void* bias, void* y,
                          int64_t rows, int64_t channels, int64_t n, float epsilon,
                          cudaStream_t stream);

// ScatterElements and ScatterND with a reduction (kAdd, kMul, kMax or kMin of AnyBinaryOp): y
// (a copy of data) combined with each update in order. Each thread owns what no other writes (a
// line along the axis; a slice position), so repeated indices combine deterministically.
void launch_scatter_elements_reduce(Elem t, AnyBinaryOp op, const void* indices, bool indices_int64,
                                    const void* updates, void* y, const ScatterElementsDesc& desc,
                                    int64_t n, const IndexCheck& check, cudaStream_t stream);
void launch_scatter_nd_reduce(Elem t, AnyBinaryOp op, const int64_t* indices, const void* updates,
                              void* y, const ScatterNDDesc& desc, const IndexCheck& check,
                              cudaStream_t stream);

// NegativeLogLikelihoodLoss (softmax false) and SoftmaxCrossEntropyLoss (true) over scores x
// [n, c, inner] and targets [n, inner] (int64 or int32): per row, loss = -score[target] *
// weight[target] (score: x, or its log-softmax over c, also written to log_prob when not null);
// ignored rows (has_ignore, target == ignore) give 0 and weigh nothing; so do other targets
// outside [0, c), which are reported through `check`. reduction 0: y holds each row's loss; 1:
// their sum; 2: the sum over the total weight. x, weight (nullable), y and log_prob share the
// storage `st`.
struct LossDesc {
  int64_t n = 0, c = 0, inner = 1;
  bool softmax = false, target_int64 = true, has_ignore = false;
  int64_t ignore = 0;
  int reduction = 2;
};
void launch_loss(Storage st, const LossDesc& desc, const void* x, const void* target,
                 const void* weight, void* y, void* log_prob, const IndexCheck& check,
                 cudaStream_t stream);

}  // namespace lumen::cuda
