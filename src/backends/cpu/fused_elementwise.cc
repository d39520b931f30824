// CPU kernel of FusedElementwise: one pass over the output in blocks of about kBlock elements. For
// each block every input is read in place (same shape as the output), taken from a block filled
// once per thread (a scalar, or a row such as a [C] scale under [N, H, W, C], the blocks then
// being whole rows), or gathered through its broadcast strides into a block buffer; then
// the program's instructions run one after another over block-sized register arrays, the last
// one writing the output block. Each instruction is a plain loop over one block that g++
// vectorises (the math is elementwise_math.h's, as in the unfused kernels, so results match
// theirs). A block of temporaries stays in L1, so a chain of k ops reads its inputs and writes
// its output once instead of k times.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/broadcast.h"
#include "backends/cpu/elementwise_math.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "graph/fused_elementwise.h"

namespace lumen::cpu {
namespace {

// Elements per block, and the most when blocks are whole rows: 32 registers of kMaxBlock floats
// are 128 KiB of stack per thread.
constexpr int kBlock = 512;
constexpr int kMaxBlock = 1024;
// Registers lie kRegisterStride floats apart: one cache line more than a block, so that they do
// not all start at the same offset modulo 4 KiB, where loads from one register falsely wait on
// stores to another (4K aliasing) and compete for the same L1 sets. Measured: a 3-op chain over
// [1, 32, 112, 112] ran 1.7x slower with registers exactly 4 KiB apart.
constexpr int kRegisterStride = kMaxBlock + 16;

// ---- scalar functions (the same formulas as the unfused kernels) ----

inline float hard_sigmoid(float x, float alpha, float beta) {
  float v = std::fma(alpha, x, beta);
  v = select(v < 0.0f, 0.0f, v);
  return select(v > 1.0f, 1.0f, v);
}

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|).
inline float softplus(float x) {
  return select(x > 0.0f, x, 0.0f) + std::log1p(exp_f(-std::fabs(x)));
}

inline float gelu_erf(float x) {
  constexpr float kSqrtHalf = 0.7071067811865476f;
  return 0.5f * x * (1.0f + erf_f(x * kSqrtHalf));
}

// 0.5 x (1 + tanh(u)) == x * sigmoid(2u), as the Gelu kernel computes it.
inline float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float u = kSqrt2OverPi * std::fma(0.044715f * x, x * x, x);
  return x * sigmoid_f(2.0f * u);
}

// ---- block loops ----
// d may be a (a temporary overwritten, or the output over input 0); that case gets its own loop
// over one pointer so that no alias check keeps g++ from vectorising.

template <typename F>
void unary_block(const float* a, float* d, int n, F f) {
  if (a == d) {
    for (int i = 0; i < n; ++i) d[i] = f(d[i]);
  } else {
    for (int i = 0; i < n; ++i) d[i] = f(a[i]);
  }
}

// pa / pb: a register's block, or nullptr for the immediate av / bv.
template <typename F>
void binary_block(const float* pa, float av, const float* pb, float bv, float* d, int n, F f) {
  if (pa && pb) {
    if (pa == d && pb == d) {
      for (int i = 0; i < n; ++i) d[i] = f(d[i], d[i]);
    } else if (pa == d) {
      for (int i = 0; i < n; ++i) d[i] = f(d[i], pb[i]);
    } else if (pb == d) {
      for (int i = 0; i < n; ++i) d[i] = f(pa[i], d[i]);
    } else {
      for (int i = 0; i < n; ++i) d[i] = f(pa[i], pb[i]);
    }
  } else if (pa) {
    if (pa == d) {
      for (int i = 0; i < n; ++i) d[i] = f(d[i], bv);
    } else {
      for (int i = 0; i < n; ++i) d[i] = f(pa[i], bv);
    }
  } else {
    if (pb == d) {
      for (int i = 0; i < n; ++i) d[i] = f(av, d[i]);
    } else {
      for (int i = 0; i < n; ++i) d[i] = f(av, pb[i]);
    }
  }
}

// x ^ p for a constant p, with the PowKernel's shortcuts for the common exponents.
void pow_block(const float* a, float p, float* d, int n) {
  if (p == 1.0f) return unary_block(a, d, n, [](float x) { return x; });
  if (p == 2.0f) return unary_block(a, d, n, [](float x) { return x * x; });
  if (p == 3.0f) return unary_block(a, d, n, [](float x) { return x * x * x; });
  if (p == 0.5f) return unary_block(a, d, n, [](float x) { return std::sqrt(x); });
  if (p == -1.0f) return unary_block(a, d, n, [](float x) { return 1.0f / x; });
  unary_block(a, d, n, [p](float x) { return std::pow(x, p); });
}

// How input k reaches a block: read in place, one value repeated, a row of block_ / row_ copies
// (block_ being whole rows), or gathered per block.
enum class Source { kDirect, kScalar, kRow, kGather };

class FusedElementwiseKernel final : public Kernel {
 public:
  explicit FusedElementwiseKernel(const NodeContext& ctx)
      : out_shape_(ctx.output(0).shape), consts_(ctx.attr_floats("consts", {})) {
    std::string error;
    program_ = decode_ew_program(ctx.attr_ints("code"), consts_.size(), ctx.num_inputs(), &error);
    if (program_.empty()) ctx.fail_model(error);
    std::vector<int> ranks;
    ranks.reserve(static_cast<size_t>(ctx.num_inputs()));
    for (int k = 0; k < ctx.num_inputs(); ++k) ranks.push_back(ctx.input_shape(k).rank());
    std::vector<std::vector<int64_t>> perms;
    if (!decode_ew_perms(ctx.attr_ints("perms", {}), ranks, &perms, &error)) ctx.fail_model(error);
    for (int k = 0; k < ctx.num_inputs(); ++k) {
      const Shape& s = ctx.input_shape(k);
      Input in;
      if (!perms[k].empty()) {
        // Read through a transpose: gathered along the output's dims.
        in.source = Source::kGather;
        in.dims = out_shape_.dims();
        in.strides = ew_input_strides(s.dims(), perms[k], out_shape_.dims());
      } else if (s == out_shape_) {
        in.source = Source::kDirect;
      } else if (s.numel() == 1) {
        in.source = Source::kScalar;
      } else {
        BroadcastPlan plan(out_shape_, {s});
        in.dims = plan.dims();
        in.strides = plan.strides(0);
        // Repeated whole along the leading dimensions: element j of a row-aligned block is
        // element j % inner of the input.
        const int64_t inner = plan.inner();
        const bool row =
            inner > 0 && s.numel() == inner && plan.inner_stride(0) == 1 && inner <= kMaxBlock;
        if (row && (row_ == 0 || row_ == inner)) {
          row_ = inner;
          in.source = Source::kRow;
        } else {
          in.source = Source::kGather;
        }
      }
      inputs_.push_back(std::move(in));
    }
    block_ = row_ == 0 ? kBlock : std::max<int64_t>(1, kBlock / row_) * row_;
    for (const EwInstr& ins : program_) num_registers_ = std::max(num_registers_, ins.dst + 1);
    in_place_ = inputs_[0].source == Source::kDirect ? 0 : -1;
  }

  void run(KernelContext& ctx) const override {
    const int64_t numel = out_shape_.numel();
    if (numel == 0) return;
    const int64_t blocks = (numel + block_ - 1) / block_;
    float* out = ctx.outputs[0].data<float>();
    const float* src[kEwMaxRegisters] = {};
    for (size_t k = 0; k < inputs_.size(); ++k) src[k] = ctx.inputs[k].data<float>();
    const auto range = [&](int64_t b0, int64_t b1) { run_blocks(src, out, b0, b1); };
    if (numel < kParallelThreshold) {
      isa_call(range, int64_t{0}, blocks);
      return;
    }
    const int64_t task_blocks = std::max<int64_t>(1, kParallelChunk / block_);
    const int64_t tasks = (blocks + task_blocks - 1) / task_blocks;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tasks; ++t)
      isa_call(range, t * task_blocks, std::min(blocks, (t + 1) * task_blocks));
  }
  int in_place_input() const override {
    return in_place_;
  }

 private:
  struct Input {
    Source source = Source::kDirect;
    std::vector<int64_t> dims, strides;  // the broadcast plan's merged dims and strides
  };

  // Runs blocks [begin, end) with this thread's registers.
  void run_blocks(const float* const* src, float* out, int64_t begin, int64_t end) const {
    if (begin >= end) return;
    alignas(64) float regs[kEwMaxRegisters][kRegisterStride];
    const int n_in = static_cast<int>(inputs_.size());
    for (int k = 0; k < n_in; ++k) {
      if (inputs_[k].source == Source::kScalar) std::fill_n(regs[k], block_, src[k][0]);
      if (inputs_[k].source == Source::kRow)
        for (int64_t j = 0; j < block_; j += row_) std::copy_n(src[k], row_, regs[k] + j);
    }
    const int64_t numel = out_shape_.numel();
    const float* reg[kEwMaxRegisters] = {};
    int64_t filled[kEwMaxRegisters];
    std::fill_n(filled, kEwMaxRegisters, int64_t{-1});
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t start = blk * block_;
      const int n = static_cast<int>(std::min<int64_t>(block_, numel - start));
      for (int k = 0; k < n_in; ++k) {
        switch (inputs_[k].source) {
          case Source::kDirect:
            reg[k] = src[k] + start;
            break;
          case Source::kScalar:
          case Source::kRow:
            reg[k] = regs[k];
            break;
          case Source::kGather:
            gather(inputs_[k], src[k], start, n, static_cast<int>(block_), regs[k], &filled[k]);
            reg[k] = regs[k];
            break;
        }
      }
      for (int r = n_in; r < num_registers_; ++r) reg[r] = regs[r];
      const size_t last = program_.size() - 1;
      for (size_t i = 0; i <= last; ++i) {
        const EwInstr& ins = program_[i];
        float* d = i == last ? out + start : regs[ins.dst];
        execute(ins, reg, d, n);
        reg[ins.dst] = d;
      }
    }
  }

  // Input elements under output elements [start, start + n), walked row by row of the plan's
  // innermost merged dimension (stride 1: a copy, stride 0: one value repeated, another stride:
  // an input read through a transpose). A block inside one row of a repeated value (a
  // per-channel [1, C, 1, 1] operand over NCHW) is that value block_ times; *filled remembers
  // which element the buffer holds that way (-1: none), so the blocks after it in the same row
  // reuse the buffer as it is.
  static void gather(const Input& in, const float* x, int64_t start, int n, int block, float* dst,
                     int64_t* filled) {
    const int rank = static_cast<int>(in.dims.size());
    const int64_t inner = in.dims[rank - 1];
    const int64_t step = in.strides[rank - 1];
    int64_t row = start / inner, pos = start % inner;
    auto row_offset = [&](int64_t r) {
      int64_t off = 0;
      for (int d = rank - 2; d >= 0; --d) {
        off += (r % in.dims[d]) * in.strides[d];
        r /= in.dims[d];
      }
      return off;
    };
    if (step == 0 && pos + n <= inner) {
      const int64_t off = row_offset(row);
      if (*filled != off) std::fill_n(dst, block, x[off]);
      *filled = off;
      return;
    }
    *filled = -1;
    for (int done = 0; done < n; ++row, pos = 0) {
      const int64_t off = row_offset(row);
      const int len = static_cast<int>(std::min<int64_t>(inner - pos, n - done));
      if (step == 0) {
        std::fill_n(dst + done, len, x[off]);
      } else if (step == 1) {
        std::copy_n(x + off + pos, len, dst + done);
      } else {  // read through a transpose (`perms`)
        const float* src = x + off + pos * step;
        for (int j = 0; j < len; ++j) dst[done + j] = src[j * step];
      }
      done += len;
    }
  }

  float imm(int operand) const {
    return consts_[static_cast<size_t>(ew_immediate(operand))];
  }

  // One instruction over one block.
  void execute(const EwInstr& ins, const float* const* reg, float* d, int n) const {
    const float* a = ins.a >= 0 ? reg[ins.a] : nullptr;
    const float* b = ins.b >= 0 ? reg[ins.b] : nullptr;
    const float av = ins.a < 0 ? imm(ins.a) : 0.0f;
    const float bv = ins.b < 0 ? imm(ins.b) : 0.0f;
    switch (ins.op) {
      case EwOp::kAdd:
        return binary_block(a, av, b, bv, d, n, [](float x, float y) { return x + y; });
      case EwOp::kSub:
        return binary_block(a, av, b, bv, d, n, [](float x, float y) { return x - y; });
      case EwOp::kMul:
        return binary_block(a, av, b, bv, d, n, [](float x, float y) { return x * y; });
      case EwOp::kDiv:
        return binary_block(a, av, b, bv, d, n, [](float x, float y) { return x / y; });
      case EwOp::kMax:  // NaN in either operand gives NaN, as the Max kernel does
        return binary_block(a, av, b, bv, d, n,
                            [](float x, float y) { return select(y > x || y != y, y, x); });
      case EwOp::kMin:
        return binary_block(a, av, b, bv, d, n,
                            [](float x, float y) { return select(y < x || y != y, y, x); });
      case EwOp::kPow:
        return pow_block(a, bv, d, n);
      case EwOp::kRelu:
        return unary_block(a, d, n, [](float x) { return select(x < 0.0f, 0.0f, x); });
      case EwOp::kSigmoid:
        return unary_block(a, d, n, [](float x) { return sigmoid_f(x); });
      case EwOp::kTanh:
        return unary_block(a, d, n, [](float x) { return tanh_f(x); });
      case EwOp::kExp:
        return unary_block(a, d, n, [](float x) { return exp_f(x); });
      case EwOp::kLog:
        return unary_block(a, d, n, [](float x) { return std::log(x); });
      case EwOp::kNeg:
        return unary_block(a, d, n, [](float x) { return -x; });
      case EwOp::kAbs:
        return unary_block(a, d, n, [](float x) { return std::fabs(x); });
      case EwOp::kSqrt:
        return unary_block(a, d, n, [](float x) { return std::sqrt(x); });
      case EwOp::kReciprocal:
        return unary_block(a, d, n, [](float x) { return 1.0f / x; });
      case EwOp::kErf:
        return unary_block(a, d, n, [](float x) { return erf_f(x); });
      case EwOp::kClip: {
        const float lo = bv, hi = imm(ins.b - 1);
        return unary_block(a, d, n, [lo, hi](float x) {
          const float v = select(x < lo, lo, x);
          return select(v > hi, hi, v);
        });
      }
      case EwOp::kLeakyRelu:
        return unary_block(a, d, n,
                           [alpha = bv](float x) { return select(x < 0.0f, alpha * x, x); });
      case EwOp::kHardSigmoid: {
        const float alpha = bv, beta = imm(ins.b - 1);
        return unary_block(a, d, n,
                           [alpha, beta](float x) { return hard_sigmoid(x, alpha, beta); });
      }
      case EwOp::kHardSwish:
        return unary_block(a, d, n, [](float x) { return x * hard_sigmoid(x, 1.0f / 6.0f, 0.5f); });
      case EwOp::kSoftplus:
        return unary_block(a, d, n, [](float x) { return softplus(x); });
      case EwOp::kSwish:
        return unary_block(a, d, n, [](float x) { return x * sigmoid_f(x); });
      case EwOp::kGeluErf:
        return unary_block(a, d, n, [](float x) { return gelu_erf(x); });
      case EwOp::kGeluTanh:
        return unary_block(a, d, n, [](float x) { return gelu_tanh(x); });
      case EwOp::kCount:
        break;
    }
  }

  Shape out_shape_;
  std::vector<float> consts_;
  std::vector<EwInstr> program_;
  std::vector<Input> inputs_;
  int num_registers_ = 0;
  int in_place_ = -1;
  int64_t row_ = 0;         // the length of the kRow inputs' rows (0: none)
  int64_t block_ = kBlock;  // elements per block: a multiple of row_ when there is one
};

std::unique_ptr<Kernel> make_fused_elementwise(const NodeContext& ctx) {
  return std::make_unique<FusedElementwiseKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(FusedElementwise, &make_fused_elementwise, &require_float32);

}  // namespace lumen::cpu
