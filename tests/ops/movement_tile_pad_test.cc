// Tests of Expand, Tile and Pad against naive per-element references, on every dtype (compared
// bit for bit), including size-1 and empty dims, cropping, every Pad mode and bad input.
#include <gtest/gtest.h>

#include <limits>

#include "ops/movement_test_util.h"

namespace lumen::test {
namespace {

// --- Expand ---

void check_expand(const Shape& in, const std::vector<int64_t>& shape, const Shape& want,
                  DType dtype, uint64_t seed) {
  SCOPED_TRACE(in.to_string() + " -> " + Shape(shape).to_string() + " " + dtype_name(dtype));
  Tensor x = random_data(in, dtype, seed);
  Tensor y = run_op("Expand", {x, constant(ints(shape))})[0];
  std::vector<int64_t> src;
  for (int64_t i = 0; i < want.numel(); ++i) src.push_back(broadcast_source(unravel(i, want), in));
  expect_moved(y, x, want, src);
}

TEST(Expand, Broadcasts) {
  uint64_t seed = 3000;
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBool}) {
    check_expand({3, 1}, {2, 3, 4}, {2, 3, 4}, dt, seed++);
    check_expand({1}, {5}, {5}, dt, seed++);
    check_expand({}, {2, 2}, {2, 2}, dt, seed++);
    check_expand({4, 1, 6}, {4, 5, 6}, {4, 5, 6}, dt, seed++);
    check_expand({2, 1, 1, 3}, {2, 4, 5, 3}, {2, 4, 5, 3}, dt, seed++);
  }
}

TEST(Expand, Bidirectional) {
  uint64_t seed = 3100;
  check_expand({3, 4}, {3, 1}, {3, 4}, DType::kFloat32, seed++);  // 1 in shape keeps the input
  check_expand({2, 3}, {1, 1, 3}, {1, 2, 3}, DType::kInt64, seed++);
  check_expand({2, 3}, {}, {2, 3}, DType::kBool, seed++);
  check_expand({3, 1, 5}, {2, 1, 4, 1}, {2, 3, 4, 5}, DType::kFloat32, seed++);
}

TEST(Expand, EmptyAndLarge) {
  uint64_t seed = 3200;
  check_expand({2, 1}, {2, 0}, {2, 0}, DType::kFloat32, seed++);
  check_expand({0, 1}, {0, 7}, {0, 7}, DType::kInt64, seed++);
  check_expand({1, 512}, {256, 512}, {256, 512}, DType::kFloat32, seed++);
  check_expand({256, 1}, {256, 512}, {256, 512}, DType::kInt64, seed++);
  for (DType dt : all_dtypes()) check_expand({3, 1, 4}, {2, 3, 5, 4}, {2, 3, 5, 4}, dt, seed++);
}

TEST(Expand, BadInput) {
  Tensor x = random_tensor({2, 3}, 3300);
  EXPECT_THROW(run_op("Expand", {x, constant(ints({4, 3}))}), ShapeError);
  EXPECT_THROW(run_op("Expand", {x, constant(ints({2, 2}))}), ShapeError);
  EXPECT_THROW(run_op("Expand", {x, constant(ints({-1, 3}))}), ShapeError);
  EXPECT_THROW(run_op("Expand", {x, ints({2, 3})}), ShapeError);  // unknown at build time
}

// --- Tile ---

void check_tile(const Shape& in, const std::vector<int64_t>& repeats, DType dtype, uint64_t seed) {
  SCOPED_TRACE(in.to_string() + " repeats " + Shape(repeats).to_string() + " " + dtype_name(dtype));
  Tensor x = random_data(in, dtype, seed);
  Tensor y = run_op("Tile", {x, constant(ints(repeats))})[0];
  std::vector<int64_t> od;
  for (int a = 0; a < in.rank(); ++a) od.push_back(in.dims()[a] * repeats[a]);
  Shape want(od);
  std::vector<int64_t> src;
  for (int64_t i = 0; i < want.numel(); ++i) {
    std::vector<int64_t> o = unravel(i, want);
    for (int a = 0; a < in.rank(); ++a) o[a] %= in.dims()[a];
    src.push_back(ravel(o, in));
  }
  expect_moved(y, x, want, src);
}

TEST(Tile, Repeats) {
  uint64_t seed = 4000;
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBool}) {
    check_tile({2, 3}, {2, 3}, dt, seed++);
    check_tile({2, 1, 3}, {1, 4, 2}, dt, seed++);
    check_tile({5}, {3}, dt, seed++);
    check_tile({3, 4}, {1, 1}, dt, seed++);
    check_tile({3, 4}, {0, 2}, dt, seed++);  // empty output
    check_tile({0, 4}, {3, 2}, dt, seed++);
  }
  for (DType dt : all_dtypes()) check_tile({2, 3, 4}, {2, 1, 3}, dt, seed++);
  check_tile({100, 100}, {2, 3}, DType::kFloat32, seed++);
  check_tile({1, 64, 1}, {128, 1, 16}, DType::kInt64, seed++);
}

TEST(Tile, BadInput) {
  Tensor x = random_tensor({2, 3}, 4100);
  EXPECT_THROW(run_op("Tile", {x, constant(ints({2}))}), ShapeError);
  EXPECT_THROW(run_op("Tile", {x, constant(ints({2, -1}))}), InvalidModel);
  EXPECT_THROW(run_op("Tile", {x, ints({2, 2})}), ShapeError);
  EXPECT_THROW(run_op("Tile", {x, constant(ints({int64_t{1} << 62, 4}))}), ShapeError);
}

// --- Pad ---

// Pads one axis of length d: where output coordinate o reads from (-1: the constant), with any
// negative pad applied first as a crop, then the positive pads by the mode's rule.
int64_t pad_source(const std::string& mode, int64_t o, int64_t d, int64_t b, int64_t e) {
  int64_t lo = b < 0 ? -b : 0;     // first kept input coordinate
  int64_t hi = e < 0 ? d + e : d;  // one past the last
  int64_t pb = b > 0 ? b : 0;
  int64_t x = o - pb + lo;  // coordinate in the input
  if (x >= lo && x < hi) return x;
  if (mode == "constant") return -1;
  if (mode == "edge") return x < lo ? lo : hi - 1;
  // reflect about the first and last kept elements, excluding them
  while (x < lo || x >= hi) x = x < lo ? 2 * lo - x : 2 * (hi - 1) - x;
  return x;
}

struct PadCase {
  Shape shape;
  std::vector<int64_t> pads;
  std::string mode;
  std::vector<int64_t> axes;  // empty: input omitted
};

void check_pad(const PadCase& c, DType dtype, uint64_t seed, bool with_value) {
  SCOPED_TRACE(c.shape.to_string() + " pads " + Shape(c.pads).to_string() + " " + c.mode +
               " axes " + Shape(c.axes).to_string() + " " + dtype_name(dtype) +
               (with_value ? " with value" : ""));
  int r = c.shape.rank();
  Tensor x = random_data(c.shape, dtype, seed);
  Tensor value = with_value ? random_data(Shape{}, dtype, seed + 1) : Tensor();
  std::vector<OpInput> in = {x, constant(ints(c.pads))};
  if (with_value || !c.axes.empty()) in.push_back(with_value ? OpInput(value) : omitted());
  if (!c.axes.empty()) in.push_back(constant(ints(c.axes)));
  Attributes attrs;
  if (c.mode != "constant" || seed % 2) attrs["mode"] = c.mode;
  Tensor y = run_op("Pad", in, attrs)[0];

  std::vector<int64_t> b(r, 0), e(r, 0);
  size_t n = c.axes.empty() ? r : c.axes.size();
  for (size_t k = 0; k < n; ++k) {
    int64_t a = c.axes.empty() ? static_cast<int64_t>(k) : c.axes[k];
    if (a < 0) a += r;
    b[a] = c.pads[k];
    e[a] = c.pads[k + n];
  }
  std::vector<int64_t> od;
  for (int a = 0; a < r; ++a) od.push_back(c.shape.dims()[a] + b[a] + e[a]);
  Shape want(od);
  std::vector<int64_t> src;
  for (int64_t i = 0; i < want.numel(); ++i) {
    std::vector<int64_t> o = unravel(i, want);
    bool inside = true;
    for (int a = 0; a < r; ++a) {
      o[a] = pad_source(c.mode, o[a], c.shape.dims()[a], b[a], e[a]);
      inside = inside && o[a] >= 0;
    }
    src.push_back(inside ? ravel(o, c.shape) : -1);
  }
  expect_moved(y, x, want, src, value);
}

const std::vector<PadCase>& pad_cases() {
  static const std::vector<PadCase> kCases = {
      {{3, 4}, {1, 2, 2, 1}, "constant", {}},
      {{3, 4}, {0, 0, 0, 0}, "constant", {}},
      {{2, 3, 4}, {0, 1, 2, 1, 0, 3}, "constant", {}},
      {{3, 5}, {-1, 2, 1, -3}, "constant", {}},    // crop and pad
      {{4, 6}, {-2, -1, -2, -5}, "constant", {}},  // crop to empty
      {{0, 3}, {1, 1, 2, 0}, "constant", {}},      // pad an empty input
      {{3, 4}, {2, 3, 2, 3}, "reflect", {}},
      {{2, 5, 4}, {0, 4, 3, 1, 2, 3}, "reflect", {}},
      {{3, 7}, {-1, 2, 1, -3}, "reflect", {}},  // crop, then reflect what is left
      {{3, 4}, {2, 5, 3, 1}, "edge", {}},
      {{1, 1}, {3, 2, 1, 4}, "edge", {}},
      {{4, 6}, {-3, 2, 3, -4}, "edge", {}},
      {{2, 3, 4, 5}, {1, 2, 2, 1}, "constant", {1, -1}},  // axes input (opset 18)
      {{2, 3, 4, 5}, {1, 3, 2, 4}, "reflect", {-2, 3}},
      {{2, 3, 4, 5}, {4, 0}, "edge", {0}},
      {{5}, {2, 3}, "constant", {}},
      {{2, 16, 64, 64}, {0, 0, 1, 2, 0, 0, 3, 1}, "constant", {}},  // large: parallel path
      {{2, 16, 64, 64}, {0, 0, 2, 2, 0, 0, 2, 2}, "reflect", {}},
  };
  return kCases;
}

TEST(Pad, MatchesReferenceOnEveryCase) {
  uint64_t seed = 5000;
  for (const PadCase& c : pad_cases())
    for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBool}) {
      check_pad(c, dt, seed += 2, false);
      if (c.mode == "constant") check_pad(c, dt, seed += 2, true);
    }
}

TEST(Pad, EveryDtype) {
  uint64_t seed = 5500;
  for (DType dt : all_dtypes())
    for (const char* mode : {"constant", "reflect", "edge"}) {
      check_pad({{3, 4, 5}, {1, 2, 0, 2, 1, 3}, mode, {}}, dt, seed += 2, false);
      if (std::string(mode) == "constant")
        check_pad({{3, 4, 5}, {1, 2, 0, 2, 1, 3}, mode, {}}, dt, seed += 2, true);
    }
}

TEST(Pad, KnownValues) {
  Tensor x = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = run_op("Pad", {x, constant(ints({0, 2, 0, 0})), Tensor::scalar<float>(9.f)})[0];
  expect_close(y, {2, 5}, {9, 9, 1, 2, 3, 9, 9, 4, 5, 6});
  y = run_op("Pad", {x, constant(ints({0, 2, 0, 1}))}, {{"mode", "reflect"}})[0];
  expect_close(y, {2, 6}, {3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5});
  y = run_op("Pad", {x, constant(ints({1, 1, 0, 0}))}, {{"mode", "edge"}})[0];
  expect_close(y, {3, 4}, {1, 1, 2, 3, 1, 1, 2, 3, 4, 4, 5, 6});
}

TEST(Pad, BadInput) {
  Tensor x = random_tensor({3, 4}, 5600);
  auto pad = [&](std::vector<int64_t> pads, const char* mode) {
    return run_op("Pad", {x, constant(ints(pads))}, {{"mode", mode}});
  };
  EXPECT_THROW(pad({0, 4, 0, 0}, "reflect"), ShapeError);  // pad must be < dim
  EXPECT_THROW(pad({0, 0, 3, 0}, "reflect"), ShapeError);
  EXPECT_THROW(pad({0, -3, 0, 1}, "reflect"), ShapeError);  // only one element left to reflect
  EXPECT_THROW(pad({0, -4, 0, 1}, "edge"), ShapeError);     // nothing left to repeat
  EXPECT_THROW(pad({-2, 0, -2, 0}, "constant"), ShapeError);
  EXPECT_THROW(pad({1, 1}, "constant"), ShapeError);
  EXPECT_THROW(pad({std::numeric_limits<int64_t>::max(), 0, 1, 0}, "constant"), ShapeError);
  EXPECT_THROW(pad({1, 1, 1, 1}, "mirror"), InvalidModel);
  EXPECT_THROW(pad({0, -4, 0, 1}, "wrap"), ShapeError);  // nothing left to wrap around
  EXPECT_THROW(run_op("Pad", {x, ints({1, 1, 1, 1})}), ShapeError);  // pads unknown at build
  EXPECT_THROW(run_op("Pad", {x, constant(ints({1, 1, 1, 1})), Tensor::scalar<int64_t>(1)}),
               ShapeError);  // constant_value of another dtype
  EXPECT_THROW(run_op("Pad", {x, constant(ints({1, 1})), omitted(), constant(ints({1, -1}))}),
               InvalidModel);  // repeated axis
  EXPECT_THROW(run_op("Pad", {x, constant(ints({1, 1})), omitted(), constant(ints({2}))}),
               InvalidModel);  // axis out of range
}

}  // namespace
}  // namespace lumen::test
