// NonZero, Compress, Unique and NonMaxSuppression: outputs sized by the data. Each runs at execute
// time (runtime inputs) and folded at build time (constant inputs), against naive references.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;

// Random float32 data where about half the elements are exactly zero.
Tensor sparse_floats(const Shape& shape, uint64_t seed) {
  Tensor t = test::random_tensor(shape, seed);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (p[i] < 0.0f) p[i] = 0.0f;
  return t;
}

TEST(DataDependent, NonZeroListsCoordinatesRowMajor) {
  Tensor x = sparse_floats({3, 4, 5}, 1);
  std::vector<std::vector<double>> coords(3);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.data<float>()[i] == 0.0f) continue;
    std::vector<int64_t> idx = test::unravel(i, x.shape());
    for (int d = 0; d < 3; ++d) coords[d].push_back(static_cast<double>(idx[d]));
  }
  std::vector<double> want;
  for (const auto& c : coords) want.insert(want.end(), c.begin(), c.end());
  const Shape shape{3, static_cast<int64_t>(coords[0].size())};
  ASSERT_GT(shape[1], 0);
  test::expect_equal(test::run_op("NonZero", {x})[0], DType::kInt64, shape, want);
  test::expect_equal(test::run_op("NonZero", {constant(x)})[0], DType::kInt64, shape, want);
}

TEST(DataDependent, CompressAlongAnAxisAndFlattened) {
  Tensor x = test::random_tensor({4, 5, 3}, 2);
  Tensor cond = test::random_ints({5}, 3, 0, 1, DType::kBool);
  std::vector<double> want;
  int64_t kept = 0;
  for (int64_t j = 0; j < 5; ++j) kept += cond.data<bool>()[j] ? 1 : 0;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j)
      if (cond.data<bool>()[j])
        for (int64_t k = 0; k < 3; ++k) want.push_back(x.data<float>()[(i * 5 + j) * 3 + k]);
  test::expect_close(test::run_op("Compress", {x, cond}, {{"axis", -2}})[0], {4, kept, 3}, want);

  Tensor flat_cond = test::random_ints({7}, 4, 0, 1, DType::kBool);  // shorter than 60: the rest go
  std::vector<double> flat;
  for (int64_t i = 0; i < 7; ++i)
    if (flat_cond.data<bool>()[i]) flat.push_back(x.data<float>()[i]);
  const Shape flat_shape{static_cast<int64_t>(flat.size())};
  test::expect_close(test::run_op("Compress", {x, flat_cond})[0], flat_shape, flat);
  test::expect_close(test::run_op("Compress", {constant(x), constant(flat_cond)})[0], flat_shape,
                     flat);
}

TEST(DataDependent, CompressRejectsALongCondition) {
  Tensor x = test::random_tensor({2, 3}, 5);
  Tensor cond = test::random_ints({4}, 6, 0, 1, DType::kBool);
  EXPECT_THROW(test::run_op("Compress", {x, cond}, {{"axis", 1}}), ShapeError);
}

TEST(DataDependent, UniqueSortedAndInFirstOccurrenceOrder) {
  Tensor x = test::random_ints({20}, 7, -3, 4);
  const int64_t* p = x.data<int64_t>();
  std::map<int64_t, std::pair<int64_t, int64_t>> seen;  // value -> first index, count
  std::vector<int64_t> first_order;
  for (int64_t i = 0; i < 20; ++i) {
    auto [it, fresh] = seen.emplace(p[i], std::make_pair(i, 0));
    it->second.second += 1;
    if (fresh) first_order.push_back(p[i]);
  }
  for (bool sorted : {true, false}) {
    std::vector<int64_t> order;
    if (sorted) {
      for (const auto& [v, info] : seen) order.push_back(v);
    } else {
      order = first_order;
    }
    std::vector<double> y, idx, inv, cnt;
    for (int64_t v : order) {
      y.push_back(static_cast<double>(v));
      idx.push_back(static_cast<double>(seen[v].first));
      cnt.push_back(static_cast<double>(seen[v].second));
    }
    for (int64_t i = 0; i < 20; ++i)
      inv.push_back(
          static_cast<double>(std::find(order.begin(), order.end(), p[i]) - order.begin()));
    const Shape n{static_cast<int64_t>(order.size())};
    for (bool folded : {false, true}) {
      test::OpInput in = folded ? constant(x) : test::OpInput(x);
      auto out = test::run_op("Unique", {in}, {{"sorted", sorted ? 1 : 0}}, 4);
      test::expect_equal(out[0], DType::kInt64, n, y);
      test::expect_equal(out[1], DType::kInt64, n, idx);
      test::expect_equal(out[2], DType::kInt64, {20}, inv);
      test::expect_equal(out[3], DType::kInt64, n, cnt);
    }
  }
}

// Every integer width sorts by its own values (a fuzz finding read int16 data as int64), and
// a dtype the kernel does not take is an error at compile, not a wrong answer.
template <typename T>
void expect_unique_sorted(const std::vector<T>& values) {
  SCOPED_TRACE(dtype_name(DTypeOf<T>::value));
  Tensor x = Tensor::from_vector<T>({static_cast<int64_t>(values.size())}, values);
  std::set<T> distinct(values.begin(), values.end());
  std::vector<double> want(distinct.begin(), distinct.end());
  auto out = test::run_op("Unique", {x}, {{"sorted", 1}}, 1);
  test::expect_equal(out[0], DTypeOf<T>::value, {static_cast<int64_t>(want.size())}, want);
}

TEST(DataDependent, UniqueSortsEveryIntegerWidth) {
  expect_unique_sorted<int16_t>({-300, 7, 7, -2, 12000, -300, 5});
  expect_unique_sorted<uint16_t>({65000, 3, 3, 40000, 1, 65000});
  expect_unique_sorted<uint32_t>({4000000000u, 2, 2, 3000000000u, 9});
  expect_unique_sorted<uint64_t>({uint64_t{1} << 63, 4, 4, (uint64_t{1} << 63) + 8, 1});
  Tensor half = Tensor::zeros({4}, DType::kFloat16);
  EXPECT_THROW(test::run_op("Unique", {half}, {{"sorted", 1}}, 1), UnsupportedOp);
}

TEST(DataDependent, UniqueAlongAnAxisComparesWholeSlices) {
  // Columns of a [2, 6] matrix drawn from three distinct columns, so some repeat.
  Tensor pool = test::random_tensor({2, 3}, 8);
  Tensor pick = test::random_ints({6}, 9, 0, 2);
  std::vector<float> data(12);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 6; ++c)
      data[r * 6 + c] = pool.data<float>()[r * 3 + pick.data<int64_t>()[c]];
  Tensor x = Tensor::from_vector<float>({2, 6}, data);
  auto column = [&](int64_t c) { return std::vector<float>{data[c], data[6 + c]}; };
  std::vector<int64_t> firsts;  // first column of each distinct value, sorted by column value
  for (int64_t c = 0; c < 6; ++c) {
    bool fresh = true;
    for (int64_t f : firsts) fresh = fresh && column(f) != column(c);
    if (fresh) firsts.push_back(c);
  }
  std::sort(firsts.begin(), firsts.end(),
            [&](int64_t a, int64_t b) { return column(a) < column(b); });
  const int64_t u = static_cast<int64_t>(firsts.size());
  std::vector<double> y(static_cast<size_t>(2 * u)), inv;
  for (int64_t k = 0; k < u; ++k)
    for (int64_t r = 0; r < 2; ++r) y[r * u + k] = data[r * 6 + firsts[k]];
  for (int64_t c = 0; c < 6; ++c)
    for (int64_t k = 0; k < u; ++k)
      if (column(firsts[k]) == column(c)) inv.push_back(static_cast<double>(k));
  auto out = test::run_op("Unique", {x}, {{"axis", -1}}, 3);
  test::expect_close(out[0], {2, u}, y, 0.0, 0.0);
  test::expect_equal(out[2], DType::kInt64, {6}, inv);
}

TEST(DataDependent, UniqueAlongAnAxisWithEmptySlices) {
  // [3, 0] along axis 0: three empty rows, all equal, so one group holding all three (a fuzz
  // finding: the empty slices used to be copied from a null buffer).
  Tensor x = Tensor::empty({3, 0}, DType::kFloat32);
  auto out = test::run_op("Unique", {x}, {{"axis", 0}}, 4);
  test::expect_close(out[0], {1, 0}, {}, 0.0, 0.0);
  test::expect_equal(out[1], DType::kInt64, {1}, {0});
  test::expect_equal(out[2], DType::kInt64, {3}, {0, 0, 0});
  test::expect_equal(out[3], DType::kInt64, {1}, {3});
}

// Reference NMS: repeatedly take the best remaining box, then drop every box overlapping it.
std::vector<double> nms_reference(const Tensor& boxes, const Tensor& scores, int64_t max_out,
                                  float iou_t, float score_t) {
  const int64_t batches = boxes.shape()[0], n = boxes.shape()[1], classes = scores.shape()[1];
  auto area_iou = [&](const float* a, const float* b) {
    double ay1 = std::min(a[0], a[2]), ay2 = std::max(a[0], a[2]);
    double ax1 = std::min(a[1], a[3]), ax2 = std::max(a[1], a[3]);
    double by1 = std::min(b[0], b[2]), by2 = std::max(b[0], b[2]);
    double bx1 = std::min(b[1], b[3]), bx2 = std::max(b[1], b[3]);
    double ih = std::max(0.0, std::min(ay2, by2) - std::max(ay1, by1));
    double iw = std::max(0.0, std::min(ax2, bx2) - std::max(ax1, bx1));
    double inter = ih * iw;
    double uni = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter;
    return uni <= 0.0 ? 0.0 : inter / uni;
  };
  std::vector<double> rows;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores.data<float>() + (b * classes + c) * n;
      std::vector<bool> alive(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) alive[i] = s[i] > score_t;
      for (int64_t taken = 0; taken < max_out; ++taken) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; ++i)
          if (alive[i] && (best < 0 || s[i] > s[best])) best = i;
        if (best < 0) break;
        rows.insert(rows.end(), {double(b), double(c), double(best)});
        const float* bb = boxes.data<float>() + (b * n + best) * 4;
        for (int64_t i = 0; i < n; ++i)
          if (alive[i] && area_iou(bb, boxes.data<float>() + (b * n + i) * 4) > iou_t)
            alive[i] = false;
        alive[best] = false;
      }
    }
  return rows;
}

TEST(DataDependent, NonMaxSuppressionMatchesAGreedyReference) {
  Tensor boxes = test::random_tensor({2, 30, 4}, 10, 0.0f, 4.0f);
  Tensor scores = test::random_tensor({2, 3, 30}, 11, 0.0f, 1.0f);
  Tensor max_out = Tensor::from_vector<int64_t>({1}, {5});
  Tensor iou = Tensor::from_vector<float>({1}, {0.3f});
  Tensor score = Tensor::from_vector<float>({1}, {0.2f});
  std::vector<double> want = nms_reference(boxes, scores, 5, 0.3f, 0.2f);
  ASSERT_GT(want.size(), 6u);
  auto out = test::run_op("NonMaxSuppression", {boxes, scores, max_out, iou, score});
  test::expect_equal(out[0], DType::kInt64, {static_cast<int64_t>(want.size() / 3), 3}, want);
}

TEST(DataDependent, ADataDependentShapeCannotFeedAStaticOp) {
  Graph g;
  Value* x = g.add_input("x", {4, 4});
  Value* nz = g.add_op("NonZero", {x}, {}, "nz");
  try {
    g.add_op("Relu", {g.add_op("Cast", {nz}, {{"to", int64_t{1}}})}, {}, "after");
    FAIL() << "expected UnsupportedOp";
  } catch (const UnsupportedOp& e) {
    EXPECT_NE(std::string(e.what()).find("'nz' (NonZero)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("known only at run time"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lumen
