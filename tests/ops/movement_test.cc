// Tests of Transpose, Slice and Gather against naive index-loop references, on every dtype
// (compared bit for bit), including size-1 and empty dims, negative axes and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "ops/movement_test_util.h"

namespace lumen::test {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// --- Transpose ---

// Output element o of the transpose reads input element at index in[perm[k]] = o[k].
std::vector<int64_t> transpose_ref(const Shape& in, const std::vector<int64_t>& perm,
                                   Shape* out_shape) {
  std::vector<int64_t> od;
  for (int64_t p : perm) od.push_back(in.dims()[p]);
  *out_shape = Shape(od);
  std::vector<int64_t> src;
  for (int64_t i = 0; i < out_shape->numel(); ++i) {
    std::vector<int64_t> o = unravel(i, *out_shape);
    std::vector<int64_t> x(in.rank());
    for (size_t k = 0; k < perm.size(); ++k) x[perm[k]] = o[k];
    src.push_back(ravel(x, in));
  }
  return src;
}

void check_transpose(const Shape& shape, const std::vector<int64_t>& perm, DType dtype,
                     uint64_t seed, bool default_perm = false) {
  SCOPED_TRACE(shape.to_string() + " perm " + Shape(perm).to_string() + " " + dtype_name(dtype));
  Tensor x = random_data(shape, dtype, seed);
  Attributes attrs;
  if (!default_perm) attrs["perm"] = perm;
  Tensor y = run_op("Transpose", {x}, attrs)[0];
  Shape out;
  std::vector<int64_t> src = transpose_ref(shape, perm, &out);
  expect_moved(y, x, out, src);
}

TEST(Transpose, AllPermutationsOfRank3) {
  std::vector<int64_t> perm = {0, 1, 2};
  uint64_t seed = 1;
  do {
    for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBool})
      check_transpose({2, 3, 4}, perm, dt, seed++);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(Transpose, AllPermutationsOfRank4) {
  std::vector<int64_t> perm = {0, 1, 2, 3};
  uint64_t seed = 100;
  do {
    check_transpose({3, 4, 5, 6}, perm, DType::kFloat32, seed++);
    check_transpose({2, 1, 5, 3}, perm, DType::kInt64, seed++);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(Transpose, EveryDtypeOnBlockedPlanes) {
  uint64_t seed = 200;
  for (DType dt : all_dtypes()) {
    // Plane sizes around the tile (32) and micro-kernel (8) edges, with remainders.
    check_transpose({37, 45}, {1, 0}, dt, seed++);
    check_transpose({3, 17, 9}, {0, 2, 1}, dt, seed++);
    check_transpose({2, 64, 40}, {2, 1, 0}, dt, seed++);
    check_transpose({5, 6, 7, 8}, {3, 1, 0, 2}, dt, seed++);
  }
}

TEST(Transpose, LargeRunsInParallel) {
  check_transpose({4, 256, 300}, {0, 2, 1}, DType::kFloat32, 300);
  check_transpose({3, 200, 130}, {2, 0, 1}, DType::kInt64, 301);
  check_transpose({2, 96, 64, 24}, {0, 3, 1, 2}, DType::kFloat16, 302);  // NHWC -> NCHW
  check_transpose({2, 24, 96, 64}, {0, 2, 3, 1}, DType::kUInt8, 303);    // NCHW -> NHWC
  check_transpose({64, 32, 48}, {1, 0, 2}, DType::kFloat32, 304);        // rows move whole
  // Planes 3 or 4 rows tall split into bands of columns across threads (an image's NCHW -> NHWC).
  check_transpose({1, 3, 224, 224}, {0, 2, 3, 1}, DType::kFloat32, 305);
  check_transpose({2, 4, 67, 129}, {0, 2, 3, 1}, DType::kFloat32, 306);
  check_transpose({3, 40000}, {1, 0}, DType::kInt64, 307);
  check_transpose({4, 5000}, {1, 0}, DType::kUInt8, 308);
}

TEST(Transpose, DefaultPermReverses) {
  check_transpose({2, 3, 4}, {2, 1, 0}, DType::kFloat32, 400, true);
  check_transpose({5, 7}, {1, 0}, DType::kBool, 401, true);
  check_transpose({6}, {0}, DType::kInt64, 402, true);
  check_transpose({}, {}, DType::kFloat32, 403, true);
}

TEST(Transpose, SizeOneAndEmptyDims) {
  check_transpose({1, 3, 1, 4}, {2, 0, 1, 3}, DType::kFloat32, 500);  // only moves size-1 axes
  check_transpose({1, 3, 1, 4}, {3, 2, 1, 0}, DType::kInt64, 501);
  check_transpose({2, 1, 3, 1, 4}, {4, 1, 0, 3, 2}, DType::kBool, 502);
  check_transpose({1, 1}, {1, 0}, DType::kFloat32, 503);
  check_transpose({3, 0, 2}, {2, 0, 1}, DType::kFloat32, 504);
  check_transpose({0, 5}, {1, 0}, DType::kInt64, 505);
  // Axes 1 and 2 stay neighbours and merge.
  check_transpose({4, 3, 5, 6}, {3, 1, 2, 0}, DType::kFloat32, 506);
  check_transpose({2, 3, 4, 5, 6}, {4, 0, 2, 1, 3}, DType::kFloat32, 507);
}

TEST(Transpose, IdentityPermIsAView) {
  check_transpose({3, 4}, {0, 1}, DType::kFloat32, 600);
  // After dropping size-1 axes nothing moves: the output is the input, reshaped.
  check_transpose({1, 3, 4}, {1, 0, 2}, DType::kInt64, 602);
  Tensor x = random_tensor({2, 3}, 601);
  Tensor y = run_op("Transpose", {x}, {{"perm", {0, 1}}})[0];
  EXPECT_EQ(to_doubles(y), to_doubles(x));
}

TEST(Transpose, BadPermIsInvalidModel) {
  Tensor x = random_tensor({2, 3, 4}, 700);
  EXPECT_THROW(run_op("Transpose", {x}, {{"perm", {0, 0, 1}}}), InvalidModel);
  EXPECT_THROW(run_op("Transpose", {x}, {{"perm", {0, 1}}}), InvalidModel);
  EXPECT_THROW(run_op("Transpose", {x}, {{"perm", {0, 1, 3}}}), InvalidModel);
  EXPECT_THROW(run_op("Transpose", {x}, {{"perm", {-1, 0, 1}}}), InvalidModel);
  EXPECT_THROW(run_op("Transpose", {x}, {{"axes", {0, 1, 2}}}), InvalidModel);
}

// --- Slice ---

struct SliceCase {
  Shape shape;
  std::vector<int64_t> starts, ends, axes, steps;  // axes / steps empty: input omitted
};

// The indices each axis keeps, by ONNX's rules, then their cartesian product.
std::vector<int64_t> slice_ref(const SliceCase& c, Shape* out_shape) {
  int r = c.shape.rank();
  std::vector<std::vector<int64_t>> keep(r);
  for (int a = 0; a < r; ++a)
    for (int64_t i = 0; i < c.shape.dims()[a]; ++i) keep[a].push_back(i);
  for (size_t k = 0; k < c.starts.size(); ++k) {
    int a = static_cast<int>(c.axes.empty() ? static_cast<int64_t>(k) : c.axes[k]);
    if (a < 0) a += r;
    int64_t d = c.shape.dims()[a];
    int64_t step = c.steps.empty() ? 1 : c.steps[k];
    int64_t s = c.starts[k], e = c.ends[k];
    if (s < 0) s += d;
    if (e < 0) e += d;
    keep[a].clear();
    if (step > 0) {
      s = std::min(std::max<int64_t>(s, 0), d);
      e = std::min(std::max<int64_t>(e, 0), d);
      for (int64_t i = s; i < e; i += step) keep[a].push_back(i);
    } else {
      s = std::min(std::max<int64_t>(s, 0), d - 1);
      e = std::min(std::max<int64_t>(e, -1), d - 1);
      for (int64_t i = s; i > e; i += step) keep[a].push_back(i);
    }
  }
  std::vector<int64_t> od;
  for (auto& k : keep) od.push_back(static_cast<int64_t>(k.size()));
  *out_shape = Shape(od);
  std::vector<int64_t> src;
  for (int64_t i = 0; i < out_shape->numel(); ++i) {
    std::vector<int64_t> o = unravel(i, *out_shape);
    for (int a = 0; a < r; ++a) o[a] = keep[a][o[a]];
    src.push_back(ravel(o, c.shape));
  }
  return src;
}

std::vector<OpInput> slice_inputs(const Tensor& x, const SliceCase& c) {
  std::vector<OpInput> in = {x, constant(ints(c.starts)), constant(ints(c.ends))};
  if (!c.axes.empty() || !c.steps.empty())
    in.push_back(c.axes.empty() ? omitted() : constant(ints(c.axes)));
  if (!c.steps.empty()) in.push_back(constant(ints(c.steps)));
  return in;
}

void check_slice(const SliceCase& c, DType dtype, uint64_t seed) {
  SCOPED_TRACE(c.shape.to_string() + " starts " + Shape(c.starts).to_string() + " ends " +
               Shape(c.ends).to_string() + " axes " + Shape(c.axes).to_string() + " steps " +
               Shape(c.steps).to_string() + " " + dtype_name(dtype));
  Tensor x = random_data(c.shape, dtype, seed);
  Tensor y = run_op("Slice", slice_inputs(x, c))[0];
  Shape out;
  std::vector<int64_t> src = slice_ref(c, &out);
  expect_moved(y, x, out, src);
}

const std::vector<SliceCase>& slice_cases() {
  static const std::vector<SliceCase> kCases = {
      {{5, 6}, {1, 2}, {4, 5}, {}, {}},
      {{5, 6}, {1}, {kMax}, {1}, {}},                      // INT64_MAX end
      {{5, 6, 7}, {-3, 1}, {-1, 100}, {0, 2}, {}},         // negative starts, clamped end
      {{5, 6, 7}, {0, 1}, {7, 6}, {-1, -2}, {2, 3}},       // negative axes, steps > 1
      {{5, 6}, {-1}, {kMin}, {1}, {-1}},                   // reverse a whole axis
      {{8, 6}, {6, 5}, {1, -100}, {0, 1}, {-2, -3}},       // negative steps, clamped
      {{4, 5, 6}, {10, -10}, {-10, 10}, {1, 2}, {-1, 1}},  // out-of-range starts on both sides
      {{5, 6}, {3}, {3}, {0}, {}},                         // empty: start == end
      {{5, 6}, {4}, {2}, {1}, {}},                         // empty: start > end, step 1
      {{5, 6}, {1}, {3}, {1}, {-1}},                       // empty: start < end, step -1
      {{0, 4}, {0}, {2}, {1}, {}},                         // empty input dim
      {{0, 4}, {-1}, {kMin}, {0}, {-1}},                   // negative step over an empty dim
      {{3, 1, 4}, {0, 0, 0}, {kMax, kMax, kMax}, {}, {}},  // everything
      {{2, 3, 4, 5}, {1, 3}, {4, 0}, {3, 2}, {1, -1}},     // unordered axes
      {{7}, {-2}, {kMax}, {}, {}},
      {{64, 64, 64}, {0, 1, 63}, {64, 64, kMin}, {}, {2, 2, -2}},  // large: parallel path
      // One contiguous run (CUDA: a view where it starts 256 bytes past another).
      {{4, 128}, {2}, {3}, {0}, {}},
      {{1, 512}, {64}, {320}, {1}, {}},
      {{1, 3, 64}, {1}, {2}, {1}, {}},
      {{1, 1000}, {0}, {24}, {1}, {}},
  };
  return kCases;
}

TEST(Slice, MatchesReferenceOnEveryCase) {
  uint64_t seed = 1000;
  for (const SliceCase& c : slice_cases())
    for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBool}) check_slice(c, dt, seed++);
}

TEST(Slice, EveryDtype) {
  uint64_t seed = 1100;
  SliceCase c{{6, 7, 8}, {1, -1, 0}, {5, 0, 8}, {0, 1, 2}, {2, -2, 3}};
  for (DType dt : all_dtypes()) check_slice(c, dt, seed++);
}

TEST(Slice, Int32Parameters) {
  Tensor x = random_tensor({4, 6}, 1200);
  auto i32 = [](std::vector<int32_t> v) {
    return Tensor::from_vector<int32_t>(Shape{static_cast<int64_t>(v.size())}, v);
  };
  Tensor y = run_op("Slice", {x, constant(i32({1, -1})), constant(i32({3, -7})),
                              constant(i32({0, 1})), constant(i32({1, -2}))})[0];
  Shape out;
  std::vector<int64_t> src = slice_ref({{4, 6}, {1, -1}, {3, -7}, {0, 1}, {1, -2}}, &out);
  expect_moved(y, x, out, src);
}

TEST(Slice, HugeSteps) {
  Tensor x = random_tensor({5, 3}, 1250);
  Tensor y = run_op("Slice", {x, constant(ints({1})), constant(ints({kMax})), constant(ints({0})),
                              constant(ints({kMax}))})[0];
  expect_moved(y, x, {1, 3}, {3, 4, 5});
  y = run_op("Slice", {x, constant(ints({-1})), constant(ints({kMin})), constant(ints({0})),
                       constant(ints({kMin}))})[0];
  expect_moved(y, x, {1, 3}, {12, 13, 14});
}

TEST(Slice, BadInput) {
  Tensor x = random_tensor({4, 6}, 1300);
  auto run = [&](std::vector<OpInput> extra) {
    std::vector<OpInput> in = {x};
    in.insert(in.end(), extra.begin(), extra.end());
    return run_op("Slice", in);
  };
  // steps 0
  EXPECT_THROW(
      run({constant(ints({0})), constant(ints({2})), constant(ints({0})), constant(ints({0}))}),
      InvalidModel);
  // repeated and out-of-range axes
  EXPECT_THROW(run({constant(ints({0, 0})), constant(ints({2, 2})), constant(ints({1, -1}))}),
               InvalidModel);
  EXPECT_THROW(run({constant(ints({0})), constant(ints({2})), constant(ints({2}))}), InvalidModel);
  // starts and ends of different lengths
  EXPECT_THROW(run({constant(ints({0, 1})), constant(ints({2}))}), ShapeError);
  // starts unknown at build time
  EXPECT_THROW(run({ints({0}), constant(ints({2}))}), ShapeError);
  // float starts
  EXPECT_THROW(run({constant(Tensor::from_vector<float>({1}, {0.f})), constant(ints({2}))}),
               InvalidModel);
}

// --- Gather ---

std::vector<int64_t> gather_ref(const Shape& data, int axis, const std::vector<int64_t>& idx,
                                const Shape& idx_shape, Shape* out_shape) {
  std::vector<int64_t> od(data.dims().begin(), data.dims().begin() + axis);
  od.insert(od.end(), idx_shape.dims().begin(), idx_shape.dims().end());
  od.insert(od.end(), data.dims().begin() + axis + 1, data.dims().end());
  *out_shape = Shape(od);
  std::vector<int64_t> src;
  int q = idx_shape.rank();
  for (int64_t i = 0; i < out_shape->numel(); ++i) {
    std::vector<int64_t> o = unravel(i, *out_shape);
    std::vector<int64_t> j(o.begin() + axis, o.begin() + axis + q);
    int64_t k = idx[ravel(j, idx_shape)];
    if (k < 0) k += data.dims()[axis];
    std::vector<int64_t> x(o.begin(), o.begin() + axis);
    x.push_back(k);
    x.insert(x.end(), o.begin() + axis + q, o.end());
    src.push_back(ravel(x, data));
  }
  return src;
}

void check_gather(const Shape& data_shape, int64_t axis, const Shape& idx_shape, DType dtype,
                  DType idx_dtype, uint64_t seed, bool const_indices = false) {
  SCOPED_TRACE(data_shape.to_string() + " axis " + std::to_string(axis) + " indices " +
               idx_shape.to_string() + " " + dtype_name(dtype) + " " + dtype_name(idx_dtype));
  int a = static_cast<int>(axis < 0 ? axis + data_shape.rank() : axis);
  int64_t d = data_shape.dims()[a];
  Tensor x = random_data(data_shape, dtype, seed);
  Tensor ind = random_ints(idx_shape, seed + 1, -d, d - 1, idx_dtype);
  std::vector<int64_t> idx;
  for (double v : to_doubles(ind)) idx.push_back(static_cast<int64_t>(v));
  Tensor y = run_op("Gather", {x, OpInput(ind, const_indices)}, {{"axis", axis}})[0];
  Shape out;
  std::vector<int64_t> src = gather_ref(data_shape, a, idx, idx_shape, &out);
  expect_moved(y, x, out, src);
}

TEST(Gather, AxesAndIndexRanks) {
  uint64_t seed = 2000;
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBool}) {
    check_gather({5, 4, 3}, 0, {7}, dt, DType::kInt64, seed += 2);
    check_gather({5, 4, 3}, 1, {2, 3}, dt, DType::kInt64, seed += 2);
    check_gather({5, 4, 3}, 2, {6}, dt, DType::kInt32, seed += 2);
    check_gather({5, 4, 3}, -1, {2, 2, 2}, dt, DType::kInt64, seed += 2);
    check_gather({5, 4, 3}, -3, {}, dt, DType::kInt32, seed += 2);  // scalar index drops the axis
    check_gather({9}, 0, {4}, dt, DType::kInt64, seed += 2);
    check_gather({9}, 0, {}, dt, DType::kInt64, seed += 2);
    check_gather({1, 6}, 1, {3, 1}, dt, DType::kInt64, seed += 2, true);
  }
}

TEST(Gather, EveryDtypeAndLargeInputs) {
  uint64_t seed = 2100;
  for (DType dt : all_dtypes()) check_gather({6, 5, 4}, 1, {3, 2}, dt, DType::kInt64, seed += 2);
  check_gather({1000, 64}, 0, {500}, DType::kFloat32, DType::kInt64, seed += 2);  // embedding rows
  check_gather({64, 1000}, 1, {700}, DType::kInt64, DType::kInt32, seed += 2);    // last axis
}

TEST(Gather, EmptyIndicesAndEmptyDims) {
  check_gather({4, 3}, 0, {0}, DType::kFloat32, DType::kInt64, 2200);
  check_gather({4, 0}, 0, {3}, DType::kInt64, DType::kInt64, 2202);
  check_gather({0, 3}, 1, {2}, DType::kBool, DType::kInt64, 2204);
}

TEST(Gather, FoldsShapeArithmeticOnInt64) {
  // Shape -> Gather chains: both inputs known, so the graph folds the node at build time.
  Graph g;
  Value* shape = g.add_constant("shape", ints({2, 3, 5, 7}));
  Value* idx = g.add_constant("idx", Tensor::scalar<int64_t>(-2));
  Value* dim = g.add_op("Gather", {shape, idx}, {{"axis", 0}}, "gather");
  ASSERT_TRUE(dim->data.has_value());
  expect_equal(*dim->data, DType::kInt64, Shape{}, {5});
  Value* pair = g.add_op("Gather", {shape, g.add_constant("idx2", ints({3, 0}))}, {}, "gather2");
  ASSERT_TRUE(pair->data.has_value());
  expect_equal(*pair->data, DType::kInt64, Shape{2}, {7, 2});
  Tensor y = run_op("Gather", {constant(ints({4, 8, 16})), constant(ints({2, -3}))})[0];
  expect_equal(y, DType::kInt64, Shape{2}, {16, 4});
}

TEST(Gather, IndexOutOfRangeAtRunIsInvalidArgument) {
  Tensor x = random_tensor({4, 3}, 2300);
  // On CUDA too: the kernel records the index and the host raises it after the run.
  for (int64_t bad : {4, -5, 1000}) {
    Tensor ind = ints({0, bad, 1});
    try {
      std::vector<Tensor> out = run_op("Gather", {x, ind}, {{"axis", 0}});
      ADD_FAILURE() << "no error for index " << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("node 'node' (Gather)"), std::string::npos) << e.what();
    }
  }
  Tensor ind32 = Tensor::from_vector<int32_t>({2}, {3, 3});
  EXPECT_THROW(run_op("Gather", {x, ind32}, {{"axis", 1}}), InvalidArgument);
}

TEST(Gather, BadInput) {
  Tensor x = random_tensor({4, 3}, 2400);
  EXPECT_THROW(run_op("Gather", {x, ints({0})}, {{"axis", 2}}), InvalidModel);
  EXPECT_THROW(run_op("Gather", {x, ints({0})}, {{"axis", -3}}), InvalidModel);
  EXPECT_THROW(run_op("Gather", {x, Tensor::from_vector<float>({1}, {0.f})}), ShapeError);
  EXPECT_THROW(run_op("Gather", {Tensor::scalar<float>(1.f), ints({0})}), ShapeError);
  // Indices known at build time are checked at build time.
  EXPECT_THROW(run_op("Gather", {x, constant(ints({4}))}), InvalidModel);
}

}  // namespace
}  // namespace lumen::test
