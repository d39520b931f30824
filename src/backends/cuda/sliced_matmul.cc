#include "backends/cuda/sliced_matmul.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>
#include <utility>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"

namespace lumen::cuda {

namespace {

constexpr int kSliceCounts[] = {2, 3, 4, 6, 8, 12, 16};
// No slicing where the partial results would take more than this of the workspace.
constexpr size_t kMaxPartialBytes = size_t{64} << 20;
// A slicing is kept where it takes at most this share of the plain way's time.
constexpr float kMaxShare = 0.97f;

size_t round256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The batched product of `whole`'s K in `slices` parts: part j reads X's columns and W's rows
// j * k / slices onwards and writes partial result j (packed, m * n apart).
GemmShape slices_of(const GemmShape& whole, int slices) {
  GemmShape s = whole;
  const int64_t ks = whole.k / slices;
  s.k = ks;
  s.batch = slices;
  s.ld_x = whole.ld_x > 0 ? whole.ld_x : whole.k;
  s.stride_x = ks;
  if (whole.trans_w) {
    s.ld_w = whole.ld_w > 0 ? whole.ld_w : whole.k;
    s.stride_w = ks;
  } else {
    s.ld_w = whole.ld_w > 0 ? whole.ld_w : whole.n;
    s.stride_w = ks * s.ld_w;
  }
  s.ld_y = 0;
  s.stride_y = whole.m * whole.n;
  s.constant_w = false;
  // Every slice starts ks floats after the one before: the largest power of two dividing that,
  // within what the whole product's pointers are known to have.
  int align = whole.align > 0 ? whole.align : 256;
  while (align > 4 && (ks * 4) % align != 0) align /= 2;
  s.align = align;
  return s;
}

// Whether `plain` may run sliced (any row count where `any_rows`).
bool qualifies(const LtMatmul& plain, bool norm, bool any_rows = false) {
  const GemmShape& s = plain.shape();
  return plain.storage() == Storage::kFloat32 && !plain.split_tf32() && s.batch == 1 &&
         !s.trans_x && s.ld_y == 0 && s.m > 0 && (any_rows || s.m <= SlicedMatmul::kMaxRows) &&
         s.n > 0 && s.k >= 2 * SlicedMatmul::kMinSliceK && (!norm || s.n <= kSliceNormMaxColumns);
}

// Whether K splits into `slices` parts of kMinSliceK or more whose partial results fit.
bool slicing_fits(const GemmShape& s, int slices) {
  return s.k % slices == 0 && s.k / slices >= SlicedMatmul::kMinSliceK &&
         sizeof(float) * static_cast<size_t>(slices * s.m * s.n) <= kMaxPartialBytes;
}

}  // namespace

SlicedMatmul::SlicedMatmul(std::unique_ptr<LtMatmul> parts, int slices, const GemmShape& whole,
                           UnaryOp op, float alpha, float beta, bool norm, float epsilon)
    : parts_(std::move(parts)),
      slices_(slices),
      whole_(whole),
      op_(op),
      alpha_(alpha),
      beta_(beta),
      norm_(norm),
      epsilon_(epsilon),
      partials_offset_(round256(parts_->workspace_size())) {}

std::unique_ptr<SlicedMatmul> SlicedMatmul::make(const LtMatmul& plain, bool bias, bool residual,
                                                 UnaryOp op, float alpha, float beta, bool norm,
                                                 float epsilon) {
  if (!qualifies(plain, norm)) return nullptr;
  const GemmShape& s = plain.shape();
  CudaBackend& be = require_cuda_backend();
  int device = 0;
  check(cudaGetDevice(&device), "SlicedMatmul");
  char key[256];
  std::snprintf(key, sizeof(key), "%d:%lld,%lld,%lld,%lld,%lld,%d,%d,%d,%d,%d,%d", device,
                static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), static_cast<long long>(s.ld_x),
                static_cast<long long>(s.ld_w), s.trans_w ? 1 : 0, s.align, bias ? 1 : 0,
                residual ? 1 : 0, static_cast<int>(op), norm ? 1 : 0);
  static MeasuredPairs measured;
  // (the best slice count, 0 for none; its time over the plain way's)
  const std::pair<float, float> best = measured.get(key, [&] {
    const Device dev = Device::cuda();
    const int64_t x_elems = (s.ld_x > 0 ? s.ld_x : s.k) * (s.m - 1) + s.k;
    const int64_t w_rows = s.trans_w ? s.n : s.k, w_cols = s.trans_w ? s.k : s.n;
    const int64_t w_elems = (s.ld_w > 0 ? s.ld_w : w_cols) * (w_rows - 1) + w_cols;
    const Tensor x = Tensor::zeros(Shape{x_elems}, DType::kFloat32, dev);
    const Tensor w = Tensor::zeros(Shape{w_elems}, DType::kFloat32, dev);
    const Tensor y = Tensor::zeros(Shape{s.m * s.n}, DType::kFloat32, dev);
    const Tensor z = Tensor::zeros(Shape{residual ? s.m * s.n : 1}, DType::kFloat32, dev);
    const Tensor b = Tensor::zeros(Shape{bias ? s.n : 1}, DType::kFloat32, dev);
    const Tensor scale = Tensor::zeros(Shape{norm ? s.n : 1}, DType::kFloat32, dev);
    // The candidates' partial results, in scratch memory: the workspace grows only for the
    // slicing taken.
    const int64_t most_partials = std::min(static_cast<int64_t>(kMaxPartialBytes / sizeof(float)),
                                           kSliceCounts[std::size(kSliceCounts) - 1] * s.m * s.n);
    const Tensor partials = Tensor::empty(Shape{most_partials}, DType::kFloat32, dev);
    const void* bp = bias ? b.raw_data() : nullptr;
    const void* zp = residual ? z.raw_data() : nullptr;
    const void* sp = norm ? scale.raw_data() : nullptr;
    check(cudaStreamSynchronize(be.stream().handle()), "SlicedMatmul");  // the scratch zeros
    TimingStream own("SlicedMatmul");
    const float plain_ms = time_on_stream(
        own.handle,
        [&] {
          plain.run(own.handle, x.raw_data(), w.raw_data(), zp, bp, y.raw_data(), 1.f,
                    residual ? 1.f : 0.f);
          if (op != UnaryOp::kIdentity)
            launch_unary(Storage::kFloat32, op, alpha, beta, y.raw_data(), y.raw_data(), s.m * s.n,
                         own.handle);
          if (norm)
            launch_layer_norm(Storage::kFloat32, y.raw_data(), sp, bp, y.raw_data(), s.m, s.n,
                              epsilon, own.handle);
        },
        "SlicedMatmul");
    float best_ms = plain_ms;
    int best_slices = 0;
    for (int slices : kSliceCounts) {
      if (!slicing_fits(s, slices)) continue;
      std::unique_ptr<SlicedMatmul> candidate;
      try {
        candidate.reset(new SlicedMatmul(LtMatmul::unbiased(plain, slices_of(s, slices)), slices, s,
                                         op, alpha, beta, norm, epsilon));
      } catch (const UnsupportedOp&) {
        continue;  // cuBLASLt has no algorithm for this slicing
      }
      const float ms = time_on_stream(
          own.handle,
          [&] {
            candidate->run_into(own.handle, x.raw_data(), w.raw_data(), bp, zp, y.raw_data(), sp,
                                bp, static_cast<float*>(partials.raw_data()));
          },
          "SlicedMatmul");
      if (ms < best_ms) {
        best_ms = ms;
        best_slices = slices;
      }
    }
    check(cudaStreamSynchronize(own.handle), "SlicedMatmul");
    return std::make_pair(
        static_cast<float>(best_slices),
        best_slices > 0 && best_ms <= kMaxShare * plain_ms ? best_ms / plain_ms : 1.f);
  });
  const int slices = static_cast<int>(best.first);
  if (slices == 0 || best.second > kMaxShare) return nullptr;
  std::unique_ptr<SlicedMatmul> made(new SlicedMatmul(
      LtMatmul::unbiased(plain, slices_of(s, slices)), slices, s, op, alpha, beta, norm, epsilon));
  char text[128];
  std::snprintf(text, sizeof(text),
                "k in %d slices, summed with the epilogue%s: %.2fx the time of ", slices,
                norm ? " and row norm" : "", static_cast<double>(best.second));
  made->choice_ = text + plain.choice();
  be.workspace().reserve(made->workspace_bytes());
  return made;
}

std::unique_ptr<SlicedMatmul> SlicedMatmul::with_slices(const LtMatmul& plain, int slices,
                                                        bool bias_per_row, UnaryOp op, float alpha,
                                                        float beta) {
  const GemmShape& s = plain.shape();
  if (!qualifies(plain, false, true) || !slicing_fits(s, slices)) return nullptr;
  std::unique_ptr<SlicedMatmul> made;
  try {
    made.reset(new SlicedMatmul(LtMatmul::unbiased(plain, slices_of(s, slices)), slices, s, op,
                                alpha, beta, false, 0.f));
  } catch (const UnsupportedOp&) {
    return nullptr;  // cuBLASLt has no algorithm for this slicing
  }
  made->bias_per_row_ = bias_per_row;
  char text[96];
  std::snprintf(text, sizeof(text), "k in %d slices, summed with the epilogue", slices);
  made->choice_ = text;
  return made;
}

size_t SlicedMatmul::workspace_bytes() const {
  return partials_offset_ + sizeof(float) * static_cast<size_t>(slices_ * whole_.m * whole_.n);
}

void SlicedMatmul::run(cudaStream_t stream, const void* x, const void* w, const void* bias,
                       const void* z, void* y, const void* norm_scale,
                       const void* norm_bias) const {
  char* workspace = static_cast<char*>(require_cuda_backend().workspace().ptr());
  run_into(stream, x, w, bias, z, y, norm_scale, norm_bias,
           reinterpret_cast<float*>(workspace + partials_offset_));
}

void SlicedMatmul::run_into(cudaStream_t stream, const void* x, const void* w, const void* bias,
                            const void* z, void* y, const void* norm_scale, const void* norm_bias,
                            float* partials) const {
  parts_->run(stream, x, w, nullptr, nullptr, partials, 1.f, 0.f);
  const ConvEpilogue epilogue{bias, z, op_, alpha_, beta_};
  if (norm_)
    launch_slice_sum_norm(partials, slices_, static_cast<float*>(y), whole_.m, whole_.n, epilogue,
                          RowNorm{norm_scale, norm_bias, epsilon_}, stream);
  else if (bias_per_row_)
    launch_slice_sum(partials, slices_, static_cast<float*>(y), 1, whole_.m, whole_.n, epilogue,
                     stream);
  else
    launch_slice_sum(partials, slices_, static_cast<float*>(y), whole_.m, whole_.n, 1, epilogue,
                     stream);
}

}  // namespace lumen::cuda
