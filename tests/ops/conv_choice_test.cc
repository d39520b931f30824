// Channels-last convolutions that both Lumen's own kernels (Winograd, GroupedConv8, Im2colConv,
// DepthwiseConv, and at AVX-512 pointwise ones on packed_gemm) and oneDNN's primitive can run: each
// side forced in turn, then the measured choice (lumen/cpu_isa.h, set_cpu_kernel_choice), every
// output element against a naive double-precision convolution, with bias, activation and residual.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

struct ConvCase {
  const char* kernel;  // which of Lumen's kernels takes it at AVX2 and above
  int64_t c, o, h, w, k, stride, pad, group;
  const char* activation;
};

// (N, C, H, W) <-> (N, H, W, C) of a one-image tensor as doubles.
std::vector<double> to_nhwc(const std::vector<double>& nchw, int64_t c, int64_t h, int64_t w) {
  std::vector<double> out(nchw.size());
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < h * w; ++i) out[i * c + ch] = nchw[ch * h * w + i];
  return out;
}

double activate(double v, const std::string& act) {
  if (act == "Relu") return std::max(v, 0.0);
  if (act == "Swish") return v / (1 + std::exp(-v));
  return v;
}

// Grouped convolution of one image, NCHW in and out, in double.
std::vector<double> reference(const Tensor& x, const Tensor& w, const Tensor& b, const ConvCase& t,
                              int64_t oh, int64_t ow) {
  const std::vector<double> xv = test::to_doubles(x), wv = test::to_doubles(w),
                            bv = test::to_doubles(b);
  const int64_t cg = t.c / t.group, og = t.o / t.group;
  std::vector<double> y(static_cast<size_t>(t.o * oh * ow));
  for (int64_t o = 0; o < t.o; ++o)
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t q = 0; q < ow; ++q) {
        double acc = bv[o];
        const int64_t g = o / og;
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t kr = 0; kr < t.k; ++kr)
            for (int64_t kq = 0; kq < t.k; ++kq) {
              const int64_t ih = r * t.stride - t.pad + kr, iw = q * t.stride - t.pad + kq;
              if (ih < 0 || ih >= t.h || iw < 0 || iw >= t.w) continue;
              acc += xv[((g * cg + ci) * t.h + ih) * t.w + iw] *
                     wv[((o * cg + ci) * t.k + kr) * t.k + kq];
            }
        y[(o * oh + r) * ow + q] = acc;
      }
  return y;
}

TEST(ConvChoice, OwnKernelsAndOneDnnAgree) {
  const ConvCase cases[] = {
      {"Winograd", 64, 64, 14, 14, 3, 1, 1, 1, "Relu"},
      {"GroupedConv8", 32, 32, 12, 10, 3, 1, 1, 4, "Relu"},
      {"Im2colConv", 64, 48, 13, 11, 3, 2, 1, 1, ""},
      {"DepthwiseConv", 24, 24, 11, 9, 3, 1, 1, 24, "Swish"},
      {"packed_gemm (AVX-512 only)", 40, 72, 9, 7, 1, 1, 0, 1, "Relu"},
  };
  uint64_t seed = 500;
  for (CpuKernelChoice choice :
       {CpuKernelChoice::kLumen, CpuKernelChoice::kOneDnn, CpuKernelChoice::kMeasure}) {
    set_cpu_kernel_choice(choice);
    for (const ConvCase& t : cases)
      for (bool residual : {false, true}) {
        SCOPED_TRACE(::testing::Message() << t.kernel << " choice " << static_cast<int>(choice)
                                          << (residual ? " residual" : ""));
        const int64_t oh = (t.h + 2 * t.pad - t.k) / t.stride + 1;
        const int64_t ow = (t.w + 2 * t.pad - t.k) / t.stride + 1;
        Tensor x = test::random_tensor({1, t.c, t.h, t.w}, ++seed, -1, 1);
        Tensor w = test::random_tensor({t.o, t.c / t.group, t.k, t.k}, ++seed, -1, 1);
        Tensor b = test::random_tensor({t.o}, ++seed, -1, 1);
        Tensor z = test::random_tensor({1, t.o, oh, ow}, ++seed, -1, 1);
        std::vector<double> want = reference(x, w, b, t, oh, ow);
        const std::vector<double> zv = test::to_doubles(z);
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = activate(want[i] + (residual ? zv[i] : 0.0), t.activation);
        // The node as the channels-last pass writes it: X, Z and Y stored (N, H, W, C).
        auto nhwc = [](const Tensor& t4) {
          const Shape& s = t4.shape();
          const std::vector<double> v = to_nhwc(test::to_doubles(t4), s[1], s[2], s[3]);
          Tensor out = Tensor::empty({s[0], s[2], s[3], s[1]});
          for (size_t i = 0; i < v.size(); ++i) out.data<float>()[i] = static_cast<float>(v[i]);
          return out;
        };
        Graph graph;
        std::vector<Value*> in = {graph.add_input("x", {1, t.h, t.w, t.c}),
                                  graph.add_constant("w", w), graph.add_constant("b", b)};
        if (residual) in.push_back(graph.add_input("z", {1, oh, ow, t.o}));
        Attributes attrs{{"kernel_shape", {t.k, t.k}},
                         {"strides", {t.stride, t.stride}},
                         {"pads", {t.pad, t.pad, t.pad, t.pad}},
                         {"group", t.group},
                         {"channels_last", int64_t{1}}};
        if (*t.activation) attrs["activation"] = std::string(t.activation);
        graph.mark_output(graph.add_op("FusedConv", in, attrs));
        Runtime rt;
        std::vector<Tensor> inputs = {nhwc(x)};
        if (residual) inputs.push_back(nhwc(z));
        test::expect_close(graph.compile(&rt)->execute(inputs)[0], {1, oh, ow, t.o},
                           to_nhwc(want, t.o, oh, ow), 1e-5, 1e-4);
      }
  }
  set_cpu_kernel_choice(CpuKernelChoice::kMeasure);
}

}  // namespace
}  // namespace lumen
