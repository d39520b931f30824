// CPU kernel of TensorScatter for every dtype (a byte copy). The cache is seen as
// [prefix, max_seq, inner] around the sequence axis and the update as [prefix, seq, inner]; each
// prefix row's update rows land at its batch's write index. The output may be the cache itself
// (the planner then runs the op in place and only the update is copied, as a KV cache wants).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

// Bytes below which the copies run on one thread.
constexpr int64_t kParallelBytes = 1 << 18;

class TensorScatterKernel final : public Kernel {
 public:
  explicit TensorScatterKernel(const NodeContext& ctx)
      : where_(ctx.where()),
        circular_(ctx.attr_string("mode", "linear") == "circular"),
        elem_(static_cast<int64_t>(dtype_size(ctx.input_dtype(0)))) {
    const Shape& cache = ctx.input_shape(0);
    const int axis = normalize_axis(ctx.attr_int("axis", -2), cache.rank());
    batch_ = cache[0];
    for (int d = 0; d < axis; ++d) prefix_ *= cache[d];
    max_seq_ = cache[axis];
    seq_ = ctx.input_shape(1)[axis];
    for (int d = axis + 1; d < cache.rank(); ++d) inner_ *= cache[d];
  }

  void run(KernelContext& ctx) const override {
    const auto* cache = static_cast<const char*>(ctx.inputs[0].raw_data());
    const auto* update = static_cast<const char*>(ctx.inputs[1].raw_data());
    auto* out = static_cast<char*>(ctx.outputs[0].raw_data());
    const int64_t* indices =
        ctx.inputs.size() > 2 && ctx.inputs[2].defined() ? ctx.inputs[2].data<int64_t>() : nullptr;
    // Every index is checked before anything is written.
    std::vector<int64_t> start(static_cast<size_t>(batch_), 0);
    for (int64_t b = 0; b < batch_; ++b) {
      int64_t s = indices ? indices[b] : 0;
      if (circular_) {
        if (max_seq_ > 0) s = ((s % max_seq_) + max_seq_) % max_seq_;
      } else if (s < 0 || s + seq_ > max_seq_) {
        throw InvalidArgument(where_ + ": write_indices[" + std::to_string(b) +
                              "] = " + std::to_string(s) + " with " + std::to_string(seq_) +
                              " update rows does not fit the cache's " + std::to_string(max_seq_) +
                              " (mode linear)");
      }
      start[b] = s;
    }
    const int64_t row = inner_ * elem_;  // bytes of one sequence position
    const int64_t total = prefix_ * max_seq_ * row;
    // In place only the update moves (a decoding step's new key: a few KB), not the cache.
    const bool parallel = (out != cache ? total : prefix_ * seq_ * row) > kParallelBytes;
    if (out != cache) {
      const int64_t chunk = max_seq_ * row;
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t p = 0; p < prefix_; ++p) std::memcpy(out + p * chunk, cache + p * chunk, chunk);
    }
    if (seq_ == 0 || prefix_ == 0) return;
    const int64_t per_batch = prefix_ / batch_;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < prefix_; ++p) {
      const int64_t s0 = start[p / per_batch];
      char* dst = out + p * max_seq_ * row;
      const char* src = update + p * seq_ * row;
      if (s0 + seq_ <= max_seq_) {
        std::memcpy(dst + s0 * row, src, seq_ * row);
        continue;
      }
      // Circular mode past the cache's end: the rest wraps to its start (seq_ <= max_seq_, so
      // no position is written twice).
      for (int64_t i = 0; i < seq_; ++i)
        std::memcpy(dst + ((s0 + i) % max_seq_) * row, src + i * row, row);
    }
  }
  int in_place_input() const override {
    return 0;
  }

 private:
  std::string where_;
  bool circular_;
  int64_t elem_;
  int64_t batch_ = 1, prefix_ = 1, max_seq_ = 1, seq_ = 0, inner_ = 1;
};

std::unique_ptr<Kernel> make_tensor_scatter(const NodeContext& ctx) {
  return std::make_unique<TensorScatterKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(TensorScatter, &make_tensor_scatter);

}  // namespace lumen::cpu
