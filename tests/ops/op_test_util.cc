#include "ops/op_test_util.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>

#include "core/half.h"
#include "passes/rewrite.h"

namespace lumen::test {

namespace {

// Where run_op's nodes ran (op -> backend -> count), printed at exit when the program was given
// more than one backend: on the GPU machine it shows which ops the CUDA kernels really ran (a
// node the CUDA backend refuses runs on the CPU, and its test checks the CPU kernel instead).
class PlacementTally {
 public:
  ~PlacementTally() {
    if (counts_.empty()) return;
    std::printf("run_op placements (op: backend runs):\n");
    for (const auto& [op, per_backend] : counts_) {
      std::printf("  %s:", op.c_str());
      for (const auto& [backend, n] : per_backend) std::printf(" %s %d", backend.c_str(), n);
      std::printf("\n");
    }
  }
  // Reads the step of the node named "node" from an executable's summary ("node (Op) @cuda").
  void add(const std::string& summary) {
    const std::string key = ": node (";
    const size_t at = summary.find(key);
    if (at == std::string::npos) return;
    const size_t op_end = summary.find(") @", at);
    const size_t line_end = summary.find('\n', at);
    if (op_end == std::string::npos || op_end > line_end) return;
    const std::string op = summary.substr(at + key.size(), op_end - at - key.size());
    const std::string backend = summary.substr(op_end + 3, line_end - op_end - 3);
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_[op][backend];
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::map<std::string, int>> counts_;
};

PlacementTally& placement_tally() {
  static PlacementTally tally;
  return tally;
}

// The process's scratch folder, removed at exit.
class ScratchFolder {
 public:
  ScratchFolder()
      : path_(std::filesystem::temp_directory_path() /
              ("lumen_test_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace

std::string temp_file(const std::string& name) {
  static const ScratchFolder folder;
  return (folder.path() / name).string();
}

Tensor random_tensor(const Shape& shape, uint64_t seed, float lo, float hi) {
  Tensor t = Tensor::empty(shape, DType::kFloat32);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

Tensor near_identity(int64_t count, int64_t n, uint64_t seed, float spread) {
  Tensor t = random_tensor(Shape{count, n, n}, seed, -spread, spread);
  float* v = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if ((i / n) % n == i % n) v[i] += 1.f;
  return t;
}

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  Tensor t = random_tensor({n}, seed);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

Tensor random_ints(const Shape& shape, uint64_t seed, int64_t lo, int64_t hi, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = dist(rng);
    switch (dtype) {
      case DType::kInt64:
        t.data<int64_t>()[i] = v;
        break;
      case DType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(v);
        break;
      case DType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(v);
        break;
      case DType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
        break;
      case DType::kInt16:
        t.data<int16_t>()[i] = static_cast<int16_t>(v);
        break;
      case DType::kUInt16:
        t.data<uint16_t>()[i] = static_cast<uint16_t>(v);
        break;
      case DType::kUInt32:
        t.data<uint32_t>()[i] = static_cast<uint32_t>(v);
        break;
      case DType::kUInt64:
        t.data<uint64_t>()[i] = static_cast<uint64_t>(v);
        break;
      case DType::kBool:
        t.data<bool>()[i] = (v & 1) != 0;
        break;
      default:
        throw InvalidArgument("random_ints: not an integer dtype");
    }
  }
  return t;
}

std::vector<double> conv2d_reference(const std::vector<double>& x, const Shape& x_shape,
                                     const Tensor& w, const Tensor& b, int64_t stride,
                                     int64_t pad) {
  const int64_t n = x_shape[0], c = x_shape[1], h = x_shape[2], wd = x_shape[3];
  const int64_t o = w.shape()[0], kh = w.shape()[2], kw = w.shape()[3];
  const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (wd + 2 * pad - kw) / stride + 1;
  std::vector<double> wv = to_doubles(w), bv = to_doubles(b);
  std::vector<double> y(static_cast<size_t>(n * o * oh * ow));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) {
          double acc = bv[oc];
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t kr = 0; kr < kh; ++kr)
              for (int64_t kq = 0; kq < kw; ++kq) {
                const int64_t rr = r * stride - pad + kr, qq = q * stride - pad + kq;
                if (rr < 0 || rr >= h || qq < 0 || qq >= wd) continue;
                acc +=
                    x[((i * c + ic) * h + rr) * wd + qq] * wv[((oc * c + ic) * kh + kr) * kw + kq];
              }
          y[((i * o + oc) * oh + r) * ow + q] = acc;
        }
  return y;
}

Tensor to_16bit(Tensor& x, DType dtype) {
  Tensor h = Tensor::empty(x.shape(), dtype);
  float* f = x.data<float>();
  auto* bits = static_cast<uint16_t*>(h.raw_data());
  for (int64_t i = 0; i < x.numel(); ++i) {
    bits[i] = dtype == DType::kFloat16 ? float_to_half(f[i]) : float_to_bfloat16(f[i]);
    f[i] = dtype == DType::kFloat16 ? half_to_float(bits[i]) : bfloat16_to_float(bits[i]);
  }
  return h;
}

int count_ops(const Graph& graph, const std::string& op) {
  const std::map<std::string, int> histogram = op_histogram(graph);
  const auto it = histogram.find(op);
  return it == histogram.end() ? 0 : it->second;
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = t.item_as_double(i);
  return out;
}

void at_each_kernel_level(const std::function<void()>& body) {
  const CpuIsa in_use = cpu_isa();
  std::vector<CpuIsa> levels;
  for (CpuIsa level : {CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (in_use >= CpuIsa::kAvx2 && level <= in_use) levels.push_back(level);
  if (levels.empty()) levels.push_back(in_use);
  for (CpuIsa level : levels) {
    set_cpu_isa_limit(level);
    SCOPED_TRACE(::testing::Message() << "cpu level " << cpu_isa_name(level));
    body();
  }
  set_cpu_isa_limit(in_use);
}

Executable* compile_op(Runtime& rt, const std::string& op, const std::vector<OpInput>& inputs,
                       const Attributes& attrs, int num_outputs, const CompileOptions& options,
                       std::vector<Tensor>* runtime_inputs) {
  Graph graph;
  std::vector<Value*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const OpInput& in = inputs[i];
    std::string name = "in" + std::to_string(i);
    if (!in.tensor.defined()) {
      values.push_back(nullptr);
    } else if (in.constant) {
      values.push_back(graph.add_constant(name, in.tensor));
    } else {
      values.push_back(graph.add_input(name, in.tensor.shape(), in.tensor.dtype()));
      runtime_inputs->push_back(in.tensor);
    }
  }
  std::vector<Value*> outs = graph.add_op(op, values, num_outputs, attrs, "node");
  for (Value* v : outs) graph.mark_output(v);
  return graph.compile(&rt, options);
}

std::vector<Tensor> run_op(const std::string& op, const std::vector<OpInput>& inputs,
                           const Attributes& attrs, int num_outputs) {
  Runtime rt;
  CompileOptions options;
  options.backends = run_op_backends();
  std::vector<Tensor> runtime_inputs;
  Executable* exe = compile_op(rt, op, inputs, attrs, num_outputs, options, &runtime_inputs);
  if (options.backends.size() > 1) placement_tally().add(exe->summary());
  return exe->execute(runtime_inputs);
}

std::vector<std::string>& run_op_backends() {
  static std::vector<std::string> backends = {"cpu"};
  return backends;
}

void expect_close(const Tensor& got, const Shape& want_shape, const std::vector<double>& want,
                  double atol, double rtol) {
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.shape(), want_shape) << got.shape().to_string() << " vs " << want_shape.to_string();
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size());
  std::vector<double> g = to_doubles(got);
  int reported = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    bool ok = std::isnan(want[i]) ? std::isnan(g[i])
                                  : std::abs(g[i] - want[i]) <= atol + rtol * std::abs(want[i]);
    if (!ok && reported++ < 10)
      ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << want[i];
  }
  EXPECT_EQ(reported, 0) << "mismatching elements";
}

void expect_equal(const Tensor& got, DType want_dtype, const Shape& want_shape,
                  const std::vector<double>& want) {
  ASSERT_TRUE(got.defined());
  ASSERT_EQ(got.dtype(), want_dtype) << dtype_name(got.dtype());
  ASSERT_EQ(got.shape(), want_shape) << got.shape().to_string() << " vs " << want_shape.to_string();
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size());
  std::vector<double> g = to_doubles(got);
  int reported = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (g[i] != want[i] && reported++ < 10)
      ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << want[i];
  EXPECT_EQ(reported, 0) << "mismatching elements";
}

std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.rank());
  for (int i = shape.rank() - 1; i >= 0; --i) {
    int64_t d = shape.dims()[i];
    idx[i] = d ? flat % d : 0;
    flat = d ? flat / d : 0;
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& index, const Shape& shape) {
  int64_t flat = 0;
  for (int i = 0; i < shape.rank(); ++i) flat = flat * shape.dims()[i] + index[i];
  return flat;
}

int64_t broadcast_source(const std::vector<int64_t>& out_index, const Shape& in) {
  int offset = static_cast<int>(out_index.size()) - in.rank();
  int64_t flat = 0;
  for (int i = 0; i < in.rank(); ++i) {
    int64_t d = in.dims()[i];
    flat = flat * d + (d == 1 ? 0 : out_index[i + offset]);
  }
  return flat;
}

}  // namespace lumen::test
