// derived_tensor: one derivation per source tensor and name, alive while both sides are.
#include "core/derived_tensors.h"

#include <gtest/gtest.h>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

Tensor doubled(const Tensor& t, int* calls) {
  ++*calls;
  Tensor out = Tensor::empty(t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.data<float>()[i] = 2 * t.data<float>()[i];
  return out;
}

TEST(DerivedTensors, SameSourceAndNameShareOneDerivation) {
  Tensor w = test::random_tensor({5, 7}, 1);
  int calls = 0;
  Tensor a = derived_tensor(w, "double", [&] { return doubled(w, &calls); });
  Tensor b = derived_tensor(w, "double", [&] { return doubled(w, &calls); });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(a.raw_data(), b.raw_data());
  for (int64_t i = 0; i < w.numel(); ++i)
    EXPECT_EQ(b.data<float>()[i], 2 * w.data<float>()[i]) << i;
  // Another name, or another tensor with the same values, derives again.
  Tensor c = derived_tensor(w, "double again", [&] { return doubled(w, &calls); });
  Tensor copy = w.clone();
  Tensor d = derived_tensor(copy, "double", [&] { return doubled(copy, &calls); });
  EXPECT_EQ(calls, 3);
  EXPECT_NE(c.raw_data(), a.raw_data());
  EXPECT_NE(d.raw_data(), a.raw_data());
  // A view at another offset of the same buffer is another source, and so is a view of another
  // shape at the same offset (a device copy must keep its source's shape).
  Tensor row = w.narrow(1, 2);
  derived_tensor(row, "double", [&] { return doubled(row, &calls); });
  EXPECT_EQ(calls, 4);
  Tensor flat = w.reshape(Shape{35});
  Tensor e = derived_tensor(flat, "double", [&] { return doubled(flat, &calls); });
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(e.shape(), Shape{35});
}

TEST(DerivedTensors, ADerivationNobodyHoldsIsMadeAgain) {
  Tensor w = test::random_tensor({3, 3}, 2);
  int calls = 0;
  {
    Tensor a = derived_tensor(w, "double", [&] { return doubled(w, &calls); });
  }
  Tensor b = derived_tensor(w, "double", [&] { return doubled(w, &calls); });
  EXPECT_EQ(calls, 2);
  for (int64_t i = 0; i < w.numel(); ++i) EXPECT_EQ(b.data<float>()[i], 2 * w.data<float>()[i]);
}

TEST(DerivedTensors, ADeadSourceIsNeverMatched) {
  int calls = 0;
  Tensor kept;
  for (int round = 0; round < 200; ++round) {
    // Freed sources may come back at the same address: each must get its own derivation.
    Tensor w = test::random_tensor({4}, 100 + round);
    Tensor d = derived_tensor(w, "double", [&] { return doubled(w, &calls); });
    for (int64_t i = 0; i < w.numel(); ++i)
      ASSERT_EQ(d.data<float>()[i], 2 * w.data<float>()[i]) << round;
    kept = d;
  }
  EXPECT_EQ(calls, 200);
  EXPECT_LE(num_derived_tensors(), 1u);
}

TEST(DerivedTensors, AnUndefinedSourceIsNotCached) {
  int calls = 0;
  Tensor none;
  derived_tensor(none, "x", [&] {
    ++calls;
    return Tensor();
  });
  derived_tensor(none, "x", [&] {
    ++calls;
    return Tensor();
  });
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace lumen
