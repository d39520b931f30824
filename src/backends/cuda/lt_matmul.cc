// LtMatmul: Lumen's tensors are row-major and cuBLASLt's matrices column-major, so
// Y[M,N] = X[M,K] W[K,N] is computed as Y^T = W^T X^T: cuBLASLt's A is our W and its B is our X,
// read with no copy.
#include "backends/cuda/lt_matmul.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace lumen::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// At build time, up to this many of cuBLASLt's heuristic candidates are timed, and the fastest
// taken where it beats the heuristic's first by kMinGain: the heuristic's first choice is often
// not the fastest for float32 products of few rows (Swin's and BERT's) on Hopper.
constexpr int kCandidates = 8;
constexpr float kMinGain = 0.97f;
// No timing where the scratch operands would take more than this (a vocabulary head's weight):
// the heuristic's choice stands.
constexpr size_t kMaxTimingBytes = size_t{256} << 20;

// cuBLASLt's heuristic answer per product, for the process: a model's layers share a few shapes,
// and a plan for each new size of a shape family asks again for shapes seen before. At most
// kMaxAlgos entries (the cache starts over when full).
struct AlgoKey {
  int device, storage, compute;
  bool trans_x, trans_w, bias;
  int64_t m, n, k, batch, stride_x, stride_w, stride_y, ld_x, ld_w, ld_y;
  int align;
  auto tie() const {
    return std::tie(device, storage, compute, trans_x, trans_w, bias, m, n, k, batch, stride_x,
                    stride_w, stride_y, ld_x, ld_w, ld_y, align);
  }
  bool operator<(const AlgoKey& o) const { return tie() < o.tie(); }
};
struct AlgoChoice {
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
  std::string choice;
};
constexpr size_t kMaxAlgos = 4096;
std::mutex algo_mutex;
std::map<AlgoKey, AlgoChoice>& algo_cache() {
  static std::map<AlgoKey, AlgoChoice> cache;
  return cache;
}
}  // namespace

namespace {
// Elements a column-major rows x cols matrix spans with leading dimension ld (0: rows), over
// `batch` matrices `stride` apart.
int64_t span(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch) {
  return (ld > 0 ? ld : rows) * (cols - 1) + rows + stride * (batch - 1);
}
}  // namespace

LtMatmul::LtMatmul(const NodeContext& ctx, const GemmShape& s, bool bias)
    : where_(ctx.where()),
      s_(s),
      bias_(bias),
      storage_(storage_of(ctx.input_dtype(0))),
      compute_(ctx.precision() == Precision::kTF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                   : CUBLAS_COMPUTE_32F) {
  if (!plan(true)) ctx.fail_unsupported("cuBLASLt has no algorithm for this product");
  if (ctx.precision() != Precision::kFloat32Strict && split_eligible(s_)) {
    plan_split(true);
    choose_split();
  }
}

LtMatmul::LtMatmul(const LtMatmul& like, const GemmShape& s)
    : where_(like.where_),
      s_(s),
      bias_(like.bias_),
      storage_(like.storage_),
      compute_(like.compute_) {
  if (!plan(false)) throw UnsupportedOp(where_ + ": cuBLASLt has no algorithm for this product");
  // A size of a shape family whose measured plan took 3xTF32 takes it too, with as many rows.
  if (like.split_ && split_eligible(s) && s.m >= like.s_.m) plan_split(false);
}

LtMatmul::LtMatmul(std::string where, const GemmShape& s, bool bias, Storage storage,
                   cublasComputeType_t compute, bool measure)
    : where_(std::move(where)), s_(s), bias_(bias), storage_(storage), compute_(compute) {
  if (!plan(measure)) throw UnsupportedOp(where_ + ": cuBLASLt has no algorithm for this product");
}

std::unique_ptr<LtMatmul> LtMatmul::unbiased(const LtMatmul& like, const GemmShape& shape) {
  return std::unique_ptr<LtMatmul>(
      new LtMatmul(like.where_, shape, false, like.storage_, like.compute_, true));
}

namespace {
// Rows from which a float32 product is timed as 3xTF32 too (the timing decides). From 192: ViT-B's
// 197 rows took it on all four of its product shapes (H200, 197 x 768 x 3072: 0.0207 ms 3xTF32,
// 0.0349 ms float32). Below, not measured yet (TF32 alone gained 2.2x at 128 x 768 x 3072).
constexpr int64_t kSplitMinRows = 192;
// The 3xTF32 path is kept where it takes at most this share of the float32 product's time.
constexpr float kSplitMaxShare = 0.9f;

size_t round256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}
}  // namespace

bool LtMatmul::split_eligible(const GemmShape& s) const {
  return storage_ == Storage::kFloat32 && compute_ == CUBLAS_COMPUTE_32F && s.batch == 1 &&
         s.m >= kSplitMinRows && s.n >= 64 && s.k >= 64;
}

void LtMatmul::plan_split(bool measure) {
  GemmShape inner = s_;
  inner.k = 3 * s_.k;
  inner.ld_x = inner.ld_w = 0;  // the split operands are packed
  split_ = std::unique_ptr<LtMatmul>(
      new LtMatmul(where_, inner, bias_, storage_, CUBLAS_COMPUTE_32F_FAST_TF32, measure));
  split_w_ = round256(split_->workspace_size());
  split_x_ = split_w_ + round256(static_cast<size_t>(inner.k * s_.n) * sizeof(float));
  split_total_ = split_x_ + static_cast<size_t>(inner.k * s_.m) * sizeof(float);
  require_cuda_backend().workspace().reserve(split_total_);
}

void LtMatmul::choose_split() {
  const GemmShape& s = s_;
  char key[160];
  std::snprintf(key, sizeof(key), "%d %d %d %d %lld %lld %lld %lld %lld %lld %d", s.trans_x,
                s.trans_w, s.constant_w, bias_, static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k),
                static_cast<long long>(s.ld_x), static_cast<long long>(s.ld_w),
                static_cast<long long>(s.ld_y), s.align);
  static MeasuredPairs measured;
  const auto [fp32_ms, split_ms] = measured.get(key, [&] {
    CudaBackend& be = require_cuda_backend();
    const Device dev = Device::cuda();
    const int64_t x_elems = span(s.trans_x ? s.m : s.k, s.trans_x ? s.k : s.m, s.ld_x, 0, 1);
    const int64_t w_elems = span(s.trans_w ? s.k : s.n, s.trans_w ? s.n : s.k, s.ld_w, 0, 1);
    const int64_t y_elems = span(s.n, s.m, s.ld_y, 0, 1);
    const Tensor x = Tensor::zeros(Shape{x_elems}, DType::kFloat32, dev);
    const Tensor w = Tensor::zeros(Shape{w_elems}, DType::kFloat32, dev);
    const Tensor y = Tensor::zeros(Shape{y_elems}, DType::kFloat32, dev);
    const Tensor bias = bias_ ? Tensor::zeros(Shape{s.n}, DType::kFloat32, dev) : Tensor();
    check(cudaStreamSynchronize(be.stream().handle()), where_);  // the scratch zeros
    TimingStream own(where_);
    const float fp32 = time_on_stream(
        own.handle,
        [&] {
          run_product(own.handle, x.raw_data(), w.raw_data(), nullptr, bias.raw_data(),
                      y.raw_data(), 1.0f, 0.0f);
        },
        where_.c_str());
    const Tensor w_parts = s.constant_w ? split_weight(w) : Tensor();
    const float three = time_on_stream(
        own.handle,
        [&] {
          run(own.handle, x.raw_data(), w.raw_data(), nullptr, bias.raw_data(), y.raw_data(), 1.0f,
              0.0f, w_parts.defined() ? w_parts.raw_data() : nullptr);
        },
        where_.c_str());
    check(cudaStreamSynchronize(own.handle), where_);
    return std::make_pair(fp32, three);
  });
  const bool keep = split_ms <= kSplitMaxShare * fp32_ms;
  char text[160];
  std::snprintf(text, sizeof(text), "; 3xTF32 %.4f ms against float32 %.4f ms: %s",
                static_cast<double>(split_ms), static_cast<double>(fp32_ms),
                keep ? "3xTF32" : "float32");
  choice_ += text;
  if (!keep) split_.reset();
}

bool LtMatmul::plan(bool measure) {
  const GemmShape& s = s_;
  CudaBackend& be = require_cuda_backend();
  if (s.m == 0 || s.n == 0) return true;
  check(cublasLtMatmulDescCreate(&op_, compute_, CUDA_R_32F), where_);
  cublasOperation_t ta = s.trans_w ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = s.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), where_);
  check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), where_);
  if (bias_) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
          where_);
  }
  // Column-major views: W as (n x k) op'd, X as (k x m) op'd, Y as (n x m).
  layout(&a_, s.trans_w ? s.k : s.n, s.trans_w ? s.n : s.k, s.stride_w, s.ld_w);
  layout(&b_, s.trans_x ? s.m : s.k, s.trans_x ? s.k : s.m, s.stride_x, s.ld_x);
  layout(&d_, s.n, s.m, s.stride_y, s.ld_y);
  int device = 0;
  check(cudaGetDevice(&device), where_);
  const AlgoKey key{device,
                    static_cast<int>(storage_),
                    static_cast<int>(compute_),
                    s.trans_x,
                    s.trans_w,
                    bias_,
                    s.m,
                    s.n,
                    s.k,
                    s.batch,
                    s.stride_x,
                    s.stride_w,
                    s.stride_y,
                    s.ld_x,
                    s.ld_w,
                    s.ld_y,
                    s.align};
  {
    std::lock_guard<std::mutex> lock(algo_mutex);
    auto it = algo_cache().find(key);
    if (it != algo_cache().end()) {
      algo_ = it->second.algo;
      workspace_ = it->second.workspace;
      choice_ = it->second.choice;
      be.workspace().reserve(workspace_);
      return true;
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), where_);
  size_t ws = kWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof(ws)),
        where_);
  if (s.align > 0) {
    const uint32_t align = static_cast<uint32_t>(s.align);
    for (auto attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)), where_);
  }
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(be.cublas(), op_, a_, b_, d_, d_, pref,
                                                     measure ? kCandidates : 1, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check(st, where_ + ": algorithm heuristic");
  if (found == 0) return false;
  const int chosen = found > 1 ? fastest(results, found) : 0;
  algo_ = results[chosen].algo;
  workspace_ = results[chosen].workspaceSize;
  be.workspace().reserve(workspace_);
  std::lock_guard<std::mutex> lock(algo_mutex);
  if (algo_cache().size() >= kMaxAlgos) algo_cache().clear();
  algo_cache()[key] = {algo_, workspace_, choice_};
  return true;
}

int LtMatmul::fastest(const cublasLtMatmulHeuristicResult_t* results, int found) {
  const GemmShape& s = s_;
  const int64_t elements[] = {
      span(s.trans_w ? s.k : s.n, s.trans_w ? s.n : s.k, s.ld_w, s.stride_w, s.batch),
      span(s.trans_x ? s.m : s.k, s.trans_x ? s.k : s.m, s.ld_x, s.stride_x, s.batch),
      span(s.n, s.m, s.ld_y, s.stride_y, s.batch), bias_ ? s.n : 0};
  size_t bytes = 0;
  for (int64_t e : elements) bytes += static_cast<size_t>(e) * storage_bytes(storage_);
  if (bytes > kMaxTimingBytes) return 0;
  CudaBackend& be = require_cuda_backend();
  const Device dev = Device::cuda();
  const DType t = dtype_of(storage_);
  const Tensor w = Tensor::zeros(Shape{elements[0]}, t, dev);
  const Tensor x = Tensor::zeros(Shape{elements[1]}, t, dev);
  const Tensor y = Tensor::zeros(Shape{elements[2]}, t, dev);
  const Tensor bias = bias_ ? Tensor::zeros(Shape{elements[3]}, t, dev) : Tensor();
  size_t most = 0;
  for (int i = 0; i < found; ++i) most = std::max(most, results[i].workspaceSize);
  be.workspace().reserve(most);
  check(cudaStreamSynchronize(be.stream().handle()), where_);  // the scratch zeros
  if (bias_) {
    const void* b = bias.raw_data();
    check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b)),
          where_);
  }
  TimingStream own(where_);
  const float alpha = 1.f, beta = 0.f;
  std::vector<float> ms(found, std::numeric_limits<float>::infinity());
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    try {
      ms[i] = time_on_stream(
          own.handle,
          [&] {
            check(cublasLtMatmul(be.cublas(), op_, &alpha, w.raw_data(), a_, x.raw_data(), b_,
                                 &beta, y.raw_data(), d_, y.raw_data(), d_, &results[i].algo,
                                 be.workspace().ptr(), results[i].workspaceSize, own.handle),
                  where_);
          },
          where_.c_str());
    } catch (const DeviceError&) {
      // This candidate refused the product before enqueueing anything: not a candidate.
      cudaGetLastError();
    }
  }
  check(cudaStreamSynchronize(own.handle), where_);
  int best = 0;
  for (int i = 1; i < found; ++i)
    if (ms[i] < ms[best]) best = i;
  if (ms[0] < std::numeric_limits<float>::infinity() && !(ms[best] < kMinGain * ms[0])) best = 0;
  char text[160];
  std::snprintf(text, sizeof(text),
                "cublasLt candidate %d of %d measured: %.4f ms (heuristic's first %.4f ms)",
                best + 1, found, static_cast<double>(ms[best]), static_cast<double>(ms[0]));
  choice_ = text;
  return best;
}

LtMatmul::~LtMatmul() {
  for (auto* l : {a_, b_, d_})
    if (l) cublasLtMatrixLayoutDestroy(l);
  if (op_) cublasLtMatmulDescDestroy(op_);
}

Tensor LtMatmul::split_weight(const Tensor& w) const {
  if (!split_ || !s_.constant_w) return Tensor();
  if (w.dtype() != DType::kFloat32 || w.numel() != s_.k * s_.n)
    throw InvalidArgument(where_ + ": the weight to split has " + std::to_string(w.numel()) +
                          " elements, the product's W " + std::to_string(s_.k * s_.n));
  cudaStream_t stream = require_cuda_backend().stream().handle();
  const Tensor on_gpu = w.to(Device::cuda());
  Tensor parts = Tensor::empty(Shape{3 * s_.k * s_.n}, DType::kFloat32, Device::cuda());
  split_w(stream, on_gpu.raw_data(), static_cast<float*>(parts.raw_data()));
  check_launch(where_);
  check(cudaStreamSynchronize(stream), where_);
  return parts;
}

void LtMatmul::split_w(cudaStream_t stream, const void* w, float* parts) const {
  const auto* wf = static_cast<const float*>(w);
  if (s_.trans_w)
    launch_tf32_split3(wf, s_.n, s_.k, s_.ld_w, true, 0b010, parts, stream);
  else
    launch_tf32_split3(wf, s_.k, s_.n, s_.ld_w, false, 0b010, parts, stream);
}

void LtMatmul::run(cudaStream_t stream, const void* x, const void* w, const void* c,
                   const void* bias, void* y, float alpha, float beta, const void* w_parts) const {
  if (s_.m == 0 || s_.n == 0) return;
  if (s_.k == 0) {
    const size_t bytes = static_cast<size_t>(s_.m * s_.n * s_.batch) * storage_bytes(storage_);
    check(cudaMemsetAsync(y, 0, bytes, stream), where_);
    return;
  }
  CudaBackend& be = require_cuda_backend();
  if (split_) {
    // W (k x n, or n x k transposed) and X (m x k, or k x m) as their TF32 parts along k:
    // W' = [big; small; big], X' = [big, big, small], so X'W' = Xb Wb + Xb Ws + Xs Wb.
    char* ws = static_cast<char*>(be.workspace().ptr());
    auto* x3 = reinterpret_cast<float*>(ws + split_x_);
    const auto* xf = static_cast<const float*>(x);
    const void* w3 = w_parts;
    if (w3 == nullptr) {
      auto* parts = reinterpret_cast<float*>(ws + split_w_);
      split_w(stream, w, parts);
      w3 = parts;
    }
    if (s_.trans_x)
      launch_tf32_split3(xf, s_.k, s_.m, s_.ld_x, false, 0b100, x3, stream);
    else
      launch_tf32_split3(xf, s_.m, s_.k, s_.ld_x, true, 0b100, x3, stream);
    check_launch(where_);
    split_->run(stream, x3, w3, c, bias, y, alpha, beta);
    return;
  }
  run_product(stream, x, w, c, bias, y, alpha, beta);
}

void LtMatmul::run_product(cudaStream_t stream, const void* x, const void* w, const void* c,
                           const void* bias, void* y, float alpha, float beta) const {
  CudaBackend& be = require_cuda_backend();
  if (bias_)
    check(
        cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
        where_);
  check(cublasLtMatmul(be.cublas(), op_, &alpha, w, a_, x, b_, &beta, c != nullptr ? c : y, d_, y,
                       d_, &algo_, be.workspace().ptr(), workspace_, stream),
        where_);
}

void LtMatmul::layout(cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t stride,
                      int64_t ld) {
  const cudaDataType_t type = storage_ == Storage::kFloat16    ? CUDA_R_16F
                              : storage_ == Storage::kBFloat16 ? CUDA_R_16BF
                                                               : CUDA_R_32F;
  check(cublasLtMatrixLayoutCreate(l, type, rows, cols, ld > 0 ? ld : rows), where_);
  if (s_.batch > 1) {
    int32_t count = static_cast<int32_t>(s_.batch);
    check(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                           sizeof(count)),
          where_);
    check(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                           sizeof(stride)),
          where_);
  }
}

}  // namespace lumen::cuda
