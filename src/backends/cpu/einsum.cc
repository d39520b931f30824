// CPU kernel of Einsum (float32; float64 through the direct loop). Two-operand contractions whose
// subscripts split cleanly into batch, M, N and K groups (attention, batched matmul, outer
// products) run as one sgemm per batch entry after at most a transposing copy of each operand;
// every other equation (traces, diagonals, broadcast '...', labels summed out of a single operand,
// three or more operands) runs a direct loop over the output and summed index spaces, accumulating
// in double.
#include <dnnl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/nn_extra_einsum.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 32768;

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// A strided gather: dst (contiguous, shape dims) [idx] = src[sum idx[d] * strides[d]].
struct StridedCopy {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;

  void run(const float* src, float* dst) const {
    const int rank = static_cast<int>(dims.size());
    const int64_t inner = rank == 0 ? 1 : dims.back();
    const int64_t inner_stride = rank == 0 ? 0 : strides.back();
    int64_t rows = 1;
    for (int d = 0; d + 1 < rank; ++d) rows *= dims[d];
    if (rows * inner == 0) return;
#pragma omp parallel for schedule(static) if (rows * inner > kParallelWork)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t rest = row, off = 0;
      for (int d = rank - 2; d >= 0; --d) {
        off += (rest % dims[d]) * strides[d];
        rest /= dims[d];
      }
      const float* in = src + off;
      float* out = dst + row * inner;
      if (inner_stride == 1) {
        std::copy(in, in + inner, out);
      } else {
        for (int64_t i = 0; i < inner; ++i) out[i] = in[i * inner_stride];
      }
    }
  }
};

class EinsumKernel final : public Kernel {
 public:
  explicit EinsumKernel(const NodeContext& ctx) : where_(ctx.where()) {
    EinsumSpec spec = einsum_spec(ctx);
    const int num_labels = static_cast<int>(spec.label_sizes.size());
    const int num_ops = static_cast<int>(spec.operands.size());
    // Per operand, the element stride of each label (0 when absent or broadcast).
    std::vector<std::vector<int64_t>> label_strides(num_ops, std::vector<int64_t>(num_labels, 0));
    bool simple = num_ops == 2 && ctx.input_dtype(0) == DType::kFloat32;
    for (int i = 0; i < num_ops; ++i) {
      const Shape& s = ctx.input_shape(i);
      std::vector<int64_t> st = s.strides();
      std::vector<bool> seen(num_labels, false);
      for (int a = 0; a < s.rank(); ++a) {
        int l = spec.operands[i][a];
        if (seen[l]) simple = false;
        seen[l] = true;
        if (s.dims()[a] != spec.label_sizes[l]) {
          simple = false;
          continue;
        }
        label_strides[i][l] += st[a];
      }
    }
    out_numel_ = spec.output_shape.numel();
    std::vector<bool> in_out(num_labels, false);
    for (int l : spec.output) in_out[l] = true;
    for (int64_t v : spec.label_sizes) simple = simple && v > 0;
    if (simple) simple = init_gemm(spec, label_strides, in_out);
    if (simple) return;
    gemm_ = false;
    // Direct loop: output labels first (output order), then summed labels.
    for (int l : spec.output) {
      loop_dims_.push_back(spec.label_sizes[l]);
    }
    for (int l = 0; l < num_labels; ++l) {
      if (!in_out[l]) {
        sum_dims_.push_back(spec.label_sizes[l]);
        sum_count_ *= spec.label_sizes[l];
      }
    }
    op_out_strides_.resize(num_ops);
    op_sum_strides_.resize(num_ops);
    for (int i = 0; i < num_ops; ++i) {
      for (int l : spec.output) op_out_strides_[i].push_back(label_strides[i][l]);
      for (int l = 0; l < num_labels; ++l) {
        if (!in_out[l]) op_sum_strides_[i].push_back(label_strides[i][l]);
      }
    }
  }

  void run(KernelContext& ctx) const override {
    if (out_numel_ == 0) return;
    if (gemm_) {
      run_gemm(ctx.inputs[0].data<float>(), ctx.inputs[1].data<float>(),
               ctx.outputs[0].data<float>());
      return;
    }
    if (ctx.inputs[0].dtype() == DType::kFloat64) {
      run_loop<double>(ctx);
    } else {
      run_loop<float>(ctx);
    }
  }

 private:
  template <typename T>
  void run_loop(KernelContext& ctx) const {
    T* y = ctx.outputs[0].data<T>();
    const int num_ops = static_cast<int>(op_out_strides_.size());
    std::vector<const T*> ptrs(num_ops);
    for (int i = 0; i < num_ops; ++i) ptrs[i] = ctx.inputs[i].data<T>();
    const int out_rank = static_cast<int>(loop_dims_.size());
    const int sum_rank = static_cast<int>(sum_dims_.size());
    const int64_t sum_count = sum_count_;
#pragma omp parallel if (out_numel_ * sum_count > kParallelWork)
    {
      std::vector<int64_t> off(num_ops), idx(sum_rank, 0);
#pragma omp for schedule(static)
      for (int64_t o = 0; o < out_numel_; ++o) {
        std::fill(off.begin(), off.end(), 0);
        int64_t rest = o;
        for (int d = out_rank - 1; d >= 0; --d) {
          const int64_t v = rest % loop_dims_[d];
          rest /= loop_dims_[d];
          for (int i = 0; i < num_ops; ++i) off[i] += v * op_out_strides_[i][d];
        }
        double acc = 0.0;
        for (int64_t s = 0; s < sum_count; ++s) {
          double prod = 1.0;
          for (int i = 0; i < num_ops; ++i) prod *= ptrs[i][off[i]];
          acc += prod;
          // Odometer step over the summed labels; it wraps back to all zeros at the end.
          for (int d = sum_rank - 1; d >= 0; --d) {
            for (int i = 0; i < num_ops; ++i) off[i] += op_sum_strides_[i][d];
            if (++idx[d] < sum_dims_[d]) break;
            for (int i = 0; i < num_ops; ++i) off[i] -= op_sum_strides_[i][d] * sum_dims_[d];
            idx[d] = 0;
          }
        }
        y[o] = static_cast<T>(acc);
      }
    }
  }

  // Sets up the sgemm path; false when the equation does not fit it.
  bool init_gemm(const EinsumSpec& spec, const std::vector<std::vector<int64_t>>& strides,
                 const std::vector<bool>& in_out) {
    const std::vector<int>& a = spec.operands[0];
    const std::vector<int>& b = spec.operands[1];
    auto has = [](const std::vector<int>& v, int l) {
      return std::find(v.begin(), v.end(), l) != v.end();
    };
    std::vector<int> batch, m, n, k;
    for (int l : spec.output) {
      bool ia = has(a, l), ib = has(b, l);
      (ia && ib ? batch : ia ? m : n).push_back(l);
    }
    for (int l : a) {
      if (!in_out[l]) {
        if (!has(b, l)) return false;
        k.push_back(l);
      }
    }
    for (int l : b) {
      if (!in_out[l] && !has(a, l)) return false;
    }
    auto prod = [&](const std::vector<int>& ls) {
      int64_t p = 1;
      for (int l : ls) p *= spec.label_sizes[l];
      return p;
    };
    auto cat = [](std::initializer_list<const std::vector<int>*> parts) {
      std::vector<int> r;
      for (const auto* p : parts) r.insert(r.end(), p->begin(), p->end());
      return r;
    };
    batch_ = prod(batch);
    m_ = prod(m);
    n_ = prod(n);
    k_ = prod(k);
    // Operand A: used in place as [batch, M, K] or [batch, K, M], else gathered to [batch, M, K].
    trans_a_ = false;
    if (a != cat({&batch, &m, &k})) {
      if (a == cat({&batch, &k, &m})) {
        trans_a_ = true;
      } else {
        pack_a_ = gather_for(cat({&batch, &m, &k}), spec, strides[0]);
      }
    }
    trans_b_ = false;
    if (b != cat({&batch, &k, &n})) {
      if (b == cat({&batch, &n, &k})) {
        trans_b_ = true;
      } else {
        pack_b_ = gather_for(cat({&batch, &k, &n}), spec, strides[1]);
      }
    }
    std::vector<int> c_order = cat({&batch, &m, &n});
    if (spec.output != c_order) {
      std::vector<int64_t> c_dims;
      for (int l : c_order) c_dims.push_back(spec.label_sizes[l]);
      std::vector<int64_t> c_strides = row_major_strides(c_dims);
      for (int l : spec.output) {
        unpack_c_.dims.push_back(spec.label_sizes[l]);
        auto pos = std::find(c_order.begin(), c_order.end(), l) - c_order.begin();
        unpack_c_.strides.push_back(c_strides[pos]);
      }
      unpack_ = true;
    }
    gemm_ = true;
    return true;
  }

  static StridedCopy gather_for(const std::vector<int>& order, const EinsumSpec& spec,
                                const std::vector<int64_t>& strides) {
    StridedCopy c;
    for (int l : order) {
      c.dims.push_back(spec.label_sizes[l]);
      c.strides.push_back(strides[l]);
    }
    return c;
  }

  void run_gemm(const float* a, const float* b, float* y) const {
    Tensor a_buf, b_buf, c_buf;
    if (!pack_a_.dims.empty()) {
      a_buf = Tensor::empty({batch_ * m_ * k_});
      pack_a_.run(a, a_buf.data<float>());
      a = a_buf.data<float>();
    }
    if (!pack_b_.dims.empty()) {
      b_buf = Tensor::empty({batch_ * k_ * n_});
      pack_b_.run(b, b_buf.data<float>());
      b = b_buf.data<float>();
    }
    float* c = y;
    if (unpack_) {
      c_buf = Tensor::empty({batch_ * m_ * n_});
      c = c_buf.data<float>();
    }
    const char ta = trans_a_ ? 'T' : 'N', tb = trans_b_ ? 'T' : 'N';
    const int64_t m = m_, n = n_, k = k_;
    const int64_t lda = trans_a_ ? m : k, ldb = trans_b_ ? k : n;
    const bool batch_parallel = batch_ >= omp_get_max_threads() && m * n * k < (1 << 21);
    int failures = 0;
#pragma omp parallel for schedule(static) reduction(+ : failures) if (batch_parallel)
    for (int64_t i = 0; i < batch_; ++i) {
      dnnl_status_t st = dnnl_sgemm(ta, tb, m, n, k, 1.0f, a + i * m * k, lda, b + i * k * n, ldb,
                                    0.0f, c + i * m * n, n);
      if (st != dnnl_success) ++failures;
    }
    if (failures > 0) throw DeviceError(where_ + ": oneDNN sgemm failed");
    if (unpack_) unpack_c_.run(c, y);
  }

  std::string where_;
  int64_t out_numel_ = 0;
  // sgemm path.
  bool gemm_ = false;
  int64_t batch_ = 1, m_ = 1, n_ = 1, k_ = 1;
  bool trans_a_ = false, trans_b_ = false, unpack_ = false;
  StridedCopy pack_a_, pack_b_, unpack_c_;
  // Direct loop.
  std::vector<int64_t> loop_dims_, sum_dims_;
  int64_t sum_count_ = 1;
  std::vector<std::vector<int64_t>> op_out_strides_, op_sum_strides_;
};

std::unique_ptr<Kernel> make_einsum(const NodeContext& ctx) {
  return std::make_unique<EinsumKernel>(ctx);
}

std::string check_einsum(const NodeContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    DType t = ctx.input_dtype(i);
    if (t != DType::kFloat32 && t != DType::kFloat64)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(t) +
             "; Einsum takes float32 or float64";
  }
  return "";
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Einsum, &make_einsum, &check_einsum);

}  // namespace lumen::cpu
