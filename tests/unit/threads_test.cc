// lumen::set_num_threads: the count every later compile and run uses, on whichever thread runs
// it; results do not depend on it; a negative count is an InvalidArgument.
#include <omp.h>

#include <thread>

#include "gtest/gtest.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

// x (m x k) times a constant (k x n), and a plain-loop reference in double.
struct Product {
  Graph graph;
  Tensor x;
  Tensor w;
  Product(int64_t m, int64_t k, int64_t n)
      : x(test::random_tensor({m, k}, 7)), w(test::random_tensor({k, n}, 8)) {
    Value* in = graph.add_input("x", {m, k});
    graph.mark_output(graph.add_op("MatMul", {in, graph.add_constant("w", w)}));
  }
  void check(const Tensor& y) const {
    const int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[1];
    ASSERT_EQ(y.shape(), (Shape{m, n}));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (int64_t p = 0; p < k; ++p)
          ref += static_cast<double>(x.data<float>()[i * k + p]) * w.data<float>()[p * n + j];
        EXPECT_NEAR(y.data<float>()[i * n + j], ref, 1e-4 * (1 + std::abs(ref))) << i << "," << j;
      }
  }
};

TEST(Threads, EveryLaterRunUsesTheCountOnAnyThread) {
  Product p(64, 96, 80);
  Runtime rt;
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  Executable* exe = p.graph.compile(&rt, CompileOptions{{"cpu"}});
  EXPECT_EQ(omp_get_max_threads(), 3);
  // A thread that never saw the setting takes it from its first run.
  int seen = 0;
  std::thread worker([&] {
    omp_set_num_threads(1);
    p.check(exe->execute({p.x})[0]);
    seen = omp_get_max_threads();
  });
  worker.join();
  EXPECT_EQ(seen, 3);

  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  p.check(exe->execute({p.x})[0]);
  EXPECT_EQ(omp_get_max_threads(), 1);

  // 0 restores OpenMP's own count, read before the first setting.
  set_num_threads(0);
  EXPECT_GE(num_threads(), 1);
  p.check(exe->execute({p.x})[0]);
  EXPECT_EQ(omp_get_max_threads(), num_threads());
}

TEST(Threads, NegativeCountIsAnError) {
  try {
    set_num_threads(-2);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("got -2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lumen
