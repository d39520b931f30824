// MatMulNBits (com.microsoft): Y = A x W with W (K x N) stored block-quantized along K, in the
// layout ONNX Runtime's quantizer writes. Shared by its schema, the fuse-block-dequant pass and
// the kernels. Included only by those files.
//
// Inputs: A (float32, [..., K]), B (uint8 [N, n_blocks, blob]: column n's block b holds its
// block_size values packed `bits` wide, the first in the lowest bits), scales (float32,
// N * n_blocks, column-major by block: scales[n * n_blocks + b]), zero_points (optional: uint8
// packed like B along the blocks, [N, ceil(n_blocks * bits / 8)], or float32 [N * n_blocks];
// default 2^(bits - 1)), g_idx (optional, deprecated: refused), bias (optional float32 [N]).
// Lumen's epilogue, made by its passes (fuse-matmul, fuse-residual) as for FusedMatMul: a
// residual (optional input 6, Y's type and shape) added, then the attribute "activation" (with
// "activation_alpha", "activation_beta") applied as each output is written:
// Y = activation(A x W + bias + residual).
// W[k, n] = (q(n, k) - zero_point(n, k / block_size)) * scale(n, k / block_size).
#pragma once

#include <cstdint>

namespace lumen {

// The input slots of MatMulNBits.
inline constexpr int kNBitsA = 0;
inline constexpr int kNBitsB = 1;
inline constexpr int kNBitsScales = 2;
inline constexpr int kNBitsZeroPoints = 3;
inline constexpr int kNBitsGroupIndex = 4;
inline constexpr int kNBitsBias = 5;
inline constexpr int kNBitsResidual = 6;

// The sizes of one MatMulNBits weight, from its attributes.
struct NBitsLayout {
  int64_t k = 0, n = 0;
  int bits = 4;
  int64_t block_size = 32;
  // Blocks per column (the last may be partial) and bytes per block.
  int64_t n_blocks() const { return (k + block_size - 1) / block_size; }
  int64_t blob_bytes() const { return block_size * bits / 8; }
  // Bytes per column of packed uint8 zero points.
  int64_t zero_point_bytes() const { return (n_blocks() * bits + 7) / 8; }

  // The quantized value of row k of column n in B's bytes.
  uint8_t q(const uint8_t* b, int64_t col, int64_t row) const {
    const int64_t blk = row / block_size, in = row % block_size;
    const uint8_t* blob = b + (col * n_blocks() + blk) * blob_bytes();
    if (bits == 8) return blob[in];
    return static_cast<uint8_t>((blob[in / 2] >> (4 * (in & 1))) & 0xF);
  }
  // The uint8 zero point of block blk of column n in packed zero-point bytes.
  uint8_t zero_point(const uint8_t* z, int64_t col, int64_t blk) const {
    const uint8_t* row = z + col * zero_point_bytes();
    if (bits == 8) return row[blk];
    return static_cast<uint8_t>((row[blk / 2] >> (4 * (blk & 1))) & 0xF);
  }
  // The zero point used when none is given.
  int default_zero_point() const { return 1 << (bits - 1); }
};

}  // namespace lumen
