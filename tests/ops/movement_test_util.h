// Test helpers for the data-movement ops: random data of any dtype, and an exact check that each
// output element holds the bytes of the input element a naive reference says it came from.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen::test {

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> kTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16,
                                            DType::kFloat64, DType::kInt8,    DType::kUInt8,
                                            DType::kInt32,   DType::kInt64,   DType::kBool};
  return kTypes;
}

// Random values of any dtype: uniform floats for float32, random bits for other types (0/1 for
// bool). Element-wise movement never interprets the bits, so NaN patterns are fine.
inline Tensor random_data(const Shape& shape, DType dtype, uint64_t seed) {
  if (dtype == DType::kFloat32) return random_tensor(shape, seed, -10.0f, 10.0f);
  if (dtype == DType::kInt64) return random_ints(shape, seed, -1000000, 1000000);
  Tensor t = Tensor::empty(shape, dtype);
  std::mt19937_64 rng(seed);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = dtype == DType::kBool ? static_cast<uint8_t>(rng() & 1) : static_cast<uint8_t>(rng());
  return t;
}

// Checks dtype and shape, then that output element i equals input element src[i] bit for bit, or
// the single element of `fill` (zero bits when undefined) where src[i] is -1.
inline void expect_moved(const Tensor& got, const Tensor& in, const Shape& want_shape,
                         const std::vector<int64_t>& src, const Tensor& fill = Tensor()) {
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.dtype(), in.dtype()) << dtype_name(got.dtype());
  ASSERT_EQ(got.shape(), want_shape) << got.shape().to_string() << " vs " << want_shape.to_string();
  ASSERT_EQ(static_cast<size_t>(got.numel()), src.size());
  size_t e = dtype_size(in.dtype());
  std::vector<uint8_t> zero(e, 0);
  const uint8_t* fill_bytes =
      fill.defined() ? static_cast<const uint8_t*>(fill.raw_data()) : zero.data();
  const auto* g = static_cast<const uint8_t*>(got.raw_data());
  const auto* x = static_cast<const uint8_t*>(in.raw_data());
  int reported = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    const uint8_t* want = src[i] >= 0 ? x + src[i] * e : fill_bytes;
    if (std::memcmp(g + i * e, want, e) != 0 && reported++ < 10)
      ADD_FAILURE() << dtype_name(in.dtype()) << " element " << i << " (index "
                    << Shape(unravel(static_cast<int64_t>(i), want_shape)).to_string()
                    << ") should come from input element " << src[i];
  }
  EXPECT_EQ(reported, 0) << "mismatching elements";
}

inline Tensor ints(std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
}

}  // namespace lumen::test
