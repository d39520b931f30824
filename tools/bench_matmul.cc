// `lumen bench matmul N`: the speed of one large float32 MatMul through each backend's kernel.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "lumen/lumen.h"
#include "tools/commands.h"

namespace lumen::cli {
namespace {

Tensor random_matrix(int64_t n, uint64_t seed) {
  Tensor t = Tensor::empty({n, n});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

int64_t parse_positive(const std::string& s, const char* what) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || v <= 0)
    throw InvalidArgument(std::string(what) +
                          " must be a positive "
                          "integer, got '" +
                          s + "'");
  return v;
}

}  // namespace

int bench_matmul(const std::vector<std::string>& args) {
  if (args.empty()) throw InvalidArgument("bench matmul: give the matrix size N");
  int64_t n = parse_positive(args[0], "N");
  int64_t runs = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--runs" && i + 1 < args.size()) {
      runs = parse_positive(args[++i], "--runs");
    } else {
      throw InvalidArgument("bench matmul: unknown argument '" + args[i] + "'");
    }
  }
  Runtime rt;
  Tensor a = random_matrix(n, 1);
  Tensor b = random_matrix(n, 2);
  double flop = 2.0 * static_cast<double>(n) * n * n;
  std::printf("matmul %lld x %lld float32 (%.1f GFLOP per run)\n", static_cast<long long>(n),
              static_cast<long long>(n), flop / 1e9);
  std::printf("%-8s %10s %10s %10s %6s\n", "backend", "median_ms", "min_ms", "GFLOP/s", "runs");
  for (const std::string& backend : rt.backends()) {
    Graph graph;
    Value* x = graph.add_input("a", {n, n});
    Value* w = graph.add_constant("b", b);
    graph.mark_output(graph.add_op("MatMul", {x, w}));
    Executable* exe = graph.compile(&rt, CompileOptions{{backend}});
    exe->execute({a});  // warm-up: first-touch pages, thread start-up
    std::vector<double> ms;
    auto start = std::chrono::steady_clock::now();
    for (int64_t r = 0;; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      exe->execute({a});
      auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      double elapsed = std::chrono::duration<double>(t1 - start).count();
      if (runs > 0 ? r + 1 >= runs : (r + 1 >= 5 && elapsed > 2.0)) break;
    }
    std::sort(ms.begin(), ms.end());
    double median = ms[ms.size() / 2];
    std::printf("%-8s %10.3f %10.3f %10.1f %6zu\n", backend.c_str(), median, ms.front(),
                flop / (median * 1e-3) / 1e9, ms.size());
  }
  return 0;
}

}  // namespace lumen::cli
