// F(2x2, 3x3) on channels-last tensors. With B^T, G and A^T the transforms of Lavin and Gray:
//   U = G g G^T (4x4 per output and input channel, at compile time),
//   V = B^T d B (4x4 per tile and input channel), M = per position xi: V[xi] x U[xi],
//   Y = A^T m A (2x2 per tile and output channel).
// Every transform runs along the channel axis, which is contiguous, so its loops vectorise.
#include "backends/cpu/winograd.h"

#include <omp.h>

#include <algorithm>

#include "lumen/tensor.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kTile = 4;  // input tile side
constexpr int64_t kOut = 2;   // output block side
constexpr int64_t kXi = 16;   // positions of the transformed tile
constexpr int64_t kParallelTiles = 16;

// One 1-D step of the input transform, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], over `n`
// channels: out[i] = sum_j B^T[i][j] in[j]. Applied along the tile's rows, then its columns.
inline void input_step(const float* const in[kTile], float* const out[kTile], int64_t n) {
  const float *s0 = in[0], *s1 = in[1], *s2 = in[2], *s3 = in[3];
  float *d0 = out[0], *d1 = out[1], *d2 = out[2], *d3 = out[3];
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) {
    d0[k] = s0[k] - s2[k];
    d1[k] = s1[k] + s2[k];
    d2[k] = s2[k] - s1[k];
    d3[k] = s1[k] - s3[k];
  }
}

// One 1-D step of the output transform, A^T = [1 1 1 0; 0 1 -1 -1], over `n` channels.
inline void output_step(const float* const in[kTile], float* const out[kOut], int64_t n) {
  const float *s0 = in[0], *s1 = in[1], *s2 = in[2], *s3 = in[3];
  float *d0 = out[0], *d1 = out[1];
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) {
    d0[k] = s0[k] + s1[k] + s2[k];
    d1[k] = s1[k] - s2[k] - s3[k];
  }
}

}  // namespace

bool winograd_pays(int64_t out_h, int64_t out_w, int64_t in_channels, int64_t out_channels) {
  // Measured on 2 AVX2 cores, interleaved with oneDNN's direct kernel: ResNet-18's 3x3 layers
  // from 56x56 x 64 channels (1.4 against 2.4 ms) down to 7x7 x 512 (1.35 against 1.75 ms) gain;
  // with fewer than 64 input or output channels the transforms cost more than the products save
  // (SqueezeNet's 16 -> 64 channel layers: 7.8 against 5.7 ms for the model), except on large
  // images with 128 or more input channels: DenseNet's 128 -> 32 layers gain at 56x56 (1.70
  // against 2.29 ms and 1.39 against 1.86 ms, interleaved) but not at 28x28 or below.
  if (!prefer_packed_gemm() || out_h * out_w < 49) return false;
  return std::min(in_channels, out_channels) >= 64 ||
         (in_channels >= 128 && out_channels >= 32 && out_h * out_w >= int64_t{56} * 56);
}

WinogradConv::WinogradConv(const float* weights, int64_t out_channels, int64_t in_channels)
    : in_channels_(in_channels), out_channels_(out_channels) {
  const int64_t c = in_channels, o = out_channels;
  std::vector<float> u(static_cast<size_t>(kXi * c * o));  // [xi][c][o]
  // Output channels innermost: each of the 16 planes of u is then written in order.
  for (int64_t ic = 0; ic < c; ++ic)
    for (int64_t oc = 0; oc < o; ++oc) {
      const float* g = weights + (oc * c + ic) * 9;
      // t = G g (4x3), then U = t G^T (4x4); G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1].
      float t[kTile][3];
      for (int j = 0; j < 3; ++j) {
        t[0][j] = g[j];
        t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        t[3][j] = g[6 + j];
      }
      for (int i = 0; i < kTile; ++i) {
        const float r[kTile] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]),
                                0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
        for (int j = 0; j < kTile; ++j) u[((i * kTile + j) * c + ic) * o + oc] = r[j];
      }
    }
  u_.reserve(kXi);
  for (int xi = 0; xi < kXi; ++xi) u_.emplace_back(u.data() + xi * c * o, c, o, o, 1);
}

void WinogradConv::run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t pad_top,
                       int64_t pad_left, int64_t out_h, int64_t out_w, float* y,
                       const GemmEpilogue& epilogue) const {
  const int64_t c = in_channels_, o = out_channels_;
  const int64_t tiles_h = (out_h + kOut - 1) / kOut, tiles_w = (out_w + kOut - 1) / kOut;
  const int64_t tiles = batch * tiles_h * tiles_w;
  Tensor v_buf = Tensor::empty(Shape{kXi * tiles * c}, DType::kFloat32);
  Tensor m_buf = Tensor::empty(Shape{kXi * tiles * o}, DType::kFloat32);
  float* v = v_buf.data<float>();
  float* m = m_buf.data<float>();
  const bool parallel = tiles >= kParallelTiles && omp_get_max_threads() > 1;

  // V[xi][tile][c] = (B^T d B)[xi].
#pragma omp parallel if (parallel)
  {
    thread_local std::vector<float> zeros, t;
    zeros.assign(static_cast<size_t>(c), 0.0f);
    t.resize(static_cast<size_t>(kTile * kTile * c));
#pragma omp for schedule(static)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t tw = tile % tiles_w, th = (tile / tiles_w) % tiles_h;
      const int64_t n = tile / (tiles_w * tiles_h);
      const float* image = x + n * in_h * in_w * c;
      const float* d[kTile][kTile];
      for (int i = 0; i < kTile; ++i)
        for (int j = 0; j < kTile; ++j) {
          const int64_t ih = th * kOut - pad_top + i, iw = tw * kOut - pad_left + j;
          const bool inside = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w;
          d[i][j] = inside ? image + (ih * in_w + iw) * c : zeros.data();
        }
      // Rows first, t[i][j] = (B^T d)[i][j]; then columns, V[i][j] = (t B)[i][j].
      for (int j = 0; j < kTile; ++j) {
        const float* in[kTile] = {d[0][j], d[1][j], d[2][j], d[3][j]};
        float* out[kTile];
        for (int i = 0; i < kTile; ++i) out[i] = &t[(i * kTile + j) * c];
        input_step(in, out, c);
      }
      for (int i = 0; i < kTile; ++i) {
        const float* in[kTile];
        float* out[kTile];
        for (int j = 0; j < kTile; ++j) {
          in[j] = &t[(i * kTile + j) * c];
          out[j] = v + ((i * kTile + j) * tiles + tile) * c;
        }
        input_step(in, out, c);
      }
    }
  }

  // M[xi] = V[xi] x U[xi]: tiles x o each.
  for (int xi = 0; xi < kXi; ++xi)
    packed_gemm(tiles, v + xi * tiles * c, c, u_[xi], m + xi * tiles * o, o, GemmEpilogue{});

    // Y = A^T m A, then the epilogue on each output pixel.
#pragma omp parallel if (parallel)
  {
    thread_local std::vector<float> r, out;
    r.resize(static_cast<size_t>(kOut * kTile * o));
    out.resize(static_cast<size_t>(kOut * kOut * o));
#pragma omp for schedule(static)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t tw = tile % tiles_w, th = (tile / tiles_w) % tiles_h;
      const int64_t n = tile / (tiles_w * tiles_h);
      // Rows first, r[i][j] = (A^T m)[i][j]; then columns, out[i][j] = (r A)[i][j].
      for (int j = 0; j < kTile; ++j) {
        const float* in[kTile];
        for (int i = 0; i < kTile; ++i) in[i] = m + ((i * kTile + j) * tiles + tile) * o;
        float* rows[kOut] = {&r[(0 * kTile + j) * o], &r[(1 * kTile + j) * o]};
        output_step(in, rows, o);
      }
      for (int i = 0; i < kOut; ++i) {
        const float* in[kTile];
        for (int j = 0; j < kTile; ++j) in[j] = &r[(i * kTile + j) * o];
        float* cols[kOut] = {&out[(i * kOut + 0) * o], &out[(i * kOut + 1) * o]};
        output_step(in, cols, o);
      }
      for (int i = 0; i < kOut; ++i)
        for (int j = 0; j < kOut; ++j) {
          const int64_t oh = th * kOut + i, ow = tw * kOut + j;
          if (oh >= out_h || ow >= out_w) continue;
          float* dst = y + ((n * out_h + oh) * out_w + ow) * o;
          const float* src = &out[(i * kOut + j) * o];
          if (epilogue.accumulate) {
#pragma omp simd
            for (int64_t k = 0; k < o; ++k) dst[k] += src[k];
          } else {
            std::copy(src, src + o, dst);
          }
          finish_row(dst, o, 0, epilogue);
        }
    }
  }
}

}  // namespace lumen::cpu
