// Tests of GatherElements, GatherND, ScatterND, ScatterElements, OneHot, Trilu and EyeLike against
// naive double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::constant;
using test::expect_close;
using test::expect_equal;
using test::random_ints;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

Tensor ints1(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

int64_t wrapped(double v, int64_t n) {
  return v < 0 ? static_cast<int64_t>(v) + n : static_cast<int64_t>(v);
}

// Data of any dtype for the copy-by-size kernels.
Tensor data_of(DType dt, const Shape& s, uint64_t seed) {
  if (dt == DType::kFloat32) return random_tensor(s, seed);
  return random_ints(s, seed, dt == DType::kBool ? 0 : -100, dt == DType::kBool ? 1 : 100, dt);
}

void expect_same(const Tensor& got, DType dt, const Shape& s, const std::vector<double>& want) {
  if (dt == DType::kFloat32)
    expect_close(got, s, want, 0, 0);
  else
    expect_equal(got, dt, s, want);
}

TEST(GatherElementsTest, AxesDtypesNegativeIndices) {
  uint64_t seed = 1;
  struct Case {
    Shape data, idx;
  };
  for (Case c : {Case{{5}, {7}}, Case{{3, 4}, {3, 4}}, Case{{3, 4}, {2, 6}}, Case{{4, 3}, {9, 2}},
                 Case{{2, 3, 4}, {2, 2, 5}}, Case{{2, 3, 4}, {1, 3, 2}}, Case{{3, 4}, {0, 4}},
                 Case{{64, 700}, {64, 700}}})
    for (int axis = -c.data.rank(); axis < c.data.rank(); ++axis) {
      const int a = axis < 0 ? axis + c.data.rank() : axis;
      bool fits = true;
      for (int d = 0; d < c.data.rank(); ++d)
        if (d != a && c.idx.dims()[d] > c.data.dims()[d]) fits = false;
      if (!fits) continue;
      for (DType dt : {DType::kFloat32, DType::kInt64, DType::kUInt8, DType::kBool})
        for (DType it : {DType::kInt64, DType::kInt32}) {
          SCOPED_TRACE(c.data.to_string() + " " + c.idx.to_string() + " axis " +
                       std::to_string(axis));
          const int64_t n = c.data.dims()[a];
          Tensor x = data_of(dt, c.data, seed++);
          Tensor idx = random_ints(c.idx, seed++, -n, n - 1, it);
          Tensor got = run_op("GatherElements", {x, idx}, {{"axis", axis}})[0];
          std::vector<double> xv = to_doubles(x), iv = to_doubles(idx), want;
          for (int64_t i = 0; i < c.idx.numel(); ++i) {
            std::vector<int64_t> p = test::unravel(i, c.idx);
            p[a] = wrapped(iv[i], n);
            want.push_back(xv[test::ravel(p, c.data)]);
          }
          expect_same(got, dt, c.idx, want);
        }
    }
}

TEST(GatherElementsTest, Bad) {
  Tensor x = random_tensor({3, 4}, 1);
  EXPECT_THROW(run_op("GatherElements", {x, ints1({0, 1})}), ShapeError);  // rank
  EXPECT_THROW(run_op("GatherElements", {x, random_ints({4, 4}, 1, 0, 1)}, {{"axis", 1}}),
               ShapeError);
  EXPECT_THROW(run_op("GatherElements", {x, random_ints({3, 4}, 1, 0, 1)}, {{"axis", 2}}),
               ShapeError);
  EXPECT_THROW(run_op("GatherElements", {x, random_tensor({3, 4}, 1)}), ShapeError);
  Tensor bad = Tensor::from_vector<int64_t>({1, 2}, {0, 3});
  EXPECT_THROW(run_op("GatherElements", {x, bad}), InvalidArgument);
  bad = Tensor::from_vector<int64_t>({1, 2}, {-4, 0});
  EXPECT_THROW(run_op("GatherElements", {x, bad}), InvalidArgument);
}

TEST(ScatterElementsTest, ReductionsAxes) {
  uint64_t seed = 100;
  for (Shape s : {Shape{6}, Shape{3, 4}, Shape{2, 3, 4}})
    for (int axis = -s.rank(); axis < s.rank(); ++axis)
      for (std::string red : {"none", "add", "mul", "max", "min"})
        for (DType dt : {DType::kFloat32, DType::kInt64}) {
          SCOPED_TRACE(s.to_string() + " axis " + std::to_string(axis) + " " + red);
          const int a = axis < 0 ? axis + s.rank() : axis;
          const int64_t n = s.dims()[a];
          Shape is = s;
          is.dims()[a] = red == "none" ? 1 : n + 2;  // none: unique targets
          for (int d = 0; d < s.rank(); ++d)
            if (d != a && is.dims()[d] > 1) is.dims()[d] -= 1;
          Tensor x = data_of(dt, s, seed++);
          Tensor idx = random_ints(is, seed++, -n, n - 1);
          Tensor upd = data_of(dt, is, seed++);
          Tensor got =
              run_op("ScatterElements", {x, idx, upd}, {{"axis", axis}, {"reduction", red}})[0];
          std::vector<double> want = to_doubles(x), iv = to_doubles(idx), uv = to_doubles(upd);
          for (int64_t i = 0; i < is.numel(); ++i) {
            std::vector<int64_t> p = test::unravel(i, is);
            p[a] = wrapped(iv[i], n);
            double& o = want[test::ravel(p, s)];
            if (red == "none")
              o = uv[i];
            else if (red == "add")
              o += uv[i];
            else if (red == "mul")
              o = dt == DType::kFloat32 ? static_cast<float>(o * uv[i]) : o * uv[i];
            else if (red == "max")
              o = std::max(o, uv[i]);
            else
              o = std::min(o, uv[i]);
            if (dt == DType::kFloat32) o = static_cast<float>(o);
          }
          expect_close(got, s, want, 1e-5, 1e-5);
        }
}

TEST(ScatterElementsTest, Bad) {
  Tensor x = random_tensor({3, 4}, 1);
  Tensor idx = Tensor::from_vector<int64_t>({1, 2}, {0, 4});
  Tensor upd = random_tensor({1, 2}, 2);
  EXPECT_THROW(run_op("ScatterElements", {x, idx, upd}, {{"axis", 1}}), InvalidArgument);
  EXPECT_THROW(run_op("ScatterElements", {x, idx, random_tensor({2, 2}, 2)}), ShapeError);
  EXPECT_THROW(run_op("ScatterElements", {x, idx, upd}, {{"reduction", "sub"}}), InvalidModel);
  EXPECT_THROW(run_op("ScatterElements", {x, idx, random_ints({1, 2}, 1, 0, 1)}), ShapeError);
  Tensor xb = random_ints({3, 4}, 1, 0, 1, DType::kBool);
  Tensor ub = random_ints({1, 2}, 1, 0, 1, DType::kBool);
  EXPECT_THROW(
      run_op("ScatterElements", {xb, ints1({0, 1}).reshape({1, 2}), ub}, {{"reduction", "add"}}),
      UnsupportedOp);
}

TEST(GatherNDTest, BatchDimsAndDtypes) {
  uint64_t seed = 200;
  struct Case {
    Shape data, idx;
    int batch_dims;
  };
  for (Case c :
       {Case{{5}, {3, 1}, 0}, Case{{3, 4}, {2, 2}, 0}, Case{{3, 4}, {5, 1}, 0},
        Case{{2, 3, 4}, {2, 2, 2}, 0}, Case{{2, 3, 4}, {2, 1}, 1}, Case{{2, 3, 4}, {2, 5, 2}, 1},
        Case{{2, 3, 4, 2}, {2, 3, 1}, 2}, Case{{3, 4}, {0, 2}, 0}, Case{{40, 30, 40}, {100, 1}, 0}})
    for (DType dt : {DType::kFloat32, DType::kInt32, DType::kBool})
      for (DType it : {DType::kInt64, DType::kInt32}) {
        SCOPED_TRACE(c.data.to_string() + " " + c.idx.to_string());
        const int b = c.batch_dims;
        const int64_t q = c.idx.dims().back();
        Tensor x = data_of(dt, c.data, seed++);
        // Build indices column by column so every component is in range for its dim.
        std::vector<int64_t> iv(static_cast<size_t>(c.idx.numel()));
        Tensor r = random_ints(c.idx, seed++, -1000, 1000);
        std::vector<double> rv = to_doubles(r);
        for (int64_t i = 0; i < c.idx.numel(); ++i) {
          const int64_t n = c.data.dims()[b + i % q];
          iv[i] = static_cast<int64_t>(rv[i]) % n;  // in (-n, n)
        }
        Tensor idx = Tensor::from_vector<int64_t>(c.idx, iv);
        if (it == DType::kInt32) {
          std::vector<int32_t> i32(iv.begin(), iv.end());
          idx = Tensor::from_vector<int32_t>(c.idx, i32);
        }
        Tensor got = run_op("GatherND", {x, idx}, {{"batch_dims", b}})[0];
        std::vector<int64_t> od(c.idx.dims().begin(), c.idx.dims().end() - 1);
        for (int d = static_cast<int>(b + q); d < c.data.rank(); ++d)
          od.push_back(c.data.dims()[d]);
        Shape os(od);
        std::vector<double> xv = to_doubles(x), want;
        for (int64_t o = 0; o < os.numel(); ++o) {
          std::vector<int64_t> oi = test::unravel(o, os), p;
          const int lead = c.idx.rank() - 1;
          for (int d = 0; d < b; ++d) p.push_back(oi[d]);
          std::vector<int64_t> ip(oi.begin(), oi.begin() + lead);
          ip.push_back(0);
          for (int64_t k = 0; k < q; ++k) {
            ip.back() = k;
            p.push_back(
                wrapped(static_cast<double>(iv[test::ravel(ip, c.idx)]), c.data.dims()[b + k]));
          }
          for (int d = lead; d < os.rank(); ++d) p.push_back(oi[d]);
          want.push_back(xv[test::ravel(p, c.data)]);
        }
        expect_same(got, dt, os, want);
      }
}

TEST(GatherNDTest, Bad) {
  Tensor x = random_tensor({3, 4}, 1);
  EXPECT_THROW(run_op("GatherND", {x, Tensor::from_vector<int64_t>({1, 3}, {0, 0, 0})}),
               ShapeError);
  EXPECT_THROW(run_op("GatherND", {x, Tensor::from_vector<int64_t>({1, 2}, {0, 4})}),
               InvalidArgument);
  EXPECT_THROW(run_op("GatherND", {x, Tensor::from_vector<int64_t>({1, 2}, {-4, 0})}),
               InvalidArgument);
  EXPECT_THROW(
      run_op("GatherND", {x, Tensor::from_vector<int64_t>({2, 1}, {0, 1})}, {{"batch_dims", 2}}),
      InvalidModel);
  EXPECT_THROW(
      run_op("GatherND", {x, Tensor::from_vector<int64_t>({2, 1}, {0, 1})}, {{"batch_dims", 1}}),
      ShapeError);  // batch dims 3 vs 2
}

TEST(ScatterNDTest, ReductionsAndSlices) {
  uint64_t seed = 300;
  struct Case {
    Shape data;
    int64_t tuples, q;
  };
  for (Case c : {Case{{8}, 4, 1}, Case{{4, 5}, 3, 1}, Case{{4, 5}, 6, 2}, Case{{2, 3, 4}, 2, 2},
                 Case{{2, 3, 4}, 5, 3}, Case{{3, 4}, 0, 1}})
    for (std::string red : {"none", "add", "mul", "max", "min"})
      for (DType dt : {DType::kFloat32, DType::kInt64}) {
        SCOPED_TRACE(c.data.to_string() + " q " + std::to_string(c.q) + " " + red);
        const int64_t q = c.q;
        Tensor x = data_of(dt, c.data, seed++);
        // Distinct tuples for "none" (duplicates there are order-dependent in ONNX).
        std::vector<int64_t> iv;
        int64_t space = 1;
        for (int k = 0; k < q; ++k) space *= c.data.dims()[k];
        int64_t tuples = red == "none" ? std::min(c.tuples, space) : c.tuples;
        for (int64_t t = 0; t < tuples; ++t) {
          int64_t flat = red == "none" ? (t * 7 + 1) % space : (t * 5) % space;
          std::vector<int64_t> tup(q);
          for (int64_t k = q - 1; k >= 0; --k) {
            tup[k] = flat % c.data.dims()[k];
            flat /= c.data.dims()[k];
          }
          for (int64_t k = 0; k < q; ++k) iv.push_back(t % 2 ? tup[k] - c.data.dims()[k] : tup[k]);
        }
        if (red == "none") {  // keep tuples distinct: (t*7+1) % space may collide for small space
          std::vector<std::vector<int64_t>> seen;
          std::vector<int64_t> uniq;
          for (int64_t t = 0; t < tuples; ++t) {
            std::vector<int64_t> w;
            for (int64_t k = 0; k < q; ++k) w.push_back(wrapped(iv[t * q + k], c.data.dims()[k]));
            if (std::find(seen.begin(), seen.end(), w) != seen.end()) continue;
            seen.push_back(w);
            uniq.insert(uniq.end(), iv.begin() + t * q, iv.begin() + (t + 1) * q);
          }
          iv = uniq;
          tuples = static_cast<int64_t>(seen.size());
        }
        Tensor idx = Tensor::from_vector<int64_t>({tuples, q}, iv);
        std::vector<int64_t> ud = {tuples};
        int64_t slice = 1;
        for (int d = static_cast<int>(q); d < c.data.rank(); ++d) {
          ud.push_back(c.data.dims()[d]);
          slice *= c.data.dims()[d];
        }
        Tensor upd = data_of(dt, Shape(ud), seed++);
        Tensor got = run_op("ScatterND", {x, idx, upd}, {{"reduction", red}})[0];
        std::vector<double> want = to_doubles(x), uv = to_doubles(upd);
        for (int64_t t = 0; t < tuples; ++t) {
          int64_t base = 0, stride = slice;
          for (int64_t k = q - 1; k >= 0; --k) {
            base += wrapped(iv[t * q + k], c.data.dims()[k]) * stride;
            stride *= c.data.dims()[k];
          }
          for (int64_t s = 0; s < slice; ++s) {
            double& o = want[base + s];
            double u = uv[t * slice + s];
            if (red == "none")
              o = u;
            else if (red == "add")
              o += u;
            else if (red == "mul")
              o *= u;
            else if (red == "max")
              o = std::max(o, u);
            else
              o = std::min(o, u);
            if (dt == DType::kFloat32) o = static_cast<float>(o);
          }
        }
        expect_close(got, c.data, want, 1e-5, 1e-5);
      }
}

TEST(ScatterNDTest, Bad) {
  Tensor x = random_tensor({3, 4}, 1);
  Tensor idx = Tensor::from_vector<int64_t>({2, 1}, {0, 3});
  EXPECT_THROW(run_op("ScatterND", {x, idx, random_tensor({2, 4}, 2)}), InvalidArgument);
  EXPECT_THROW(
      run_op("ScatterND", {x, Tensor::from_vector<int64_t>({1, 1}, {0}), random_tensor({2, 4}, 2)}),
      ShapeError);
  EXPECT_THROW(run_op("ScatterND",
                      {x, Tensor::from_vector<int64_t>({1, 3}, {0, 0, 0}), random_tensor({1}, 2)}),
               ShapeError);
  EXPECT_THROW(
      run_op("ScatterND", {x, Tensor::from_vector<int64_t>({1, 1}, {0}), random_tensor({1, 4}, 2)},
             {{"reduction", "avg"}}),
      InvalidModel);
  // A bad index leaves the output unwritten and raises, even after good ones.
  Tensor mixed = Tensor::from_vector<int64_t>({2, 1}, {1, -4});
  EXPECT_THROW(run_op("ScatterND", {x, mixed, random_tensor({2, 4}, 2)}, {{"reduction", "add"}}),
               InvalidArgument);
}

TEST(OneHotTest, AxesDepthsAndIndexTypes) {
  uint64_t seed = 400;
  for (Shape s : {Shape{5}, Shape{2, 3}, Shape{2, 3, 2}, Shape{0, 3}})
    for (int axis = -s.rank() - 1; axis <= s.rank(); ++axis)
      for (DType it : {DType::kInt64, DType::kInt32, DType::kFloat32}) {
        const int64_t depth = 4;
        SCOPED_TRACE(s.to_string() + " axis " + std::to_string(axis));
        Tensor raw = random_ints(s, seed++, -6, 5);  // some outside [-depth, depth)
        std::vector<double> rv = to_doubles(raw);
        Tensor idx = raw;
        if (it == DType::kInt32)
          idx = Tensor::from_vector<int32_t>(s, std::vector<int32_t>(rv.begin(), rv.end()));
        if (it == DType::kFloat32)
          idx = Tensor::from_vector<float>(s, std::vector<float>(rv.begin(), rv.end()));
        Tensor values = Tensor::from_vector<float>({2}, {-0.5f, 3.0f});
        Tensor got = run_op("OneHot", {idx, constant(ints1({depth})), values}, {{"axis", axis}})[0];
        const int a = axis < 0 ? axis + s.rank() + 1 : axis;
        std::vector<int64_t> od = s.dims();
        od.insert(od.begin() + a, depth);
        Shape os(od);
        std::vector<double> want;
        for (int64_t o = 0; o < os.numel(); ++o) {
          std::vector<int64_t> oi = test::unravel(o, os);
          int64_t d = oi[a];
          oi.erase(oi.begin() + a);
          double v = rv[test::ravel(oi, s)];
          bool on = v >= -depth && v < depth && wrapped(v, depth) == d;
          want.push_back(on ? 3.0 : -0.5);
        }
        expect_close(got, os, want);
      }
  // Integer values and a float depth.
  Tensor got = run_op("OneHot", {ints1({1, -1}), constant(Tensor::scalar<float>(3.0f)),
                                 Tensor::from_vector<int64_t>({2}, {0, 7})})[0];
  expect_equal(got, DType::kInt64, {2, 3}, {0, 7, 0, 0, 0, 7});
}

TEST(OneHotTest, FloatIndicesTruncateAndNanIsOff) {
  Tensor idx = Tensor::from_vector<float>({3}, {NAN, 1.7f, -1.2f});
  Tensor values = Tensor::from_vector<float>({2}, {0, 1});
  Tensor got = run_op("OneHot", {idx, constant(ints1({3})), values})[0];
  expect_close(got, {3, 3}, {0, 0, 0, 0, 1, 0, 0, 0, 1});
}

TEST(OneHotTest, Bad) {
  Tensor values = Tensor::from_vector<float>({2}, {0, 1});
  EXPECT_THROW(run_op("OneHot", {ints1({1}), ints1({3}), values}), ShapeError);  // not constant
  EXPECT_THROW(run_op("OneHot", {ints1({1}), constant(ints1({0})), values}), ShapeError);
  EXPECT_THROW(run_op("OneHot", {ints1({1}), constant(ints1({3})), random_tensor({3}, 1)}),
               ShapeError);
  EXPECT_THROW(run_op("OneHot", {ints1({1}), constant(ints1({3})), values}, {{"axis", 2}}),
               ShapeError);
}

TEST(TriluTest, UpperLowerK) {
  uint64_t seed = 500;
  for (Shape s : {Shape{4, 4}, Shape{3, 5}, Shape{5, 3}, Shape{2, 3, 4}, Shape{0, 3, 3},
                  Shape{3, 0}, Shape{1, 1}})
    for (int upper : {0, 1})
      for (int64_t k : {-7, -2, -1, 0, 1, 3, 9})
        for (DType dt : {DType::kFloat32, DType::kInt64, DType::kBool, DType::kUInt8})
          for (bool with_k : {true, false}) {
            if (!with_k && k != 0) continue;
            SCOPED_TRACE(s.to_string() + " upper " + std::to_string(upper) + " k " +
                         std::to_string(k));
            Tensor x = data_of(dt, s, seed++);
            std::vector<test::OpInput> in = {x};
            if (with_k) in.push_back(constant(Tensor::scalar<int64_t>(k)));
            Tensor got = run_op("Trilu", in, {{"upper", upper}})[0];
            std::vector<double> xv = to_doubles(x), want(xv.size());
            for (int64_t i = 0; i < x.numel(); ++i) {
              std::vector<int64_t> p = test::unravel(i, s);
              int64_t r = p[s.rank() - 2], c = p[s.rank() - 1];
              bool keep = upper ? c - r >= k : c - r <= k;
              want[i] = keep ? xv[i] : 0.0;
            }
            expect_same(got, dt, s, want);
          }
  EXPECT_THROW(run_op("Trilu", {random_tensor({4}, 1)}), ShapeError);
  EXPECT_THROW(run_op("Trilu", {random_tensor({3, 3}, 1)}, {{"upper", 2}}), InvalidModel);
  EXPECT_THROW(run_op("Trilu", {random_tensor({3, 3}, 1), Tensor::scalar<int64_t>(1)}),
               ShapeError);  // k unknown at build time
}

TEST(EyeLikeTest, DtypesAndK) {
  for (Shape s : {Shape{3, 3}, Shape{2, 5}, Shape{5, 2}, Shape{0, 3}})
    for (int64_t k : {-6, -1, 0, 2, 4}) {
      SCOPED_TRACE(s.to_string() + " k " + std::to_string(k));
      std::vector<double> want(static_cast<size_t>(s.numel()), 0.0);
      for (int64_t i = 0; i < s.numel(); ++i)
        if (i % s.dims()[1] - i / s.dims()[1] == k) want[i] = 1.0;
      Tensor x = random_tensor(s, 1);
      expect_close(run_op("EyeLike", {x}, {{"k", k}})[0], s, want, 0, 0);
      // ONNX codes: 7 int64, 6 int32, 9 bool, 11 double.
      expect_equal(run_op("EyeLike", {x}, {{"k", k}, {"dtype", 7}})[0], DType::kInt64, s, want);
      expect_equal(run_op("EyeLike", {x}, {{"k", k}, {"dtype", 9}})[0], DType::kBool, s, want);
      expect_equal(run_op("EyeLike", {random_ints(s, 2, 0, 5, DType::kInt32)}, {{"k", k}})[0],
                   DType::kInt32, s, want);
      expect_close(run_op("EyeLike", {x}, {{"k", k}, {"dtype", 11}})[0], s, want, 0, 0);
    }
  EXPECT_THROW(run_op("EyeLike", {random_tensor({2, 2, 2}, 1)}), ShapeError);
  EXPECT_THROW(run_op("EyeLike", {random_tensor({2, 2}, 1)}, {{"dtype", 8}}), UnsupportedOp);
}

}  // namespace
}  // namespace lumen
