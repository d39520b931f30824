// Lumen's packed GEMM (src/backends/cpu/packed_gemm.h) against double-precision references on
// random data: matrix products of every edge shape (rows and columns that are not multiples of the
// micro-kernel's 6 x 16, k across its 256-row blocks, strided and transposed operands) with each
// epilogue, and channels-last convolutions (stride, padding, dilation, batch, channel counts around
// the block sizes). Then the same through compiled graphs: a channels-last region with a residual
// and pools, which on an AVX2 machine runs the packed kernels and the direct channels-last pools.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "backends/cpu/packed_gemm.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using cpu::ConvWindow;
using cpu::GemmActivation;
using cpu::GemmEpilogue;
using cpu::PackedMatrix;

double activate(double v, GemmActivation a, double alpha, double beta) {
  switch (a) {
    case GemmActivation::kNone: return v;
    case GemmActivation::kRelu: return std::max(v, 0.0);
    case GemmActivation::kLeakyRelu: return v < 0 ? alpha * v : v;
    case GemmActivation::kClip: return std::min(std::max(v, alpha), beta);
    case GemmActivation::kSigmoid: return 1.0 / (1.0 + std::exp(-v));
    case GemmActivation::kTanh: return std::tanh(v);
    case GemmActivation::kHardSwish: return v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0);
    case GemmActivation::kSwish: return v / (1.0 + std::exp(-v));
    case GemmActivation::kGeluErf: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case GemmActivation::kGeluTanh:
      return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  return v;
}

std::vector<float> random_floats(size_t n, uint64_t seed) {
  Tensor t = test::random_tensor({static_cast<int64_t>(n)}, seed, -1.0f, 1.0f);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

// Every element of got (rows x cols, rows ldc apart) against want (rows x cols, dense).
void expect_matrix(const std::vector<float>& got, int64_t ldc, const std::vector<double>& want,
                   int64_t rows, int64_t cols, double scale) {
  int64_t bad = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const double w = want[i * cols + j], g = got[i * ldc + j];
      if (!(std::fabs(g - w) <= 2e-5 * scale + 1e-4 * std::fabs(w)) && ++bad <= 5)
        ADD_FAILURE() << "(" << i << ", " << j << "): got " << g << ", want " << w;
    }
  EXPECT_EQ(bad, 0);
}

TEST(PackedGemm, MatchesReferenceOnEdgeShapes) {
  struct Shape3 {
    int64_t m, k, n;
  };
  const Shape3 shapes[] = {{1, 1, 1},    {5, 3, 15},    {6, 256, 16}, {7, 257, 17},
                           {13, 600, 40}, {100, 70, 33}, {131, 512, 100}};
  uint64_t seed = 100;
  for (const Shape3& s : shapes)
    for (int variant = 0; variant < 4; ++variant) {
      const bool trans_b = variant & 1, strided = variant & 2;
      SCOPED_TRACE(::testing::Message() << s.m << "x" << s.k << "x" << s.n
                                        << (trans_b ? " B transposed" : "")
                                        << (strided ? " strided" : ""));
      const int64_t lda = s.k + (strided ? 3 : 0), ldc = s.n + (strided ? 5 : 0);
      std::vector<float> a = random_floats(s.m * lda, ++seed);
      std::vector<float> b = random_floats(s.k * s.n, ++seed);
      std::vector<float> bias = random_floats(s.n, ++seed);
      std::vector<float> residual = random_floats(s.m * ldc, ++seed);
      PackedMatrix packed = trans_b ? PackedMatrix(b.data(), s.k, s.n, 1, s.k)
                                    : PackedMatrix(b.data(), s.k, s.n, s.n, 1);
      for (GemmActivation act :
           {GemmActivation::kNone, GemmActivation::kRelu, GemmActivation::kLeakyRelu,
            GemmActivation::kClip, GemmActivation::kSigmoid, GemmActivation::kTanh,
            GemmActivation::kHardSwish, GemmActivation::kSwish, GemmActivation::kGeluErf,
            GemmActivation::kGeluTanh})
        for (bool with_bias : {false, true})
          for (bool accumulate : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "activation " << static_cast<int>(act)
                                              << (with_bias ? " bias" : "")
                                              << (accumulate ? " residual" : ""));
            GemmEpilogue e;
            e.activation = act;
            e.alpha = act == GemmActivation::kClip ? -0.3f : 0.1f;
            e.beta = 0.4f;
            e.bias = with_bias ? bias.data() : nullptr;
            e.accumulate = accumulate;
            std::vector<float> c = accumulate ? residual : std::vector<float>(s.m * ldc, 7.0f);
            cpu::packed_gemm(s.m, a.data(), lda, packed, c.data(), ldc, e);
            std::vector<double> want(s.m * s.n);
            for (int64_t i = 0; i < s.m; ++i)
              for (int64_t j = 0; j < s.n; ++j) {
                double acc = with_bias ? bias[j] : 0.0;
                if (accumulate) acc += residual[i * ldc + j];
                for (int64_t q = 0; q < s.k; ++q)
                  acc += double(a[i * lda + q]) * (trans_b ? b[j * s.k + q] : b[q * s.n + j]);
                want[i * s.n + j] = activate(acc, act, e.alpha, e.beta);
              }
            expect_matrix(c, ldc, want, s.m, s.n, std::sqrt(double(s.k)));
            if (strided)  // the gaps between C's rows are left alone
              for (int64_t i = 0; i < s.m; ++i)
                EXPECT_EQ(c[i * ldc + s.n], accumulate ? residual[i * ldc + s.n] : 7.0f);
          }
    }
}

TEST(PackedGemm, ZeroDepthGivesTheEpilogueOfZero) {
  std::vector<float> bias = random_floats(20, 7), c(3 * 20, 5.0f);
  PackedMatrix packed(nullptr, 0, 20, 20, 1);
  GemmEpilogue e;
  e.bias = bias.data();
  e.activation = GemmActivation::kRelu;
  cpu::packed_gemm(3, nullptr, 0, packed, c.data(), 20, e);
  std::vector<double> want(3 * 20);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 20; ++j) want[i * 20 + j] = std::max(0.0, double(bias[j]));
  expect_matrix(c, 20, want, 3, 20, 1.0);
}

TEST(PackedConv, MatchesNaiveChannelsLastConvolution) {
  struct Case {
    int64_t batch, h, w, c, o, kh, kw, sh, sw, ph, pw, dh, dw;
  };
  const Case cases[] = {
      {1, 9, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1},   {2, 7, 9, 19, 21, 3, 3, 2, 2, 1, 1, 1, 1},
      {1, 10, 10, 64, 40, 1, 1, 2, 2, 0, 0, 1, 1}, {1, 12, 11, 24, 17, 5, 3, 1, 2, 2, 1, 1, 1},
      {1, 11, 11, 16, 8, 3, 3, 1, 1, 2, 2, 2, 2},  {1, 6, 6, 300, 33, 3, 3, 1, 1, 1, 1, 1, 1},
  };
  uint64_t seed = 500;
  for (const Case& t : cases) {
    SCOPED_TRACE(::testing::Message() << "case c=" << t.c << " o=" << t.o << " k=" << t.kh << "x"
                                      << t.kw << " s=" << t.sh << "x" << t.sw);
    ConvWindow win;
    win.batch = t.batch, win.in_h = t.h, win.in_w = t.w, win.channels = t.c;
    win.kernel_h = t.kh, win.kernel_w = t.kw, win.stride_h = t.sh, win.stride_w = t.sw;
    win.pad_top = t.ph, win.pad_left = t.pw, win.dilation_h = t.dh, win.dilation_w = t.dw;
    win.out_h = (t.h + 2 * t.ph - (t.kh - 1) * t.dh - 1) / t.sh + 1;
    win.out_w = (t.w + 2 * t.pw - (t.kw - 1) * t.dw - 1) / t.sw + 1;
    std::vector<float> x = random_floats(t.batch * t.h * t.w * t.c, ++seed);
    std::vector<float> wt = random_floats(t.o * t.c * t.kh * t.kw, ++seed);
    std::vector<float> bias = random_floats(t.o, ++seed);
    PackedMatrix packed = PackedMatrix::from_conv_weights(wt.data(), t.o, t.c, t.kh, t.kw);
    GemmEpilogue e;
    e.bias = bias.data();
    e.activation = GemmActivation::kRelu;
    const int64_t pixels = t.batch * win.out_h * win.out_w;
    std::vector<float> y(pixels * t.o, 3.0f);
    cpu::packed_conv(win, x.data(), packed, y.data(), e);
    std::vector<double> want(pixels * t.o);
    for (int64_t n = 0; n < t.batch; ++n)
      for (int64_t oh = 0; oh < win.out_h; ++oh)
        for (int64_t ow = 0; ow < win.out_w; ++ow)
          for (int64_t o = 0; o < t.o; ++o) {
            double acc = bias[o];
            for (int64_t i = 0; i < t.c; ++i)
              for (int64_t r = 0; r < t.kh; ++r)
                for (int64_t q = 0; q < t.kw; ++q) {
                  const int64_t ih = oh * t.sh - t.ph + r * t.dh, iw = ow * t.sw - t.pw + q * t.dw;
                  if (ih < 0 || ih >= t.h || iw < 0 || iw >= t.w) continue;
                  acc += double(x[((n * t.h + ih) * t.w + iw) * t.c + i]) *
                         wt[((o * t.c + i) * t.kh + r) * t.kw + q];
                }
            want[((n * win.out_h + oh) * win.out_w + ow) * t.o + o] = std::max(acc, 0.0);
          }
    expect_matrix(y, t.o, want, pixels, t.o, std::sqrt(double(t.c * t.kh * t.kw)));
  }
}

// NCHW reference convolution with bias, in double.
std::vector<double> conv_nchw(const std::vector<double>& x, const Shape& xs, const Tensor& w,
                              const Tensor& b, int64_t stride, int64_t pad) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const int64_t o = w.shape()[0], k = w.shape()[2];
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (wd + 2 * pad - k) / stride + 1;
  std::vector<double> wv = test::to_doubles(w), bv = test::to_doubles(b);
  std::vector<double> y(static_cast<size_t>(n * o * oh * ow));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) {
          double acc = bv[oc];
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t kr = 0; kr < k; ++kr)
              for (int64_t kq = 0; kq < k; ++kq) {
                const int64_t rr = r * stride - pad + kr, qq = q * stride - pad + kq;
                if (rr < 0 || rr >= h || qq < 0 || qq >= wd) continue;
                acc += x[((i * c + ic) * h + rr) * wd + qq] * wv[((oc * c + ic) * k + kr) * k + kq];
              }
          y[((i * o + oc) * oh + r) * ow + q] = acc;
        }
  return y;
}

// 3x3 pooling, stride 2, padding 1, ceil_mode: max, or the mean over the window's inside
// positions (count_include_pad 0).
std::vector<double> pool_nchw(const std::vector<double>& x, const Shape& xs, bool is_max,
                              int64_t* out_h, int64_t* out_w) {
  const int64_t planes = xs[0] * xs[1], h = xs[2], wd = xs[3];
  auto out = [](int64_t in) {
    int64_t o = (in + 2 - 3 + 1) / 2 + 1;                 // ceil((in + 2 - 3) / 2) + 1
    return (o - 1) * 2 >= in + 1 ? o - 1 : o;             // the last window starts inside
  };
  *out_h = out(h), *out_w = out(wd);
  std::vector<double> y(static_cast<size_t>(planes * *out_h * *out_w));
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t r = 0; r < *out_h; ++r)
      for (int64_t q = 0; q < *out_w; ++q) {
        double acc = is_max ? -1e300 : 0.0;
        int64_t count = 0;
        for (int64_t kr = 0; kr < 3; ++kr)
          for (int64_t kq = 0; kq < 3; ++kq) {
            const int64_t rr = r * 2 - 1 + kr, qq = q * 2 - 1 + kq;
            if (rr < 0 || rr >= h || qq < 0 || qq >= wd) continue;
            const double v = x[(p * h + rr) * wd + qq];
            acc = is_max ? std::max(acc, v) : acc + v;
            ++count;
          }
        y[(p * *out_h + r) * *out_w + q] = is_max ? acc : acc / double(count);
      }
  return y;
}

// conv(3x3, stride 2) -> Relu -> conv(3x3) + residual -> Relu -> MaxPool and AveragePool (3x3,
// stride 2, pad 1, ceil_mode): one channels-last region whose convolutions have 12 and 24 input
// channels, so an AVX2 machine runs them (and the residual) through the packed GEMM.
TEST(PackedConv, ChannelsLastRegionWithResidualAndPoolsMatchesReference) {
  const int64_t c0 = 12, c1 = 24, h = 15, wd = 13;
  Tensor x = test::random_tensor({2, c0, h, wd}, 61, -2, 2);
  Tensor w1 = test::random_tensor({c1, c0, 3, 3}, 62, -0.3f, 0.3f);
  Tensor b1 = test::random_tensor({c1}, 63, -1, 1);
  Tensor w2 = test::random_tensor({c1, c1, 3, 3}, 64, -0.2f, 0.2f);
  Tensor b2 = test::random_tensor({c1}, 65, -1, 1);
  Graph graph;
  Value* in = graph.add_input("x", x.shape());
  Value* y1 = graph.add_op(
      "Relu", {graph.add_op("Conv", {in, graph.add_constant("w1", w1), graph.add_constant("b1", b1)},
                            {{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}})});
  Value* y2 = graph.add_op("Conv", {y1, graph.add_constant("w2", w2), graph.add_constant("b2", b2)},
                           {{"pads", {1, 1, 1, 1}}});
  Value* y3 = graph.add_op("Relu", {graph.add_op("Add", {y2, y1})});
  const Attributes pool = {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}},
                           {"ceil_mode", int64_t{1}}};
  graph.mark_output(graph.add_op("MaxPool", {y3}, pool, "max"));
  graph.mark_output(graph.add_op("AveragePool", {y3}, pool, "avg"));
  graph.optimize();

  std::vector<double> a = conv_nchw(test::to_doubles(x), x.shape(), w1, b1, 2, 1);
  for (double& v : a) v = std::max(v, 0.0);
  const Shape as({2, c1, (h - 1) / 2 + 1, (wd - 1) / 2 + 1});
  std::vector<double> b = conv_nchw(a, as, w2, b2, 1, 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::max(b[i] + a[i], 0.0);
  int64_t ph = 0, pw = 0;
  std::vector<double> want_max = pool_nchw(b, as, true, &ph, &pw);
  std::vector<double> want_avg = pool_nchw(b, as, false, &ph, &pw);
  Runtime rt;
  std::vector<Tensor> got = graph.compile(&rt)->execute({x});
  test::expect_close(got[0], {2, c1, ph, pw}, want_max, 1e-4, 1e-4);
  test::expect_close(got[1], {2, c1, ph, pw}, want_avg, 1e-4, 1e-4);
}

}  // namespace
}  // namespace lumen
