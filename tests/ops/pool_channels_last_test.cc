// Channels-last pooling (src/backends/cpu/pool.cc's direct kernel): a compiled graph whose
// convolutions put MaxPool and AveragePool (3x3, stride 2, padding, ceil_mode) in a channels-last
// region, against a double-precision NCHW reference on random data, every element checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

// 3x3 pooling, stride 2, padding 1, ceil_mode: max, or the mean over the window's inside
// positions (count_include_pad 0).
std::vector<double> pool_nchw(const std::vector<double>& x, const Shape& xs, bool is_max,
                              int64_t* out_h, int64_t* out_w) {
  const int64_t planes = xs[0] * xs[1], h = xs[2], wd = xs[3];
  auto out = [](int64_t in) {
    int64_t o = (in + 2 - 3 + 1) / 2 + 1;      // ceil((in + 2 - 3) / 2) + 1
    return (o - 1) * 2 >= in + 1 ? o - 1 : o;  // the last window starts inside
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
// stride 2, pad 1, ceil_mode): one channels-last region, two images, c1 pooled channels.
void check_region(int64_t c1) {
  SCOPED_TRACE(::testing::Message() << c1 << " channels");
  const int64_t c0 = 12, h = 15, wd = 13;
  Tensor x = test::random_tensor({2, c0, h, wd}, 61, -2, 2);
  Tensor w1 = test::random_tensor({c1, c0, 3, 3}, 62, -0.3f, 0.3f);
  Tensor b1 = test::random_tensor({c1}, 63, -1, 1);
  Tensor w2 = test::random_tensor({c1, c1, 3, 3}, 64, -0.2f, 0.2f);
  Tensor b2 = test::random_tensor({c1}, 65, -1, 1);
  Graph graph;
  Value* in = graph.add_input("x", x.shape());
  Value* y1 = graph.add_op(
      "Relu",
      {graph.add_op("Conv", {in, graph.add_constant("w1", w1), graph.add_constant("b1", b1)},
                    {{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}})});
  Value* y2 = graph.add_op("Conv", {y1, graph.add_constant("w2", w2), graph.add_constant("b2", b2)},
                           {{"pads", {1, 1, 1, 1}}});
  Value* y3 = graph.add_op("Relu", {graph.add_op("Add", {y2, y1})});
  const Attributes pool = {{"kernel_shape", {3, 3}},
                           {"strides", {2, 2}},
                           {"pads", {1, 1, 1, 1}},
                           {"ceil_mode", int64_t{1}}};
  graph.mark_output(graph.add_op("MaxPool", {y3}, pool, "max"));
  graph.mark_output(graph.add_op("AveragePool", {y3}, pool, "avg"));
  graph.optimize();
  int pools = 0;
  for (int id : graph.topological_order()) {
    const Node& n = graph.node(id);
    if (n.op != OpKind::kMaxPool && n.op != OpKind::kAveragePool) continue;
    EXPECT_EQ(n.attrs.at("channels_last").as_int(), 1);
    ++pools;
  }
  EXPECT_EQ(pools, 2);

  std::vector<double> a = test::conv2d_reference(test::to_doubles(x), x.shape(), w1, b1, 2, 1);
  for (double& v : a) v = std::max(v, 0.0);
  const Shape as({2, c1, (h - 1) / 2 + 1, (wd - 1) / 2 + 1});
  std::vector<double> b = test::conv2d_reference(a, as, w2, b2, 1, 1);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::max(b[i] + a[i], 0.0);
  int64_t ph = 0, pw = 0;
  std::vector<double> want_max = pool_nchw(b, as, true, &ph, &pw);
  std::vector<double> want_avg = pool_nchw(b, as, false, &ph, &pw);
  Runtime rt;
  std::vector<Tensor> got = graph.compile(&rt)->execute({x});
  test::expect_close(got[0], {2, c1, ph, pw}, want_max, 1e-4, 1e-4);
  test::expect_close(got[1], {2, c1, ph, pw}, want_avg, 1e-4, 1e-4);
}

// 24 channels: three blocks of 8; 45: one block of 32, one of 8 and 5 single channels.
TEST(ChannelsLastPool, RegionWithResidualAndCeilModePoolsMatchesReference) {
  check_region(24);
  check_region(45);
}

}  // namespace
}  // namespace lumen
