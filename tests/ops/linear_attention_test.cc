// Tests of LinearAttention and CausalConvWithState (opset 27) against plain-loop double-precision
// references written from the spec's formulas, on random data: every update rule, GQA and MQA,
// per-key and per-head decay, scalar and per-head beta, with and without past state, float16 and
// bfloat16 storage, and the errors of bad nodes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/half.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::expect_close;
using test::expect_error;
using test::omitted;
using test::OpInput;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

// `t` (float32) stored as float16 or bfloat16 (rounded to nearest even), or unchanged.
Tensor stored_as(const Tensor& t, DType dtype) {
  if (dtype == DType::kFloat32) return t;
  Tensor out = Tensor::empty(t.shape(), dtype);
  const float* src = t.data<float>();
  uint16_t* dst = static_cast<uint16_t*>(out.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i)
    dst[i] = dtype == DType::kFloat16 ? float_to_half(src[i]) : float_to_bfloat16(src[i]);
  return out;
}

// --- LinearAttention ----------------------------------------------------------------------------

struct LaCase {
  std::string rule = "gated_delta";
  int64_t batch = 2, seq = 5, q_heads = 4, kv_heads = 2, dk = 12, dv = 40;
  bool past = true;
  bool per_key_decay = true;
  bool beta_per_head = true;
  float scale = 0.0f;  // the attribute; 0 = default
  DType dtype = DType::kFloat32;
  DType state_dtype = DType::kFloat32;
  uint64_t seed = 1;
};

struct LaInputs {
  Tensor query, key, value, past, decay, beta;
};

bool rule_gated(const std::string& rule) {
  return rule == "gated" || rule == "gated_delta";
}
bool rule_delta(const std::string& rule) {
  return rule == "delta" || rule == "gated_delta";
}

LaInputs la_inputs(const LaCase& c) {
  LaInputs in;
  const uint64_t s = c.seed * 10;
  in.query = stored_as(random_tensor({c.batch, c.seq, c.q_heads * c.dk}, s + 1), c.dtype);
  in.key =
      stored_as(random_tensor({c.batch, c.seq, c.kv_heads * c.dk}, s + 2, -0.5f, 0.5f), c.dtype);
  in.value = stored_as(random_tensor({c.batch, c.seq, c.kv_heads * c.dv}, s + 3), c.dtype);
  if (c.past)
    in.past = stored_as(random_tensor({c.batch, c.kv_heads, c.dk, c.dv}, s + 4), c.state_dtype);
  if (rule_gated(c.rule)) {
    const int64_t last = c.per_key_decay ? c.kv_heads * c.dk : c.kv_heads;
    in.decay = stored_as(random_tensor({c.batch, c.seq, last}, s + 5, -1.0f, 0.0f), c.dtype);
  }
  if (rule_delta(c.rule)) {
    const int64_t last = c.beta_per_head ? c.kv_heads : 1;
    in.beta = stored_as(random_tensor({c.batch, c.seq, last}, s + 6, 0.0f, 1.0f), c.dtype);
  }
  return in;
}

struct LaResult {
  std::vector<double> output, state;
};

// The spec's recurrence, token by token, one (batch, KV head) at a time:
//   S = exp(g_t) * S                         (gated rules; g per key row or per head)
//   u = beta_t * (v_t - S^T k_t)             (delta rules, with the decayed S), else u = v_t
//   S = S + k_t (x) u
//   o_t = scale * q_t^T S for each query head h_q of the group (KV head h_q / group)
LaResult la_reference(const LaCase& c, const LaInputs& in) {
  const int64_t B = c.batch, T = c.seq, Hq = c.q_heads, Hkv = c.kv_heads, dk = c.dk, dv = c.dv;
  const int64_t group = Hq / Hkv;
  const bool gated = rule_gated(c.rule), delta = rule_delta(c.rule);
  const double scale = c.scale != 0.0f ? c.scale : 1.0 / std::sqrt(static_cast<double>(dk));
  std::vector<double> q = to_doubles(in.query), k = to_doubles(in.key), v = to_doubles(in.value);
  std::vector<double> g = gated ? to_doubles(in.decay) : std::vector<double>();
  std::vector<double> beta = delta ? to_doubles(in.beta) : std::vector<double>();
  LaResult r;
  r.state = c.past ? to_doubles(in.past) : std::vector<double>(B * Hkv * dk * dv, 0.0);
  r.output.assign(B * T * Hq * dv, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hkv; ++h) {
      double* S = r.state.data() + (b * Hkv + h) * dk * dv;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t bt = b * T + t;
        const double* kt = k.data() + (bt * Hkv + h) * dk;
        const double* vt = v.data() + (bt * Hkv + h) * dv;
        if (gated) {
          for (int64_t i = 0; i < dk; ++i) {
            const double gi = c.per_key_decay ? g[(bt * Hkv + h) * dk + i] : g[bt * Hkv + h];
            for (int64_t j = 0; j < dv; ++j) S[i * dv + j] *= std::exp(gi);
          }
        }
        std::vector<double> u(vt, vt + dv);
        if (delta) {
          const double bb = c.beta_per_head ? beta[bt * Hkv + h] : beta[bt];
          for (int64_t j = 0; j < dv; ++j) {
            double retrieved = 0;
            for (int64_t i = 0; i < dk; ++i) retrieved += S[i * dv + j] * kt[i];
            u[j] = bb * (vt[j] - retrieved);
          }
        }
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += kt[i] * u[j];
        for (int64_t gq = 0; gq < group; ++gq) {
          const int64_t hq = h * group + gq;
          const double* qt = q.data() + (bt * Hq + hq) * dk;
          for (int64_t j = 0; j < dv; ++j) {
            double acc = 0;
            for (int64_t i = 0; i < dk; ++i) acc += qt[i] * S[i * dv + j];
            r.output[(bt * Hq + hq) * dv + j] = scale * acc;
          }
        }
      }
    }
  }
  return r;
}

Attributes la_attrs(const LaCase& c) {
  Attributes a{{"q_num_heads", c.q_heads}, {"kv_num_heads", c.kv_heads}, {"update_rule", c.rule}};
  if (c.scale != 0.0f) a["scale"] = c.scale;
  return a;
}

std::vector<OpInput> la_op_inputs(const LaInputs& in) {
  auto opt = [](const Tensor& t) { return t.defined() ? OpInput(t) : omitted(); };
  return {OpInput(in.query), OpInput(in.key), OpInput(in.value),
          opt(in.past),      opt(in.decay),   opt(in.beta)};
}

void check_linear_attention(const LaCase& c) {
  SCOPED_TRACE("rule " + c.rule + " dtype " + dtype_name(c.dtype) + " state " +
               dtype_name(c.state_dtype));
  const LaInputs in = la_inputs(c);
  const LaResult want = la_reference(c, in);
  const std::vector<Tensor> got = run_op("LinearAttention", la_op_inputs(in), la_attrs(c), 2);
  ASSERT_EQ(got.size(), 2u);
  const bool narrow = c.dtype != DType::kFloat32;
  const double tol = c.dtype == DType::kBFloat16 ? 2e-2 : narrow ? 4e-3 : 1e-5;
  EXPECT_EQ(got[0].dtype(), c.dtype);
  expect_close(got[0], Shape{c.batch, c.seq, c.q_heads * c.dv}, want.output, tol, tol);
  const DType state_dtype = c.past ? c.state_dtype : c.dtype;
  const double state_tol = state_dtype == DType::kBFloat16  ? 2e-2
                           : state_dtype == DType::kFloat16 ? 4e-3
                                                            : 1e-5;
  EXPECT_EQ(got[1].dtype(), state_dtype);
  expect_close(got[1], Shape{c.batch, c.kv_heads, c.dk, c.dv}, want.state, state_tol, state_tol);
}

TEST(LinearAttention, EveryRuleWithAndWithoutPast) {
  for (const char* rule : {"linear", "gated", "delta", "gated_delta"}) {
    for (bool past : {false, true}) {
      LaCase c;
      c.rule = rule;
      c.past = past;
      c.seed = past ? 2 : 3;
      check_linear_attention(c);
    }
  }
}

TEST(LinearAttention, PerHeadDecayAndScalarBeta) {
  for (const char* rule : {"gated", "gated_delta"}) {
    LaCase c;
    c.rule = rule;
    c.per_key_decay = false;
    c.beta_per_head = false;
    c.seed = 4;
    check_linear_attention(c);
  }
  LaCase d;
  d.rule = "delta";
  d.beta_per_head = false;
  d.seed = 5;
  check_linear_attention(d);
}

TEST(LinearAttention, MultiHeadAndMultiQuery) {
  LaCase mha;
  mha.q_heads = mha.kv_heads = 3;
  mha.dv = 7;
  mha.seed = 6;
  check_linear_attention(mha);
  LaCase mqa;
  mqa.q_heads = 5;
  mqa.kv_heads = 1;
  mqa.dk = 4;
  mqa.dv = 33;
  mqa.seed = 7;
  check_linear_attention(mqa);
}

TEST(LinearAttention, ExplicitScaleAndDecodeStep) {
  LaCase c;
  c.scale = 0.3f;
  c.seed = 8;
  check_linear_attention(c);
  LaCase decode;
  decode.seq = 1;
  decode.seed = 9;
  check_linear_attention(decode);
}

// Large enough that the tasks (batch x KV heads x column blocks) run on several threads.
TEST(LinearAttention, ParallelPrefill) {
  LaCase c;
  c.batch = 2;
  c.seq = 24;
  c.q_heads = 8;
  c.kv_heads = 4;
  c.dk = 32;
  c.dv = 96;
  c.seed = 10;
  check_linear_attention(c);
}

// Running a sequence in two halves, the second from the first's present_state, gives the same
// output and state as running it at once.
TEST(LinearAttention, SplitSequenceMatchesWhole) {
  LaCase c;
  c.seq = 6;
  c.past = false;
  c.seed = 11;
  const LaInputs in = la_inputs(c);
  const std::vector<Tensor> whole = run_op("LinearAttention", la_op_inputs(in), la_attrs(c), 2);
  auto half = [](const Tensor& t, int64_t from) {
    const int64_t b = t.shape()[0], n = t.shape()[2];
    std::vector<float> v;
    const float* p = t.data<float>();
    for (int64_t i = 0; i < b; ++i)
      for (int64_t s = from; s < from + 3; ++s)
        for (int64_t j = 0; j < n; ++j) v.push_back(p[(i * 6 + s) * n + j]);
    return Tensor::from_vector(Shape{b, 3, n}, v);
  };
  LaInputs first{half(in.query, 0), half(in.key, 0),   half(in.value, 0),
                 Tensor(),          half(in.decay, 0), half(in.beta, 0)};
  const std::vector<Tensor> a = run_op("LinearAttention", la_op_inputs(first), la_attrs(c), 2);
  LaInputs second{half(in.query, 3), half(in.key, 3), half(in.value, 3), a[1],
                  half(in.decay, 3), half(in.beta, 3)};
  const std::vector<Tensor> b = run_op("LinearAttention", la_op_inputs(second), la_attrs(c), 2);
  expect_close(b[1], whole[1].shape(), to_doubles(whole[1]), 1e-5, 1e-5);
  const std::vector<double> w = to_doubles(whole[0]), o1 = to_doubles(a[0]), o2 = to_doubles(b[0]);
  const int64_t n = whole[0].shape()[2];
  for (int64_t i = 0; i < c.batch; ++i)
    for (int64_t s = 0; s < 6; ++s)
      for (int64_t j = 0; j < n; ++j) {
        const double got = s < 3 ? o1[(i * 3 + s) * n + j] : o2[(i * 3 + s - 3) * n + j];
        EXPECT_NEAR(got, w[(i * 6 + s) * n + j], 1e-5);
      }
}

TEST(LinearAttention, HalfStorage) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    LaCase c;
    c.dtype = t;
    c.state_dtype = t;
    c.seed = 12;
    check_linear_attention(c);
    // float32 state with 16-bit activations (S != T): present_state stays float32.
    LaCase mixed = c;
    mixed.state_dtype = DType::kFloat32;
    mixed.seed = 13;
    check_linear_attention(mixed);
  }
}

TEST(LinearAttention, OutputOnly) {
  LaCase c;
  c.seed = 14;
  const LaInputs in = la_inputs(c);
  const LaResult want = la_reference(c, in);
  const std::vector<Tensor> got = run_op("LinearAttention", la_op_inputs(in), la_attrs(c), 1);
  ASSERT_EQ(got.size(), 1u);
  expect_close(got[0], Shape{c.batch, c.seq, c.q_heads * c.dv}, want.output, 1e-5, 1e-5);
}

TEST(LinearAttention, BadNodesRaise) {
  const std::string op = "LinearAttention";
  LaCase c;
  const LaInputs in = la_inputs(c);
  auto run = [&](const std::vector<OpInput>& inputs, const Attributes& attrs) {
    run_op(op, inputs, attrs, 2);
  };
  auto with = [&](int i, const Tensor& t) {
    std::vector<OpInput> v = la_op_inputs(in);
    v[i] = t.defined() ? OpInput(t) : omitted();
    return v;
  };
  // Attributes.
  Attributes attrs = la_attrs(c);
  attrs["q_num_heads"] = int64_t{3};  // not a multiple of kv_num_heads = 2
  expect_error<InvalidModel>([&] { run(la_op_inputs(in), attrs); }, op);
  attrs = la_attrs(c);
  attrs["update_rule"] = "softmax";
  expect_error<InvalidModel>([&] { run(la_op_inputs(in), attrs); }, op);
  attrs = la_attrs(c);
  attrs.erase("kv_num_heads");
  expect_error<InvalidModel>([&] { run(la_op_inputs(in), attrs); }, op);
  // Inputs the rule requires or forbids.
  expect_error<InvalidModel>([&] { run(with(4, Tensor()), la_attrs(c)); }, op);
  expect_error<InvalidModel>([&] { run(with(5, Tensor()), la_attrs(c)); }, op);
  LaCase linear = c;
  linear.rule = "linear";
  expect_error<InvalidModel>([&] { run(la_op_inputs(in), la_attrs(linear)); }, op);
  // Shapes and dtypes.
  expect_error<ShapeError>([&] { run(with(0, random_tensor({2, 5, 50}, 1)), la_attrs(c)); }, op);
  expect_error<ShapeError>([&] { run(with(1, random_tensor({2, 5, 12}, 1)), la_attrs(c)); }, op);
  expect_error<ShapeError>([&] { run(with(2, random_tensor({2, 4, 80}, 1)), la_attrs(c)); }, op);
  expect_error<ShapeError>([&] { run(with(2, random_tensor({2, 5, 81}, 1)), la_attrs(c)); }, op);
  expect_error<ShapeError>(
      [&] {
        run(with(3, random_tensor({2, 2, 40, 12}, 1)), la_attrs(c));
      },
      op);
  expect_error<ShapeError>([&] { run(with(4, random_tensor({2, 5, 12}, 1)), la_attrs(c)); }, op);
  expect_error<ShapeError>([&] { run(with(5, random_tensor({2, 5, 3}, 1)), la_attrs(c)); }, op);
  expect_error<ShapeError>([&] { run(with(0, random_tensor({2, 48}, 1)), la_attrs(c)); }, op);
  expect_error<ShapeError>([&] { run(with(1, stored_as(in.key, DType::kFloat16)), la_attrs(c)); },
                           op);
  expect_error<ShapeError>(
      [&] {
        run(with(0, test::random_ints({2, 5, 48}, 1, 0, 3, DType::kInt32)), la_attrs(c));
      },
      op);
}

// --- CausalConvWithState ----------------------------------------------------------------------

struct CcCase {
  int64_t batch = 2, channels = 5, length = 7, kernel = 4;
  bool bias = false, past = false;
  std::string activation;  // "" = attribute absent
  DType dtype = DType::kFloat32;
  uint64_t seed = 1;
};

struct CcInputs {
  Tensor x, weight, bias, past;
};

CcInputs cc_inputs(const CcCase& c) {
  const uint64_t s = c.seed * 10;
  CcInputs in;
  in.x = stored_as(random_tensor({c.batch, c.channels, c.length}, s + 1, -2.0f, 2.0f), c.dtype);
  in.weight = stored_as(random_tensor({c.channels, 1, c.kernel}, s + 2), c.dtype);
  if (c.bias) in.bias = stored_as(random_tensor({c.channels}, s + 3), c.dtype);
  if (c.past)
    in.past = stored_as(random_tensor({c.batch, c.channels, c.kernel - 1}, s + 4), c.dtype);
  return in;
}

struct CcResult {
  std::vector<double> output, state;
};

// padded = [past_state or zeros (k - 1), input (L)] per (batch, channel);
// y[t] = bias + sum_j w[j] * padded[t + j], then x * sigmoid(x) for silu/swish;
// present_state = padded[L, L + k - 1).
CcResult cc_reference(const CcCase& c, const CcInputs& in) {
  const int64_t L = c.length, K = c.kernel;
  std::vector<double> x = to_doubles(in.x), w = to_doubles(in.weight);
  std::vector<double> b = c.bias ? to_doubles(in.bias) : std::vector<double>(c.channels, 0.0);
  std::vector<double> p = c.past ? to_doubles(in.past) : std::vector<double>();
  const bool silu = c.activation == "silu" || c.activation == "swish";
  CcResult r;
  for (int64_t n = 0; n < c.batch; ++n) {
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      const int64_t row = n * c.channels + ch;
      std::vector<double> padded;
      for (int64_t i = 0; i < K - 1; ++i) padded.push_back(c.past ? p[row * (K - 1) + i] : 0.0);
      for (int64_t t = 0; t < L; ++t) padded.push_back(x[row * L + t]);
      for (int64_t t = 0; t < L; ++t) {
        double acc = b[ch];
        for (int64_t j = 0; j < K; ++j) acc += w[ch * K + j] * padded[t + j];
        r.output.push_back(silu ? acc / (1.0 + std::exp(-acc)) : acc);
      }
      for (int64_t i = 0; i < K - 1; ++i) r.state.push_back(padded[L + i]);
    }
  }
  return r;
}

void check_causal_conv(const CcCase& c) {
  SCOPED_TRACE("activation '" + c.activation + "' bias " + std::to_string(c.bias) + " past " +
               std::to_string(c.past) + " L " + std::to_string(c.length) + " k " +
               std::to_string(c.kernel) + " " + dtype_name(c.dtype));
  const CcInputs in = cc_inputs(c);
  const CcResult want = cc_reference(c, in);
  Attributes attrs;
  if (!c.activation.empty()) attrs["activation"] = c.activation;
  auto opt = [](const Tensor& t) { return t.defined() ? OpInput(t) : omitted(); };
  const std::vector<Tensor> got =
      run_op("CausalConvWithState", {OpInput(in.x), OpInput(in.weight), opt(in.bias), opt(in.past)},
             attrs, 2);
  ASSERT_EQ(got.size(), 2u);
  const double tol = c.dtype == DType::kBFloat16 ? 2e-2 : c.dtype == DType::kFloat16 ? 2e-3 : 1e-5;
  EXPECT_EQ(got[0].dtype(), c.dtype);
  EXPECT_EQ(got[1].dtype(), c.dtype);
  expect_close(got[0], Shape{c.batch, c.channels, c.length}, want.output, tol, tol);
  // present_state is a copy of stored values: exact.
  expect_close(got[1], Shape{c.batch, c.channels, c.kernel - 1}, want.state, 0.0, 0.0);
}

TEST(CausalConvWithState, BiasPastAndActivations) {
  uint64_t seed = 1;
  for (const char* act : {"", "none", "silu", "swish"}) {
    for (bool bias : {false, true}) {
      for (bool past : {false, true}) {
        CcCase c;
        c.activation = act;
        c.bias = bias;
        c.past = past;
        c.seed = seed++;
        check_causal_conv(c);
      }
    }
  }
}

TEST(CausalConvWithState, ShortInputsDecodeAndKernelOne) {
  CcCase shorter;  // L < k - 1: present_state keeps part of past_state
  shorter.length = 2;
  shorter.kernel = 5;
  shorter.past = true;
  shorter.seed = 20;
  check_causal_conv(shorter);
  shorter.past = false;
  check_causal_conv(shorter);
  CcCase decode;
  decode.length = 1;
  decode.past = decode.bias = true;
  decode.activation = "silu";
  decode.seed = 21;
  check_causal_conv(decode);
  CcCase one;  // k = 1: present_state is empty
  one.kernel = 1;
  one.bias = true;
  one.seed = 22;
  check_causal_conv(one);
}

TEST(CausalConvWithState, ParallelRows) {
  CcCase c;
  c.batch = 3;
  c.channels = 64;
  c.length = 150;
  c.kernel = 4;
  c.bias = c.past = true;
  c.activation = "silu";
  c.seed = 23;
  check_causal_conv(c);
}

TEST(CausalConvWithState, HalfStorage) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    CcCase c;
    c.dtype = t;
    c.bias = c.past = true;
    c.activation = "silu";
    c.seed = 24;
    check_causal_conv(c);
  }
}

TEST(CausalConvWithState, BadNodesRaise) {
  const std::string op = "CausalConvWithState";
  const Tensor x = random_tensor({2, 5, 7}, 1), w = random_tensor({5, 1, 4}, 2);
  auto run = [&](const std::vector<OpInput>& inputs, const Attributes& attrs = {}) {
    run_op(op, inputs, attrs, 2);
  };
  expect_error<InvalidModel>([&] { run({x, w}, {{"activation", "relu"}}); }, op);
  expect_error<ShapeError>([&] { run({x, random_tensor({5, 2, 4}, 3)}); }, op);
  expect_error<ShapeError>([&] { run({x, random_tensor({4, 1, 4}, 3)}); }, op);
  expect_error<ShapeError>([&] { run({x, random_tensor({5, 1, 0}, 3)}); }, op);
  expect_error<ShapeError>([&] { run({x, random_tensor({5, 4}, 3)}); }, op);
  expect_error<ShapeError>([&] { run({random_tensor({2, 35}, 3), w}); }, op);
  expect_error<ShapeError>([&] { run({x, w, random_tensor({4}, 3)}); }, op);
  expect_error<ShapeError>([&] { run({x, w, omitted(), random_tensor({2, 5, 4}, 3)}); }, op);
  expect_error<ShapeError>([&] { run({x, stored_as(w, DType::kFloat16)}); }, op);
  expect_error<ShapeError>(
      [&] {
        run({test::random_ints({2, 5, 7}, 1, 0, 3, DType::kInt32), w});
      },
      op);
}

}  // namespace
}  // namespace lumen
