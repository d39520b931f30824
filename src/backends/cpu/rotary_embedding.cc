// CPU kernel of RotaryEmbedding (opset 23) for float32, float64, float16 and bfloat16. Each task is
// one head vector of one token, taken in memory order: it finds the token's cos and sin rows (at
// position_ids[b, s], or the caches' own (b, s) row) and rotates the first rotary_dim values,
// halves (i, i + rotary_dim / 2) or interleaved pairs (2i, 2i + 1), copying the rest.
// A position id outside the caches throws InvalidArgument naming the node.
#include <algorithm>
#include <memory>
#include <string>

#include "backends/cpu/float_types.h"
#include "backends/cpu/kernel_registry.h"
#include "graph/schemas/rotary_geometry.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelWork = 1 << 15;

class RotaryEmbeddingKernel final : public Kernel {
 public:
  explicit RotaryEmbeddingKernel(const NodeContext& ctx)
      : where_(ctx.where()), g_(rotary_geometry(ctx)) {}

  void run(KernelContext& ctx) const override {
    visit_float(ctx.inputs[0].dtype(), [&](auto t) { apply<decltype(t)>(ctx); });
  }

  int in_place_input() const override { return 0; }

 private:
  template <typename T>
  void apply(KernelContext& ctx) const {
    using C = ComputeOf<T>;
    const RotaryGeometry g = g_;
    const int64_t tokens = g.batch * g.seq, half = g.rotary_dim / 2, d = g.head_size;
    const T* x = elements<T>(ctx.inputs[0]);
    const T* cos_cache = elements<T>(ctx.inputs[1]);
    const T* sin_cache = elements<T>(ctx.inputs[2]);
    const int64_t* pos = g.with_positions ? ctx.inputs[3].data<int64_t>() : nullptr;
    T* y = elements<T>(ctx.outputs[0]);
    if (pos != nullptr) {
      for (int64_t t = 0; t < tokens; ++t)
        if (pos[t] < 0 || pos[t] >= g.max_position)
          throw InvalidArgument(where_ + ": position_ids[" + std::to_string(t / g.seq) + ", " +
                                std::to_string(t % g.seq) + "] = " + std::to_string(pos[t]) +
                                " is outside the caches' " + std::to_string(g.max_position) +
                                " positions");
    }
    // One task per head vector, in memory order: (b, h, s) for 4-D X, (b, s, h) for 3-D.
    const int64_t rows = tokens * g.heads;
    const int64_t work = rows * d;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / (g.heads * g.seq);
      const int64_t s = g.three_d ? (r / g.heads) % g.seq : r % g.seq;
      const int64_t t = b * g.seq + s;
      const int64_t row = pos != nullptr ? pos[t] : t;
      const T* cosv = cos_cache + row * half;
      const T* sinv = sin_cache + row * half;
      const T* in = x + r * d;
      T* out = y + r * d;
      // Every element is read before its own slot is written, so y may be x itself.
      if (g.interleaved) {
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const C c = static_cast<C>(cosv[i]), sn = static_cast<C>(sinv[i]);
          const C a = static_cast<C>(in[2 * i]), bb = static_cast<C>(in[2 * i + 1]);
          out[2 * i] = T(c * a - sn * bb);
          out[2 * i + 1] = T(sn * a + c * bb);
        }
      } else {
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const C c = static_cast<C>(cosv[i]), sn = static_cast<C>(sinv[i]);
          const C a = static_cast<C>(in[i]), bb = static_cast<C>(in[half + i]);
          out[i] = T(c * a - sn * bb);
          out[half + i] = T(sn * a + c * bb);
        }
      }
      if (in != out) std::copy(in + g.rotary_dim, in + d, out + g.rotary_dim);
    }
  }

  std::string where_;
  RotaryGeometry g_;
};

std::unique_ptr<Kernel> make_rotary_embedding(const NodeContext& ctx) {
  return std::make_unique<RotaryEmbeddingKernel>(ctx);
}

// position_ids (input 3) is int64, checked by the schema.
std::string check_rotary_embedding(const NodeContext& ctx) {
  return require_cpu_float(ctx, 1u << 3);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(RotaryEmbedding, &make_rotary_embedding, &check_rotary_embedding);

}  // namespace lumen::cpu
