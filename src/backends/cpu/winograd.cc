// F(2x2, 3x3) and F(4x4, 3x3) on channels-last tensors. With B^T, G and A^T the transforms of
// Lavin and Gray:
//   U = G g G^T (t x t per output and input channel, at compile time; t = 4 or 6),
//   V = B^T d B (t x t per tile and input channel), M = per position xi: V[xi] x U[xi],
//   Y = A^T m A (2x2 or 4x4 per tile and output channel).
// Every transform runs along the channel axis, which is contiguous, so its loops vectorise.
#include "backends/cpu/winograd.h"

#include <omp.h>

#include <algorithm>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_choice.h"
#include "lumen/tensor.h"

// The kernel is AVX2 code throughout on x86 (packed_gemm's products and transforms vectorised 8
// wide): winograd_form, which is not, admits it only where the CPU has AVX2. On arm64 the region
// is plain code, its transforms vectorised with NEON and its products on packed_gemm's NEON form,
// chosen per node against oneDNN by measurement (kernel_choice.h).
LUMEN_AVX2_BEGIN
namespace lumen::cpu {
namespace {

constexpr int64_t kParallelTiles = 8;

// F(2x2, 3x3): 4x4 input tiles, 2x2 output blocks, 16 products.
struct Form2 {
  static constexpr int kOut = 2, kTile = 4;
  // r = G (a, b, c)^T, G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1].
  static void kernel_step(float a, float b, float c, float* r) {
    r[0] = a;
    r[1] = 0.5f * (a + b + c);
    r[2] = 0.5f * (a - b + c);
    r[3] = c;
  }
  // out[i] = sum_j B^T[i][j] in[j] over n channels, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
  static void input_step(const float* const* in, float* const* out, int64_t n) {
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
  // A^T = [1 1 1 0; 0 1 -1 -1].
  static void output_step(const float* const* in, float* const* out, int64_t n) {
    const float *s0 = in[0], *s1 = in[1], *s2 = in[2], *s3 = in[3];
    float *d0 = out[0], *d1 = out[1];
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) {
      d0[k] = s0[k] + s1[k] + s2[k];
      d1[k] = s1[k] - s2[k] - s3[k];
    }
  }
};

// F(4x4, 3x3): 6x6 input tiles, 4x4 output blocks, 36 products; points 0, +-1, +-2.
struct Form4 {
  static constexpr int kOut = 4, kTile = 6;
  // G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1].
  static void kernel_step(float a, float b, float c, float* r) {
    r[0] = a / 4.0f;
    r[1] = -(a + b + c) / 6.0f;
    r[2] = -(a - b + c) / 6.0f;
    r[3] = a / 24.0f + b / 12.0f + c / 6.0f;
    r[4] = a / 24.0f - b / 12.0f + c / 6.0f;
    r[5] = c;
  }
  // B^T = [4  0 -5  0 1 0;  0 -4 -4  1 1 0;  0  4 -4 -1 1 0;
  //        0 -2 -1  2 1 0;  0  2 -1 -2 1 0;  0  4  0 -5 0 1].
  static void input_step(const float* const* in, float* const* out, int64_t n) {
    const float *s0 = in[0], *s1 = in[1], *s2 = in[2], *s3 = in[3], *s4 = in[4], *s5 = in[5];
    float *d0 = out[0], *d1 = out[1], *d2 = out[2], *d3 = out[3], *d4 = out[4], *d5 = out[5];
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) {
      const float a = s4[k] - 4.0f * s2[k], b = s3[k] - 4.0f * s1[k];
      const float c = s4[k] - s2[k], e = 2.0f * (s3[k] - s1[k]);
      d0[k] = 4.0f * s0[k] - 5.0f * s2[k] + s4[k];
      d1[k] = a + b;
      d2[k] = a - b;
      d3[k] = c + e;
      d4[k] = c - e;
      d5[k] = 4.0f * s1[k] - 5.0f * s3[k] + s5[k];
    }
  }
  // A^T = [1 1 1 1 1 0;  0 1 -1 2 -2 0;  0 1 1 4 4 0;  0 1 -1 8 -8 1].
  static void output_step(const float* const* in, float* const* out, int64_t n) {
    const float *s0 = in[0], *s1 = in[1], *s2 = in[2], *s3 = in[3], *s4 = in[4], *s5 = in[5];
    float *d0 = out[0], *d1 = out[1], *d2 = out[2], *d3 = out[3];
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) {
      const float p = s1[k] + s2[k], m = s1[k] - s2[k];
      const float q = s3[k] + s4[k], r = s3[k] - s4[k];
      d0[k] = s0[k] + p + q;
      d1[k] = m + 2.0f * r;
      d2[k] = p + 4.0f * q;
      d3[k] = m + 8.0f * r + s5[k];
    }
  }
};

// U = G g G^T for every (output, input) channel pair of the (O, C, 3, 3) weights, as t*t packed
// C x O matrices.
template <class F>
std::vector<PackedMatrix> transform_weights(const float* weights, int64_t o, int64_t c) {
  constexpr int64_t kT = F::kTile;
  std::vector<float> u(static_cast<size_t>(kT * kT * c * o));  // [xi][c][o]
  // Output channels innermost: each plane of u is then written in order. Input channels are
  // shared out over the threads: ResNet-50 compiled in 156-168 ms against 179-189 ms with them
  // on one thread (four of six interleaved runs each; the other two were slow for both).
#pragma omp parallel for schedule(static) if (c * o >= 4096)
  for (int64_t ic = 0; ic < c; ++ic)
    for (int64_t oc = 0; oc < o; ++oc) {
      const float* g = weights + (oc * c + ic) * 9;
      float gg[kT][3];  // G g
      for (int j = 0; j < 3; ++j) {
        float col[kT];
        F::kernel_step(g[j], g[3 + j], g[6 + j], col);
        for (int i = 0; i < kT; ++i) gg[i][j] = col[i];
      }
      for (int i = 0; i < kT; ++i) {
        float row[kT];
        F::kernel_step(gg[i][0], gg[i][1], gg[i][2], row);
        for (int j = 0; j < kT; ++j) u[((i * kT + j) * c + ic) * o + oc] = row[j];
      }
    }
  std::vector<PackedMatrix> packed;
  packed.reserve(static_cast<size_t>(kT * kT));
  for (int xi = 0; xi < kT * kT; ++xi) packed.emplace_back(u.data() + xi * c * o, c, o, o, 1);
  return packed;
}

// Where one tile's input and output transforms read and write (the geometry of a run).
struct TileGeometry {
  int64_t c, o, in_h, in_w, pad_top, pad_left, out_h, out_w, tiles_h, tiles_w;
  const float* x;
  float* y;
};

// V[xi][row] = (B^T d B)[xi] for tile `tile` (the rows of each position xi `stride` floats
// apart), through `scratch` (kT * kT * c floats); `zeros` holds c zeros (the padding).
template <class F>
void input_tile(const TileGeometry& g, int64_t tile, const float* zeros, float* scratch, float* v,
                int64_t stride) {
  constexpr int64_t kT = F::kTile, kOut = F::kOut;
  const int64_t c = g.c;
  const int64_t tw = tile % g.tiles_w, th = (tile / g.tiles_w) % g.tiles_h;
  const int64_t n = tile / (g.tiles_w * g.tiles_h);
  const float* image = g.x + n * g.in_h * g.in_w * c;
  const float* d[kT][kT];
  for (int i = 0; i < kT; ++i)
    for (int j = 0; j < kT; ++j) {
      const int64_t ih = th * kOut - g.pad_top + i, iw = tw * kOut - g.pad_left + j;
      const bool inside = ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w;
      d[i][j] = inside ? image + (ih * g.in_w + iw) * c : zeros;
    }
  // Rows first, scratch[i][j] = (B^T d)[i][j]; then columns, V[i][j] = (scratch B)[i][j].
  for (int j = 0; j < kT; ++j) {
    const float* in[kT];
    float* out[kT];
    for (int i = 0; i < kT; ++i) {
      in[i] = d[i][j];
      out[i] = &scratch[(i * kT + j) * c];
    }
    F::input_step(in, out, c);
  }
  for (int i = 0; i < kT; ++i) {
    const float* in[kT];
    float* out[kT];
    for (int j = 0; j < kT; ++j) {
      in[j] = &scratch[(i * kT + j) * c];
      out[j] = v + (i * kT + j) * stride;
    }
    F::input_step(in, out, c);
  }
}

// Y's block of tile `tile` = epilogue(A^T m A) from M[xi][row] (each position's row `stride`
// floats from the next), through `r` (kOut * kT * o floats) and `out` (kOut * kOut * o).
template <class F>
void output_tile(const TileGeometry& g, int64_t tile, const float* m, int64_t stride, float* r,
                 float* out, const GemmEpilogue& epilogue) {
  constexpr int64_t kT = F::kTile, kOut = F::kOut;
  const int64_t o = g.o;
  const int64_t tw = tile % g.tiles_w, th = (tile / g.tiles_w) % g.tiles_h;
  const int64_t n = tile / (g.tiles_w * g.tiles_h);
  // Rows first, r[i][j] = (A^T m)[i][j]; then columns, out[i][j] = (r A)[i][j].
  for (int j = 0; j < kT; ++j) {
    const float* in[kT];
    for (int i = 0; i < kT; ++i) in[i] = m + (i * kT + j) * stride;
    float* rows[kOut];
    for (int i = 0; i < kOut; ++i) rows[i] = &r[(i * kT + j) * o];
    F::output_step(in, rows, o);
  }
  // Each output pixel of the block, or null past the image's edge.
  float* dst[kOut][kOut];
  for (int i = 0; i < kOut; ++i)
    for (int j = 0; j < kOut; ++j) {
      const int64_t oh = th * kOut + i, ow = tw * kOut + j;
      dst[i][j] =
          oh < g.out_h && ow < g.out_w ? g.y + ((n * g.out_h + oh) * g.out_w + ow) * o : nullptr;
    }
  // Without a residual, the pixels inside the image are written in place (out holds only the
  // block's pixels past the image's edge); with one, out holds them all and each is added.
  for (int i = 0; i < kOut; ++i) {
    const float* in[kT];
    for (int j = 0; j < kT; ++j) in[j] = &r[(i * kT + j) * o];
    float* cols[kOut];
    for (int j = 0; j < kOut; ++j)
      cols[j] = dst[i][j] && !epilogue.accumulate ? dst[i][j] : &out[(i * kOut + j) * o];
    F::output_step(in, cols, o);
  }
  for (int i = 0; i < kOut; ++i)
    for (int j = 0; j < kOut; ++j) {
      float* y = dst[i][j];
      if (!y) continue;
      if (epilogue.accumulate) {
        const float* src = &out[(i * kOut + j) * o];
#pragma omp simd
        for (int64_t k = 0; k < o; ++k) y[k] += src[k];
      }
      finish_row(y, o, 0, epilogue);
    }
}

// Tiles per block of the blocked way: a block's transformed input and products (kXi x rows x
// (c + o) floats) are kept to about kBlockBytes, so they stay in L2 from the input transform to
// the output transform; whole panels of the GEMM's 6 rows. 384 KiB against 192 (alternating, 2
// Zen 5 cores): 56x56 x 64 F(4x4) 0.29 against 0.29-0.37 ms, 28x28 x 128 F(4x4) 0.27 against
// 0.30-0.35, 14x14 x 256 F(2x2) 0.34 against 0.45-0.49 (each product then has 12 to 24 rows,
// not 6); 768 KiB left 28x28 x 128 too few blocks for the blocked way.
constexpr int64_t kBlockBytes = int64_t{384} << 10;
constexpr int64_t kBlockMinTiles = 6, kBlockMaxTiles = 96;

// The whole convolution in form F. Where there are blocks of tiles for every thread, each thread
// runs its blocks start to end (input transform, kT*kT products on its own thread, output
// transform with the epilogue) with the block in L2; else in three phases over all tiles, each
// shared out over the threads (the products by packed_gemm's own tiling).
template <class F>
void run_form(const std::vector<PackedMatrix>& u, int64_t c, int64_t o, const float* x,
              int64_t batch, int64_t in_h, int64_t in_w, int64_t pad_top, int64_t pad_left,
              int64_t out_h, int64_t out_w, float* y, const GemmEpilogue& epilogue) {
  constexpr int64_t kT = F::kTile, kOut = F::kOut, kXi = kT * kT;
  const int64_t tiles_h = (out_h + kOut - 1) / kOut, tiles_w = (out_w + kOut - 1) / kOut;
  const int64_t tiles = batch * tiles_h * tiles_w;
  const TileGeometry g{c, o, in_h, in_w, pad_top, pad_left, out_h, out_w, tiles_h, tiles_w, x, y};
  const int threads = omp_get_max_threads();
  const bool parallel = tiles >= kParallelTiles && threads > 1;

  // Smaller blocks where that gives every thread two: at 16 threads, 56x56 x 64 channels in
  // F(4x4) has 196 tiles, 11 blocks of 18 but 33 of 6 (resnet18 on the Xeon took 3.29 ms with
  // that layer's three passes, 2.73 block by block).
  const int64_t workers = parallel ? threads : 1;
  int64_t block = std::min(kBlockBytes / (kXi * (c + o) * static_cast<int64_t>(sizeof(float))),
                           tiles / (2 * workers));
  block =
      std::clamp<int64_t>(block / kBlockMinTiles * kBlockMinTiles, kBlockMinTiles, kBlockMaxTiles);
  const int64_t blocks = (tiles + block - 1) / block;
  if (blocks >= 2 * workers) {
#pragma omp parallel if (parallel)
    {
      thread_local std::vector<float> zeros, scratch, vb, mb;
      zeros.assign(static_cast<size_t>(c), 0.0f);
      scratch.resize(static_cast<size_t>(std::max(kXi * c, kOut * (kT + kOut) * o)));
      vb.resize(static_cast<size_t>(kXi * block * c));
      mb.resize(static_cast<size_t>(kXi * block * o));
#pragma omp for schedule(dynamic, 1)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t t0 = b * block, rows = std::min(block, tiles - t0);
        for (int64_t t = 0; t < rows; ++t)
          input_tile<F>(g, t0 + t, zeros.data(), scratch.data(), vb.data() + t * c, rows * c);
        for (int xi = 0; xi < kXi; ++xi)
          packed_gemm(rows, vb.data() + xi * rows * c, c, u[xi], mb.data() + xi * rows * o, o,
                      GemmEpilogue{});
        float* r = scratch.data();
        for (int64_t t = 0; t < rows; ++t)
          output_tile<F>(g, t0 + t, mb.data() + t * o, rows * o, r, r + kOut * kT * o, epilogue);
      }
    }
    return;
  }

  Tensor v_buf = Tensor::empty(Shape{kXi * tiles * c}, DType::kFloat32);
  Tensor m_buf = Tensor::empty(Shape{kXi * tiles * o}, DType::kFloat32);
  float* v = v_buf.data<float>();
  float* m = m_buf.data<float>();
#pragma omp parallel if (parallel)
  {
    thread_local std::vector<float> zeros, scratch;
    zeros.assign(static_cast<size_t>(c), 0.0f);
    scratch.resize(static_cast<size_t>(kXi * c));
#pragma omp for schedule(static)
    for (int64_t tile = 0; tile < tiles; ++tile)
      input_tile<F>(g, tile, zeros.data(), scratch.data(), v + tile * c, tiles * c);
  }
  // M[xi] = V[xi] x U[xi]: tiles x o each.
  for (int xi = 0; xi < kXi; ++xi)
    packed_gemm(tiles, v + xi * tiles * c, c, u[xi], m + xi * tiles * o, o, GemmEpilogue{});
#pragma omp parallel if (parallel)
  {
    thread_local std::vector<float> r, out;
    r.resize(static_cast<size_t>(kOut * kT * o));
    out.resize(static_cast<size_t>(kOut * kOut * o));
#pragma omp for schedule(static)
    for (int64_t tile = 0; tile < tiles; ++tile)
      output_tile<F>(g, tile, m + tile * o, tiles * o, r.data(), out.data(), epilogue);
  }
}

}  // namespace
LUMEN_ISA_END

std::optional<WinogradForm> winograd_form(int64_t out_h, int64_t out_w, int64_t in_channels,
                                          int64_t out_channels) {
  // Measured on 2 AVX2 cores with F(2x2, 3x3), interleaved with oneDNN's direct kernel:
  // ResNet-18's 3x3 layers from 56x56 x 64 channels (1.4 against 2.4 ms) down to 7x7 x 512 (1.35
  // against 1.75 ms) gain; with fewer than 64 input or output channels the transforms cost more
  // than the products save (SqueezeNet's 16 -> 64 channel layers: 7.8 against 5.7 ms for the
  // model), except on large images with 128 or more input channels: DenseNet's 128 -> 32 layers
  // gain at 56x56 (1.70 against 2.29 ms and 1.39 against 1.86 ms, interleaved) but not at 28x28
  // or below (with either form).
  if (!lumen_kernel_candidate() || out_h * out_w < 49) return std::nullopt;
  if (std::min(in_channels, out_channels) < 64 &&
      !(in_channels >= 128 && out_channels >= 32 && out_h * out_w >= int64_t{56} * 56))
    return std::nullopt;
  // F(4x4, 3x3) where the image has many tiles: its 36 weight matrices are 2.25 times F(2x2)'s
  // 16, which below 28x28 outweighs the products it saves (ResNet-50 with F(4x4) everywhere ran
  // 2-15 ms slower in 6 interleaved rounds of 30 runs).
  return out_h * out_w >= int64_t{28} * 28 ? WinogradForm::kF4x4 : WinogradForm::kF2x2;
}

LUMEN_AVX2_BEGIN

WinogradConv::WinogradConv(const float* weights, int64_t out_channels, int64_t in_channels,
                           WinogradForm form)
    : in_channels_(in_channels),
      out_channels_(out_channels),
      form_(form),
      u_(form == WinogradForm::kF4x4
             ? transform_weights<Form4>(weights, out_channels, in_channels)
             : transform_weights<Form2>(weights, out_channels, in_channels)) {}

void WinogradConv::run(const float* x, int64_t batch, int64_t in_h, int64_t in_w, int64_t pad_top,
                       int64_t pad_left, int64_t out_h, int64_t out_w, float* y,
                       const GemmEpilogue& epilogue) const {
  if (form_ == WinogradForm::kF4x4)
    run_form<Form4>(u_, in_channels_, out_channels_, x, batch, in_h, in_w, pad_top, pad_left, out_h,
                    out_w, y, epilogue);
  else
    run_form<Form2>(u_, in_channels_, out_channels_, x, batch, in_h, in_w, pad_top, pad_left, out_h,
                    out_w, y, epilogue);
}

LUMEN_ISA_END
}  // namespace lumen::cpu

namespace lumen::cpu {

void WinogradConv::evict() const {
  for (const PackedMatrix& u : u_) u.evict();
}

}  // namespace lumen::cpu
