// The CUDA kernels of Resize, GridSample, ConvTranspose and Conv/FusedConv of 1-D, 3-D and
// asymmetrically padded 2-D: each node is compiled for {cuda, cpu} and must be placed on CUDA, and
// every output element must match the CPU backend's on the same random inputs, over many
// attribute combinations, in float32 and (a float16 compile, inputs rounded to float16 so that
// both backends read the same values) with float16 storage. Without a CUDA device every test
// skips with a message; run on a GPU machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/half.h"
#include "ops/backend_check_util.h"

namespace lumen::test {
namespace {

bool have_cuda() {
  Runtime rt;
  const std::vector<std::string> have = rt.backends();
  return std::find(have.begin(), have.end(), "cuda") != have.end();
}

#define SKIP_WITHOUT_CUDA()                                                                 \
  do {                                                                                      \
    if (!have_cuda())                                                                       \
      GTEST_SKIP() << "no CUDA device on this machine: these tests check the CUDA kernels " \
                      "against the CPU backend on a GPU machine";                           \
  } while (0)

Tensor floats(const Shape& shape, std::vector<float> v) {
  return Tensor::from_vector<float>(shape, v);
}
Tensor int64s(std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
}

// `t` with every value rounded to float16 (bfloat16 with `bf16`), still float32, so that a 16-bit
// compile reads what the host reads.
Tensor round_to_half(const Tensor& t, bool bf16 = false) {
  Tensor r = t.clone();
  float* p = r.data<float>();
  for (int64_t i = 0; i < r.numel(); ++i)
    p[i] = bf16 ? bfloat16_to_float(float_to_bfloat16(p[i])) : half_to_float(float_to_half(p[i]));
  return r;
}

struct Tolerance {
  double atol = 2e-5, rtol = 1e-4;
};

// Runs `op` compiled for {cuda, cpu} at `precision` (checking that the node ran on CUDA) and for
// the CPU alone, and compares every element.
void compare(const std::string& op, const std::vector<OpInput>& inputs, const Attributes& attrs,
             Precision precision = Precision::kFloat32, Tolerance tol = {}) {
  Runtime rt;
  CompileOptions gpu;
  gpu.backends = {"cuda", "cpu"};
  gpu.precision = precision;
  std::vector<Tensor> gpu_inputs;
  Executable* g = compile_op(rt, op, inputs, attrs, 1, gpu, &gpu_inputs);
  EXPECT_EQ(backend_of_step(g->summary(), "node"), "cuda") << op << ":\n" << g->summary();
  const Tensor got = g->execute(gpu_inputs)[0].to(Device::cpu());
  CompileOptions host;
  host.backends = {"cpu"};
  std::vector<Tensor> host_inputs;
  Executable* c = compile_op(rt, op, inputs, attrs, 1, host, &host_inputs);
  const Tensor want = c->execute(host_inputs)[0];
  ASSERT_EQ(got.dtype(), DType::kFloat32);
  expect_close(got, want.shape(), to_doubles(want), tol.atol, tol.rtol);
}

const Tolerance kHalf{2e-2, 1e-2};
const Tolerance kBFloat16{6e-2, 2e-2};

std::string attrs_text(const Attributes& attrs) {
  std::string s;
  for (const auto& [k, v] : attrs) s += k + "=" + v.to_string() + " ";
  return s;
}

// ---- Resize ----

const char* const kCoords[] = {"half_pixel", "pytorch_half_pixel",        "align_corners",
                               "asymmetric", "tf_half_pixel_for_nearest", "half_pixel_symmetric"};

TEST(CudaResize, NearestEveryModeAndCoordinate) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 1;
  const Tensor x = random_tensor({2, 3, 7, 9}, seed);
  for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
    for (const char* coord : kCoords)
      for (std::vector<float> s :
           {std::vector<float>{1, 1, 2, 1.5f}, {1, 1, 0.6f, 0.45f}, {1, 1, 3.f, 0.5f}}) {
        const Attributes a = {{"mode", "nearest"},
                              {"nearest_mode", nearest},
                              {"coordinate_transformation_mode", coord}};
        SCOPED_TRACE(attrs_text(a) + "scales " + std::to_string(s[2]) + "," + std::to_string(s[3]));
        compare("Resize", {x, omitted(), constant(floats({4}, s))}, a);
      }
}

TEST(CudaResize, LinearAndCubicEveryCoordinate) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = random_tensor({1, 4, 8, 11}, 2);
  for (const char* mode : {"linear", "cubic"})
    for (const char* coord : kCoords)
      for (int antialias : {0, 1})
        for (std::vector<float> s :
             {std::vector<float>{1, 1, 2.5f, 1.7f}, {1, 1, 0.5f, 0.3f}, {1, 1, 1.25f, 0.8f}}) {
          Attributes a = {
              {"mode", mode}, {"coordinate_transformation_mode", coord}, {"antialias", antialias}};
          SCOPED_TRACE(attrs_text(a) + "scales " + std::to_string(s[2]) + "," +
                       std::to_string(s[3]));
          compare("Resize", {x, omitted(), constant(floats({4}, s))}, a);
        }
}

TEST(CudaResize, CubicCoefficientAndExcludeOutside) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = random_tensor({2, 2, 6, 5}, 3);
  for (float coeff : {-0.75f, -0.5f})
    for (int exclude : {0, 1})
      for (int antialias : {0, 1})
        for (const char* coord : {"half_pixel", "align_corners", "asymmetric"}) {
          Attributes a = {{"mode", "cubic"},
                          {"cubic_coeff_a", coeff},
                          {"exclude_outside", exclude},
                          {"antialias", antialias},
                          {"coordinate_transformation_mode", coord}};
          SCOPED_TRACE(attrs_text(a));
          compare("Resize", {x, omitted(), omitted(), constant(int64s({2, 2, 13, 3}))}, a);
        }
}

// Trilinear and tricubic over 5-D, resizing every axis of a 3-D tensor, 1-D and 2-D tensors.
TEST(CudaResize, OtherRanks) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 10;
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    SCOPED_TRACE(mode);
    const Attributes a = {{"mode", mode}};
    compare("Resize",
            {random_tensor({1, 2, 4, 5, 6}, ++seed), omitted(),
             constant(floats({5}, {1, 1, 1.5f, 2.f, 0.5f}))},
            a);
    compare("Resize",
            {random_tensor({3, 5, 4}, ++seed), omitted(), constant(floats({3}, {2.f, 0.6f, 1.5f}))},
            a);
    compare("Resize", {random_tensor({10}, ++seed), omitted(), constant(floats({1}, {2.3f}))}, a);
    compare("Resize",
            {random_tensor({6, 7}, ++seed), omitted(), omitted(), constant(int64s({3, 12}))}, a);
  }
}

TEST(CudaResize, TfCropAndResize) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = random_tensor({1, 2, 9, 8}, 20);
  const Tensor roi = floats({8}, {0, 0, 0.2f, -0.3f, 1, 1, 0.9f, 1.4f});
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (float extrapolation : {0.f, -2.5f}) {
      Attributes a = {{"mode", mode},
                      {"coordinate_transformation_mode", "tf_crop_and_resize"},
                      {"extrapolation_value", extrapolation}};
      SCOPED_TRACE(attrs_text(a));
      compare("Resize", {x, constant(roi), omitted(), constant(int64s({1, 2, 7, 10}))}, a);
      compare("Resize", {x, constant(roi), constant(floats({4}, {1, 1, 0.5f, 1.5f}))}, a);
    }
  // roi over the resized axes only.
  compare("Resize",
          {x, constant(floats({4}, {0.1f, 0.1f, 0.8f, 0.7f})), omitted(), constant(int64s({5, 6}))},
          {{"mode", "linear"},
           {"coordinate_transformation_mode", "tf_crop_and_resize"},
           {"axes", {2, 3}}});
}

TEST(CudaResize, AxesAndKeepAspectRatio) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = random_tensor({2, 3, 10, 6}, 30);
  for (const char* policy : {"stretch", "not_larger", "not_smaller"})
    for (const char* mode : {"nearest", "linear"}) {
      Attributes a = {{"mode", mode}, {"keep_aspect_ratio_policy", policy}, {"axes", {2, 3}}};
      SCOPED_TRACE(attrs_text(a));
      compare("Resize", {x, omitted(), omitted(), constant(int64s({7, 9}))}, a);
    }
  compare("Resize", {x, omitted(), constant(floats({2}, {2.f, 0.5f}))},
          {{"mode", "linear"}, {"axes", {3, 1}}});
}

TEST(CudaResize, Float16) {
  SKIP_WITHOUT_CUDA();
  const Tensor x = round_to_half(random_tensor({2, 3, 9, 7}, 40));
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (int antialias : {0, 1}) {
      Attributes a = {{"mode", mode}, {"antialias", antialias}};
      SCOPED_TRACE(attrs_text(a));
      compare("Resize", {x, omitted(), omitted(), constant(int64s({2, 3, 16, 4}))}, a,
              Precision::kFloat16, kHalf);
      // Scales, which the float16 compile narrows (1.7 and 0.3 are not float16 values).
      compare("Resize", {x, omitted(), constant(floats({4}, {1, 1, 2.f, 0.5f}))}, a,
              Precision::kFloat16, kHalf);
      compare("Resize", {x, omitted(), constant(floats({4}, {1, 1, 1.7f, 0.3f}))}, a,
              Precision::kFloat16, kHalf);
      compare("Resize", {x, omitted(), omitted(), constant(int64s({2, 3, 5, 11}))}, a,
              Precision::kBFloat16, kBFloat16);
    }
}

// ---- GridSample ----

TEST(CudaGridSample, EveryModePaddingAndAlignment) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 100;
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (int align : {0, 1}) {
        Attributes a = {{"mode", mode}, {"padding_mode", padding}, {"align_corners", align}};
        SCOPED_TRACE(attrs_text(a));
        const Tensor x = random_tensor({2, 3, 7, 9}, ++seed);
        const Tensor grid = random_tensor({2, 5, 6, 2}, ++seed, -1.4f, 1.4f);
        compare("GridSample", {x, grid}, a);
      }
}

TEST(CudaGridSample, Volumetric) {
  SKIP_WITHOUT_CUDA();
  uint64_t seed = 200;
  for (const char* mode : {"linear", "nearest"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (int align : {0, 1}) {
        Attributes a = {{"mode", mode}, {"padding_mode", padding}, {"align_corners", align}};
        SCOPED_TRACE(attrs_text(a));
        const Tensor x = random_tensor({2, 2, 4, 5, 6}, ++seed);
        const Tensor grid = random_tensor({2, 3, 4, 5, 3}, ++seed, -1.3f, 1.3f);
        compare("GridSample", {x, grid}, a);
      }
}

TEST(CudaGridSample, Float16) {
  SKIP_WITHOUT_CUDA();
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    SCOPED_TRACE(mode);
    const Tensor x = round_to_half(random_tensor({1, 4, 6, 8}, 300));
    const Tensor grid = round_to_half(random_tensor({1, 5, 5, 2}, 301, -1.2f, 1.2f));
    compare("GridSample", {x, grid}, {{"mode", mode}, {"padding_mode", "border"}},
            Precision::kFloat16, kHalf);
  }
}

TEST(CudaGridSample, BadGridNamesTheNode) {
  SKIP_WITHOUT_CUDA();
  expect_error<Error>(
      [] {
        Runtime rt;
        CompileOptions gpu;
        gpu.backends = {"cuda", "cpu"};
        std::vector<Tensor> in;
        compile_op(rt, "GridSample",
                   {random_tensor({1, 2, 4, 4}, 1), random_tensor({1, 3, 3, 3}, 2)}, {}, 1, gpu,
                   &in);
      },
      "GridSample");
}

// ---- ConvTranspose ----

struct ConvCase {
  Shape x, w;
  Attributes attrs;
  bool bias = true;
};

void compare_conv(const std::string& op, const ConvCase& c, uint64_t seed,
                  Precision precision = Precision::kFloat32) {
  SCOPED_TRACE(op + " X " + c.x.to_string() + " W " + c.w.to_string() + " " + attrs_text(c.attrs));
  const bool half = precision == Precision::kFloat16 || precision == Precision::kBFloat16;
  const bool bf16 = precision == Precision::kBFloat16;
  auto prep = [half, bf16](const Tensor& t) { return half ? round_to_half(t, bf16) : t; };
  const int64_t out_channels =
      op == "ConvTranspose" ? c.w[1] * (c.attrs.count("group") ? c.attrs.at("group").as_int() : 1)
                            : c.w[0];
  std::vector<OpInput> in = {prep(random_tensor(c.x, seed)),
                             constant(prep(random_tensor(c.w, seed + 1)))};
  in.push_back(c.bias ? constant(prep(random_tensor(Shape{out_channels}, seed + 2))) : omitted());
  compare(op, in, c.attrs, precision, bf16 ? kBFloat16 : half ? kHalf : Tolerance{1e-4, 1e-4});
}

TEST(CudaConvTranspose, TwoD) {
  SKIP_WITHOUT_CUDA();
  const std::vector<ConvCase> cases = {
      {{1, 4, 5, 5}, {4, 3, 3, 3}, {}},
      {{2, 4, 5, 6}, {4, 3, 3, 3}, {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}},
      {{1, 4, 5, 5},
       {4, 3, 3, 3},
       {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}}},
      {{2, 3, 4, 4}, {3, 2, 3, 3}, {{"strides", {2, 2}}, {"output_padding", {1, 0}}}, false},
      {{1, 2, 4, 5}, {2, 3, 2, 3}, {{"strides", {3, 2}}, {"pads", {0, 1, 2, 0}}}},
      {{1, 4, 6, 6}, {4, 2, 3, 3}, {{"group", 2}, {"dilations", {2, 1}}, {"pads", {1, 0, 1, 0}}}},
      {{1, 6, 5, 4}, {6, 1, 3, 3}, {{"group", 6}, {"strides", {2, 2}}}},
      {{1, 2, 4, 4}, {2, 3, 3, 3}, {{"strides", {2, 2}}, {"output_shape", {8, 9}}}},
      {{1, 2, 4, 4}, {2, 3, 3, 3}, {{"strides", {2, 2}}, {"output_shape", {12, 11}}}},
      {{1, 2, 4, 5}, {2, 3, 4, 3}, {{"strides", {2, 2}}, {"auto_pad", "SAME_UPPER"}}},
      {{1, 2, 4, 5}, {2, 3, 4, 3}, {{"strides", {2, 3}}, {"auto_pad", "SAME_LOWER"}}},
      {{1, 2, 4, 5}, {2, 3, 2, 2}, {{"strides", {2, 2}}, {"auto_pad", "VALID"}}},
  };
  uint64_t seed = 400;
  for (const ConvCase& c : cases) compare_conv("ConvTranspose", c, seed += 3);
}

TEST(CudaConvTranspose, OneDAndThreeD) {
  SKIP_WITHOUT_CUDA();
  const std::vector<ConvCase> cases = {
      {{2, 3, 7}, {3, 4, 3}, {}},
      {{1, 4, 6}, {4, 3, 5}, {{"strides", {3}}, {"pads", {1, 2}}, {"output_padding", {2}}}},
      {{1, 4, 6}, {4, 1, 3}, {{"group", 4}, {"dilations", {2}}, {"strides", {2}}}, false},
      {{1, 2, 5}, {2, 2, 3}, {{"output_shape", {13}}, {"strides", {2}}}},
      {{1, 2, 3, 4, 3}, {2, 3, 3, 3, 2}, {}},
      {{1, 4, 3, 3, 4},
       {4, 2, 3, 3, 3},
       {{"strides", {2, 2, 1}}, {"pads", {1, 1, 0, 1, 0, 1}}, {"group", 2}}},
      {{2, 2, 3, 3, 3},
       {2, 2, 2, 2, 2},
       {{"strides", {2, 2, 2}}, {"output_padding", {1, 0, 1}}, {"dilations", {1, 2, 1}}}},
  };
  uint64_t seed = 500;
  for (const ConvCase& c : cases) compare_conv("ConvTranspose", c, seed += 3);
}

TEST(CudaConvTranspose, Float16) {
  SKIP_WITHOUT_CUDA();
  compare_conv("ConvTranspose",
               {{1, 8, 5, 5}, {8, 4, 3, 3}, {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}}, 600,
               Precision::kFloat16);
  compare_conv("ConvTranspose", {{1, 8, 6}, {8, 4, 4}, {{"strides", {2}}, {"output_padding", {1}}}},
               610, Precision::kFloat16);
}

// ---- Conv of 1-D and 3-D, asymmetric padding ----

TEST(CudaConvNd, OneDThreeDAndAsymmetricPadding) {
  SKIP_WITHOUT_CUDA();
  const std::vector<ConvCase> cases = {
      {{2, 3, 11}, {4, 3, 3}, {}},
      {{1, 4, 16}, {6, 2, 5}, {{"group", 2}, {"strides", {2}}, {"pads", {2, 2}}}},
      {{1, 4, 16}, {4, 1, 3}, {{"group", 4}, {"dilations", {3}}, {"pads", {1, 3}}}, false},
      {{1, 3, 9}, {2, 3, 4}, {{"auto_pad", "SAME_UPPER"}}},
      {{1, 2, 5, 6, 7}, {3, 2, 3, 3, 3}, {{"pads", {1, 1, 1, 1, 1, 1}}}},
      {{2, 4, 6, 5, 4},
       {4, 2, 2, 3, 2},
       {{"group", 2},
        {"strides", {2, 1, 2}},
        {"dilations", {1, 2, 1}},
        {"pads", {0, 1, 1, 1, 2, 0}}}},
      {{1, 3, 8, 9}, {5, 3, 3, 3}, {{"pads", {0, 1, 2, 1}}}},
      {{1, 4, 8, 8}, {4, 1, 4, 4}, {{"group", 4}, {"strides", {2, 2}}, {"auto_pad", "SAME_LOWER"}}},
  };
  uint64_t seed = 700;
  for (const ConvCase& c : cases) compare_conv("Conv", c, seed += 3);
}

TEST(CudaConvNd, FusedActivationAndFloat16) {
  SKIP_WITHOUT_CUDA();
  compare_conv("FusedConv", {{1, 3, 12}, {5, 3, 3}, {{"activation", "Relu"}, {"pads", {1, 1}}}},
               800);
  compare_conv(
      "FusedConv",
      {{1, 2, 4, 5, 6},
       {3, 2, 3, 3, 3},
       {{"activation", "LeakyRelu"}, {"activation_alpha", 0.1f}, {"pads", {1, 0, 1, 1, 2, 1}}}},
      810);
  compare_conv("Conv", {{1, 8, 20}, {8, 8, 3}, {{"pads", {1, 1}}}}, 820, Precision::kFloat16);
  compare_conv("Conv", {{1, 4, 5, 6, 7}, {8, 4, 3, 3, 3}, {}}, 830, Precision::kFloat16);
}

// bfloat16 storage: computed through float32 copies.
TEST(CudaConvNd, BFloat16) {
  SKIP_WITHOUT_CUDA();
  compare_conv("Conv", {{1, 4, 20}, {6, 4, 3}, {{"pads", {0, 2}}}}, 900, Precision::kBFloat16);
  compare_conv(
      "FusedConv",
      {{1, 2, 4, 5, 6}, {3, 2, 3, 3, 3}, {{"activation", "Relu"}, {"pads", {1, 1, 1, 1, 1, 1}}}},
      910, Precision::kBFloat16);
  compare_conv("ConvTranspose", {{1, 4, 5, 5}, {4, 3, 3, 3}, {{"strides", {2, 2}}}}, 920,
               Precision::kBFloat16);
  compare_conv(
      "ConvTranspose",
      {{1, 4, 6}, {4, 3, 3}, {{"strides", {2}}, {"pads", {1, 0}}, {"output_padding", {1}}}}, 930,
      Precision::kBFloat16);
}

}  // namespace
}  // namespace lumen::test
