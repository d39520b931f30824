// The per-ISA pieces of GroupedConv8 (grouped_conv.h): one block of output pixels of one group,
// and the packing of a band of input rows. GroupedConv8::run (grouped_conv.cc) shares the work out
// the same way on every CPU and calls this CPU's form: AVX2 (grouped_conv.cc) or NEON
// (grouped_conv_neon.cc).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "backends/cpu/packed_gemm.h"

namespace lumen::cpu::grouped8 {

inline constexpr int64_t kLanes = 8;  // channels per group
inline constexpr int64_t kTaps = 3;   // kernel height and width
inline constexpr int kMaxBlock = 12;  // output pixels per block at most

// N output pixels, 8 channels each, from the packed rows at q (row_stride floats apart; q is the
// input column under the first pixel's first kernel column; pixels 8 floats apart), the group's
// weights w ([kh][kw][input channel][output channel]) and biases b (8, or null), into y (pixels
// y_step apart), with the epilogue e.
using BlockFn = void (*)(const float* q, int64_t row_stride, const float* w, const float* b,
                         float* y, int64_t y_step, const GemmEpilogue& e);

// Copies input rows [ih0, ih0 + rows) of one group's 8 channels (xg; pixels `channels` floats
// apart) into `packed` (rows row_stride apart, pixels 8 apart), input column c - pad_left at
// column c for c < cols, zeros outside the image.
using PackFn = void (*)(const float* xg, int64_t channels, int64_t in_h, int64_t in_w, int64_t ih0,
                        int64_t rows, int64_t cols, int64_t pad_left, float* packed,
                        int64_t row_stride);

struct Kernels {
  const BlockFn* blocks[2];  // [width stride - 1][pixels - 1], pixels <= kMaxBlock
  PackFn pack;
};

// Whether this CPU has a form: AVX2 on x86, NEON on arm64.
bool has_form();

// This CPU's form; only called where grouped_conv8_applies admits the kernel.
Kernels kernels();

// Kernels::blocks for a form's Block<N, S>::run (a BlockFn for N pixels at width stride S).
template <template <int, int> class Block>
struct BlockTables {
  template <int S, size_t... I>
  static constexpr std::array<BlockFn, sizeof...(I)> row(std::index_sequence<I...>) {
    return {&Block<static_cast<int>(I) + 1, S>::run...};
  }
  static constexpr std::array<std::array<BlockFn, kMaxBlock>, 2> kTables = {
      row<1>(std::make_index_sequence<kMaxBlock>()), row<2>(std::make_index_sequence<kMaxBlock>())};
};

// The epilogue's activations other than ReLU (which the blocks apply in registers) over the n
// pixels a block stored at y (y_step apart), its bias already added.
inline void finish_block(float* y, int n, int64_t y_step, const GemmEpilogue& e) {
  if (e.activation == GemmActivation::kNone || e.activation == GemmActivation::kRelu) return;
  GemmEpilogue act = e;
  act.bias = nullptr;
  for (int p = 0; p < n; ++p) finish_row(y + p * y_step, kLanes, 0, act);
}

}  // namespace lumen::cpu::grouped8
