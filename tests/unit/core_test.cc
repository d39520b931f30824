// Core types: dtype, shape, tensor views, the caching pool, half conversions, errors, .npy files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/half.h"
#include "lumen/lumen.h"

namespace lumen {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kFloat32), 4u);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                  DType::kUInt8, DType::kInt32, DType::kInt64, DType::kBool, DType::kInt16,
                  DType::kUInt16, DType::kUInt32, DType::kUInt64})
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  EXPECT_THROW(dtype_from_name("complex64"), InvalidArgument);
  EXPECT_EQ(dtype_size(DType::kInt16), 2u);
  EXPECT_EQ(dtype_size(DType::kUInt16), 2u);
  EXPECT_EQ(dtype_size(DType::kUInt32), 4u);
  EXPECT_EQ(dtype_size(DType::kUInt64), 8u);
  for (DType d : {DType::kInt16, DType::kUInt16, DType::kUInt32, DType::kUInt64}) {
    EXPECT_TRUE(is_integer(d)) << dtype_name(d);
    EXPECT_FALSE(is_floating(d)) << dtype_name(d);
  }
}

// The wider integer dtypes survive a .npy round trip bit for bit, and read back as themselves.
TEST(Npy, RoundTripsTheWiderIntegerDtypes) {
  const std::string path = ::testing::TempDir() + "lumen_npy_dtypes.npy";
  Tensor u64 = Tensor::from_vector<uint64_t>({2, 2}, {0, 1, uint64_t{1} << 63, ~uint64_t{0}});
  Tensor i16 = Tensor::from_vector<int16_t>({3}, {-32768, 7, 32767});
  Tensor u16 = Tensor::from_vector<uint16_t>({2}, {65535, 3});
  Tensor u32 = Tensor::from_vector<uint32_t>({2}, {4000000000u, 5});
  for (const Tensor& t : {u64, i16, u16, u32}) {
    write_npy(path, t);
    Tensor back = read_npy(path);
    ASSERT_EQ(back.dtype(), t.dtype()) << dtype_name(t.dtype());
    ASSERT_EQ(back.shape(), t.shape());
    EXPECT_EQ(std::memcmp(back.raw_data(), t.raw_data(), t.nbytes()), 0) << dtype_name(t.dtype());
  }
  EXPECT_EQ(read_npy(path).item_as_double(0), 4000000000.0);
  std::remove(path.c_str());
}

TEST(Shape, NumelStridesBroadcast) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(s[-1], 4);
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ((Shape{0, 5}).numel(), 0);
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {5}), (Shape{5}));
  EXPECT_THROW(broadcast_shapes({2, 3}, {4}), ShapeError);
  EXPECT_THROW((Shape{-1, 2}).numel(), ShapeError);
  EXPECT_THROW((Shape{int64_t{1} << 40, int64_t{1} << 40}).numel(), ShapeError);
  EXPECT_THROW(s[3], InvalidArgument);
  EXPECT_EQ(normalize_axis(-1, 3), 2);
  EXPECT_THROW(normalize_axis(3, 3), ShapeError);
}

TEST(Tensor, ViewsShareMemory) {
  Tensor t = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = t.reshape({3, -1});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.raw_data(), t.raw_data());
  Tensor row = t.narrow(1, 1);
  EXPECT_EQ(row.shape(), (Shape{1, 3}));
  EXPECT_EQ(row.data<float>()[0], 4.0f);
  row.data<float>()[0] = 40.0f;
  EXPECT_EQ(t.data<float>()[3], 40.0f);
  Tensor c = t.clone();
  c.data<float>()[0] = -1.0f;
  EXPECT_EQ(t.data<float>()[0], 1.0f);
  EXPECT_THROW(t.reshape({4, 2}), ShapeError);
  EXPECT_THROW(t.reshape({-1, -1}), ShapeError);
  EXPECT_THROW(t.narrow(1, 2), ShapeError);
  EXPECT_THROW(t.data<int64_t>(), InvalidArgument);
  EXPECT_THROW(Tensor::from_vector<float>({2, 2}, {1, 2, 3}), ShapeError);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(Tensor::empty({7}).raw_data()) % kAlignment, 0u);
}

TEST(Tensor, ZerosAndEmptyShapes) {
  Tensor z = Tensor::zeros({3, 0, 2});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(z.nbytes(), 0u);
  Tensor s = Tensor::scalar<int64_t>(7);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.item_as_double(), 7.0);
}

TEST(MemoryPool, ReusesBlocksAndCounts) {
  Allocator& pool = cpu_allocator();
  pool.release_cached();
  pool.reset_peak();
  MemoryStats before = pool.stats();
  { Tensor a = Tensor::empty({1000, 1000}); }
  MemoryStats mid = pool.stats();
  EXPECT_EQ(mid.num_system_allocs, before.num_system_allocs + 1);
  EXPECT_GE(mid.peak_bytes_in_use, before.bytes_in_use + 4000000u);
  EXPECT_GE(mid.bytes_cached, 4000000u);
  {
    Tensor b = Tensor::empty({1000, 1000});  // same size class: comes from the cache
  }
  EXPECT_EQ(pool.stats().num_system_allocs, mid.num_system_allocs);
  EXPECT_EQ(pool.stats().bytes_in_use, before.bytes_in_use);
}

TEST(MemoryPool, ThreadSafe) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 2000; ++i) {
        Tensor x = Tensor::empty({static_cast<int64_t>(1 + i % 97)});
        x.data<float>()[0] = 1.0f;
      }
    });
  for (auto& t : threads) t.join();
  SUCCEED();
}

TEST(Half, RoundTripsAndRounding) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_FLOAT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(float_to_half(1.0f / 3.0f), 0x3555);
  EXPECT_FLOAT_EQ(half_to_float(0x0001), 5.9604645e-8f);  // smallest subnormal
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  for (uint32_t h = 0; h < 0x7c00; ++h)  // every finite positive half survives a round trip
    ASSERT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(h))), h);
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_FLOAT_EQ(bfloat16_to_float(float_to_bfloat16(3.140625f)), 3.140625f);
}

TEST(Error, KindsAndMessages) {
  try {
    throw ShapeError("node 'x' (MatMul): bad");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kShapeError);
    EXPECT_STREQ(e.what(), "ShapeError: node 'x' (MatMul): bad");
  }
}

}  // namespace
}  // namespace lumen
