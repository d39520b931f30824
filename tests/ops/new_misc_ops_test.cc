// Tests of BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot, BitCast, CumProd and TensorScatter
// against plain-loop references on random data (every output element checked), and their
// bad-input errors. CenterCropPad, Col2Im, AffineGrid and DeformConv are in
// new_misc_image_ops_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::broadcast_source;
using test::constant;
using test::expect_error;
using test::omitted;
using test::run_op;
using test::unravel;

// The elements of a host tensor as T (raw bytes, any dtype of T's size).
template <typename T>
std::vector<T> elems(const Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.raw_data(), v.size() * sizeof(T));
  return v;
}

template <typename T>
void expect_elems(const Tensor& got, DType dtype, const Shape& shape, const std::vector<T>& want) {
  ASSERT_EQ(got.dtype(), dtype);
  ASSERT_EQ(got.shape(), shape);
  std::vector<T> g = elems<T>(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(g[i], want[i]) << "element " << i;
}

// Random integers of T covering all of its bits.
template <typename T>
Tensor random_bits(const Shape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(static_cast<size_t>(shape.numel()));
  for (T& x : v) x = static_cast<T>(rng());
  return Tensor::from_vector<T>(shape, v);
}

// ---- BitwiseAnd / Or / Xor / Not ----

template <typename T>
void check_bitwise_binary(const Shape& a_shape, const Shape& b_shape, uint64_t seed) {
  SCOPED_TRACE(std::string(dtype_name(DTypeOf<T>::value)) + " " + a_shape.to_string() + " " +
               b_shape.to_string());
  Tensor a = random_bits<T>(a_shape, seed), b = random_bits<T>(b_shape, seed + 1);
  const Shape out = broadcast_shapes(a_shape, b_shape);
  std::vector<T> av = elems<T>(a), bv = elems<T>(b);
  std::vector<T> want_and(out.numel()), want_or(out.numel()), want_xor(out.numel());
  for (int64_t i = 0; i < out.numel(); ++i) {
    const std::vector<int64_t> idx = unravel(i, out);
    const T x = av[broadcast_source(idx, a_shape)], y = bv[broadcast_source(idx, b_shape)];
    want_and[i] = static_cast<T>(x & y);
    want_or[i] = static_cast<T>(x | y);
    want_xor[i] = static_cast<T>(x ^ y);
  }
  const DType dt = DTypeOf<T>::value;
  expect_elems<T>(run_op("BitwiseAnd", {a, b})[0], dt, out, want_and);
  expect_elems<T>(run_op("BitwiseOr", {a, b})[0], dt, out, want_or);
  expect_elems<T>(run_op("BitwiseXor", {a, b})[0], dt, out, want_xor);
  std::vector<T> want_not(av.size());
  for (size_t i = 0; i < av.size(); ++i) want_not[i] = static_cast<T>(~av[i]);
  expect_elems<T>(run_op("BitwiseNot", {a})[0], dt, a_shape, want_not);
}

template <typename T>
void check_bitwise_all_shapes(uint64_t seed) {
  check_bitwise_binary<T>({3, 4, 5}, {3, 4, 5}, seed);
  check_bitwise_binary<T>({3, 4, 5, 6}, {4, 5, 6}, seed + 10);
  check_bitwise_binary<T>({3, 1, 5}, {4, 1}, seed + 20);
  check_bitwise_binary<T>({}, {7}, seed + 30);
  // Large enough for the parallel path.
  check_bitwise_binary<T>({64, 600}, {600}, seed + 40);
}

TEST(Bitwise, EveryIntegerDtypeWithBroadcasting) {
  check_bitwise_all_shapes<int8_t>(1);
  check_bitwise_all_shapes<uint8_t>(100);
  check_bitwise_all_shapes<int16_t>(200);
  check_bitwise_all_shapes<uint16_t>(300);
  check_bitwise_all_shapes<int32_t>(400);
  check_bitwise_all_shapes<uint32_t>(500);
  check_bitwise_all_shapes<int64_t>(600);
  check_bitwise_all_shapes<uint64_t>(700);
}

TEST(Bitwise, BadInputs) {
  Tensor f = test::random_tensor({3}, 1);
  Tensor i32 = test::random_ints({3}, 2, -5, 5, DType::kInt32);
  Tensor i64 = test::random_ints({3}, 3, -5, 5, DType::kInt64);
  Tensor b = test::random_ints({3}, 4, 0, 1, DType::kBool);
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) {
    expect_error<ShapeError>([&] { run_op(op, {f, f}); }, op);
    expect_error<ShapeError>([&] { run_op(op, {b, b}); }, op);
    expect_error<ShapeError>([&] { run_op(op, {i32, i64}); }, op);
    Tensor other = test::random_ints({4}, 5, -5, 5, DType::kInt32);
    expect_error<ShapeError>([&] { run_op(op, {i32, other}); }, op);
  }
  expect_error<ShapeError>([&] { run_op("BitwiseNot", {f}); }, "BitwiseNot");
  expect_error<ShapeError>([&] { run_op("BitwiseNot", {b}); }, "BitwiseNot");
}

// ---- BitCast ----

template <typename From, typename To>
void check_bit_cast(int64_t onnx_to, const Tensor& x) {
  SCOPED_TRACE(std::string(dtype_name(x.dtype())) + " to " + std::to_string(onnx_to));
  std::vector<From> xv = elems<From>(x);
  std::vector<To> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) std::memcpy(&want[i], &xv[i], sizeof(To));
  Tensor y = run_op("BitCast", {x}, {{"to", onnx_to}})[0];
  ASSERT_EQ(y.shape(), x.shape());
  ASSERT_EQ(std::memcmp(y.raw_data(), want.data(), want.size() * sizeof(To)), 0);
  EXPECT_EQ(elems<To>(y).size(), want.size());
}

TEST(BitCast, SameWidthTypesKeepTheirBits) {
  // ONNX codes: 1 float, 2 uint8, 3 int8, 4 uint16, 5 int16, 6 int32, 7 int64, 10 float16,
  // 11 double, 12 uint32, 13 uint64.
  Tensor f = test::random_tensor({5, 7}, 1, -100.0f, 100.0f);
  check_bit_cast<float, int32_t>(6, f);
  check_bit_cast<float, uint32_t>(12, f);
  check_bit_cast<int32_t, float>(1, random_bits<int32_t>({64}, 2));
  check_bit_cast<uint32_t, int32_t>(6, random_bits<uint32_t>({3, 3}, 3));
  check_bit_cast<int64_t, double>(11, random_bits<int64_t>({9}, 4));
  check_bit_cast<uint64_t, int64_t>(7, random_bits<uint64_t>({9}, 5));
  check_bit_cast<uint16_t, int16_t>(5, random_bits<uint16_t>({2, 8}, 6));
  check_bit_cast<int16_t, uint16_t>(10, random_bits<int16_t>({2, 8}, 7));
  check_bit_cast<int8_t, uint8_t>(2, random_bits<int8_t>({40}, 8));
  check_bit_cast<uint8_t, int8_t>(3, random_bits<uint8_t>({40}, 9));
  check_bit_cast<float, int32_t>(6, Tensor::scalar<float>(-2.5f));
  // Large enough for the parallel copy.
  check_bit_cast<double, uint64_t>(
      13, Tensor::from_vector<double>({100000}, std::vector<double>(100000, -1.25)));
  // float16 -> int16: the float16 bits as they are.
  Tensor h = Tensor::empty({6}, DType::kFloat16);
  std::vector<uint16_t> bits = {0x3c00, 0xbc00, 0x7bff, 0x0001, 0x7e00, 0x0000};
  std::memcpy(h.raw_data(), bits.data(), 12);
  Tensor y = run_op("BitCast", {h}, {{"to", int64_t{5}}})[0];
  expect_elems<int16_t>(y, DType::kInt16, {6}, {0x3c00, -17408, 0x7bff, 1, 0x7e00, 0});
}

TEST(BitCast, BoolBytes) {
  std::vector<bool> b = {true, false, false, true, true};
  Tensor x = Tensor::from_vector<bool>({5}, b);
  expect_elems<uint8_t>(run_op("BitCast", {x}, {{"to", int64_t{2}}})[0], DType::kUInt8, {5},
                        {1, 0, 0, 1, 1});
  // A byte other than 0 or 1 becomes true: a bool holds only those two.
  Tensor u = Tensor::from_vector<uint8_t>({4}, {0, 1, 2, 255});
  Tensor y = run_op("BitCast", {u}, {{"to", int64_t{9}}})[0];
  expect_elems<uint8_t>(y, DType::kBool, {4}, {0, 1, 1, 1});
}

TEST(BitCast, BadInputs) {
  Tensor f = test::random_tensor({3}, 1);
  expect_error<ShapeError>([&] { run_op("BitCast", {f}, {{"to", int64_t{7}}}); }, "BitCast");
  expect_error<ShapeError>([&] { run_op("BitCast", {f}, {{"to", int64_t{10}}}); }, "BitCast");
  expect_error<UnsupportedOp>([&] { run_op("BitCast", {f}, {{"to", int64_t{8}}}); }, "BitCast");
  expect_error<UnsupportedOp>([&] { run_op("BitCast", {f}, {{"to", int64_t{99}}}); }, "BitCast");
  expect_error<InvalidModel>([&] { run_op("BitCast", {f}); }, "BitCast");
}

// ---- CumProd ----

// The reference's accumulator: unsigned for integers (products wrap around), double for floats.
template <typename T, bool = std::is_integral_v<T>>
struct AccOf {
  using type = double;
};
template <typename T>
struct AccOf<T, true> {
  using type = std::make_unsigned_t<T>;
};

// The running product along `axis` in plain loops (T's own arithmetic; integers wrap).
template <typename T>
std::vector<T> cum_prod_reference(const std::vector<T>& x, const Shape& shape, int axis,
                                  bool exclusive, bool reverse) {
  using Acc = typename AccOf<T>::type;
  std::vector<T> y(x.size());
  const int64_t n = shape[axis], stride = shape.strides()[axis];
  for (int64_t first = 0; first < shape.numel(); ++first) {
    if ((first / stride) % n != 0) continue;  // not the start of a line along the axis
    Acc acc = 1;
    for (int64_t step = 0; step < n; ++step) {
      const int64_t at = first + (reverse ? n - 1 - step : step) * stride;
      if (exclusive) {
        y[at] = static_cast<T>(acc);
        acc = static_cast<Acc>(acc * static_cast<Acc>(x[at]));
      } else {
        acc = static_cast<Acc>(acc * static_cast<Acc>(x[at]));
        y[at] = static_cast<T>(acc);
      }
    }
  }
  return y;
}

template <typename T>
void check_cum_prod(const Shape& shape, uint64_t seed, bool axis_int32) {
  std::mt19937_64 rng(seed);
  std::vector<T> x(static_cast<size_t>(shape.numel()));
  for (T& v : x) {
    if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(rng());  // wide values: the products wrap around
    } else {
      v = static_cast<T>(0.8 + 0.4 * std::uniform_real_distribution<double>(0, 1)(rng));
    }
  }
  Tensor xt = Tensor::from_vector<T>(shape, x);
  for (int axis = -shape.rank(); axis < shape.rank(); ++axis) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool exclusive = flags & 1, reverse = flags & 2;
      SCOPED_TRACE(std::string(dtype_name(DTypeOf<T>::value)) + " " + shape.to_string() + " axis " +
                   std::to_string(axis) + " exclusive " + std::to_string(exclusive) + " reverse " +
                   std::to_string(reverse));
      Tensor a = axis_int32 ? Tensor::scalar<int32_t>(axis) : Tensor::scalar<int64_t>(axis);
      Tensor y = run_op("CumProd", {xt, constant(a)},
                        {{"exclusive", int64_t{exclusive}}, {"reverse", int64_t{reverse}}})[0];
      std::vector<T> want =
          cum_prod_reference(x, shape, normalize_axis(axis, shape.rank()), exclusive, reverse);
      ASSERT_EQ(y.shape(), shape);
      ASSERT_EQ(y.dtype(), DTypeOf<T>::value);
      std::vector<T> got = elems<T>(y);
      for (size_t i = 0; i < want.size(); ++i) {
        if constexpr (std::is_integral_v<T>) {
          ASSERT_EQ(got[i], want[i]) << "element " << i;
        } else {
          // float32 rounds at each of up to n steps.
          const double tol = std::is_same_v<T, float> ? 2e-4 : 1e-12;
          ASSERT_NEAR(got[i], want[i], tol * std::abs(want[i]) + 1e-6) << "element " << i;
        }
      }
    }
  }
}

TEST(CumProd, EveryAxisAndFlag) {
  check_cum_prod<float>({3, 4, 5}, 1, false);
  check_cum_prod<double>({2, 3, 4}, 2, true);
  check_cum_prod<int32_t>({4, 6}, 3, true);
  check_cum_prod<int64_t>({3, 5}, 4, false);
  check_cum_prod<uint32_t>({7}, 5, false);
  check_cum_prod<uint64_t>({2, 5}, 6, false);
  // Rows longer than one column chunk, and enough elements for the parallel path.
  check_cum_prod<float>({3, 9, 1300}, 7, false);
}

TEST(CumProd, Float16RoundsEachStep) {
  std::vector<float> xs = {1.1f, 0.9f, 1.3f, 1.7f, 0.6f, 1.05f};
  Tensor x = Tensor::empty({6}, DType::kFloat16);
  std::vector<uint16_t> bits;
  for (float v : xs) bits.push_back(float_to_half(v));
  std::memcpy(x.raw_data(), bits.data(), 12);
  Tensor y = run_op("CumProd", {x, constant(Tensor::scalar<int64_t>(0))})[0];
  std::vector<uint16_t> got = elems<uint16_t>(y);
  uint16_t acc = float_to_half(1.0f);
  for (size_t i = 0; i < 6; ++i) {
    acc = float_to_half(half_to_float(acc) * half_to_float(bits[i]));
    EXPECT_EQ(got[i], acc) << "element " << i;
  }
}

TEST(CumProd, BadInputs) {
  Tensor x = test::random_tensor({3, 4}, 1);
  Tensor axis = Tensor::scalar<int64_t>(0);
  expect_error<ShapeError>(
      [&] {
        run_op("CumProd", {x, constant(Tensor::scalar<int64_t>(2))});
      },
      "CumProd");
  expect_error<ShapeError>(
      [&] {
        run_op("CumProd", {x, constant(Tensor::scalar<int64_t>(-3))});
      },
      "CumProd");
  expect_error<ShapeError>([&] { run_op("CumProd", {x, axis}); }, "CumProd");  // not constant
  expect_error<ShapeError>(
      [&] {
        run_op("CumProd", {x, constant(Tensor::from_vector<int64_t>({2}, {0, 1}))});
      },
      "CumProd");
  Tensor b = test::random_ints({3}, 2, 0, 1, DType::kBool);
  expect_error<ShapeError>([&] { run_op("CumProd", {b, constant(axis)}); }, "CumProd");
  Tensor i8 = test::random_ints({3}, 3, 0, 5, DType::kInt8);
  expect_error<ShapeError>([&] { run_op("CumProd", {i8, constant(axis)}); }, "CumProd");
  expect_error<InvalidModel>(
      [&] {
        run_op("CumProd", {x, constant(axis)}, {{"exclusive", int64_t{2}}});
      },
      "CumProd");
  expect_error<ShapeError>(
      [&] {
        run_op("CumProd", {Tensor::scalar<float>(1.0f), constant(axis)});
      },
      "CumProd");
}

// ---- TensorScatter ----

// The spec's pseudocode in plain loops; cache and update as doubles, row-major.
std::vector<double> tensor_scatter_reference(const std::vector<double>& cache, const Shape& cs,
                                             const std::vector<double>& update, const Shape& us,
                                             const std::vector<int64_t>& write, int axis,
                                             bool circular) {
  std::vector<double> out = cache;
  for (int64_t i = 0; i < us.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, us);
    int64_t pos = (write.empty() ? 0 : write[idx[0]]) + idx[axis];
    if (circular) pos %= cs[axis];
    idx[axis] = pos;
    out[test::ravel(idx, cs)] = update[i];
  }
  return out;
}

void check_tensor_scatter(const Shape& cs, const Shape& us, int axis_attr, bool circular,
                          const std::vector<int64_t>& write, DType dtype, uint64_t seed) {
  SCOPED_TRACE(cs.to_string() + " <- " + us.to_string() + " axis " + std::to_string(axis_attr) +
               (circular ? " circular" : " linear"));
  Tensor cache = dtype == DType::kFloat32 ? test::random_tensor(cs, seed)
                                          : test::random_ints(cs, seed, -1000, 1000, dtype);
  Tensor update = dtype == DType::kFloat32 ? test::random_tensor(us, seed + 1)
                                           : test::random_ints(us, seed + 1, -1000, 1000, dtype);
  Attributes attrs = {{"mode", circular ? "circular" : "linear"}};
  if (axis_attr != -2) attrs["axis"] = int64_t{axis_attr};
  std::vector<test::OpInput> inputs = {cache, update};
  if (!write.empty())
    inputs.push_back(Tensor::from_vector<int64_t>({static_cast<int64_t>(write.size())}, write));
  Tensor y = run_op("TensorScatter", inputs, attrs)[0];
  std::vector<double> want =
      tensor_scatter_reference(test::to_doubles(cache), cs, test::to_doubles(update), us, write,
                               normalize_axis(axis_attr, cs.rank()), circular);
  test::expect_equal(y, dtype, cs, want);
}

TEST(TensorScatter, LinearAndCircularOnEachAxis) {
  check_tensor_scatter({2, 3, 8, 4}, {2, 3, 3, 4}, -2, false, {0, 5}, DType::kFloat32, 1);
  check_tensor_scatter({2, 3, 8, 4}, {2, 3, 3, 4}, -2, false, {}, DType::kFloat32, 2);
  check_tensor_scatter({2, 3, 8, 4}, {2, 3, 3, 4}, 2, true, {6, 13}, DType::kFloat32, 3);
  check_tensor_scatter({3, 6, 5}, {3, 2, 5}, 1, false, {4, 0, 2}, DType::kInt64, 4);
  check_tensor_scatter({3, 6, 5}, {3, 6, 5}, 1, true, {4, 0, 2}, DType::kInt32, 5);
  check_tensor_scatter({2, 4, 3, 7}, {2, 4, 3, 2}, -1, true, {6, 3}, DType::kInt8, 6);
  check_tensor_scatter({2, 4, 3, 7}, {2, 4, 3, 0}, 3, false, {7, 3}, DType::kFloat32, 7);
  // A large cache: the parallel copies.
  check_tensor_scatter({4, 8, 256, 64}, {4, 8, 5, 64}, -2, true, {254, 0, 100, 251},
                       DType::kFloat32, 8);
}

// With the cache an intermediate that dies at TensorScatter, the planner may run it in place;
// the result must be the same.
TEST(TensorScatter, InPlaceOnAnIntermediateCache) {
  const Shape cs{2, 2, 6, 3}, us{2, 2, 2, 3};
  Tensor past = test::random_ints(cs, 1, -100, 100, DType::kInt32);
  Tensor update = test::random_ints(us, 2, -100, 100, DType::kInt32);
  Graph graph;
  Value* p = graph.add_input("past", cs, DType::kInt32);
  Value* u = graph.add_input("update", us, DType::kInt32);
  Value* w = graph.add_input("write", {2}, DType::kInt64);
  Value* once = graph.add_op("BitwiseNot", {p}, 1, {}, "not1")[0];
  Value* twice = graph.add_op("BitwiseNot", {once}, 1, {}, "not2")[0];
  Value* out = graph.add_op("TensorScatter", {twice, u, w}, 1, {{"mode", "circular"}}, "node")[0];
  graph.mark_output(out);
  Runtime rt;
  CompileOptions options;
  options.backends = test::run_op_backends();
  Executable* exe = graph.compile(&rt, options);
  const std::vector<int64_t> write = {5, 1};
  Tensor y = exe->execute({past, update, Tensor::from_vector<int64_t>({2}, write)})[0];
  test::expect_equal(y, DType::kInt32, cs,
                     tensor_scatter_reference(test::to_doubles(past), cs, test::to_doubles(update),
                                              us, write, 2, true));
}

TEST(TensorScatter, BadInputs) {
  Tensor cache = test::random_tensor({2, 3, 8, 4}, 1);
  Tensor update = test::random_tensor({2, 3, 3, 4}, 2);
  Tensor write = Tensor::from_vector<int64_t>({2}, {0, 6});  // 6 + 3 > 8
  expect_error<InvalidArgument>(
      [&] {
        run_op("TensorScatter", {cache, update, write});
      },
      "TensorScatter");
  Tensor negative = Tensor::from_vector<int64_t>({2}, {-1, 0});
  expect_error<InvalidArgument>(
      [&] {
        run_op("TensorScatter", {cache, update, negative});
      },
      "TensorScatter");
  Tensor longer = test::random_tensor({2, 3, 9, 4}, 3);
  expect_error<ShapeError>([&] { run_op("TensorScatter", {cache, longer}); }, "TensorScatter");
  Tensor other = test::random_tensor({2, 4, 3, 4}, 4);
  expect_error<ShapeError>([&] { run_op("TensorScatter", {cache, other}); }, "TensorScatter");
  Tensor ints = test::random_ints({2, 3, 3, 4}, 5, 0, 5, DType::kInt64);
  expect_error<ShapeError>([&] { run_op("TensorScatter", {cache, ints}); }, "TensorScatter");
  Tensor wrong_batch = Tensor::from_vector<int64_t>({3}, {0, 0, 0});
  expect_error<ShapeError>(
      [&] {
        run_op("TensorScatter", {cache, update, wrong_batch});
      },
      "TensorScatter");
  Tensor write32 = Tensor::from_vector<int32_t>({2}, {0, 0});
  expect_error<ShapeError>(
      [&] {
        run_op("TensorScatter", {cache, update, write32});
      },
      "TensorScatter");
  expect_error<InvalidModel>(
      [&] {
        run_op("TensorScatter", {cache, update}, {{"axis", int64_t{0}}});
      },
      "TensorScatter");
  expect_error<InvalidModel>(
      [&] {
        run_op("TensorScatter", {cache, update}, {{"axis", int64_t{4}}});
      },
      "TensorScatter");
  expect_error<InvalidModel>(
      [&] {
        run_op("TensorScatter", {cache, update}, {{"mode", "wrap"}});
      },
      "TensorScatter");
}

}  // namespace
}  // namespace lumen
