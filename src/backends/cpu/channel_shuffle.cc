// CPU kernel of ChannelShuffle (schema in graph/schemas/channel_shuffle.cc): the concatenation of
// the inputs along `axis`, its channels shuffled over `groups`, split into equal outputs, in one
// copy. Every dtype is moved by its element size.
//
// The output channels are planned at compile time as runs: a run takes `count` consecutive
// channels from each of `groups` sources and interleaves them (output channel i * groups + g from
// source g's channel i). Channels-last tensors (nothing after `axis`) of 4-byte elements with two
// groups, ShuffleNet's case, interleave their runs 8 channels at a time in AVX2 registers where the
// CPU has them.
#include <omp.h>

#include <cstring>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"

#if LUMEN_X86
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

#if LUMEN_X86
LUMEN_AVX2_BEGIN
// dst[2i] = a[i], dst[2i + 1] = b[i] for i < n - n % 8, 8 of each in registers; returns n - n % 8.
int64_t interleave_avx2(const float* a, const float* b, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8, dst += 16) {
    const __m256 x = _mm256_loadu_ps(a + i), y = _mm256_loadu_ps(b + i);
    const __m256 lo = _mm256_unpacklo_ps(x, y);  // x0 y0 x1 y1 | x4 y4 x5 y5
    const __m256 hi = _mm256_unpackhi_ps(x, y);  // x2 y2 x3 y3 | x6 y6 x7 y7
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
  return i;
}
LUMEN_ISA_END
#endif

constexpr int64_t kParallelBytes = int64_t{1} << 16;

// Where one output channel comes from: input `input`, channel `channel` along the axis.
struct Source {
  int input = 0;
  int64_t channel = 0;
};

// `count` channels from each source, interleaved into output `output` from channel `first`.
struct Run {
  int output = 0;
  int64_t first = 0;
  int64_t count = 0;
  std::vector<Source> sources;  // one per group; a single source copies `count` channels as is
};

class ChannelShuffleKernel final : public Kernel {
 public:
  explicit ChannelShuffleKernel(const NodeContext& ctx)
      : elem_size_(static_cast<int64_t>(dtype_size(ctx.input_dtype(0)))) {
    const Shape& first = ctx.input_shape(0);
    const int rank = first.rank();
    const int64_t axis_attr = ctx.attr_int("axis");
    const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
    for (int d = 0; d < axis; ++d) outer_ *= first.dims()[d];
    for (int d = axis + 1; d < rank; ++d) inner_ *= first.dims()[d];
    std::vector<Source> concat;  // channel of the concatenation -> its source
    for (int k = 0; k < ctx.num_inputs(); ++k) {
      in_channels_.push_back(ctx.input_shape(k).dims()[axis]);
      for (int64_t c = 0; c < in_channels_.back(); ++c) concat.push_back({k, c});
    }
    const auto channels = static_cast<int64_t>(concat.size());
    groups_ = ctx.attr_int("groups");
    out_channels_ = channels / ctx.num_outputs();
    const int64_t per_group = channels / groups_;
    // Output channel j (of the whole shuffled tensor) reads concatenated channel
    // (j % groups) * per_group + j / groups.
    auto source = [&](int64_t j) { return concat[(j % groups_) * per_group + j / groups_]; };
    for (int64_t j = 0; j < channels;) {
      const int out = static_cast<int>(j / out_channels_);
      const int64_t end = (out + 1) * out_channels_;  // runs stay inside one output
      Run run{out, j - out * out_channels_, 0, {}};
      if (j % groups_ == 0 && j + groups_ <= end) {
        for (int64_t g = 0; g < groups_; ++g) run.sources.push_back(source(j + g));
        // Extend while every group's next channel follows its last one in the same input.
        auto follows = [&](int64_t n) {
          if (j + (n + 1) * groups_ > end) return false;
          for (int64_t g = 0; g < groups_; ++g) {
            const Source s = source(j + n * groups_ + g);
            if (s.input != run.sources[g].input || s.channel != run.sources[g].channel + n)
              return false;
          }
          return true;
        };
        while (follows(run.count)) ++run.count;
        j += run.count * groups_;
      } else {
        run.sources.push_back(source(j));
        run.count = 1;
        ++j;
      }
      runs_.push_back(std::move(run));
    }
  }

  void run(KernelContext& ctx) const override {
    if (outer_ == 0 || inner_ == 0) return;
    std::vector<const char*> in(ctx.inputs.size());
    for (size_t k = 0; k < in.size(); ++k)
      in[k] = static_cast<const char*>(ctx.inputs[k].raw_data());
    std::vector<char*> out(ctx.outputs.size());
    for (size_t o = 0; o < out.size(); ++o) out[o] = static_cast<char*>(ctx.outputs[o].raw_data());
    const int64_t total_bytes =
        outer_ * out_channels_ * inner_ * elem_size_ * static_cast<int64_t>(out.size());
    const bool interleave8 = inner_ == 1 && elem_size_ == 4 && groups_ == 2;
    const bool avx2 = has_avx2();  // once per run, not per row
#pragma omp parallel for schedule(static) if (total_bytes > kParallelBytes)
    for (int64_t p = 0; p < outer_; ++p) {
      for (const Run& r : runs_) {
        if (interleave8 && r.sources.size() == 2) {
          interleave_pair(p, r, in, out, avx2);
          continue;
        }
        const int64_t block = inner_ * elem_size_;  // bytes of one channel in one outer row
        char* dst = out[r.output] + (p * out_channels_ + r.first) * block;
        const auto groups = static_cast<int64_t>(r.sources.size());
        for (int64_t i = 0; i < r.count; ++i)
          for (int64_t g = 0; g < groups; ++g, dst += block) {
            const Source& s = r.sources[g];
            std::memcpy(dst, in[s.input] + (p * in_channels_[s.input] + s.channel + i) * block,
                        block);
          }
      }
    }
  }

 private:
  // A two-group run of a channels-last row of 4-byte elements: 8 channels of each source per
  // step, interleaved in registers.
  void interleave_pair(int64_t p, const Run& r, const std::vector<const char*>& in,
                       const std::vector<char*>& out, bool avx2) const {
    const Source a = r.sources[0], b = r.sources[1];
    const auto* pa =
        reinterpret_cast<const float*>(in[a.input]) + p * in_channels_[a.input] + a.channel;
    const auto* pb =
        reinterpret_cast<const float*>(in[b.input]) + p * in_channels_[b.input] + b.channel;
    auto* dst = reinterpret_cast<float*>(out[r.output]) + p * out_channels_ + r.first;
    int64_t i = 0;
#if LUMEN_X86
    if (avx2) {
      i = interleave_avx2(pa, pb, dst, r.count);
      dst += 2 * i;
    }
#endif
    for (; i < r.count; ++i, dst += 2) {
      dst[0] = pa[i];
      dst[1] = pb[i];
    }
  }

  int64_t elem_size_;
  int64_t outer_ = 1, inner_ = 1;
  int64_t groups_ = 1;
  int64_t out_channels_ = 0;          // channels of each output
  std::vector<int64_t> in_channels_;  // channels of each input
  std::vector<Run> runs_;
};

std::unique_ptr<Kernel> make_channel_shuffle(const NodeContext& ctx) {
  return std::make_unique<ChannelShuffleKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(ChannelShuffle, &make_channel_shuffle, nullptr);

}  // namespace lumen::cpu
