// Data movement on the CUDA backend's generic kernels, on float, integer and bool data: Expand,
// Tile, Trilu, OneHot, DepthToSpace (both modes), SpaceToDepth, ScatterElements, ScatterND,
// GatherElements, GatherND, Pad (every mode), Range, EyeLike, and the views and copies (Unsqueeze,
// Transpose, Concat) that now take integer data. Plain-loop references; with
// --lumen-backends=cuda,cpu each node must run on CUDA (skipped without a GPU).
#include <numeric>

#include "ops/backend_check_util.h"

namespace lumen::test {
namespace {

class GenericMovement : public ::testing::Test {
 protected:
  void SetUp() override { LUMEN_SKIP_WITHOUT_BACKENDS(); }
};

const DType kTypes[] = {DType::kFloat32, DType::kInt64, DType::kInt32,
                        DType::kBool,    DType::kUInt8, DType::kFloat64};

Tensor data_of(const Shape& shape, DType dt, uint64_t seed) {
  return int_valued(shape, dt, seed, dt == DType::kBool || dt == DType::kUInt8 ? 0 : -50,
                    dt == DType::kBool ? 1 : 50);
}

TEST_F(GenericMovement, ExpandAndTile) {
  for (DType dt : kTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = data_of({3, 1, 5}, dt, 1);
    const std::vector<double> xv = to_doubles(x);
    const Shape out{2, 3, 4, 5};
    std::vector<double> want;
    for (int64_t i = 0; i < out.numel(); ++i)
      want.push_back(xv[broadcast_source(unravel(i, out), x.shape())]);
    const Tensor shape = Tensor::from_vector<int64_t>({4}, {2, 1, 4, 5});
    expect_equal(run_checked("Expand", {x, constant(shape)})[0], dt, out, want);

    const Shape tiled{6, 2, 15};
    std::vector<double> tw;
    for (int64_t i = 0; i < tiled.numel(); ++i) {
      std::vector<int64_t> idx = unravel(i, tiled);
      for (int k = 0; k < 3; ++k) idx[k] %= x.shape()[k];
      tw.push_back(xv[ravel(idx, x.shape())]);
    }
    const Tensor reps = Tensor::from_vector<int64_t>({3}, {2, 2, 3});
    expect_equal(run_checked("Tile", {x, constant(reps)})[0], dt, tiled, tw);
  }
}

TEST_F(GenericMovement, TriluBothWaysEveryDiagonal) {
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBool}) {
    const Tensor x = data_of({2, 5, 7}, dt, 2);
    const std::vector<double> xv = to_doubles(x);
    for (int upper : {0, 1}) {
      for (int64_t k : {-2, 0, 3}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " upper " + std::to_string(upper) + " k " +
                     std::to_string(k));
        std::vector<double> want(xv.size());
        for (int64_t i = 0; i < x.numel(); ++i) {
          const int64_t c = i % 7, r = (i / 7) % 5;
          want[i] = (upper ? c - r >= k : c - r <= k) ? xv[i] : 0;
        }
        expect_equal(run_checked("Trilu", {x, constant(Tensor::scalar<int64_t>(k))},
                                 {{"upper", int64_t{upper}}})[0],
                     dt, x.shape(), want);
      }
    }
  }
}

TEST_F(GenericMovement, OneHotAnyAxis) {
  const int64_t depth = 6;
  const Tensor idx = random_ints({4, 5}, 3, -depth, depth - 1, DType::kInt64);
  const std::vector<double> iv = to_doubles(idx);
  for (int axis : {-1, 0, 1}) {
    for (DType dt : {DType::kFloat32, DType::kInt32}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " axis " + std::to_string(axis));
      const Tensor values = dt == DType::kFloat32 ? Tensor::from_vector<float>({2}, {-0.5f, 2.5f})
                                                  : Tensor::from_vector<int32_t>({2}, {3, 9});
      const std::vector<double> vv = to_doubles(values);
      const int a = axis < 0 ? axis + 3 : axis;
      std::vector<int64_t> dims = {4, 5};
      dims.insert(dims.begin() + a, depth);
      const Shape out(dims);
      std::vector<double> want;
      for (int64_t i = 0; i < out.numel(); ++i) {
        std::vector<int64_t> o = unravel(i, out);
        const int64_t d = o[a];
        o.erase(o.begin() + a);
        int64_t want_idx = static_cast<int64_t>(iv[ravel(o, idx.shape())]);
        if (want_idx < 0) want_idx += depth;
        want.push_back(vv[want_idx == d ? 1 : 0]);
      }
      expect_equal(run_checked("OneHot", {idx, constant(Tensor::scalar<int64_t>(depth)), values},
                               {{"axis", int64_t{axis}}})[0],
                   dt, out, want);
    }
  }
}

TEST_F(GenericMovement, DepthToSpaceAndBack) {
  const int64_t b = 2, n = 2, c = 8, h = 3, w = 4;
  const Tensor x = random_tensor({n, c, h, w}, 4);
  const std::vector<double> xv = to_doubles(x);
  for (const char* mode : {"DCR", "CRD"}) {
    SCOPED_TRACE(mode);
    const Shape out{n, c / (b * b), h * b, w * b};
    std::vector<double> want;
    for (int64_t i = 0; i < out.numel(); ++i) {
      const std::vector<int64_t> o = unravel(i, out);
      const int64_t bh = o[2] % b, bw = o[3] % b;
      const int64_t ch = std::string(mode) == "DCR" ? (bh * b + bw) * (c / (b * b)) + o[1]
                                                    : o[1] * b * b + bh * b + bw;
      want.push_back(xv[ravel({o[0], ch, o[2] / b, o[3] / b}, x.shape())]);
    }
    const Tensor y = run_checked("DepthToSpace", {x}, {{"blocksize", b}, {"mode", mode}})[0];
    expect_close(y, out, want, 0, 0);
    if (std::string(mode) == "DCR")
      expect_close(run_checked("SpaceToDepth", {y}, {{"blocksize", b}})[0], x.shape(), xv, 0, 0);
  }
}

TEST_F(GenericMovement, ScatterElementsAndScatterND) {
  // (int32: small int64 tensors count as shape arithmetic and stay on the host)
  for (DType dt : {DType::kFloat32, DType::kInt32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor data = data_of({4, 6}, dt, 5);
    // Along axis 1: each row's indices are distinct (a permutation prefix), so no write races.
    std::vector<int64_t> ind;
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 3; ++j) ind.push_back((r + 2 * j + 1) % 6 - (j == 2 ? 6 : 0));
    const Tensor indices = Tensor::from_vector<int64_t>({4, 3}, ind);
    const Tensor updates = data_of({4, 3}, dt, 6);
    std::vector<double> want = to_doubles(data);
    const std::vector<double> uv = to_doubles(updates);
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 3; ++j) {
        int64_t col = ind[r * 3 + j];
        if (col < 0) col += 6;
        want[r * 6 + col] = uv[r * 3 + j];
      }
    expect_equal(run_checked("ScatterElements", {data, constant(indices), updates},
                             {{"axis", int64_t{1}}})[0],
                 dt, data.shape(), want);

    // ScatterND: whole rows of a [5, 3, 2] tensor at distinct (i, j) pairs.
    const Tensor d3 = data_of({5, 3, 2}, dt, 7);
    const Tensor nd_idx = Tensor::from_vector<int64_t>({3, 2}, {4, 1, 0, 2, -3, 0});
    const Tensor nd_upd = data_of({3, 2}, dt, 8);
    std::vector<double> nd_want = to_doubles(d3);
    const std::vector<double> nu = to_doubles(nd_upd);
    const int64_t pairs[3][2] = {{4, 1}, {0, 2}, {2, 0}};
    for (int u = 0; u < 3; ++u)
      for (int e = 0; e < 2; ++e) nd_want[(pairs[u][0] * 3 + pairs[u][1]) * 2 + e] = nu[u * 2 + e];
    expect_equal(run_checked("ScatterND", {d3, constant(nd_idx), nd_upd})[0], dt, d3.shape(),
                 nd_want);
  }
}

TEST_F(GenericMovement, IntegerViewsAndCopies) {
  // A padding mask's path: int64 [B, S] through Unsqueeze, Cast, Transpose and Concat on the GPU.
  const Tensor mask = random_ints({8, 40}, 9, 0, 1, DType::kInt64);
  const std::vector<double> mv = to_doubles(mask);
  const Tensor axes = Tensor::from_vector<int64_t>({2}, {1, 2});
  expect_equal(run_checked("Unsqueeze", {mask, constant(axes)})[0], DType::kInt64,
               Shape{8, 1, 1, 40}, mv);
  std::vector<double> t(mv.size());
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 40; ++j) t[j * 8 + i] = mv[i * 40 + j];
  expect_equal(run_checked("Transpose", {mask}, {{"perm", std::vector<int64_t>{1, 0}}})[0],
               DType::kInt64, Shape{40, 8}, t);
  std::vector<double> cat = mv;
  cat.insert(cat.end(), mv.begin(), mv.end());
  expect_equal(run_checked("Concat", {mask, mask}, {{"axis", int64_t{0}}})[0], DType::kInt64,
               Shape{16, 40}, cat);
}

TEST_F(GenericMovement, ScatterReductionsCombineRepeatedIndices) {
  for (DType dt : {DType::kFloat32, DType::kInt32}) {
    for (const char* red : {"add", "mul", "max", "min"}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + red);
      const std::string r = red;
      auto combine = [&](double a, double b) {
        return r == "add"   ? a + b
               : r == "mul" ? a * b
               : r == "max" ? std::max(a, b)
                            : std::min(a, b);
      };
      // ScatterElements along axis 0 of [5, 7] with repeated rows in every column.
      const Tensor data = int_valued({5, 7}, dt, 16, -3, 3);
      const Tensor idx = random_ints({6, 7}, 17, -5, 4);
      const Tensor upd = int_valued({6, 7}, dt, 18, -3, 3);
      std::vector<double> want = to_doubles(data);
      const std::vector<double> iv = to_doubles(idx), uv = to_doubles(upd);
      for (int64_t a = 0; a < 6; ++a)
        for (int64_t c = 0; c < 7; ++c) {
          int64_t row = static_cast<int64_t>(iv[a * 7 + c]);
          if (row < 0) row += 5;
          want[row * 7 + c] = combine(want[row * 7 + c], uv[a * 7 + c]);
        }
      expect_equal(
          run_checked("ScatterElements", {data, constant(idx), upd}, {{"reduction", red}})[0], dt,
          data.shape(), want);
      // ScatterND of rows of [4, 9] with a repeated row index.
      const Tensor d2 = int_valued({4, 9}, dt, 19, -3, 3);
      const Tensor rows = Tensor::from_vector<int64_t>({5, 1}, {2, 0, 2, -1, 2});
      const Tensor u2 = int_valued({5, 9}, dt, 20, -3, 3);
      std::vector<double> w2 = to_doubles(d2);
      const std::vector<double> u2v = to_doubles(u2);
      const int64_t rv[5] = {2, 0, 2, 3, 2};
      for (int64_t u = 0; u < 5; ++u)
        for (int64_t e = 0; e < 9; ++e)
          w2[rv[u] * 9 + e] = combine(w2[rv[u] * 9 + e], u2v[u * 9 + e]);
      expect_equal(run_checked("ScatterND", {d2, constant(rows), u2}, {{"reduction", red}})[0], dt,
                   d2.shape(), w2);
    }
  }
}

TEST_F(GenericMovement, GatherElementsAndGatherND) {
  for (DType dt : {DType::kFloat32, DType::kInt32, DType::kBool}) {
    SCOPED_TRACE(dtype_name(dt));
    // (80 elements: bool data with int64 indices counts as shape arithmetic at 64 or fewer)
    const Tensor data = data_of({4, 5, 4}, dt, 12);
    const std::vector<double> dv = to_doubles(data);
    for (int axis : {0, 1, -1}) {
      const int a = axis < 0 ? axis + 3 : axis;
      const Shape is{3, 4, 2};
      const Tensor idx = random_ints(is, 13 + a, -data.shape()[a], data.shape()[a] - 1);
      const std::vector<double> iv = to_doubles(idx);
      std::vector<double> want;
      for (int64_t i = 0; i < is.numel(); ++i) {
        std::vector<int64_t> at = unravel(i, is);
        int64_t c = static_cast<int64_t>(iv[i]);
        at[a] = c < 0 ? c + data.shape()[a] : c;
        want.push_back(dv[ravel(at, data.shape())]);
      }
      expect_equal(
          run_checked("GatherElements", {data, constant(idx)}, {{"axis", int64_t{axis}}})[0], dt,
          is, want);
    }
    // GatherND: batch_dims 0 with pairs, and batch_dims 1 with single indices.
    const Tensor pairs = Tensor::from_vector<int64_t>({3, 2}, {3, 4, 0, -1, 2, 2});
    std::vector<double> pw;
    const int64_t pv[3][2] = {{3, 4}, {0, 4}, {2, 2}};
    for (const auto& p : pv)
      for (int64_t e = 0; e < 4; ++e) pw.push_back(dv[(p[0] * 5 + p[1]) * 4 + e]);
    expect_equal(run_checked("GatherND", {data, constant(pairs)})[0], dt, Shape{3, 4}, pw);
    const Tensor singles = Tensor::from_vector<int64_t>({4, 2, 1}, {1, 0, 4, 2, 3, 3, 0, -5});
    std::vector<double> sw;
    const int64_t sv[4][2] = {{1, 0}, {4, 2}, {3, 3}, {0, 0}};
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t u = 0; u < 2; ++u)
        for (int64_t e = 0; e < 4; ++e) sw.push_back(dv[(b * 5 + sv[b][u]) * 4 + e]);
    expect_equal(
        run_checked("GatherND", {data, constant(singles)}, {{"batch_dims", int64_t{1}}})[0], dt,
        Shape{4, 2, 4}, sw);
  }
}

TEST_F(GenericMovement, PadEveryMode) {
  const Tensor x = random_tensor({2, 3, 4}, 14);
  const std::vector<double> xv = to_doubles(x);
  const std::vector<int64_t> pads = {0, 2, -1, 1, 2, 2};  // begin per axis, then end
  const Shape out{3, 7, 5};
  for (const char* mode : {"constant", "edge", "reflect", "wrap"}) {
    SCOPED_TRACE(mode);
    const std::string m = mode;
    std::vector<double> want;
    for (int64_t i = 0; i < out.numel(); ++i) {
      std::vector<int64_t> at = unravel(i, out);
      bool inside = true;
      for (int k = 0; k < 3; ++k) {
        // Crop first (negative pads), then pad the window [lo, lo + n).
        const int64_t lo = std::max<int64_t>(0, -pads[k]);
        const int64_t n = x.shape()[k] - lo - std::max<int64_t>(0, -pads[k + 3]);
        int64_t c = at[k] - pads[k] - lo;
        if (c < 0 || c >= n) {
          if (m == "constant") inside = false;
          if (m == "edge") c = c < 0 ? 0 : n - 1;
          if (m == "reflect") c = c < 0 ? -c : 2 * (n - 1) - c;
          if (m == "wrap") c = ((c % n) + n) % n;
        }
        at[k] = c + lo;
      }
      want.push_back(inside ? xv[ravel(at, x.shape())] : 1.5);
    }
    std::vector<OpInput> inputs = {x, constant(Tensor::from_vector<int64_t>({6}, pads))};
    if (m == "constant") inputs.push_back(Tensor::scalar<float>(1.5f));
    expect_close(run_checked("Pad", inputs, {{"mode", mode}})[0], out, want, 0, 0);
  }
  const Tensor i = random_ints({5, 6}, 15, -9, 9, DType::kInt32);
  const std::vector<double> iv = to_doubles(i);
  std::vector<double> iw;
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c = -1; c < 8; ++c) iw.push_back(c < 0 || c >= 6 ? 0 : iv[r * 6 + c]);
  expect_equal(
      run_checked("Pad", {i, constant(Tensor::from_vector<int64_t>({4}, {0, 1, 0, 2}))})[0],
      DType::kInt32, Shape{5, 9}, iw);
}

// Range's inputs decide its shape, so they are constants and the node folds when the graph is
// built: it runs on no backend (run_op, not run_checked).
TEST_F(GenericMovement, RangeAndEyeLike) {
  std::vector<double> want;
  for (int k = 0; k < 90; ++k) want.push_back(-2.0 + 0.25 * k);
  expect_close(run_op("Range", {constant(Tensor::scalar<float>(-2.f)),
                                constant(Tensor::scalar<float>(20.5f)),
                                constant(Tensor::scalar<float>(0.25f))})[0],
               Shape{90}, want);
  std::vector<double> iw;
  for (int k = 0; k < 70; ++k) iw.push_back(100 - 3 * k);
  expect_equal(run_op("Range", {constant(Tensor::scalar<int32_t>(100)),
                                constant(Tensor::scalar<int32_t>(-110)),
                                constant(Tensor::scalar<int32_t>(-3))})[0],
               DType::kInt32, Shape{70}, iw);
  const Tensor like = Tensor::zeros({6, 9}, DType::kInt32);
  for (int64_t k : {-2, 0, 3}) {
    std::vector<double> eye;
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t c = 0; c < 9; ++c) eye.push_back(c - r == k ? 1 : 0);
    expect_close(run_checked("EyeLike", {like}, {{"k", k}, {"dtype", int64_t{1}}})[0], Shape{6, 9},
                 eye, 0, 0);
  }
}

TEST_F(GenericMovement, BadInputsAreErrors) {
  const Tensor x = random_tensor({2, 3, 4, 4}, 10);
  expect_error<Error>(
      [&] {
        run_checked("DepthToSpace", {x}, {{"blocksize", int64_t{2}}});
      },
      "DepthToSpace");
  const Tensor y = random_tensor({3, 4}, 11);
  expect_error<Error>(
      [&] {
        run_checked("Tile", {y, constant(Tensor::from_vector<int64_t>({1}, {2}))});
      },
      "Tile");
}

}  // namespace
}  // namespace lumen::test
