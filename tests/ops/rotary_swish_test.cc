// Tests of RotaryEmbedding, Swish and SwiGLU against naive double-precision references on random
// data (every output element), in float32 and the other float dtypes, and of their refusals of
// bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/half.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;
using test::expect_close;
using test::expect_error;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

// `t` (float32) rounded to `dtype` (float32, float64, float16 or bfloat16).
Tensor as_dtype(const Tensor& t, DType dtype) {
  if (dtype == DType::kFloat32) return t;
  Tensor out = Tensor::empty(t.shape(), dtype);
  const float* src = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kFloat64)
      static_cast<double*>(out.raw_data())[i] = src[i];
    else if (dtype == DType::kFloat16)
      static_cast<uint16_t*>(out.raw_data())[i] = float_to_half(src[i]);
    else
      static_cast<uint16_t*>(out.raw_data())[i] = float_to_bfloat16(src[i]);
  }
  return out;
}

double atol_of(DType dtype) {
  return dtype == DType::kFloat16 ? 2e-3 : dtype == DType::kBFloat16 ? 2e-2 : 1e-5;
}
double rtol_of(DType dtype) {
  return dtype == DType::kFloat16 ? 2e-3 : dtype == DType::kBFloat16 ? 1e-2 : 1e-4;
}

// --- RotaryEmbedding ---------------------------------------------------------------------------

struct RotaryCase {
  int64_t batch = 2, heads = 3, seq = 5, head_size = 8;
  int64_t rotary_dim = 0;  // attribute; 0: absent (the whole head)
  bool interleaved = false;
  bool three_d = false;   // X (batch, seq, heads * head_size) with num_heads
  int64_t positions = 0;  // > 0: position_ids into caches of that many rows
};

// The spec's algorithm element by element: for X[b, h, s, j] (4-D; 3-D reads X[b, s, h * D + j])
// with j < rotary_dim, the pair (x1, x2) of j's rotation, and cos/sin at the token's row.
std::vector<double> ref_rotary(const RotaryCase& c, const Tensor& x, const Tensor& cos,
                               const Tensor& sin, const Tensor* pos) {
  const int64_t d = c.head_size, rd = c.rotary_dim == 0 ? d : c.rotary_dim, half = rd / 2;
  std::vector<double> xv = to_doubles(x), cv = to_doubles(cos), sv = to_doubles(sin);
  std::vector<double> y(xv.size());
  auto at = [&](int64_t b, int64_t h, int64_t s, int64_t j) {
    return c.three_d ? ((b * c.seq + s) * c.heads + h) * d + j
                     : ((b * c.heads + h) * c.seq + s) * d + j;
  };
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t s = 0; s < c.seq; ++s) {
        const int64_t row =
            pos ? static_cast<int64_t>(pos->item_as_double(b * c.seq + s)) : b * c.seq + s;
        for (int64_t j = 0; j < d; ++j) {
          if (j >= rd) {
            y[at(b, h, s, j)] = xv[at(b, h, s, j)];
            continue;
          }
          int64_t i, j1, j2;
          bool first;
          if (c.interleaved) {
            i = j / 2;
            j1 = 2 * i;
            j2 = 2 * i + 1;
            first = j % 2 == 0;
          } else {
            i = j % half;
            j1 = i;
            j2 = i + half;
            first = j < half;
          }
          const double x1 = xv[at(b, h, s, j1)], x2 = xv[at(b, h, s, j2)];
          const double co = cv[row * half + i], si = sv[row * half + i];
          y[at(b, h, s, j)] = first ? co * x1 - si * x2 : si * x1 + co * x2;
        }
      }
  return y;
}

struct RotaryInputs {
  Tensor x, cos, sin, pos;
};

RotaryInputs rotary_inputs(const RotaryCase& c, uint64_t seed, DType dtype) {
  const int64_t rd = c.rotary_dim == 0 ? c.head_size : c.rotary_dim;
  Shape xs = c.three_d ? Shape{c.batch, c.seq, c.heads * c.head_size}
                       : Shape{c.batch, c.heads, c.seq, c.head_size};
  Shape cs = c.positions > 0 ? Shape{c.positions, rd / 2} : Shape{c.batch, c.seq, rd / 2};
  RotaryInputs in;
  in.x = as_dtype(random_tensor(xs, seed, -2.0f, 2.0f), dtype);
  // Angles as a model's caches hold them: cos and sin of one angle per (row, frequency).
  Tensor angle = random_tensor(cs, seed + 1, -3.2f, 3.2f);
  Tensor cf = Tensor::empty(cs), sf = Tensor::empty(cs);
  for (int64_t i = 0; i < angle.numel(); ++i) {
    cf.data<float>()[i] = std::cos(angle.data<float>()[i]);
    sf.data<float>()[i] = std::sin(angle.data<float>()[i]);
  }
  in.cos = as_dtype(cf, dtype);
  in.sin = as_dtype(sf, dtype);
  if (c.positions > 0) in.pos = test::random_ints({c.batch, c.seq}, seed + 2, 0, c.positions - 1);
  return in;
}

Attributes rotary_attrs(const RotaryCase& c) {
  Attributes attrs;
  if (c.rotary_dim != 0) attrs["rotary_embedding_dim"] = c.rotary_dim;
  if (c.interleaved) attrs["interleaved"] = int64_t{1};
  if (c.three_d) attrs["num_heads"] = c.heads;
  return attrs;
}

void check_rotary(const RotaryCase& c, uint64_t seed, DType dtype = DType::kFloat32) {
  RotaryInputs in = rotary_inputs(c, seed, dtype);
  std::vector<test::OpInput> inputs = {in.x, in.cos, in.sin};
  if (c.positions > 0) inputs.push_back(in.pos);
  auto out = run_op("RotaryEmbedding", inputs, rotary_attrs(c));
  EXPECT_EQ(out[0].dtype(), dtype);
  expect_close(out[0], in.x.shape(),
               ref_rotary(c, in.x, in.cos, in.sin, c.positions > 0 ? &in.pos : nullptr),
               atol_of(dtype), rtol_of(dtype));
}

TEST(RotaryEmbeddingTest, HalvesNoPositions) {
  check_rotary({}, 1);
}
TEST(RotaryEmbeddingTest, Interleaved) {
  check_rotary({.interleaved = true}, 2);
}
TEST(RotaryEmbeddingTest, PositionIds) {
  check_rotary({.positions = 50}, 3);
  check_rotary({.interleaved = true, .positions = 7}, 4);
}
TEST(RotaryEmbeddingTest, PartialRotation) {
  check_rotary({.head_size = 10, .rotary_dim = 4}, 5);
  check_rotary({.head_size = 10, .rotary_dim = 6, .interleaved = true, .positions = 20}, 6);
}
TEST(RotaryEmbeddingTest, ThreeDInput) {
  check_rotary({.heads = 4, .three_d = true}, 7);
  check_rotary({.heads = 4, .three_d = true, .positions = 9}, 8);
  check_rotary({.heads = 2,
                .head_size = 12,
                .rotary_dim = 8,
                .interleaved = true,
                .three_d = true,
                .positions = 16},
               9);
}
TEST(RotaryEmbeddingTest, LargeParallel) {
  check_rotary({.batch = 2, .heads = 8, .seq = 64, .head_size = 128, .positions = 256}, 10);
  check_rotary({.batch = 2,
                .heads = 8,
                .seq = 64,
                .head_size = 64,
                .rotary_dim = 32,
                .interleaved = true,
                .three_d = true},
               11);
}
TEST(RotaryEmbeddingTest, OtherDtypes) {
  check_rotary({.positions = 12}, 12, DType::kFloat16);
  check_rotary({.interleaved = true}, 13, DType::kBFloat16);
  check_rotary({.head_size = 6, .rotary_dim = 4, .positions = 12}, 14, DType::kFloat64);
}
TEST(RotaryEmbeddingTest, ConstantCaches) {
  RotaryCase c{.positions = 32};
  RotaryInputs in = rotary_inputs(c, 15, DType::kFloat32);
  auto out = run_op("RotaryEmbedding", {in.x, constant(in.cos), constant(in.sin), in.pos});
  expect_close(out[0], in.x.shape(), ref_rotary(c, in.x, in.cos, in.sin, &in.pos));
}

// A position outside the caches: the run fails (on CUDA the kernel records the position and the
// host raises it after the run).
TEST(RotaryEmbeddingTest, PositionOutOfRange) {
  RotaryCase c{.batch = 1, .heads = 2, .seq = 3, .head_size = 4, .positions = 8};
  RotaryInputs in = rotary_inputs(c, 16, DType::kFloat32);
  in.pos.data<int64_t>()[1] = 8;
  expect_error<InvalidArgument>(
      [&] {
        run_op("RotaryEmbedding", {in.x, in.cos, in.sin, in.pos});
      },
      "RotaryEmbedding");
}

TEST(RotaryEmbeddingTest, BadInputs) {
  RotaryCase c{.positions = 10};
  RotaryInputs in = rotary_inputs(c, 20, DType::kFloat32);
  auto rotary = [](const std::vector<test::OpInput>& inputs, const Attributes& attrs = {}) {
    run_op("RotaryEmbedding", inputs, attrs);
  };
  const char* op = "RotaryEmbedding";
  Tensor x3 = random_tensor({2, 5, 24}, 21);
  // 3-D X without num_heads, or num_heads not dividing the hidden size.
  expect_error<InvalidModel>([&] { rotary({x3, in.cos, in.sin, in.pos}); }, op);
  expect_error<ShapeError>([&] { rotary({x3, in.cos, in.sin, in.pos}, {{"num_heads", 5}}); }, op);
  // 4-D X whose heads disagree with num_heads; X of rank 2.
  expect_error<ShapeError>([&] { rotary({in.x, in.cos, in.sin, in.pos}, {{"num_heads", 2}}); }, op);
  expect_error<ShapeError>(
      [&] {
        rotary({random_tensor({5, 8}, 22), in.cos, in.sin, in.pos});
      },
      op);
  // Odd or oversized rotary_embedding_dim.
  expect_error<ShapeError>(
      [&] {
        rotary({in.x, in.cos, in.sin, in.pos}, {{"rotary_embedding_dim", 3}});
      },
      op);
  expect_error<ShapeError>(
      [&] {
        rotary({in.x, in.cos, in.sin, in.pos}, {{"rotary_embedding_dim", 10}});
      },
      op);
  // Caches of the wrong width, of different shapes, of another dtype; 3-D caches with positions.
  Tensor narrow = random_tensor({10, 3}, 23);
  expect_error<ShapeError>([&] { rotary({in.x, narrow, narrow, in.pos}); }, op);
  expect_error<ShapeError>([&] { rotary({in.x, in.cos, random_tensor({11, 4}, 24), in.pos}); }, op);
  expect_error<ShapeError>(
      [&] {
        rotary({in.x, as_dtype(in.cos, DType::kFloat64), in.sin, in.pos});
      },
      op);
  Tensor c3 = random_tensor({2, 5, 4}, 25);
  expect_error<ShapeError>([&] { rotary({in.x, c3, c3, in.pos}); }, op);
  // Without positions the caches must be (batch, seq, rotary_dim / 2).
  expect_error<ShapeError>([&] { rotary({in.x, in.cos, in.sin}); }, op);
  // position_ids of the wrong type or shape.
  expect_error<ShapeError>(
      [&] {
        rotary({in.x, in.cos, in.sin, test::random_ints({2, 5}, 26, 0, 9, DType::kInt32)});
      },
      op);
  expect_error<ShapeError>(
      [&] {
        rotary({in.x, in.cos, in.sin, test::random_ints({1, 5}, 27, 0, 9)});
      },
      op);
  expect_error<InvalidModel>(
      [&] {
        rotary({in.x, in.cos, in.sin, in.pos}, {{"interleaved", 2}});
      },
      op);
}

// --- Swish, SwiGLU -----------------------------------------------------------------------------

double swish_ref(double v, double alpha) {
  return v / (1.0 + std::exp(-alpha * v));
}

void check_swish(const Shape& shape, float alpha, bool gated, uint64_t seed,
                 DType dtype = DType::kFloat32, bool default_alpha = false) {
  Tensor a = as_dtype(random_tensor(shape, seed, -12.0f, 12.0f), dtype);
  Tensor b = as_dtype(random_tensor(shape, seed + 1, -3.0f, 3.0f), dtype);
  Attributes attrs;
  if (!default_alpha) attrs["alpha"] = alpha;
  auto out = gated ? run_op("SwiGLU", {a, b}, attrs) : run_op("Swish", {a}, attrs);
  EXPECT_EQ(out[0].dtype(), dtype);
  std::vector<double> av = to_doubles(a), bv = to_doubles(b), want(av.size());
  for (size_t i = 0; i < av.size(); ++i) want[i] = swish_ref(av[i], alpha) * (gated ? bv[i] : 1.0);
  expect_close(out[0], shape, want, atol_of(dtype), rtol_of(dtype));
}

TEST(SwishTest, DefaultAlphaIsOne) {
  check_swish({3, 7}, 1.0f, false, 40, DType::kFloat32, true);
}
TEST(SwishTest, Alphas) {
  check_swish({4, 9}, 0.5f, false, 41);
  check_swish({4, 9}, -1.5f, false, 42);
  check_swish({4, 9}, 1.702f, false, 43);
}
TEST(SwishTest, LargeParallel) {
  check_swish({64, 1031}, 1.0f, false, 44);
}
TEST(SwishTest, OtherDtypes) {
  check_swish({5, 6}, 1.0f, false, 45, DType::kFloat64);
  check_swish({5, 6}, 0.75f, false, 46, DType::kFloat16);
  check_swish({5, 6}, 1.0f, false, 47, DType::kBFloat16);
}
TEST(SwishTest, BadInputs) {
  expect_error<ShapeError>([] { run_op("Swish", {test::random_ints({3}, 48, 0, 3)}); }, "Swish");
  expect_error<InvalidModel>(
      [] {
        run_op("Swish", {random_tensor({3}, 49)}, {{"alpha", "x"}});
      },
      "Swish");
}

TEST(SwiGLUTest, DefaultAlpha) {
  check_swish({2, 4}, 1.0f, true, 50, DType::kFloat32, true);
}
TEST(SwiGLUTest, AlphaAndShapes) {
  check_swish({3, 5, 7}, 0.5f, true, 51);
  check_swish({11}, 1.702f, true, 52);
}
TEST(SwiGLUTest, LargeParallel) {
  check_swish({32, 2053}, 1.0f, true, 53);
}
TEST(SwiGLUTest, OtherDtypes) {
  check_swish({4, 8}, 1.0f, true, 54, DType::kFloat16);
  check_swish({4, 8}, 1.0f, true, 55, DType::kBFloat16);
  check_swish({4, 8}, 0.5f, true, 56, DType::kFloat64);
}
TEST(SwiGLUTest, BadInputs) {
  Tensor a = random_tensor({2, 4}, 57);
  expect_error<ShapeError>([&] { run_op("SwiGLU", {a, random_tensor({1, 4}, 58)}); }, "SwiGLU");
  expect_error<ShapeError>([&] { run_op("SwiGLU", {a, as_dtype(a, DType::kFloat16)}); }, "SwiGLU");
  expect_error<ShapeError>(
      [&] {
        run_op("SwiGLU", {test::random_ints({2, 4}, 59, 0, 3), a});
      },
      "SwiGLU");
  expect_error<InvalidModel>([&] { run_op("SwiGLU", {a}); }, "SwiGLU");
}

}  // namespace
}  // namespace lumen
