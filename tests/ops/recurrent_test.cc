// Tests of RNN, GRU and LSTM against a naive double-precision step loop: directions, layouts,
// sequence_lens, initial states, peepholes, clip, linear_before_reset, input_forget and
// non-default activations, plus bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::expect_close;
using test::omitted;
using test::OpInput;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

double apply(const Act& a, double x) {
  if (a.name == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (a.name == "Tanh") return std::tanh(x);
  if (a.name == "Relu") return std::max(0.0, x);
  if (a.name == "HardSigmoid") return std::clamp(a.alpha * x + a.beta, 0.0, 1.0);
  if (a.name == "LeakyRelu") return x >= 0 ? x : a.alpha * x;
  if (a.name == "Affine") return a.alpha * x + a.beta;
  ADD_FAILURE() << "reference lacks activation " << a.name;
  return 0;
}

struct Config {
  std::string op;  // "RNN", "GRU", "LSTM"
  std::string direction = "forward";
  int64_t seq = 4, batch = 3, input = 5, hidden = 6;
  int layout = 0;
  double clip = 0;  // 0: none
  bool lbr = false;
  bool input_forget = false;
  bool with_bias = true, with_lens = false, with_h0 = false, with_c0 = false, with_p = false;
  std::vector<int32_t> lens;
  std::vector<Act> acts;  // all directions; empty: the defaults
};

struct Inputs {
  Tensor x, w, r, b, lens, h0, c0, p;
};

int gates_of(const Config& c) {
  return c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1;
}
int64_t dirs_of(const Config& c) {
  return c.direction == "bidirectional" ? 2 : 1;
}

Inputs make_inputs(const Config& c, uint64_t seed) {
  const int64_t g = gates_of(c), d = dirs_of(c), h = c.hidden;
  Inputs in;
  in.x = c.layout ? random_tensor({c.batch, c.seq, c.input}, seed)
                  : random_tensor({c.seq, c.batch, c.input}, seed);
  in.w = random_tensor({d, g * h, c.input}, seed + 1, -0.6f, 0.6f);
  in.r = random_tensor({d, g * h, h}, seed + 2, -0.6f, 0.6f);
  if (c.with_bias) in.b = random_tensor({d, 2 * g * h}, seed + 3);
  if (c.with_lens) in.lens = Tensor::from_vector<int32_t>({c.batch}, c.lens);
  Shape state = c.layout ? Shape{c.batch, d, h} : Shape{d, c.batch, h};
  if (c.with_h0) in.h0 = random_tensor(state, seed + 4);
  if (c.with_c0) in.c0 = random_tensor(state, seed + 5);
  if (c.with_p) in.p = random_tensor({d, 3 * h}, seed + 6);
  return in;
}

struct RefOut {
  std::vector<double> y, y_h, y_c;
  Shape y_shape, state_shape;
};

RefOut reference(const Config& c, const Inputs& in) {
  const int64_t g = gates_of(c), nd = dirs_of(c), H = c.hidden, S = c.seq, B = c.batch, I = c.input;
  std::vector<Act> acts = c.acts;
  if (acts.empty()) {
    for (int64_t d = 0; d < nd; ++d) {
      if (c.op == "RNN") acts.push_back({"Tanh"});
      if (c.op == "GRU") acts.insert(acts.end(), {{"Sigmoid"}, {"Tanh"}});
      if (c.op == "LSTM") acts.insert(acts.end(), {{"Sigmoid"}, {"Tanh"}, {"Tanh"}});
    }
  }
  const size_t per_dir = acts.size() / nd;
  std::vector<double> x = to_doubles(in.x), w = to_doubles(in.w), r = to_doubles(in.r);
  std::vector<double> b = in.b.defined() ? to_doubles(in.b) : std::vector<double>(nd * 2 * g * H);
  std::vector<double> h0 = in.h0.defined() ? to_doubles(in.h0) : std::vector<double>(nd * B * H);
  std::vector<double> c0 = in.c0.defined() ? to_doubles(in.c0) : std::vector<double>(nd * B * H);
  std::vector<double> p = in.p.defined() ? to_doubles(in.p) : std::vector<double>(nd * 3 * H);
  RefOut out;
  out.y.assign(S * nd * B * H, 0.0);
  out.y_h.assign(nd * B * H, 0.0);
  out.y_c.assign(nd * B * H, 0.0);
  out.y_shape = c.layout ? Shape{B, S, nd, H} : Shape{S, nd, B, H};
  out.state_shape = c.layout ? Shape{B, nd, H} : Shape{nd, B, H};
  auto clip = [&](double v) { return c.clip > 0 ? std::clamp(v, -c.clip, c.clip) : v; };
  for (int64_t d = 0; d < nd; ++d) {
    const bool rev = c.direction == "reverse" || d == 1;
    const Act* a = &acts[d * per_dir];
    for (int64_t bb = 0; bb < B; ++bb) {
      const int64_t len = c.with_lens ? c.lens[bb] : S;
      const int64_t st = c.layout ? (bb * nd + d) * H : (d * B + bb) * H;
      std::vector<double> h(h0.begin() + st, h0.begin() + st + H);
      std::vector<double> cs(c0.begin() + st, c0.begin() + st + H);
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = rev ? len - 1 - s : s;
        const double* xt = &x[c.layout ? (bb * S + t) * I : (t * B + bb) * I];
        // xw[gate*H + j] = x W^T + Wb; rh = h R^T + Rb.
        std::vector<double> xw(g * H), rh(g * H);
        for (int64_t q = 0; q < g * H; ++q) {
          double sx = b[d * 2 * g * H + q], sh = b[d * 2 * g * H + g * H + q];
          for (int64_t k = 0; k < I; ++k) sx += xt[k] * w[(d * g * H + q) * I + k];
          for (int64_t k = 0; k < H; ++k) sh += h[k] * r[(d * g * H + q) * H + k];
          xw[q] = sx;
          rh[q] = sh;
        }
        std::vector<double> hn(H);
        if (c.op == "RNN") {
          for (int64_t j = 0; j < H; ++j) hn[j] = apply(a[0], clip(xw[j] + rh[j]));
        } else if (c.op == "GRU") {
          std::vector<double> z(H), rr(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = apply(a[0], clip(xw[j] + rh[j]));
            rr[j] = apply(a[0], clip(xw[H + j] + rh[H + j]));
          }
          for (int64_t j = 0; j < H; ++j) {
            double pre;
            if (c.lbr) {
              pre = xw[2 * H + j] + rr[j] * rh[2 * H + j];
            } else {
              pre = xw[2 * H + j] + b[d * 2 * g * H + g * H + 2 * H + j];
              for (int64_t k = 0; k < H; ++k)
                pre += rr[k] * h[k] * r[(d * g * H + 2 * H + j) * H + k];
            }
            double hh = apply(a[1], clip(pre));
            hn[j] = (1 - z[j]) * hh + z[j] * h[j];
          }
        } else {
          const double* pd = &p[d * 3 * H];
          for (int64_t j = 0; j < H; ++j) {
            double i = apply(a[0], clip(xw[j] + rh[j] + pd[j] * cs[j]));
            double f =
                c.input_forget
                    ? 1 - i
                    : apply(a[0], clip(xw[2 * H + j] + rh[2 * H + j] + pd[2 * H + j] * cs[j]));
            double ct = apply(a[1], clip(xw[3 * H + j] + rh[3 * H + j]));
            cs[j] = f * cs[j] + i * ct;
            double o = apply(a[0], clip(xw[H + j] + rh[H + j] + pd[H + j] * cs[j]));
            hn[j] = o * apply(a[2], cs[j]);
          }
        }
        h = hn;
        const int64_t yo = c.layout ? ((bb * S + t) * nd + d) * H : ((t * nd + d) * B + bb) * H;
        std::copy(h.begin(), h.end(), out.y.begin() + yo);
      }
      std::copy(h.begin(), h.end(), out.y_h.begin() + st);
      std::copy(cs.begin(), cs.end(), out.y_c.begin() + st);
    }
  }
  return out;
}

Attributes attrs_of(const Config& c) {
  Attributes at{{"hidden_size", c.hidden}, {"direction", c.direction}, {"layout", c.layout}};
  if (c.clip > 0) at["clip"] = static_cast<float>(c.clip);
  if (c.op == "GRU") at["linear_before_reset"] = c.lbr ? 1 : 0;
  if (c.op == "LSTM" && c.input_forget) at["input_forget"] = 1;
  if (!c.acts.empty()) {
    std::vector<std::string> names;
    std::vector<float> alphas, betas;
    for (const Act& a : c.acts) {
      names.push_back(a.name);
      if (a.name == "HardSigmoid" || a.name == "LeakyRelu" || a.name == "Affine")
        alphas.push_back(static_cast<float>(a.alpha));
      if (a.name == "HardSigmoid" || a.name == "Affine")
        betas.push_back(static_cast<float>(a.beta));
    }
    at["activations"] = names;
    if (!alphas.empty()) at["activation_alpha"] = alphas;
    if (!betas.empty()) at["activation_beta"] = betas;
  }
  return at;
}

std::vector<Tensor> run_config(const Config& c, const Inputs& in, bool const_weights) {
  auto opt = [](const Tensor& t) { return t.defined() ? OpInput(t) : omitted(); };
  std::vector<OpInput> inputs = {OpInput(in.x),
                                 OpInput(in.w, const_weights),
                                 OpInput(in.r, const_weights),
                                 opt(in.b),
                                 opt(in.lens),
                                 opt(in.h0)};
  if (c.op == "LSTM") {
    inputs.push_back(opt(in.c0));
    inputs.push_back(opt(in.p));
  }
  while (!inputs.back().tensor.defined()) inputs.pop_back();
  return run_op(c.op, inputs, attrs_of(c), c.op == "LSTM" ? 3 : 2);
}

void check(const Config& c, uint64_t seed, bool const_weights = false) {
  Inputs in = make_inputs(c, seed);
  RefOut want = reference(c, in);
  std::vector<Tensor> got = run_config(c, in, const_weights);
  expect_close(got[0], want.y_shape, want.y, 2e-5, 1e-4);
  expect_close(got[1], want.state_shape, want.y_h, 2e-5, 1e-4);
  if (c.op == "LSTM") expect_close(got[2], want.state_shape, want.y_c, 2e-5, 1e-4);
}

// Every op under a grid of directions, layouts and optional inputs.
TEST(Recurrent, DirectionsLayoutsAndOptionalInputs) {
  uint64_t seed = 1;
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      for (int layout : {0, 1}) {
        for (int variant = 0; variant < 3; ++variant) {
          Config c;
          c.op = op;
          c.direction = dir;
          c.layout = layout;
          c.with_bias = variant != 0;
          c.with_h0 = variant >= 1;
          c.with_c0 = variant == 2;
          c.with_p = variant == 2;
          c.lbr = variant == 1;
          if (variant == 2) c.with_lens = true, c.lens = {4, 1, 3};
          SCOPED_TRACE(std::string(op) + " " + dir + " layout " + std::to_string(layout) +
                       " variant " + std::to_string(variant));
          check(c, seed, variant == 1);
          seed += 10;
        }
      }
    }
  }
}

TEST(Recurrent, ShapesIncludingSizeOne) {
  uint64_t seed = 500;
  struct Dims {
    int64_t seq, batch, input, hidden;
  };
  for (Dims d : {Dims{1, 1, 1, 1}, Dims{7, 2, 3, 1}, Dims{3, 5, 16, 32}, Dims{20, 4, 8, 24},
                 Dims{3, 64, 16, 96}}) {
    for (const char* op : {"RNN", "GRU", "LSTM"}) {
      Config c;
      c.op = op;
      c.seq = d.seq, c.batch = d.batch, c.input = d.input, c.hidden = d.hidden;
      c.direction = "bidirectional";
      c.with_h0 = true;
      SCOPED_TRACE(std::string(op) + " hidden " + std::to_string(d.hidden));
      check(c, seed);
      seed += 10;
    }
  }
}

TEST(Recurrent, SequenceLensWithZeroPadding) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    for (int layout : {0, 1}) {
      Config c;
      c.op = op;
      c.seq = 6, c.batch = 4;
      c.layout = layout;
      c.direction = "bidirectional";
      c.with_lens = true;
      c.lens = {6, 2, 5, 1};
      c.with_h0 = true;
      c.with_c0 = std::string(op) == "LSTM";
      SCOPED_TRACE(op);
      check(c, 900 + layout);
    }
  }
}

TEST(Recurrent, ClipInputForgetAndActivations) {
  Config lstm;
  lstm.op = "LSTM";
  lstm.clip = 0.5;
  lstm.input_forget = true;
  lstm.with_p = true;
  lstm.with_c0 = true;
  check(lstm, 41);
  lstm.input_forget = false;
  lstm.direction = "bidirectional";
  lstm.acts = {{"HardSigmoid", 0.3, 0.4}, {"Relu"}, {"Tanh"}, {"Sigmoid"}, {"LeakyRelu", 0.2},
               {"Affine", 0.5, 0.1}};
  check(lstm, 42);
  Config gru;
  gru.op = "GRU";
  gru.clip = 0.7;
  gru.acts = {{"Sigmoid"}, {"Relu"}};
  check(gru, 43);
  gru.lbr = true;
  gru.direction = "reverse";
  gru.acts = {{"HardSigmoid", 0.25, 0.5}, {"Tanh"}};
  check(gru, 44);
  Config rnn;
  rnn.op = "RNN";
  rnn.acts = {{"Relu"}};
  rnn.clip = 1.0;
  check(rnn, 45);
  rnn.direction = "bidirectional";
  rnn.acts = {{"Sigmoid"}, {"LeakyRelu", 0.1}};
  check(rnn, 46);
}

TEST(Recurrent, OnlyY) {
  Config c;
  c.op = "GRU";
  Inputs in = make_inputs(c, 77);
  RefOut want = reference(c, in);
  auto got = run_op("GRU", {in.x, in.w, in.r, in.b}, attrs_of(c), 1);
  ASSERT_EQ(got.size(), 1u);
  expect_close(got[0], want.y_shape, want.y, 2e-5, 1e-4);
}

TEST(Recurrent, EmptyBatch) {
  Tensor x = Tensor::empty({3, 0, 2});
  auto got = run_op("LSTM", {x, random_tensor({1, 8, 2}, 1), random_tensor({1, 8, 2}, 2)},
                    {{"hidden_size", 2}}, 3);
  EXPECT_EQ(got[0].shape(), (Shape{3, 1, 0, 2}));
  EXPECT_EQ(got[1].shape(), (Shape{1, 0, 2}));
}

TEST(Recurrent, BadInputs) {
  Tensor x = random_tensor({4, 2, 3}, 1);
  Tensor w = random_tensor({1, 4, 3}, 2), r = random_tensor({1, 4, 4}, 3);
  Attributes at{{"hidden_size", 4}};
  EXPECT_THROW(run_op("RNN", {x, random_tensor({1, 4, 2}, 2), r}, at), ShapeError);
  EXPECT_THROW(run_op("RNN", {x, w, random_tensor({1, 4, 3}, 3)}, at), ShapeError);
  EXPECT_THROW(run_op("RNN", {x, w, r, random_tensor({1, 4}, 4)}, at), ShapeError);
  EXPECT_THROW(run_op("RNN", {random_tensor({4, 3}, 1), w, r}, at), ShapeError);
  EXPECT_THROW(run_op("GRU", {x, w, r}, at), ShapeError);
  EXPECT_THROW(run_op("RNN", {x, w, r}, {{"hidden_size", 4}, {"direction", "sideways"}}),
               InvalidModel);
  EXPECT_THROW(run_op("RNN", {x, w, r}, {{"hidden_size", 4}, {"layout", 2}}), InvalidModel);
  EXPECT_THROW(run_op("RNN", {x, w, r}, {{"hidden_size", 4}, {"activations", {"Swish"}}}),
               InvalidModel);
  std::vector<std::string> two = {"Tanh", "Relu"};
  EXPECT_THROW(run_op("RNN", {x, w, r}, {{"hidden_size", 4}, {"activations", two}}), InvalidModel);
  EXPECT_THROW(run_op("RNN", {x, w, r}, {{"hidden_size", 4}, {"clip", -1.0f}}), InvalidModel);
  EXPECT_THROW(run_op("RNN", {x, w, r}, {{"hidden_size", 4}, {"bogus", 1}}), InvalidModel);
  Tensor lens_bad = Tensor::from_vector<int32_t>({2}, {4, 5});
  EXPECT_THROW(run_op("RNN", {x, w, r, omitted(), lens_bad}, at), InvalidArgument);
  Tensor lens_shape = Tensor::from_vector<int32_t>({3}, {1, 2, 3});
  EXPECT_THROW(run_op("RNN", {x, w, r, omitted(), lens_shape}, at), ShapeError);
  EXPECT_THROW(run_op("RNN", {x, w, r, omitted(), omitted(), random_tensor({1, 3, 4}, 5)}, at),
               ShapeError);
  std::vector<double> xd(24, 0.5), wd(12, 0.1), rd(16, 0.1);
  // float64, which the CPU kernel takes only as float32, runs between Casts.
  EXPECT_EQ(run_op("RNN",
                   {Tensor::from_vector<double>({4, 2, 3}, xd),
                    Tensor::from_vector<double>({1, 4, 3}, wd),
                    Tensor::from_vector<double>({1, 4, 4}, rd)},
                   at)[0]
                .dtype(),
            DType::kFloat64);
}

}  // namespace
}  // namespace lumen
