// Tests of ONNX Attention (opsets 23-25) against a plain-loop double-precision reference written
// from the spec: 4-D and 3-D inputs, grouped- and multi-query heads, causal masks, boolean and
// additive masks, past/present caches, softcap, the qk_matmul_output modes, nonpad_kv_seqlen,
// sliding windows, float16, bfloat16 and float64 inputs, and malformed nodes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::expect_close;
using test::omitted;
using test::OpInput;
using test::random_ints;
using test::random_tensor;
using test::to_16bit;
using test::run_op;
using test::to_doubles;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Spec {
  int64_t q_heads = 0, kv_heads = 0;  // for 3-D inputs
  bool causal = false;
  std::optional<double> scale;
  double softcap = 0;
  int qk_mode = 0;
  int64_t left = -1, right = -1;
};

struct Ref {
  std::vector<double> y, present_k, present_v, qk;
  Shape y_shape, present_k_shape, present_v_shape, qk_shape;
};

// Reads element [b, h, s, d] of a 4-D tensor, or of a 3-D [B, S, H * D] one with `heads` heads.
double at(const std::vector<double>& x, const Shape& shape, int64_t heads, int64_t b, int64_t h,
          int64_t s, int64_t d) {
  if (shape.rank() == 4) return x[((b * shape[1] + h) * shape[2] + s) * shape[3] + d];
  const int64_t depth = shape[2] / heads;
  return x[(b * shape[1] + s) * shape[2] + h * depth + d];
}

// The spec's computation, element by element in double.
Ref reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
              const Tensor* past_k, const Tensor* past_v, const Tensor* nonpad, const Spec& sp) {
  const bool three_d = q.rank() == 3;
  const std::vector<double> qv = to_doubles(q), kv = to_doubles(k), vv = to_doubles(v);
  const int64_t batch = q.shape()[0];
  const int64_t hq = three_d ? sp.q_heads : q.shape()[1];
  const int64_t hkv = three_d ? sp.kv_heads : k.shape()[1];
  const int64_t sq = three_d ? q.shape()[1] : q.shape()[2];
  const int64_t skv = three_d ? k.shape()[1] : k.shape()[2];
  const int64_t depth = three_d ? q.shape()[2] / hq : q.shape()[3];
  const int64_t dv = three_d ? v.shape()[2] / hkv : v.shape()[3];
  const int64_t past = past_k ? past_k->shape()[2] : 0;
  const int64_t total = past + skv;
  const std::vector<double> pk = past_k ? to_doubles(*past_k) : std::vector<double>();
  const std::vector<double> pv = past_v ? to_doubles(*past_v) : std::vector<double>();
  const double scale = sp.scale ? *sp.scale : 1.0 / std::sqrt(static_cast<double>(depth));
  // present = concat(past, new) along the sequence
  Ref r;
  r.present_k_shape = Shape({batch, hkv, total, depth});
  r.present_v_shape = Shape({batch, hkv, total, dv});
  r.present_k.resize(batch * hkv * total * depth);
  r.present_v.resize(batch * hkv * total * dv);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hkv; ++h)
      for (int64_t j = 0; j < total; ++j) {
        for (int64_t d = 0; d < depth; ++d)
          r.present_k[((b * hkv + h) * total + j) * depth + d] =
              j < past ? pk[((b * hkv + h) * past + j) * depth + d]
                       : at(kv, k.shape(), hkv, b, h, j - past, d);
        for (int64_t d = 0; d < dv; ++d)
          r.present_v[((b * hkv + h) * total + j) * dv + d] =
              j < past ? pv[((b * hkv + h) * past + j) * dv + d]
                       : at(vv, v.shape(), hkv, b, h, j - past, d);
      }
  std::vector<double> mv = mask ? to_doubles(*mask) : std::vector<double>();
  const std::vector<double> np = nonpad ? to_doubles(*nonpad) : std::vector<double>();
  r.qk_shape = Shape({batch, hq, sq, total});
  r.qk.resize(batch * hq * sq * total);
  r.y_shape = three_d ? Shape({batch, sq, hq * dv}) : Shape({batch, hq, sq, dv});
  r.y.resize(batch * hq * sq * dv);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t g = h / (hq / hkv);
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t offset = past_k ? past : nonpad ? static_cast<int64_t>(np[b]) - sq : 0;
        std::vector<double> s(total), raw(total), capped(total);
        for (int64_t j = 0; j < total; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < depth; ++d)
            dot += at(qv, q.shape(), hq, b, h, i, d) *
                   r.present_k[((b * hkv + g) * total + j) * depth + d];
          raw[j] = dot * scale;
          capped[j] = sp.softcap > 0 ? sp.softcap * std::tanh(raw[j] / sp.softcap) : raw[j];
          double bias = 0;
          if (mask) {
            const Shape& ms = mask->shape();
            const int64_t mlen = ms[-1];
            if (j >= mlen) {
              bias = -kInf;
            } else {
              const int64_t idx4[4] = {b, h, i, j};
              int64_t flat = 0;
              for (int a = 0; a < ms.rank(); ++a) {
                const int64_t dim = ms.dims()[a];
                const int64_t id = idx4[4 - ms.rank() + a];
                flat = flat * dim + (dim == 1 ? 0 : id);
              }
              if (mask->dtype() == DType::kBool)
                bias = mv[flat] != 0 ? 0 : -kInf;
              else
                bias = mv[flat];
            }
          }
          const int64_t p = offset + i;
          if (sp.causal && j > p) bias = -kInf;
          if (nonpad && j >= np[b]) bias = -kInf;
          if (sp.left >= 0 && j < p - sp.left) bias = -kInf;
          if (sp.right >= 0 && j > p + sp.right) bias = -kInf;
          s[j] = capped[j] + bias;
        }
        double m = -kInf;
        for (double x : s) m = std::max(m, x);
        double sum = 0;
        std::vector<double> prob(total, 0.0);
        if (m != -kInf) {
          for (int64_t j = 0; j < total; ++j) sum += (prob[j] = std::exp(s[j] - m));
          for (double& x : prob) x /= sum;
        }
        const std::vector<double>& qk = sp.qk_mode == 0   ? raw
                                        : sp.qk_mode == 1 ? capped
                                        : sp.qk_mode == 2 ? s
                                                          : prob;
        for (int64_t j = 0; j < total; ++j) r.qk[((b * hq + h) * sq + i) * total + j] = qk[j];
        for (int64_t d = 0; d < dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < total; ++j)
            acc += prob[j] * r.present_v[((b * hkv + g) * total + j) * dv + d];
          const int64_t out =
              three_d ? (b * sq + i) * hq * dv + h * dv + d : ((b * hq + h) * sq + i) * dv + d;
          r.y[out] = acc;
        }
      }
    }
  return r;
}

Attributes attrs_of(const Spec& sp) {
  Attributes a;
  if (sp.q_heads > 0) {
    a["q_num_heads"] = Attribute(sp.q_heads);
    a["kv_num_heads"] = Attribute(sp.kv_heads);
  }
  if (sp.causal) a["is_causal"] = Attribute(int64_t{1});
  if (sp.scale) a["scale"] = Attribute(static_cast<float>(*sp.scale));
  if (sp.softcap > 0) a["softcap"] = Attribute(static_cast<float>(sp.softcap));
  if (sp.qk_mode != 0) a["qk_matmul_output_mode"] = Attribute(int64_t{sp.qk_mode});
  if (sp.left != -1) a["left_window_size"] = Attribute(sp.left);
  if (sp.right != -1) a["right_window_size"] = Attribute(sp.right);
  return a;
}

// Runs Attention over the given inputs (mask, past and nonpad optional) with `outputs` outputs
// and checks each against the reference.
void check(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
           const Tensor* past_k, const Tensor* past_v, const Tensor* nonpad, const Spec& sp,
           int outputs = 1, double tol = 1e-5) {
  std::vector<OpInput> in = {q, k, v};
  const Tensor* opt[4] = {mask, past_k, past_v, nonpad};
  int last = 2;
  for (int i = 0; i < 4; ++i)
    if (opt[i]) last = 3 + i;
  for (int i = 0; i < last - 2; ++i) in.push_back(opt[i] ? OpInput(*opt[i]) : omitted());
  const std::vector<Tensor> out = run_op("Attention", in, attrs_of(sp), outputs);
  const Ref r = reference(q, k, v, mask, past_k, past_v, nonpad, sp);
  ASSERT_EQ(static_cast<int>(out.size()), outputs);
  expect_close(out[0], r.y_shape, r.y, tol, tol);
  if (outputs > 1) expect_close(out[1], r.present_k_shape, r.present_k, 0, 0);
  if (outputs > 2) expect_close(out[2], r.present_v_shape, r.present_v, 0, 0);
  if (outputs > 3) expect_close(out[3], r.qk_shape, r.qk, tol, tol);
}

TEST(AttentionOp, FourDimensional) {
  const Tensor q = random_tensor({2, 3, 5, 8}, 1), k = random_tensor({2, 3, 7, 8}, 2),
               v = random_tensor({2, 3, 7, 8}, 3);
  check(q, k, v, nullptr, nullptr, nullptr, nullptr, {});
  Spec scaled;
  scaled.scale = 0.3;
  check(q, k, v, nullptr, nullptr, nullptr, nullptr, scaled);
}

TEST(AttentionOp, DifferentValueHeadSize) {
  const Tensor q = random_tensor({2, 2, 4, 8}, 4), k = random_tensor({2, 2, 6, 8}, 5),
               v = random_tensor({2, 2, 6, 11}, 6);
  check(q, k, v, nullptr, nullptr, nullptr, nullptr, {});
}

TEST(AttentionOp, GroupedQueryCausalAdditiveMask) {
  const Tensor q = random_tensor({2, 6, 9, 16}, 7), k = random_tensor({2, 2, 9, 16}, 8),
               v = random_tensor({2, 2, 9, 16}, 9);
  const Tensor mask = random_tensor({9, 9}, 10, -2.0f, 2.0f);
  Spec sp;
  sp.causal = true;
  check(q, k, v, &mask, nullptr, nullptr, nullptr, sp);
  // Multi-query: one kv head.
  const Tensor k1 = random_tensor({2, 1, 9, 16}, 11), v1 = random_tensor({2, 1, 9, 16}, 12);
  check(q, k1, v1, &mask, nullptr, nullptr, nullptr, sp);
}

TEST(AttentionOp, ThreeDimensionalBoolMask) {
  Spec sp;
  sp.q_heads = 4;
  sp.kv_heads = 2;
  sp.scale = 0.2;
  const Tensor q = random_tensor({2, 5, 4 * 8}, 13), k = random_tensor({2, 6, 2 * 8}, 14),
               v = random_tensor({2, 6, 2 * 10}, 15);
  const Tensor mask = random_ints({2, 1, 5, 6}, 16, 0, 1, DType::kBool);
  check(q, k, v, &mask, nullptr, nullptr, nullptr, sp);
  // A mask over heads and keys only, and one of rank 1.
  const Tensor mask3 = random_tensor({4, 1, 6}, 17);
  check(q, k, v, &mask3, nullptr, nullptr, nullptr, sp);
  const Tensor mask1 = random_ints({6}, 18, 0, 1, DType::kBool);
  check(q, k, v, &mask1, nullptr, nullptr, nullptr, sp);
}

TEST(AttentionOp, PastAndPresent) {
  const Tensor q = random_tensor({2, 4, 3, 8}, 19), k = random_tensor({2, 2, 3, 8}, 20),
               v = random_tensor({2, 2, 3, 6}, 21);
  const Tensor pk = random_tensor({2, 2, 5, 8}, 22), pv = random_tensor({2, 2, 5, 6}, 23);
  const Tensor mask = random_tensor({2, 4, 3, 8}, 24);
  Spec sp;
  sp.causal = true;
  check(q, k, v, &mask, &pk, &pv, nullptr, sp, 3);
  check(q, k, v, nullptr, &pk, &pv, nullptr, {}, 3);
  // 3-D inputs with a 4-D cache.
  Spec sp3;
  sp3.q_heads = 4;
  sp3.kv_heads = 2;
  sp3.causal = true;
  const Tensor q3 = random_tensor({2, 3, 32}, 25), k3 = random_tensor({2, 3, 16}, 26),
               v3 = random_tensor({2, 3, 12}, 27);
  check(q3, k3, v3, nullptr, &pk, &pv, nullptr, sp3, 3);
}

TEST(AttentionOp, SoftcapAndQkOutputModes) {
  const Tensor q = random_tensor({1, 2, 4, 8}, 28, -2, 2),
               k = random_tensor({1, 2, 6, 8}, 29, -2, 2), v = random_tensor({1, 2, 6, 8}, 30);
  const Tensor pk = random_tensor({1, 2, 2, 8}, 31), pv = random_tensor({1, 2, 2, 8}, 32);
  const Tensor mask = random_tensor({4, 8}, 33);
  for (int mode = 0; mode < 4; ++mode) {
    Spec sp;
    sp.softcap = 1.5;
    sp.qk_mode = mode;
    sp.causal = mode % 2 == 1;
    check(q, k, v, &mask, &pk, &pv, nullptr, sp, 4);
    check(q, k, v, nullptr, nullptr, nullptr, nullptr, sp, 4);
  }
}

TEST(AttentionOp, NonpadKvSeqlen) {
  const Tensor q = random_tensor({3, 2, 3, 8}, 34), k = random_tensor({3, 2, 7, 8}, 35),
               v = random_tensor({3, 2, 7, 8}, 36);
  // Batch 1 has fewer valid keys than queries: its leading rows attend nothing (zero rows).
  const Tensor nonpad = Tensor::from_vector<int64_t>({3}, {7, 2, 5});
  check(q, k, v, nullptr, nullptr, nullptr, &nonpad, {});
  Spec sp;
  sp.causal = true;
  check(q, k, v, nullptr, nullptr, nullptr, &nonpad, sp);
  // A mask shorter than the keys (padded as masked) with the causal frontier.
  const Tensor mask = random_ints({3, 1, 3, 6}, 37, 0, 1, DType::kBool);
  check(q, k, v, &mask, nullptr, nullptr, &nonpad, sp);
  // Grouped heads: six rows per kv head (the blocked path; the cases above take the few-rows one).
  const Tensor q4 = random_tensor({3, 4, 3, 8}, 79);
  check(q4, k, v, &mask, nullptr, nullptr, &nonpad, sp);
  check(q4, k, v, nullptr, nullptr, nullptr, &nonpad, {});
}

TEST(AttentionOp, SlidingWindow) {
  const Tensor q = random_tensor({2, 2, 6, 8}, 38), k = random_tensor({2, 2, 9, 8}, 39),
               v = random_tensor({2, 2, 9, 8}, 40);
  Spec sp;
  sp.left = 2;
  sp.right = 1;
  check(q, k, v, nullptr, nullptr, nullptr, nullptr, sp);
  Spec causal;
  causal.causal = true;
  causal.left = 3;
  const Tensor pk = random_tensor({2, 2, 4, 8}, 41), pv = random_tensor({2, 2, 4, 8}, 42);
  check(q, k, v, nullptr, &pk, &pv, nullptr, causal, 3);
}

TEST(AttentionOp, FullyMaskedRowIsZero) {
  const Tensor q = random_tensor({1, 2, 3, 8}, 43), k = random_tensor({1, 2, 4, 8}, 44),
               v = random_tensor({1, 2, 4, 8}, 45);
  const Tensor mask = Tensor::from_vector<bool>(
      {3, 4}, {true, false, true, false, false, false, false, false, true, true, true, true});
  Spec sp;
  sp.qk_mode = 3;
  check(q, k, v, &mask, nullptr, nullptr, nullptr, sp, 4);
  const Tensor neg = Tensor::from_vector<float>(
      {3, 4}, {0, -INFINITY, 0, 0, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0, 0, 0, 0});
  check(q, k, v, &neg, nullptr, nullptr, nullptr, {});
}

TEST(AttentionOp, LargerShapesAcrossThreads) {
  // Head sizes off the 8-lane grid, key counts off the tile grid, many row blocks per head.
  const Tensor q = random_tensor({2, 4, 130, 40}, 46), k = random_tensor({2, 2, 70, 40}, 47),
               v = random_tensor({2, 2, 70, 24}, 48);
  const Tensor pk = random_tensor({2, 2, 60, 40}, 49), pv = random_tensor({2, 2, 60, 24}, 50);
  Spec sp;
  sp.causal = true;
  check(q, k, v, nullptr, &pk, &pv, nullptr, sp, 3, 1e-4);
  // Decoding: one query per head against a long cache, grouped heads.
  const Tensor q1 = random_tensor({2, 8, 1, 64}, 51), k1 = random_tensor({2, 2, 1, 64}, 52),
               v1 = random_tensor({2, 2, 1, 64}, 53);
  const Tensor pk1 = random_tensor({2, 2, 300, 64}, 54), pv1 = random_tensor({2, 2, 300, 64}, 55);
  check(q1, k1, v1, nullptr, &pk1, &pv1, nullptr, sp, 3, 1e-4);
}

TEST(AttentionOp, HalfTypes) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    Tensor q = random_tensor({2, 4, 5, 16}, 56), k = random_tensor({2, 2, 7, 16}, 57),
           v = random_tensor({2, 2, 7, 16}, 58), mask = random_tensor({5, 10}, 59);
    Tensor pk = random_tensor({2, 2, 3, 16}, 60), pv = random_tensor({2, 2, 3, 16}, 61);
    const Tensor hq = to_16bit(q, t), hk = to_16bit(k, t), hv = to_16bit(v, t),
                 hm = to_16bit(mask, t), hpk = to_16bit(pk, t), hpv = to_16bit(pv, t);
    Spec sp;
    sp.causal = true;
    const std::vector<Tensor> out =
        run_op("Attention", {hq, hk, hv, hm, hpk, hpv}, attrs_of(sp), 3);
    const Ref r = reference(q, k, v, &mask, &pk, &pv, nullptr, sp);
    ASSERT_EQ(out[0].dtype(), t);
    const double tol = t == DType::kFloat16 ? 2e-3 : 1e-2;
    expect_close(out[0], r.y_shape, r.y, tol, tol);
    expect_close(out[1], r.present_k_shape, r.present_k, 0, 0);
    expect_close(out[2], r.present_v_shape, r.present_v, 0, 0);
  }
}

// A float64 copy of a float32 tensor.
Tensor to_double(const Tensor& x) {
  Tensor d = Tensor::empty(x.shape(), DType::kFloat64);
  for (int64_t i = 0; i < x.numel(); ++i) d.data<double>()[i] = x.data<float>()[i];
  return d;
}

TEST(AttentionOp, Float64) {
  const Tensor q = random_tensor({1, 4, 3, 8}, 75), k = random_tensor({1, 2, 5, 8}, 76),
               v = random_tensor({1, 2, 5, 8}, 77), mask = random_tensor({3, 5}, 78);
  Spec sp;
  sp.causal = true;
  sp.qk_mode = 3;
  const std::vector<Tensor> out = run_op(
      "Attention", {to_double(q), to_double(k), to_double(v), to_double(mask)}, attrs_of(sp), 4);
  const Ref r = reference(q, k, v, &mask, nullptr, nullptr, nullptr, sp);
  ASSERT_EQ(out[0].dtype(), DType::kFloat64);
  expect_close(out[0], r.y_shape, r.y, 1e-5, 1e-5);  // computed in float32
  expect_close(out[3], r.qk_shape, r.qk, 1e-5, 1e-5);
}

TEST(AttentionOp, BadInputs) {
  const Tensor q = random_tensor({1, 6, 3, 8}, 62), k = random_tensor({1, 4, 3, 8}, 63),
               v = random_tensor({1, 4, 3, 8}, 64);
  // 4 kv heads do not divide 6 query heads.
  test::expect_error<ShapeError>([&] { run_op("Attention", {q, k, v}); }, "Attention");
  const Tensor k2 = random_tensor({1, 2, 3, 8}, 65), v2 = random_tensor({1, 2, 3, 8}, 66);
  // A mask whose query dim neither matches nor broadcasts, and one longer than the keys.
  test::expect_error<ShapeError>(
      [&] {
        run_op("Attention", {q, k2, v2, random_tensor({2, 3}, 67)});
      },
      "Attention");
  test::expect_error<ShapeError>(
      [&] {
        run_op("Attention", {q, k2, v2, random_tensor({3, 4}, 68)});
      },
      "Attention");
  // Q and K head sizes differ.
  test::expect_error<ShapeError>(
      [&] {
        run_op("Attention", {q, random_tensor({1, 2, 3, 4}, 69), v2});
      },
      "Attention");
  // 3-D inputs without the head counts; hidden sizes not divisible by them.
  const Tensor q3 = random_tensor({1, 3, 12}, 70), k3 = random_tensor({1, 3, 12}, 71);
  test::expect_error<InvalidModel>([&] { run_op("Attention", {q3, k3, k3}); }, "Attention");
  test::expect_error<ShapeError>(
      [&] {
        run_op("Attention", {q3, k3, k3},
               {{"q_num_heads", int64_t{5}}, {"kv_num_heads", int64_t{5}}});
      },
      "Attention");
  // past_key without past_value; a past of the wrong head count.
  const Tensor pk = random_tensor({1, 2, 2, 8}, 72);
  test::expect_error<InvalidModel>(
      [&] {
        run_op("Attention", {q, k2, v2, omitted(), pk});
      },
      "Attention");
  test::expect_error<ShapeError>(
      [&] {
        run_op("Attention", {q, k2, v2, omitted(), random_tensor({1, 3, 2, 8}, 73), pk});
      },
      "Attention");
  // An integer mask, a mode out of range.
  test::expect_error<ShapeError>(
      [&] {
        run_op("Attention", {q, k2, v2, random_ints({3, 3}, 74, 0, 1, DType::kInt32)});
      },
      "Attention");
  test::expect_error<InvalidModel>(
      [&] {
        run_op("Attention", {q, k2, v2}, {{"qk_matmul_output_mode", int64_t{4}}}, 4);
      },
      "Attention");
}

}  // namespace
}  // namespace lumen
