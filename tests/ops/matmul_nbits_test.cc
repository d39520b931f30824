// Tests of MatMulNBits (com.microsoft; graph/matmul_nbits.h) and the fuse-block-dequant pass:
// random weights packed as ONNX Runtime's quantizer packs them, bits 4 and 8, several block sizes
// (K not a multiple of the block: the last block is partial), zero points none / packed uint8 /
// float, with and without bias, M in {1, 3, 8, 64} (matrix-vector and tiled paths), against a
// plain-loop dequantize-then-matmul reference in double, every element. The blocked
// DequantizeLinear -> MatMul fusion against the unfused graph; bad attributes and shapes; a CUDA
// case (skipped without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "lumen/cpu_isa.h"
#include "ops/op_test_util.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

using test::constant;
using test::expect_close;
using test::expect_error;
using test::omitted;
using test::random_tensor;
using test::run_op;
using test::to_doubles;

enum class Zp { kNone, kPacked, kFloat };

// One MatMulNBits problem: the quantized values q[n][k] and zero points z[n][b] as plain
// integers / floats, and the same packed into the op's inputs.
struct NBitsCase {
  int64_t k = 0, n = 0, block = 32;
  int bits = 4;
  Zp zp = Zp::kNone;
  bool bias = false;
  std::vector<int> q;        // [n][k]
  std::vector<float> scale;  // [n][blocks]
  std::vector<float> zero;   // [n][blocks], the value subtracted
  Tensor b, scales, zero_points, bias_t;
  int64_t blocks() const { return (k + block - 1) / block; }
};

NBitsCase make_case(int64_t k, int64_t n, int64_t block, int bits, Zp zp, bool bias,
                    uint64_t seed) {
  NBitsCase c;
  c.k = k;
  c.n = n;
  c.block = block;
  c.bits = bits;
  c.zp = zp;
  c.bias = bias;
  std::mt19937_64 rng(seed);
  const int qmax = (1 << bits) - 1;
  std::uniform_int_distribution<int> qd(0, qmax);
  std::uniform_real_distribution<float> sd(0.5f, 1.5f);
  const int64_t blocks = c.blocks();
  const float unit = bits == 4 ? 0.05f : 0.004f;
  c.q.resize(static_cast<size_t>(n * k));
  for (int& v : c.q) v = qd(rng);
  c.scale.resize(static_cast<size_t>(n * blocks));
  for (float& s : c.scale) s = unit * sd(rng);
  c.zero.assign(static_cast<size_t>(n * blocks), static_cast<float>(1 << (bits - 1)));
  std::uniform_real_distribution<float> zf(0.0f, static_cast<float>(qmax));
  if (zp == Zp::kPacked)
    for (float& z : c.zero) z = static_cast<float>(qd(rng));
  if (zp == Zp::kFloat)
    for (float& z : c.zero) z = zf(rng);
  // B [N, blocks, block * bits / 8]: values of a block in order, 4-bit ones low nibble first.
  // Padding past K stays random (the op must not read it into the result).
  const int64_t blob = block * bits / 8;
  c.b = Tensor::empty(Shape{n, blocks, blob}, DType::kUInt8);
  uint8_t* bp = c.b.data<uint8_t>();
  for (int64_t i = 0; i < c.b.numel(); ++i) bp[i] = static_cast<uint8_t>(rng());
  for (int64_t col = 0; col < n; ++col)
    for (int64_t r = 0; r < k; ++r) {
      const int v = c.q[col * k + r];
      uint8_t* blk = bp + (col * blocks + r / block) * blob;
      const int64_t in = r % block;
      if (bits == 8) {
        blk[in] = static_cast<uint8_t>(v);
      } else {
        const int shift = 4 * static_cast<int>(in & 1);
        blk[in / 2] = static_cast<uint8_t>((blk[in / 2] & ~(0xF << shift)) | (v << shift));
      }
    }
  c.scales = Tensor::from_vector<float>(Shape{n * blocks}, c.scale);
  if (zp == Zp::kFloat) c.zero_points = Tensor::from_vector<float>(Shape{n * blocks}, c.zero);
  if (zp == Zp::kPacked) {
    const int64_t per = (blocks * bits + 7) / 8;
    c.zero_points = Tensor::zeros(Shape{n, per}, DType::kUInt8);
    uint8_t* zp8 = c.zero_points.data<uint8_t>();
    for (int64_t col = 0; col < n; ++col)
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int v = static_cast<int>(c.zero[col * blocks + blk]);
        if (bits == 8)
          zp8[col * per + blk] = static_cast<uint8_t>(v);
        else
          zp8[col * per + blk / 2] |= static_cast<uint8_t>(v << (4 * (blk & 1)));
      }
  }
  if (bias) c.bias_t = random_tensor({n}, seed + 7);
  return c;
}

// Y = A x W (+ bias), W[k][n] = (q - zero) * scale, in double.
std::vector<double> reference(const NBitsCase& c, const Tensor& a) {
  const int64_t m = a.numel() / c.k, blocks = c.blocks();
  std::vector<double> w(static_cast<size_t>(c.k * c.n));
  for (int64_t col = 0; col < c.n; ++col)
    for (int64_t r = 0; r < c.k; ++r) {
      const int64_t blk = r / c.block;
      w[r * c.n + col] = (c.q[col * c.k + r] - static_cast<double>(c.zero[col * blocks + blk])) *
                         c.scale[col * blocks + blk];
    }
  const std::vector<double> x = to_doubles(a);
  std::vector<double> y(static_cast<size_t>(m * c.n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t col = 0; col < c.n; ++col) {
      double s = c.bias ? c.bias_t.data<float>()[col] : 0.0;
      for (int64_t r = 0; r < c.k; ++r) s += x[i * c.k + r] * w[r * c.n + col];
      y[i * c.n + col] = s;
    }
  return y;
}

Attributes nbits_attrs(const NBitsCase& c) {
  return {{"K", c.k}, {"N", c.n}, {"bits", int64_t{c.bits}}, {"block_size", c.block}};
}

std::vector<test::OpInput> nbits_inputs(const NBitsCase& c, const Tensor& a) {
  std::vector<test::OpInput> in = {a, constant(c.b), constant(c.scales)};
  in.push_back(c.zp == Zp::kNone ? omitted() : constant(c.zero_points));
  if (c.bias) {
    in.push_back(omitted());
    in.push_back(c.bias_t);
  }
  return in;
}

// The same inputs as graph values: A, then constants (the bias at slot 5 after an omitted g_idx).
std::vector<Value*> nbits_graph_inputs(Graph& g, const NBitsCase& c, Value* a) {
  std::vector<Value*> in = {a, g.add_constant("B", c.b), g.add_constant("S", c.scales)};
  in.push_back(c.zp == Zp::kNone ? nullptr : g.add_constant("zp", c.zero_points));
  if (c.bias) {
    in.push_back(nullptr);
    in.push_back(g.add_constant("bias", c.bias_t));
  }
  return in;
}

// Every case of MatchesReference, with the kernel variant the CPU picks (AVX-512 where it has it)
// or with the AVX2 code forced.
void check_against_reference(uint64_t seed) {
  for (int bits : {4, 8})
    for (int64_t block : {16, 32, 128})
      for (Zp zp : {Zp::kNone, Zp::kPacked, Zp::kFloat})
        for (int64_t m : {1, 3, 8, 64}) {
          // K not a multiple of the block (a partial last block, odd for block 16), N not a
          // multiple of the kernel's 16-column panels; M=64 with N=37 (one tile of the tiled
          // path, so threads split its rows) and N=100 (two tiles).
          const int64_t k = block == 16 ? 75 : 300, n = m == 64 && block != 32 ? 100 : 37;
          const bool bias = (seed & 1) != 0;
          SCOPED_TRACE("bits " + std::to_string(bits) + " block " + std::to_string(block) + " zp " +
                       std::to_string(static_cast<int>(zp)) + " M " + std::to_string(m) +
                       (bias ? " bias" : ""));
          NBitsCase c = make_case(k, n, block, bits, zp, bias, ++seed);
          const Tensor a = random_tensor({m, k}, ++seed);
          auto out = run_op("MatMulNBits", nbits_inputs(c, a), nbits_attrs(c));
          expect_close(out[0], Shape{m, n}, reference(c, a), 5e-4, 1e-4);
        }
}

TEST(MatMulNBitsTest, MatchesReference) {
  check_against_reference(100);
}

// Each lower instruction-set level this CPU can run (the baseline's plain loops, AVX2 on an
// AVX-512 machine), as a CPU without the higher ones would.
TEST(MatMulNBitsTest, MatchesReferenceAtLowerIsaLevels) {
  const CpuIsa detected = cpu_isa_detected();
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2}) {
    if (isa >= detected) continue;
    SCOPED_TRACE(std::string(cpu_isa_name(isa)));
    set_cpu_isa_limit(isa);
    check_against_reference(200 + static_cast<int>(isa));
    set_cpu_isa_limit(detected);
  }
}

// A float16 or bfloat16 model: A, scales, float zero points, bias and Y of that type (the
// reference takes the rounded inputs; Y is rounded once).
TEST(MatMulNBitsTest, SixteenBitTypes) {
  for (DType t : {DType::kFloat16, DType::kBFloat16})
    for (Zp zp : {Zp::kNone, Zp::kFloat})
      for (int64_t m : {1, 64}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " zp " + std::to_string(static_cast<int>(zp)) +
                     " M " + std::to_string(m));
        NBitsCase c = make_case(200, 37, 32, 4, zp, true, 700 + m);
        auto narrow = [t](const Tensor& f) {
          Tensor h = Tensor::empty(f.shape(), t);
          auto* p = static_cast<uint16_t*>(h.raw_data());
          for (int64_t i = 0; i < f.numel(); ++i)
            p[i] = t == DType::kFloat16 ? float_to_half(f.data<float>()[i])
                                        : float_to_bfloat16(f.data<float>()[i]);
          return h;
        };
        auto widen = [](const Tensor& h) {
          Tensor f = Tensor::empty(h.shape());
          for (int64_t i = 0; i < h.numel(); ++i)
            f.data<float>()[i] = static_cast<float>(h.item_as_double(i));
          return f;
        };
        // The reference reads the inputs as rounded to 16 bits.
        c.scales = narrow(c.scales);
        for (size_t i = 0; i < c.scale.size(); ++i)
          c.scale[i] = static_cast<float>(c.scales.item_as_double(static_cast<int64_t>(i)));
        if (zp == Zp::kFloat) {
          c.zero_points = narrow(c.zero_points);
          for (size_t i = 0; i < c.zero.size(); ++i)
            c.zero[i] = static_cast<float>(c.zero_points.item_as_double(static_cast<int64_t>(i)));
        }
        c.bias_t = widen(narrow(c.bias_t));
        const Tensor a16 = narrow(random_tensor({m, 200}, 710 + m));
        std::vector<test::OpInput> in = {a16, constant(c.b), constant(c.scales)};
        in.push_back(zp == Zp::kNone ? omitted() : constant(c.zero_points));
        in.push_back(omitted());
        in.push_back(narrow(c.bias_t));
        auto out = run_op("MatMulNBits", in, nbits_attrs(c));
        ASSERT_EQ(out[0].dtype(), t);
        const double rel = t == DType::kFloat16 ? 2e-3 : 1e-2;
        expect_close(out[0], Shape{m, 37}, reference(c, widen(a16)), 1e-2, rel);
      }
}

// A of rank 3 and 1: the output keeps A's leading dimensions; 2-D scales and zero points (the
// spec's [N, k_blocks] shapes).
TEST(MatMulNBitsTest, Ranks) {
  NBitsCase c = make_case(64, 40, 32, 4, Zp::kPacked, true, 7);
  c.scales = c.scales.reshape(Shape{40, 2});
  const Tensor a3 = random_tensor({2, 5, 64}, 8);
  auto out = run_op("MatMulNBits", nbits_inputs(c, a3), nbits_attrs(c));
  expect_close(out[0], Shape{2, 5, 40}, reference(c, a3), 5e-4, 1e-4);
  const Tensor a1 = random_tensor({64}, 9);
  out = run_op("MatMulNBits", nbits_inputs(c, a1), nbits_attrs(c));
  expect_close(out[0], Shape{40}, reference(c, a1), 5e-4, 1e-4);
}

TEST(MatMulNBitsTest, BadInputs) {
  const char* op = "MatMulNBits";
  NBitsCase c = make_case(64, 32, 32, 4, Zp::kNone, false, 11);
  const Tensor a = random_tensor({2, 64}, 12);
  auto run = [&](const std::vector<test::OpInput>& in, const Attributes& attrs) {
    run_op(op, in, attrs);
  };
  // B of the wrong shape (blob for bits 8).
  Tensor wrong_b = Tensor::zeros(Shape{32, 2, 32}, DType::kUInt8);
  expect_error<Error>([&] { run({a, constant(wrong_b), constant(c.scales)}, nbits_attrs(c)); }, op);
  Attributes bits3 = nbits_attrs(c);
  bits3["bits"] = int64_t{3};
  expect_error<Error>([&] { run(nbits_inputs(c, a), bits3); }, op);
  Attributes block7 = nbits_attrs(c);
  block7["block_size"] = int64_t{7};
  expect_error<Error>([&] { run(nbits_inputs(c, a), block7); }, op);
  // A whose last dimension is not K; scales of the wrong size; bias of the wrong size.
  expect_error<Error>(
      [&] {
        run(nbits_inputs(c, random_tensor({2, 63}, 13)), nbits_attrs(c));
      },
      op);
  Tensor short_scales = random_tensor({63}, 14);
  expect_error<Error>([&] { run({a, constant(c.b), constant(short_scales)}, nbits_attrs(c)); }, op);
  expect_error<Error>(
      [&] {
        run({a, constant(c.b), constant(c.scales), omitted(), omitted(), random_tensor({31}, 15)},
            nbits_attrs(c));
      },
      op);
  Attributes no_k = nbits_attrs(c);
  no_k.erase("K");
  expect_error<Error>([&] { run(nbits_inputs(c, a), no_k); }, op);
}

// ---------------------------------------------------------------------------------------------
// The fuse-block-dequant pass

// A [M, K] -> MatMul(A, DequantizeLinear(w_q [K, N] of `dtype`, scale, [zero point]) with
// block_size `block` along axis 0) [-> Add(., constant bias [1, N])].
void build_dq_matmul(Graph& g, int64_t m, int64_t k, int64_t n, int64_t block, DType dtype,
                     bool with_zero, uint64_t seed, bool with_bias = false) {
  const bool is4 = dtype == DType::kInt4 || dtype == DType::kUInt4;
  const bool is_signed = dtype == DType::kInt4 || dtype == DType::kInt8;
  const int64_t lo = is_signed ? (is4 ? -8 : -128) : 0,
                hi = is4 ? (is_signed ? 7 : 15) : (is_signed ? 127 : 255);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> qd(lo, hi);
  auto ints = [&](const Shape& shape) {
    Tensor t = Tensor::empty(shape, dtype);
    auto* p = static_cast<int8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<int8_t>(qd(rng));
    return t;
  };
  const int64_t blocks = (k + block - 1) / block;
  Value* a = g.add_input("a", Shape{m, k});
  Value* w = g.add_constant("w_q", ints(Shape{k, n}));
  const float unit = is4 ? 0.05f : 0.004f;
  Value* s = g.add_constant("w_s", random_tensor({blocks, n}, seed + 1, unit * 0.5f, unit * 1.5f));
  std::vector<Value*> dq_in = {w, s};
  if (with_zero) dq_in.push_back(g.add_constant("w_z", ints(Shape{blocks, n})));
  Value* dq =
      g.add_op("DequantizeLinear", dq_in, {{"axis", int64_t{0}}, {"block_size", block}}, "w_dq");
  Value* y = g.add_op("MatMul", {a, dq}, {}, "mm");
  if (with_bias) y = g.add_op("Add", {y, g.add_constant("b", random_tensor({1, n}, seed + 2))});
  g.mark_output(y);
}

std::vector<Tensor> run_graph(Graph& g, const Tensor& a) {
  Runtime rt;
  CompileOptions options;
  options.backends = {"cpu"};
  return g.compile(&rt, options)->execute({a});
}

TEST(MatMulNBitsTest, BlockDequantFusion) {
  uint64_t seed = 300;
  for (DType dtype : {DType::kInt4, DType::kUInt4, DType::kInt8, DType::kUInt8})
    for (bool with_zero : {false, true})
      for (int64_t m : {1, 3, 64}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + (with_zero ? " zero point" : "") + " M " +
                     std::to_string(m));
        const int64_t k = 200, n = 70, block = 32;
        // A bias Add (every other case) is absorbed too.
        const bool bias = (seed & 1) != 0;
        Graph plain, fused;
        build_dq_matmul(plain, m, k, n, block, dtype, with_zero, seed, bias);
        build_dq_matmul(fused, m, k, n, block, dtype, with_zero, seed, bias);
        ++seed;
        fused.optimize({"cpu"});
        const auto ops = op_histogram(fused);
        EXPECT_EQ(ops.count("MatMulNBits") ? ops.at("MatMulNBits") : 0, 1);
        EXPECT_EQ(ops.count("DequantizeLinear"), 0u);
        EXPECT_EQ(ops.count("MatMul"), 0u);
        EXPECT_EQ(ops.count("Add"), 0u);
        const Tensor a = random_tensor({m, k}, ++seed);
        const Tensor want = run_graph(plain, a)[0];
        const Tensor got = run_graph(fused, a)[0];
        expect_close(got, want.shape(), to_doubles(want), 5e-4, 1e-4);
      }
}

// An imported MatMulNBits followed by a bias Add takes the bias; an Add of a tensor of Y's shape
// that is not a row bias becomes its residual (Lumen's epilogue); an Add of a row of the graph's
// inputs (broadcast: not Y's shape) stays.
TEST(MatMulNBitsTest, BiasFusion) {
  NBitsCase c = make_case(96, 48, 32, 4, Zp::kPacked, false, 600);
  for (int variant = 0; variant < 3; ++variant) {
    Graph g;
    Value* a = g.add_input("a", Shape{3, 96});
    Value* zp = g.add_constant("zp", c.zero_points);
    Value* y =
        g.add_op("MatMulNBits", {a, g.add_constant("B", c.b), g.add_constant("S", c.scales), zp},
                 nbits_attrs(c), "nbits");
    const Tensor b = random_tensor(variant == 2 ? Shape{3, 48} : Shape{48}, 601);
    Value* bv = variant == 1 ? g.add_input("b", b.shape()) : g.add_constant("b", b);
    g.mark_output(g.add_op("Add", {bv, y}, {}, "add"));
    g.optimize({"cpu"});
    const auto ops = op_histogram(g);
    EXPECT_EQ(ops.count("Add"), variant == 1 ? 1u : 0u) << "variant " << variant;
    const Tensor x = random_tensor({3, 96}, 602);
    Runtime rt;
    CompileOptions options;
    options.backends = {"cpu"};
    std::vector<Tensor> inputs = {x};
    if (variant == 1) inputs.push_back(b);
    const Tensor got = g.compile(&rt, options)->execute(inputs)[0];
    std::vector<double> want = reference(c, x);
    for (size_t i = 0; i < want.size(); ++i) want[i] += b.data<float>()[variant == 2 ? i : i % 48];
    expect_close(got, Shape{3, 48}, want, 5e-4, 1e-4);
  }
}

// Lumen's epilogue: a MatMulNBits followed by an activation (Gelu in both forms, Relu), by a
// residual Add, or by both (the activation applies after the residual) takes them
// (graph/matmul_nbits.h). On the CPU and, where present, on CUDA; every output against the
// reference in double.
TEST(MatMulNBitsTest, EpilogueFusion) {
  Runtime rt;
  std::vector<std::vector<std::string>> lists = {{"cpu"}};
  const std::vector<std::string> have = rt.backends();
  if (std::find(have.begin(), have.end(), "cuda") != have.end()) lists.push_back({"cuda", "cpu"});
  uint64_t seed = 700;
  for (const auto& backends : lists)
    for (int variant = 0; variant < 5; ++variant)
      for (int64_t m : {1, 3, 8, 64}) {
        SCOPED_TRACE(backends[0] + " variant " + std::to_string(variant) + " M " +
                     std::to_string(m));
        const int64_t k = 200, n = 72;
        NBitsCase c = make_case(k, n, 32, 4, Zp::kNone, true, ++seed);
        Graph g;
        Value* a = g.add_input("a", Shape{m, k});
        Value* z = g.add_input("z", Shape{m, n});
        Value* y = g.add_op("MatMulNBits", nbits_graph_inputs(g, c, a), nbits_attrs(c), "nbits");
        if (variant == 0) y = g.add_op("Gelu", {y}, {}, "gelu");
        if (variant == 1) y = g.add_op("Gelu", {y}, {{"approximate", std::string("tanh")}}, "gelu");
        if (variant == 2) y = g.add_op("Relu", {y}, {}, "relu");
        if (variant >= 3) y = g.add_op("Add", {y, z}, {}, "residual");
        if (variant == 4) y = g.add_op("Relu", {y}, {}, "relu");
        g.mark_output(y);
        g.optimize(backends);
        const auto ops = op_histogram(g);
        EXPECT_EQ(ops.count("Gelu") + ops.count("Add") + ops.count("Relu"), 0u);
        CompileOptions options;
        options.backends = backends;
        const Tensor x = random_tensor({m, k}, ++seed), zt = random_tensor({m, n}, ++seed);
        Executable* exe = g.compile(&rt, options);
        EXPECT_NE(exe->summary().find("(MatMulNBits) @" + backends[0]), std::string::npos)
            << exe->summary();
        const Tensor got = exe->execute(std::vector<Tensor>{x, zt})[0].to(Device::cpu());
        std::vector<double> want = reference(c, x);
        for (size_t i = 0; i < want.size(); ++i) {
          double v = want[i];
          if (variant >= 3) v += zt.data<float>()[i];
          if (variant == 0) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
          if (variant == 1)
            v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
          if (variant == 2 || variant == 4) v = std::max(v, 0.0);
          want[i] = v;
        }
        expect_close(got, Shape{m, n}, want, 5e-4, 1e-4);
      }
}

// Blocks that MatMulNBits cannot hold (block_size 8, along N) stay a DequantizeLinear and MatMul.
TEST(MatMulNBitsTest, FusionOnlyWhereItFits) {
  for (int64_t block : {8, 48}) {
    Graph g;
    build_dq_matmul(g, 2, 200, 70, block, DType::kInt4, false, 400);
    g.optimize({"cpu"});
    EXPECT_EQ(op_histogram(g).count("MatMulNBits"), 0u) << "block " << block;
  }
}

// The same op on CUDA (run on a GPU machine; skipped here): the node must run on cuda, in float32
// and with 16-bit storage (a float16 compile: A, scales, bias and output rounded to float16).
TEST(MatMulNBitsTest, Cuda) {
  Runtime rt;
  const std::vector<std::string> have = rt.backends();
  if (std::find(have.begin(), have.end(), "cuda") == have.end()) GTEST_SKIP() << "no CUDA backend";
  uint64_t seed = 500;
  for (Precision precision : {Precision::kFloat32, Precision::kFloat16})
    // K, block and bits: K ending inside a block (4-bit blocks of 32 and 16, 8-bit of 64), K of
    // whole blocks (4-bit blocks of 128, 8-bit of 16), and K above 1024 and 2048 (two warps and
    // a block of threads per column in the decoding kernel).
    for (auto [k, block, bits] : {std::tuple<int64_t, int64_t, int>{300, 32, 4},
                                  {320, 16, 4},
                                  {300, 16, 4},
                                  {768, 128, 4},
                                  {300, 64, 8},
                                  {768, 16, 8},
                                  {1100, 16, 8},
                                  {2080, 32, 4}})
      for (Zp zp : {Zp::kNone, Zp::kPacked, Zp::kFloat})
        for (int64_t m : {1, 3, 8, 64}) {
          const bool half = precision == Precision::kFloat16;
          SCOPED_TRACE(std::string("cuda") + (half ? " float16" : "") + " bits " +
                       std::to_string(bits) + " K " + std::to_string(k) + " block " +
                       std::to_string(block) + " zp " + std::to_string(static_cast<int>(zp)) +
                       " M " + std::to_string(m));
          const int64_t n = 100;
          NBitsCase c = make_case(k, n, block, bits, zp, (seed & 1) != 0, ++seed);
          const Tensor a = random_tensor({m, k}, ++seed);
          CompileOptions options;
          options.backends = {"cuda", "cpu"};
          options.precision = precision;
          std::vector<Tensor> inputs;
          Executable* exe = test::compile_op(rt, "MatMulNBits", nbits_inputs(c, a), nbits_attrs(c),
                                             1, options, &inputs);
          EXPECT_NE(exe->summary().find("@cuda"), std::string::npos) << exe->summary();
          auto out = exe->execute(inputs);
          expect_close(out[0].to(Device::cpu()), Shape{m, n}, reference(c, a), half ? 5e-2 : 5e-4,
                       half ? 1e-2 : 1e-4);
        }
}

}  // namespace
}  // namespace lumen
