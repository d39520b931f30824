// One oneDNN matmul primitive with its descriptors, shared by the CPU matrix-product kernels
// (gemm.cc: MatMul and Gemm; fused_matmul.cc: FusedMatMul).
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "backends/cpu/dnnl_util.h"
#include "backends/cpu/kernel_choice.h"
#include "core/derived_tensors.h"
#include "lumen/tensor.h"

namespace lumen::cpu {

using Dims = dnnl::memory::dims;
using Md = dnnl::memory::desc;

// A row-major (dense, last dimension fastest) float32 tensor of `dims`.
inline Md plain_md(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * std::max<int64_t>(dims[i + 1], 1);
  return Md(dims, dnnl::memory::data_type::f32, strides);
}

// A 2-D [rows, cols] matrix stored transposed (as [cols, rows], row-major) when `transposed`.
inline Md matrix_md(int64_t rows, int64_t cols, bool transposed) {
  return Md({rows, cols}, dnnl::memory::data_type::f32, transposed ? Dims{1, rows} : Dims{cols, 1});
}

// One oneDNN matmul primitive with its descriptors. execute() is const and thread-safe: the
// scratchpad is user-managed and allocated per call, and oneDNN primitives may be executed from
// several threads at once when they own no scratchpad.
class DnnlMatmul {
 public:
  // Creates the primitive; throws dnnl::error when oneDNN has no implementation. When
  // `const_weights` is given (a float32 weight known at compile time, described by `wei`), the
  // weights are copied now into the primitive's preferred layout, shared with every primitive of
  // the process that packs the same tensor the same way, and execute() ignores its `wei` argument.
  void init(const Md& src, const Md& wei, const Md* bias, const Md& dst, dnnl::primitive_attr attr,
            const Tensor* const_weights) {
    dnnl::engine& eng = dnnl_engine();
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto make_pd = [&](const Md& w) {
      dnnl::matmul::desc desc =
          bias ? dnnl::matmul::desc(src, w, *bias, dst) : dnnl::matmul::desc(src, w, dst);
      return dnnl::matmul::primitive_desc(desc, attr, eng);
    };
    dnnl::matmul::primitive_desc pd;
    bool packed = false;
    if (const_weights != nullptr) {
      try {
        pd = make_pd(Md(wei.dims(), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any));
        packed = pd.weights_desc() != wei;
      } catch (const dnnl::error&) {
        packed = false;
      }
    }
    if (!packed) pd = make_pd(wei);
    attr_ = attr;
    src_md_ = src;
    wei_md_ = pd.weights_desc();
    dst_md_ = dst;
    has_bias_ = bias != nullptr;
    if (has_bias_) bias_md_ = *bias;
    scratch_md_ = pd.scratchpad_desc();
    prim_ = dnnl::matmul(pd);
    if (packed) {
      packed_ =
          derived_tensor(*const_weights, "dnnl " + md_key(wei) + " to " + md_key(wei_md_), [&] {
            Tensor out = Tensor::empty({static_cast<int64_t>(wei_md_.get_size())}, DType::kUInt8);
            dnnl::memory from(wei, eng, const_weights->raw_data());
            dnnl::memory to(wei_md_, eng, out.raw_data());
            dnnl::reorder(from, to).execute(dnnl_stream(), from, to);
            dnnl_stream().wait();
            return out;
          });
    }
  }

  // `like`'s product (its bias and post-ops) for another row count: row-major [rows, k] A and
  // [rows, n] Y, on `like`'s weights as they lie, whose packed copy is shared, not made again
  // (oneDNN's matmul lays out the weights by k and n alone). `like` is 2-D. Throws dnnl::error
  // when oneDNN has no implementation for that layout at this size.
  void init_like(const DnnlMatmul& like, int64_t rows) {
    const Dims& kn = like.wei_md_.dims();
    const Md src = plain_md({rows, kn[0]}), dst = plain_md({rows, kn[1]});
    dnnl::matmul::desc desc = like.has_bias_
                                  ? dnnl::matmul::desc(src, like.wei_md_, like.bias_md_, dst)
                                  : dnnl::matmul::desc(src, like.wei_md_, dst);
    dnnl::matmul::primitive_desc pd(desc, like.attr_, dnnl_engine());
    attr_ = like.attr_;
    src_md_ = src;
    wei_md_ = like.wei_md_;
    dst_md_ = dst;
    has_bias_ = like.has_bias_;
    bias_md_ = like.bias_md_;
    scratch_md_ = pd.scratchpad_desc();
    prim_ = dnnl::matmul(pd);
    packed_ = like.packed_;
  }

  // Whether the constant weights were packed at init (execute() then ignores `wei`).
  bool packed() const { return packed_.defined(); }

  // Flushes the weights execute() reads (the packed copy, or `wei`) from the CPU's caches.
  void evict(const Tensor& wei) const {
    const Tensor& w = packed_.defined() ? packed_ : wei;
    evict_from_caches(w.raw_data(), w.nbytes());
  }

  void execute(const float* src, const float* wei, const float* bias, float* dst) const {
    dnnl::engine& eng = dnnl_engine();
    void* wei_ptr = packed_.defined() ? packed_.raw_data() : const_cast<float*>(wei);
    std::unordered_map<int, dnnl::memory> args;
    args.emplace(DNNL_ARG_SRC, dnnl::memory(src_md_, eng, const_cast<float*>(src)));
    args.emplace(DNNL_ARG_WEIGHTS, dnnl::memory(wei_md_, eng, wei_ptr));
    args.emplace(DNNL_ARG_DST, dnnl::memory(dst_md_, eng, dst));
    if (has_bias_)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md_, eng, const_cast<float*>(bias)));
    Tensor scratch;
    size_t scratch_bytes = scratch_md_.get_size();
    if (scratch_bytes > 0) {
      scratch = Tensor::empty({static_cast<int64_t>(scratch_bytes)}, DType::kUInt8);
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratch_md_, eng, scratch.raw_data()));
    }
    dnnl::stream& stream = dnnl_stream();
    prim_.execute(stream, args);
    stream.wait();
  }

 private:
  // A memory descriptor as text that tells any two layouts apart (its bytes in hex).
  static std::string md_key(const Md& md) {
    const auto* p = reinterpret_cast<const unsigned char*>(&md.data);
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < sizeof(md.data); ++i) {
      out += kHex[p[i] >> 4];
      out += kHex[p[i] & 15];
    }
    return out;
  }
  dnnl::primitive_attr attr_;  // as given to init, with the user-managed scratchpad
  Md src_md_, wei_md_, bias_md_, dst_md_, scratch_md_;
  bool has_bias_ = false;
  dnnl::matmul prim_;
  Tensor packed_;  // the constant weights in prim_'s layout, when they were packed
};

// One 2-D DnnlMatmul's product at any row count: a primitive per count, made on first use from
// the first one (DnnlMatmul::init_like, sharing its packed weights) and kept for the kMaxCounts
// most recent counts. For a kernel that serves a plan
// at every size of its symbolic dims (kernel.h, AnyShapeScope) where oneDNN measured faster than
// the packed GEMM at the first size: with a primitive of oneDNN 2.6 made for a run-time row count
// (its gemm:jit path, unpacked weights) the BERT-base products ran about half as fast as with one
// per count (brg:avx512_core) on 2 Zen 5 cores. Thread-safe.
class DnnlMatmulByRows {
 public:
  static constexpr size_t kMaxCounts = 32;

  // `first` was made for `first_rows` rows, row-major A and Y.
  DnnlMatmulByRows(DnnlMatmul first, int64_t first_rows)
      : first_(std::make_shared<const DnnlMatmul>(std::move(first))) {
    made_.emplace_back(first_rows, first_);
  }

  void execute(int64_t rows, const float* a, const float* wei, const float* bias, float* y) const {
    for_rows(rows)->execute(a, wei, bias, y);
  }

 private:
  std::shared_ptr<const DnnlMatmul> for_rows(int64_t rows) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [count, mm] : made_)
      if (count == rows) return mm;
    auto mm = std::make_shared<DnnlMatmul>();
    mm->init_like(*first_, rows);
    if (made_.size() == kMaxCounts) made_.pop_front();
    made_.emplace_back(rows, mm);
    return mm;
  }

  std::shared_ptr<const DnnlMatmul> first_;
  mutable std::mutex mutex_;
  mutable std::deque<std::pair<int64_t, std::shared_ptr<const DnnlMatmul>>> made_;
};

}  // namespace lumen::cpu
