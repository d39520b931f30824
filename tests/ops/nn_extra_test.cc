// Tests of InstanceNormalization, DepthToSpace, SpaceToDepth and Einsum against naive
// double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace lumen {
namespace {

using test::expect_close;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

// --- InstanceNormalization --------------------------------------------------------------------

std::vector<double> ref_instance_norm(const Tensor& x, const Tensor& scale, const Tensor& bias,
                                      double eps) {
  std::vector<double> xv = to_doubles(x), s = to_doubles(scale), b = to_doubles(bias);
  const int64_t n = x.shape()[0], c = x.shape()[1];
  const int64_t spatial = n * c == 0 ? 0 : x.numel() / (n * c);
  std::vector<double> out(xv.size());
  for (int64_t p = 0; p < n * c; ++p) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < spatial; ++i) mean += xv[p * spatial + i];
    mean /= spatial;
    for (int64_t i = 0; i < spatial; ++i) var += std::pow(xv[p * spatial + i] - mean, 2);
    var /= spatial;
    for (int64_t i = 0; i < spatial; ++i)
      out[p * spatial + i] =
          (xv[p * spatial + i] - mean) / std::sqrt(var + eps) * s[p % c] + b[p % c];
  }
  return out;
}

TEST(InstanceNorm, MatchesReference) {
  const std::vector<Shape> shapes = {
      {2, 3, 4, 5}, {1, 1, 7}, {3, 2, 1, 1}, {2, 4, 3, 2, 2}, {1, 2, 200, 200}};
  uint64_t seed = 1;
  for (const Shape& shape : shapes) {
    for (float eps : {1e-5f, 0.1f}) {
      Tensor x = random_tensor(shape, seed++, -2.0f, 3.0f);
      Tensor s = random_tensor({shape[1]}, seed++);
      Tensor b = random_tensor({shape[1]}, seed++);
      auto out = run_op("InstanceNormalization", {x, s, b}, {{"epsilon", eps}});
      expect_close(out[0], shape, ref_instance_norm(x, s, b, eps), 1e-4, 1e-4);
    }
  }
}

TEST(InstanceNorm, EmptyBatch) {
  Tensor x = Tensor::empty({0, 3, 4});
  auto out = run_op("InstanceNormalization", {x, random_tensor({3}, 1), random_tensor({3}, 2)});
  EXPECT_EQ(out[0].shape(), (Shape{0, 3, 4}));
}

TEST(InstanceNorm, BadInputs) {
  Tensor x = random_tensor({2, 3, 4}, 1);
  EXPECT_THROW(run_op("InstanceNormalization", {x, random_tensor({4}, 2), random_tensor({3}, 3)}),
               ShapeError);
  EXPECT_THROW(run_op("InstanceNormalization",
                      {random_tensor({2, 3}, 1), random_tensor({3}, 2), random_tensor({3}, 3)}),
               ShapeError);
  EXPECT_THROW(run_op("InstanceNormalization", {test::random_ints({2, 3, 4}, 1, 0, 5),
                                                random_tensor({3}, 2), random_tensor({3}, 3)}),
               ShapeError);
  EXPECT_THROW(run_op("InstanceNormalization", {x, random_tensor({3}, 2), random_tensor({3}, 3)},
                      {{"epsilon", -1.0f}}),
               InvalidModel);
}

// --- DepthToSpace / SpaceToDepth ----------------------------------------------------------------

// wide[n, c, h*b+i, w*b+j] = deep[n, ch, h, w] with ch per mode.
int64_t deep_channel(int64_t c, int64_t i, int64_t j, int64_t b, int64_t cw, bool crd) {
  return crd ? c * b * b + i * b + j : (i * b + j) * cw + c;
}

std::vector<double> ref_depth_to_space(const Tensor& x, int64_t b, bool crd) {
  std::vector<double> xv = to_doubles(x);
  const int64_t n = x.shape()[0], cd = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  const int64_t cw = cd / (b * b);
  std::vector<double> out;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t c = 0; c < cw; ++c)
      for (int64_t y = 0; y < h * b; ++y)
        for (int64_t z = 0; z < w * b; ++z) {
          int64_t ch = deep_channel(c, y % b, z % b, b, cw, crd);
          out.push_back(xv[((in * cd + ch) * h + y / b) * w + z / b]);
        }
  return out;
}

std::vector<double> ref_space_to_depth(const Tensor& x, int64_t b) {
  std::vector<double> xv = to_doubles(x);
  const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  std::vector<double> out(xv.size());
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t z = 0; z < w; ++z) {
          int64_t ch = (y % b * b + z % b) * c + ic;
          out[((in * c * b * b + ch) * (h / b) + y / b) * (w / b) + z / b] =
              xv[((in * c + ic) * h + y) * w + z];
        }
  return out;
}

TEST(DepthToSpace, MatchesReference) {
  struct Case {
    Shape shape;
    int64_t b;
  };
  const std::vector<Case> cases = {{{2, 8, 3, 4}, 2}, {{1, 9, 2, 2}, 3}, {{1, 4, 1, 1}, 2},
                                   {{2, 3, 2, 5}, 1}, {{0, 4, 2, 2}, 2}, {{2, 32, 40, 50}, 4}};
  uint64_t seed = 10;
  for (const Case& c : cases) {
    for (const char* mode : {"DCR", "CRD"}) {
      Tensor x = random_tensor(c.shape, seed++);
      auto out = run_op("DepthToSpace", {x}, {{"blocksize", c.b}, {"mode", mode}});
      Shape want{c.shape[0], c.shape[1] / (c.b * c.b), c.shape[2] * c.b, c.shape[3] * c.b};
      expect_close(out[0], want, ref_depth_to_space(x, c.b, std::string(mode) == "CRD"), 0, 0);
    }
  }
}

TEST(SpaceToDepth, MatchesReferenceAndInvertsDepthToSpace) {
  struct Case {
    Shape shape;
    int64_t b;
  };
  const std::vector<Case> cases = {{{2, 3, 4, 6}, 2},
                                   {{1, 1, 6, 3}, 3},
                                   {{2, 2, 3, 3}, 1},
                                   {{1, 5, 0, 4}, 2},
                                   {{2, 8, 64, 96}, 4}};
  uint64_t seed = 30;
  for (const Case& c : cases) {
    Tensor x = random_tensor(c.shape, seed++);
    auto out = run_op("SpaceToDepth", {x}, {{"blocksize", c.b}});
    Shape want{c.shape[0], c.shape[1] * c.b * c.b, c.shape[2] / c.b, c.shape[3] / c.b};
    expect_close(out[0], want, ref_space_to_depth(x, c.b), 0, 0);
    auto back = run_op("DepthToSpace", {out[0]}, {{"blocksize", c.b}});
    expect_close(back[0], c.shape, to_doubles(x), 0, 0);
  }
}

TEST(DepthToSpace, BadInputs) {
  Tensor x = random_tensor({1, 6, 2, 2}, 1);
  EXPECT_THROW(run_op("DepthToSpace", {x}, {{"blocksize", 2}}), ShapeError);
  EXPECT_THROW(run_op("DepthToSpace", {random_tensor({4, 2, 2}, 1)}, {{"blocksize", 2}}),
               ShapeError);
  EXPECT_THROW(run_op("DepthToSpace", {x}, {{"blocksize", 0}}), InvalidModel);
  EXPECT_THROW(run_op("DepthToSpace", {x}, {{"blocksize", 1}, {"mode", "XYZ"}}), InvalidModel);
  EXPECT_THROW(run_op("DepthToSpace", {x}), InvalidModel);
  EXPECT_THROW(run_op("SpaceToDepth", {random_tensor({1, 2, 3, 4}, 1)}, {{"blocksize", 2}}),
               ShapeError);
  EXPECT_THROW(run_op("SpaceToDepth", {random_tensor({1, 2, 4, 4}, 1)}, {{"blocksize", -2}}),
               InvalidModel);
  EXPECT_THROW(
      run_op("SpaceToDepth", {test::random_ints({1, 2, 4, 4}, 1, 0, 3)}, {{"blocksize", 2}}),
      UnsupportedOp);
}

// --- Einsum -------------------------------------------------------------------------------------

// Reference over explicit subscripts without '...': sums the product of the operands over every
// assignment of every letter. A size-1 operand dim broadcasts (stands for the ellipsis tests).
std::vector<double> ref_einsum(const std::vector<Tensor>& ops,
                               const std::vector<std::string>& terms, const std::string& out,
                               Shape* out_shape) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t a = 0; a < terms[i].size(); ++a) {
      int64_t d = ops[i].shape()[static_cast<int>(a)];
      if (!size.count(terms[i][a]) || size[terms[i][a]] == 1) size[terms[i][a]] = d;
    }
  std::vector<char> letters;
  for (auto& [l, s] : size) letters.push_back(l);
  std::vector<int64_t> out_dims;
  for (char l : out) out_dims.push_back(size[l]);
  *out_shape = Shape(out_dims);
  std::vector<double> result(static_cast<size_t>(out_shape->numel()), 0.0);
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ops) vals.push_back(to_doubles(t));
  int64_t total = 1;
  for (char l : letters) total *= size[l];
  std::map<char, int64_t> idx;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    for (int k = static_cast<int>(letters.size()) - 1; k >= 0; --k) {
      idx[letters[k]] = rest % size[letters[k]];
      rest /= size[letters[k]];
    }
    double prod = 1.0;
    for (size_t i = 0; i < ops.size(); ++i) {
      std::vector<int64_t> at;
      for (size_t a = 0; a < terms[i].size(); ++a)
        at.push_back(ops[i].shape()[static_cast<int>(a)] == 1 ? 0 : idx[terms[i][a]]);
      prod *= vals[i][test::ravel(at, ops[i].shape())];
    }
    std::vector<int64_t> o;
    for (char l : out) o.push_back(idx[l]);
    result[test::ravel(o, *out_shape)] += prod;
  }
  return result;
}

struct EinsumCase {
  std::string equation;
  std::vector<Shape> shapes;
  std::vector<std::string> ref_terms;  // the equation with '...' spelled out
  std::string ref_out;
};

TEST(Einsum, MatchesReference) {
  const std::vector<EinsumCase> cases = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}, {"ij", "jk"}, "ik"},
      {"ij,jk", {{3, 4}, {4, 5}}, {"ij", "jk"}, "ik"},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, {"bij", "bjk"}, "bik"},
      {"bhid,bhjd->bhij", {{2, 3, 5, 8}, {2, 3, 6, 8}}, {"bhid", "bhjd"}, "bhij"},
      {"bhij,bhjd->bhid", {{2, 3, 5, 6}, {2, 3, 6, 8}}, {"bhij", "bhjd"}, "bhid"},
      {"bhid,bhjd->bhij", {{2, 4, 64, 32}, {2, 4, 48, 32}}, {"bhid", "bhjd"}, "bhij"},
      {"bij,bjk->kib", {{2, 3, 4}, {2, 4, 5}}, {"bij", "bjk"}, "kib"},
      {"ibj,bkj->bik", {{3, 2, 4}, {2, 5, 4}}, {"ibj", "bkj"}, "bik"},
      {"jik,kj->i", {{3, 2, 4}, {4, 3}}, {"jik", "kj"}, "i"},
      {"i,j->ij", {{3}, {4}}, {"i", "j"}, "ij"},
      {"bji,bjk->bik", {{2, 4, 3}, {2, 4, 5}}, {"bji", "bjk"}, "bik"},
      {"ji,kj->ik", {{4, 3}, {5, 4}}, {"ji", "kj"}, "ik"},
      {"bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}, {"bn", "anm", "bm"}, "ba"},
      {"i,i", {{7}, {7}}, {"i", "i"}, ""},
      {"ij->ji", {{3, 4}}, {"ij"}, "ji"},
      {"ij->", {{3, 4}}, {"ij"}, ""},
      {"ii", {{4, 4}}, {"ii"}, ""},
      {"ii->i", {{4, 4}}, {"ii"}, "i"},
      {"iij->ji", {{3, 3, 2}}, {"iij"}, "ji"},
      {"...ii->...i", {{2, 3, 4, 4}}, {"xyii"}, "xyi"},
      {"ij,jk->k", {{3, 4}, {4, 5}}, {"ij", "jk"}, "k"},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}, {"ij", "jk", "kl"}, "il"},
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 2}}, {"xyij", "yjk"}, "xyik"},
      {"...ij,...jk", {{2, 3, 4}, {2, 4, 5}}, {"xij", "xjk"}, "xik"},
      {"b...i,b...i->b...", {{2, 3, 4, 5}, {2, 3, 4, 5}}, {"bxyi", "bxyi"}, "bxy"},
      {"Ab,bc", {{3, 4}, {4, 2}}, {"Ab", "bc"}, "Ac"},
      {"ba", {{3, 4}}, {"ba"}, "ab"},
      {" i j , j k -> i k ", {{2, 3}, {3, 2}}, {"ij", "jk"}, "ik"},
      {"ij,jk->ik", {{3, 0}, {0, 5}}, {"ij", "jk"}, "ik"},
      {"ij,jk->ik", {{0, 4}, {4, 5}}, {"ij", "jk"}, "ik"},
      {"ij,ij->ij", {{3, 4}, {3, 4}}, {"ij", "ij"}, "ij"},
      // Long summed spaces (a warp per output element on CUDA), one with a diagonal and a trace.
      {"ik,kj->ij", {{3, 300}, {300, 5}}, {"ik", "kj"}, "ij"},
      {"iaj,jb->ab", {{20, 3, 20}, {20, 2}}, {"iaj", "jb"}, "ab"},
      {"kk,ik->i", {{200, 200}, {2, 200}}, {"kk", "ik"}, "i"},
  };
  uint64_t seed = 100;
  for (const EinsumCase& c : cases) {
    SCOPED_TRACE(c.equation);
    std::vector<Tensor> ops;
    std::vector<test::OpInput> inputs;
    for (const Shape& s : c.shapes) {
      ops.push_back(random_tensor(s, seed++));
      inputs.emplace_back(ops.back());
    }
    Shape want_shape;
    std::vector<double> want = ref_einsum(ops, c.ref_terms, c.ref_out, &want_shape);
    auto out = run_op("Einsum", inputs, {{"equation", c.equation}});
    expect_close(out[0], want_shape, want, 1e-4, 1e-4);
  }
}

TEST(Einsum, ConstantOperand) {
  Tensor a = random_tensor({4, 6}, 1), b = random_tensor({5, 6}, 2);
  Shape want_shape;
  std::vector<double> want = ref_einsum({a, b}, {"ij", "kj"}, "ik", &want_shape);
  auto out = run_op("Einsum", {a, test::constant(b)}, {{"equation", "ij,kj->ik"}});
  expect_close(out[0], want_shape, want, 1e-5, 1e-4);
}

TEST(Einsum, Float64) {
  std::vector<double> av = {1, 2, 3, 4, 5, 6}, bv = {1, -1, 2, 0.5, 3, 1};
  Tensor a = Tensor::from_vector<double>({2, 3}, av), b = Tensor::from_vector<double>({3, 2}, bv);
  auto out = run_op("Einsum", {a, b}, {{"equation", "ij,jk->ik"}});
  EXPECT_EQ(out[0].dtype(), DType::kFloat64);
  expect_close(out[0], {2, 2}, {1 + 4 + 9, -1 + 1 + 3, 4 + 10 + 18, -4 + 2.5 + 6}, 1e-12, 0);
}

TEST(Einsum, BadInputs) {
  Tensor a = random_tensor({3, 4}, 1), b = random_tensor({4, 5}, 2);
  EXPECT_THROW(run_op("Einsum", {a, b}, {{"equation", "ij->ij"}}), InvalidModel);
  EXPECT_THROW(run_op("Einsum", {a, b}, {{"equation", "ij,kl,lm->i"}}), InvalidModel);
  EXPECT_THROW(run_op("Einsum", {a, b}, {{"equation", "ij,ik->jk"}}), ShapeError);
  EXPECT_THROW(run_op("Einsum", {a, b}, {{"equation", "ij,jk->iz"}}), InvalidModel);
  EXPECT_THROW(run_op("Einsum", {a, b}, {{"equation", "ij,jk->ii"}}), InvalidModel);
  EXPECT_THROW(run_op("Einsum", {a, b}, {{"equation", "i1,jk->ik"}}), InvalidModel);
  EXPECT_THROW(run_op("Einsum", {a, b}, {{"equation", "ijk,jk->ik"}}), ShapeError);
  EXPECT_THROW(run_op("Einsum", {a, b}, {{"equation", "i..j,jk->ik"}}), InvalidModel);
  EXPECT_THROW(run_op("Einsum", {a, b}), InvalidModel);
  EXPECT_THROW(run_op("Einsum", {random_tensor({2, 3}, 3), random_tensor({4, 3}, 4)},
                      {{"equation", "...j,...j->..."}}),
               ShapeError);
  Tensor d = Tensor::from_vector<double>({4, 5}, std::vector<double>(20, 1.0));
  EXPECT_THROW(run_op("Einsum", {a, d}, {{"equation", "ij,jk->ik"}}), ShapeError);
  EXPECT_THROW(run_op("Einsum", {test::random_ints({3, 4}, 1, 0, 3)}, {{"equation", "ij->j"}}),
               UnsupportedOp);
}

}  // namespace
}  // namespace lumen
