// The router: placement against brute force on random graphs, the cost model's interpolation, the
// tune cache's round trip and invalidation, and route() with a simulated device whose costs come
// from a cache file, so all of it runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "backends/backend.h"
#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"
#include "router/placement.h"
#include "router/router.h"
#include "router/schedule.h"
#include "router/tune_cache.h"

namespace lumen {
namespace {

using router::PlacementProblem;

// Random kernel costs on `num_devices` devices (some unsupported, never all), random value sizes
// and random links; the device 0 host is cheap for small work, others for large.
struct ProblemMaker {
  std::mt19937 rng;
  int num_devices;
  explicit ProblemMaker(uint32_t seed, int devices = 2) : rng(seed), num_devices(devices) {}

  double uniform(double lo, double hi) { return std::uniform_real_distribution<>(lo, hi)(rng); }

  PlacementProblem empty() {
    PlacementProblem p;
    p.num_devices = num_devices;
    p.latency_us.assign(num_devices, std::vector<double>(num_devices, 0));
    p.us_per_byte = p.latency_us;
    for (int a = 0; a < num_devices; ++a)
      for (int b = 0; b < num_devices; ++b)
        if (a != b) {
          p.latency_us[a][b] = uniform(2, 20);
          p.us_per_byte[a][b] = uniform(1e-5, 1e-4);
        }
    p.values.push_back({uniform(1e3, 1e6), -1, false});  // the graph input
    return p;
  }
  // A node reading `inputs`, with one output value; returns that value.
  int add_node(PlacementProblem& p, const std::vector<int>& inputs) {
    PlacementProblem::Node n;
    n.inputs = inputs;
    double work = std::exp(uniform(0, 6));
    for (int d = 0; d < num_devices; ++d)
      n.cost_us.push_back(d == 0 ? work * uniform(0.5, 2) : 5 + work * uniform(0.02, 0.5));
    if (uniform(0, 1) < 0.15) n.cost_us[1 + rng() % (num_devices - 1)] = router::kUnsupported;
    p.nodes.push_back(n);
    p.values.push_back({uniform(1e2, 1e6), static_cast<int>(p.nodes.size()) - 1, false});
    return static_cast<int>(p.values.size()) - 1;
  }
  void mark_outputs(PlacementProblem& p, int last) {
    p.values[last].output = true;
    for (size_t v = 1; v < p.values.size(); ++v)
      if (uniform(0, 1) < 0.1) p.values[v].output = true;
  }

  PlacementProblem chain(int n) {
    PlacementProblem p = empty();
    int v = 0;
    for (int i = 0; i < n; ++i) v = add_node(p, {v});
    mark_outputs(p, v);
    return p;
  }
  // A series-parallel graph of about n nodes after `entry`; returns its exit value.
  int series_parallel(PlacementProblem& p, int entry, int n) {
    if (n <= 1) return add_node(p, {entry});
    if (n >= 4 && uniform(0, 1) < 0.5) {
      int fork = add_node(p, {entry});
      int left = (n - 2) / 2, right = n - 2 - left;
      int a = series_parallel(p, fork, std::max(left, 1));
      int b = series_parallel(p, fork, std::max(right, 1));
      return add_node(p, {a, b});
    }
    int first = 1 + static_cast<int>(rng() % (n - 1));
    return series_parallel(p, series_parallel(p, entry, first), n - first);
  }
  PlacementProblem sp(int n) {
    PlacementProblem p = empty();
    int exit = series_parallel(p, 0, n);
    mark_outputs(p, exit);
    return p;
  }
  // Each node reads one to three earlier values (or the input).
  PlacementProblem dag(int n) {
    PlacementProblem p = empty();
    int v = 0;
    for (int i = 0; i < n; ++i) {
      std::vector<int> in;
      int k = 1 + static_cast<int>(rng() % 3);
      for (int j = 0; j < k; ++j) in.push_back(static_cast<int>(rng() % p.values.size()));
      v = add_node(p, in);
    }
    mark_outputs(p, v);
    return p;
  }
};

TEST(Placement, ExactEqualsBruteForceOnChains) {
  for (uint32_t seed = 0; seed < 150; ++seed) {
    ProblemMaker make(seed, seed % 3 == 0 ? 3 : 2);
    PlacementProblem p = make.chain(1 + seed % 12);
    router::Placement brute = router::place_brute_force(p);
    router::Placement got = router::place(p);
    EXPECT_EQ(got.method, "exact");
    EXPECT_NEAR(got.cost_us, brute.cost_us, 1e-9 * brute.cost_us) << "seed " << seed;
    EXPECT_NEAR(router::evaluate(p, got.device), got.cost_us, 1e-9 * brute.cost_us);
  }
}

TEST(Placement, ExactEqualsBruteForceOnSeriesParallelGraphs) {
  for (uint32_t seed = 0; seed < 150; ++seed) {
    ProblemMaker make(1000 + seed);
    PlacementProblem p = make.sp(2 + seed % 10);
    if (p.nodes.size() > 12) continue;
    router::Placement brute = router::place_brute_force(p);
    router::Placement got = router::place(p);
    EXPECT_EQ(got.method, "exact");
    EXPECT_NEAR(got.cost_us, brute.cost_us, 1e-9 * brute.cost_us) << "seed " << seed;
    EXPECT_NEAR(router::evaluate(p, got.device), got.cost_us, 1e-9 * brute.cost_us);
  }
}

TEST(Placement, HeuristicWithinFivePercentOnGeneralDags) {
  double worst = 1;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    ProblemMaker make(5000 + seed);
    PlacementProblem p = make.dag(3 + seed % 10);
    router::Placement brute = router::place_brute_force(p);
    router::Placement heuristic = router::place_heuristic(p);
    EXPECT_LE(heuristic.cost_us, 1.05 * brute.cost_us) << "seed " << seed;
    EXPECT_NEAR(router::evaluate(p, heuristic.device), heuristic.cost_us, 1e-9 * brute.cost_us);
    worst = std::max(worst, heuristic.cost_us / brute.cost_us);
    // The exact DP is exact on any graph while its state stays small.
    router::Placement exact = router::place(p);
    EXPECT_NEAR(exact.cost_us, brute.cost_us, 1e-9 * brute.cost_us) << "seed " << seed;
  }
  std::printf("heuristic / optimum, worst of 200 DAGs: %.4f\n", worst);
}

TEST(Placement, FallsBackToTheHeuristicWhenTheStateGrows) {
  ProblemMaker make(7);
  PlacementProblem p = make.dag(12);
  EXPECT_FALSE(router::place_exact(p, 1).has_value());
  router::Placement got = router::place(p, 1);
  EXPECT_EQ(got.method, "heuristic");
  EXPECT_LE(got.cost_us, 1.05 * router::place_brute_force(p).cost_us);
}

// Model-sized graphs: a residual chain of 1000 nodes (exact) and a 300-node random DAG (too wide
// for the exact state: the heuristic). Either beats or ties every single-device plan.
TEST(Placement, PlacesModelSizedGraphs) {
  ProblemMaker make(11);
  PlacementProblem residual = make.empty();
  int v = 0;
  for (int i = 0; i < 500; ++i) {
    int branch = make.add_node(residual, {v});
    v = make.add_node(residual, {v, branch});
  }
  make.mark_outputs(residual, v);
  PlacementProblem wide = make.dag(300);
  for (const PlacementProblem* p : {&residual, &wide}) {
    router::Placement got = router::place(*p);
    EXPECT_EQ(got.method, p == &residual ? "exact" : "heuristic");
    EXPECT_NEAR(router::evaluate(*p, got.device), got.cost_us, 1e-9 * got.cost_us);
    for (int d = 0; d < p->num_devices; ++d) {
      std::vector<int> all;
      for (const auto& node : p->nodes) all.push_back(std::isfinite(node.cost_us[d]) ? d : 0);
      EXPECT_LE(got.cost_us, router::evaluate(*p, all) * (1 + 1e-12));
    }
  }
}

TEST(Placement, ACopyIsPaidOncePerDeviceAndOutputsReturnToTheHost) {
  PlacementProblem p;
  p.num_devices = 2;
  p.latency_us = {{0, 10}, {20, 0}};
  p.us_per_byte = {{0, 0.001}, {0.002, 0}};
  p.values = {{1000, -1, false}, {500, 0, true}};
  p.nodes = {{{1, 1}, {0}}, {{1, 1}, {1}}, {{1, 1}, {1}}};  // node 0 makes value 1; 1, 2 read it
  // Node 0 on the device: the input goes up once (10 + 1), value 1 returns as an output (20 + 1).
  EXPECT_DOUBLE_EQ(router::evaluate(p, {1, 1, 1}), 3 + 11 + 21);
  // Both readers on the host share one copy of value 1 down (21), besides the output's own.
  EXPECT_DOUBLE_EQ(router::evaluate(p, {1, 0, 0}), 3 + 11 + 21 + 21);
  EXPECT_DOUBLE_EQ(router::evaluate(p, {0, 0, 0}), 3);
}

// A random placement of `p` on devices that can run each node.
std::vector<int> random_placement(const PlacementProblem& p, std::mt19937& rng) {
  std::vector<int> device;
  for (const auto& node : p.nodes) {
    int d = static_cast<int>(rng() % p.num_devices);
    while (!std::isfinite(node.cost_us[d])) d = (d + 1) % p.num_devices;
    device.push_back(d);
  }
  return device;
}

// Whether `order` names every node once, each after the producers of its inputs.
bool is_topological(const PlacementProblem& p, const std::vector<int>& order) {
  std::vector<int> position(p.nodes.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) position[order[k]] = static_cast<int>(k);
  if (order.size() != p.nodes.size()) return false;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (position[i] < 0) return false;
    for (int v : p.nodes[i].inputs)
      if (p.values[v].producer >= 0 && position[p.values[v].producer] >= position[i]) return false;
  }
  return true;
}

// With the host and one device (with two, one device's output may come back while the other
// computes): the sum, plus a launch wherever the device waits for the host to launch its work.
TEST(Schedule, SimulationOfChainsIsTheSumPlusTheLaunchesTheDeviceWaitsFor) {
  for (uint32_t seed = 0; seed < 50; ++seed) {
    ProblemMaker maker(seed, 2);
    PlacementProblem p = maker.chain(2 + static_cast<int>(seed % 11));
    p.launch_us.assign(p.num_devices, 5);  // no more than any device kernel's cost
    p.launch_us[0] = 0;
    std::vector<int> device = random_placement(p, maker.rng);
    std::vector<int> order = router::run_order(p, device);
    ASSERT_TRUE(is_topological(p, order)) << "seed " << seed;
    double waits = 0;
    for (size_t i = 0; i < device.size(); ++i)
      if (device[i] != 0 && (i == 0 || device[i - 1] == 0)) waits += 5;
    EXPECT_NEAR(router::simulate(p, device, order), router::evaluate(p, device) + waits, 1e-6)
        << "seed " << seed;
  }
}

TEST(Schedule, SimulationNeverExceedsTheSumAndLaunchesAndOrdersTopologically) {
  for (uint32_t seed = 0; seed < 200; ++seed) {
    ProblemMaker maker(1000 + seed, 2 + seed % 2);
    const int n = 2 + static_cast<int>(seed % 14);
    PlacementProblem p = seed % 2 ? maker.dag(n) : maker.sp(n);
    p.launch_us.assign(p.num_devices, 5);
    p.launch_us[0] = 0;
    std::vector<int> device = random_placement(p, maker.rng);
    std::vector<int> order = router::run_order(p, device);
    ASSERT_TRUE(is_topological(p, order)) << "seed " << seed;
    double launches = 0;
    for (int d : device) launches += d != 0 ? 5 : 0;
    EXPECT_LE(router::simulate(p, device, order), router::evaluate(p, device) + launches + 1e-6)
        << "seed " << seed;
    // No host node is taken while a device node is ready to run.
    std::vector<bool> taken(p.nodes.size(), false);
    for (int i : order) {
      if (device[i] == 0)
        for (size_t j = 0; j < p.nodes.size(); ++j) {
          if (taken[j] || device[j] == 0) continue;
          bool ready = true;
          for (int v : p.nodes[j].inputs)
            ready = ready && (p.values[v].producer < 0 || taken[p.values[v].producer]);
          EXPECT_FALSE(ready) << "seed " << seed << ": host node " << i << " before device node "
                              << j;
        }
      taken[i] = true;
    }
  }
}

// A host and one device, copies between them 10 us + 0.01 us per byte, device launches 4 us; the
// caller adds the values and nodes.
PlacementProblem host_and_device() {
  PlacementProblem p;
  p.num_devices = 2;
  p.latency_us = {{0, 10}, {10, 0}};
  p.us_per_byte = {{0, 0.01}, {0.01, 0}};
  p.launch_us = {0, 4};
  return p;
}

// x -> slice (host) -> deep (device) -+-> add (host): the host enqueues the device's part first,
// x -> wide (host) -------------------+   then runs its own while the device computes.
TEST(Schedule, DeviceWorkIsEnqueuedBeforeIndependentHostWorkAndOverlapsIt) {
  PlacementProblem p = host_and_device();
  // Values: 0 x (input), 1 wide's output, 2 slice's, 3 deep's, 4 add's (the output).
  p.values = {{1000, -1, false}, {4, 0, false}, {100, 1, false}, {4, 2, false}, {4, 3, true}};
  p.nodes = {{{300, router::kUnsupported}, {0}},    // 0 wide: host only
             {{1, router::kUnsupported}, {0}},      // 1 slice
             {{5000, 200}, {2}},                    // 2 deep
             {{1, router::kUnsupported}, {1, 3}}};  // 3 add
  const std::vector<int> device = {0, 0, 1, 0};
  std::vector<int> order = router::run_order(p, device);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 0, 3}));
  // Serially: 300 + 1 + 200 + 1 kernels, slice's output up (10 + 1), deep's down (10 + 0.04).
  const double serial = 502 + 11 + 10.04;
  EXPECT_NEAR(router::evaluate(p, device), serial, 1e-9);
  // Overlapped: slice 1, copy up to 12; the host launches deep (4), which runs on the device
  // 16..216 while the host runs wide 16..316; deep's output comes down at 316..326.04; add 1.
  EXPECT_NEAR(router::simulate(p, device, order), 327.04, 1e-9);
  // In the problem's order the host runs wide first and nothing overlaps; the device waits for
  // deep's launch.
  EXPECT_NEAR(router::simulate(p, device, {0, 1, 2, 3}), serial + 4, 1e-9);
  // Every node on the host: the problem's order.
  EXPECT_EQ(router::run_order(p, {0, 0, 0, 0}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_THROW(router::simulate(p, device, {2, 1, 0, 3}), InvalidArgument);  // deep before slice
  EXPECT_THROW(router::simulate(p, device, {1, 2, 0}), InvalidArgument);
  EXPECT_THROW(router::run_order(p, {0, 1}), InvalidArgument);
}

// x -> d1 (device) -> d2 (device, long) --------------+-> d3 (device): the output
//          \-> h (host) ----------------------------/
// d1's output comes to the host once d1 is done, while d2 runs; h's goes up without the host
// waiting for d2. Waiting for each device's queued work at every copy would take 1211.04 us.
TEST(Schedule, CopiesWaitOnlyForTheWorkTheyNeed) {
  PlacementProblem p = host_and_device();
  // Values: 0 x (input), 1 d1's output, 2 d2's, 3 h's, 4 d3's (the output).
  p.values = {{100, -1, false}, {100, 0, false}, {4, 1, false}, {100, 2, false}, {4, 3, true}};
  const double kNo = router::kUnsupported;
  p.nodes = {{{kNo, 100}, {0}},     // 0 d1
             {{kNo, 1000}, {1}},    // 1 d2
             {{50, kNo}, {1}},      // 2 h
             {{kNo, 10}, {2, 3}}};  // 3 d3
  const std::vector<int> device = {1, 1, 0, 1};
  const std::vector<int> order = router::run_order(p, device);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  // x up 0..11 (a graph input: a synchronous copy); d1 launched by 15, runs 15..115; d2 launched
  // by 19, runs 115..1115; d1's output down at 115..126 (host); h 126..176; its output up
  // 176..187 on the host; d3 launched by 191, runs 1115..1125; the output down 1125..1135.04.
  EXPECT_NEAR(router::simulate(p, device, order), 1135.04, 1e-9);
  // Serially: kernels 1160, copies 11 (x) + 11 (d1's) + 11 (h's) + 10.04 (the output).
  EXPECT_NEAR(router::evaluate(p, device), 1203.04, 1e-9);
}

TEST(Placement, RejectsMalformedProblems) {
  PlacementProblem p;
  p.num_devices = 2;
  p.latency_us = {{0, 1}, {1, 0}};
  p.us_per_byte = p.latency_us;
  p.values = {{10, -1, false}};
  p.nodes = {{{1}, {0}}};  // one cost for two devices
  EXPECT_THROW(router::place(p), InvalidArgument);
  p.nodes = {{{router::kUnsupported, router::kUnsupported}, {0}}};
  EXPECT_THROW(router::place(p), InvalidArgument);
  p.nodes = {{{1, 1}, {3}}};  // no such value
  EXPECT_THROW(router::place(p), InvalidArgument);
}

TEST(CostModel, InterpolatesByWorkBetweenMeasurements) {
  router::CostModel model;
  model.add_kernel("cuda", "a", {"MatMul", 1e6, 0, 10});
  model.add_kernel("cuda", "b", {"MatMul", 3e6, 0, 30});
  router::NodeSignature mid{"MatMul", "c", 2e6, 0};
  EXPECT_DOUBLE_EQ(model.kernel("cuda", mid).us, 20);
  router::NodeSignature big{"MatMul", "d", 6e6, 0};
  EXPECT_DOUBLE_EQ(model.kernel("cuda", big).us, 60);
  router::NodeSignature small{"MatMul", "e", 1e3, 0};
  EXPECT_DOUBLE_EQ(model.kernel("cuda", small).us, 10);
  EXPECT_EQ(model.kernel("cuda", {"MatMul", "a", 1e6, 0}).source, "measured");
  // Another op of the same kind of work: the backend's median rate plus its fastest kernel.
  router::NodeSignature conv{"Conv", "f", 1e6, 0};
  EXPECT_GT(model.kernel("cuda", conv).us, 10);
  EXPECT_GT(model.kernel("cpu", conv).us, 0);        // nothing measured: the default
  EXPECT_EQ(model.kernel("cuda", mid).graph_us, 0);  // no sample has an in-graph time
  // In-graph times interpolate the same way, from the samples that have one.
  model.add_kernel("cuda", "r1", {"Relu", 0, 1e6, 10, 4});
  model.add_kernel("cuda", "r2", {"Relu", 0, 3e6, 30, 12});
  router::NodeSignature relu{"Relu", "r3", 0, 2e6};
  EXPECT_DOUBLE_EQ(model.kernel("cuda", relu).us, 20);
  EXPECT_DOUBLE_EQ(model.kernel("cuda", relu).graph_us, 8);
}

TEST(TuneCache, RoundTripsAndIsInvalidatedByVersionOrDevice) {
  router::CostModel model;
  model.add_kernel("cpu", "Conv:float32[1,3,8,8]:0123", {"Conv", 1234.5, 678, 9.25});
  model.add_kernel("cuda", "Relu:float32[4]:abcd", {"Relu", 0, 32, 4.5, 1.25});
  router::Link down{9, 2e-5};
  down.points = {{4096, 9.5}, {16777216, 1300.25}};
  model.set_link("cuda", {8, 1e-5}, down);
  model.set_launch("cuda", {4, 0.75});
  const std::string file = test::temp_file("tune.tsv");
  router::CacheIdentity id{"0.1.0", "cpu=Test CPU (2 threads); cuda=Test GPU"};
  router::save_cache(file, id, model);

  router::CostModel back;
  ASSERT_TRUE(router::load_cache(file, id, &back));
  const router::KernelSample* s = back.measured("cpu", "Conv:float32[1,3,8,8]:0123");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->op, "Conv");
  EXPECT_DOUBLE_EQ(s->flops, 1234.5);
  EXPECT_DOUBLE_EQ(s->bytes, 678);
  EXPECT_DOUBLE_EQ(s->us, 9.25);
  EXPECT_DOUBLE_EQ(back.measured("cuda", "Relu:float32[4]:abcd")->us, 4.5);
  EXPECT_DOUBLE_EQ(back.measured("cuda", "Relu:float32[4]:abcd")->graph_us, 1.25);
  EXPECT_DOUBLE_EQ(back.to_device("cuda").latency_us, 8);
  EXPECT_DOUBLE_EQ(back.to_host("cuda").us_per_byte, 2e-5);
  EXPECT_TRUE(back.to_device("cuda").points.empty());
  ASSERT_EQ(back.to_host("cuda").points.size(), 2u);
  EXPECT_DOUBLE_EQ(back.to_host("cuda").points[1].first, 16777216);
  EXPECT_DOUBLE_EQ(back.to_host("cuda").points[1].second, 1300.25);
  EXPECT_DOUBLE_EQ(back.launch("cuda").graph_us, 0.75);

  router::CostModel stale;
  EXPECT_FALSE(router::load_cache(file, {"0.2.0", id.devices}, &stale));
  EXPECT_FALSE(
      router::load_cache(file, {id.version, "cpu=Test CPU (2 threads); cuda=Other"}, &stale));
  EXPECT_TRUE(stale.samples().empty());
  EXPECT_FALSE(router::load_cache(test::temp_file("missing.tsv"), id, &stale));

  std::ofstream(file, std::ios::app) << "kernel\tcpu\tRelu\tx\t1\t2\t0\tkey\n";
  EXPECT_THROW(router::load_cache(file, id, &stale), IoError);
  std::ofstream(file, std::ios::app) << "bogus line\n";
  EXPECT_THROW(router::load_cache(file, id, &stale), IoError);

  // Link points out of order, or not BYTES:US, name the file and line.
  for (const char* bad : {"link_points\tcuda\tup\t4096:1,1024:2\n", "link_points\tcuda\tup\t4096\n",
                          "link_points\tcuda\tsideways\t4096:1\n"}) {
    const std::string other = test::temp_file("bad_points.tsv");
    router::save_cache(other, id, model);
    std::ofstream(other, std::ios::app) << bad;
    router::CostModel fresh;
    EXPECT_THROW(router::load_cache(other, id, &fresh), IoError) << bad;
  }
}

// A device that runs nothing, whose costs come from the cache file: route() on it tests placement
// end to end without a GPU.
class SimulatedBackend final : public Backend {
 public:
  std::string name() const override { return "sim"; }
  Device device() const override { return Device::cuda(0); }
  std::string device_name() const override { return "Simulated GPU"; }
  bool supports(const Graph&, const Node& node, std::string* reason) const override {
    bool ok = node.op != OpKind::kSoftmax;
    if (!ok && reason) *reason = "no Softmax";
    return ok;
  }
  std::unique_ptr<Kernel> make_kernel(const Graph&, const Node& node, Precision) const override {
    throw UnsupportedOp("sim: runs nothing");
  }
  Allocator& allocator() const override { return cpu_allocator(); }
  Stream& default_stream() override { return stream_; }
  size_t cache_bytes() const override { return cache_bytes_; }
  size_t cache_bytes_ = 0;

 private:
  CpuStream stream_;
};

// x -> MatMul(big weight) -> Relu -> MatMul -> Softmax: output.
Graph small_mlp(int64_t batch, int64_t width) {
  Graph g;
  Value* x = g.add_input("x", {batch, width});
  Value* w1 = g.add_constant("w1", test::random_tensor({width, width}, 1));
  Value* w2 = g.add_constant("w2", test::random_tensor({width, 10}, 2));
  Value* h = g.add_op("MatMul", {x, w1}, {}, "mm1");
  Value* r = g.add_op("Relu", {h}, {}, "relu");
  Value* y = g.add_op("MatMul", {r, w2}, {}, "mm2");
  g.mark_output(g.add_op("Softmax", {y}, {{"axis", 1}}, "softmax"));
  return g;
}

// Costs of small_mlp on the host and the simulated device: the big MatMul (mm1) takes 2 ms on the
// host and 20 us on the device, every other node 20 us on both; links 10 us + 10 ns per byte, a
// launch 3 us (0.5 inside a graph).
router::CostModel simulated_costs(const Graph& g) {
  router::CostModel model;
  model.set_link("sim", {10, 1e-5}, {10, 1e-5});
  model.set_launch("sim", {3, 0.5});
  for (int n = 0; n < g.num_nodes(); ++n) {
    router::NodeSignature sig = router::signature_of(g, g.node(n));
    bool big = g.node(n).name == "mm1";
    model.add_kernel("cpu", sig.key, {sig.op, sig.flops, sig.bytes, big ? 2000.0 : 20.0});
    model.add_kernel("sim", sig.key, {sig.op, sig.flops, sig.bytes, 20.0});
  }
  return model;
}

TEST(Router, PlacesBySimulatedCostsAndExplains) {
  Graph g = small_mlp(64, 256);
  SimulatedBackend sim;
  Backend* cpu = find_backend("cpu");
  std::vector<Backend*> candidates = {&sim, cpu};  // the host goes first whatever the order
  const std::string file = test::temp_file("sim.tsv");
  router::CacheIdentity id{version(), router::device_identity({cpu, &sim})};
  // The big MatMul is 100x faster on the device; the rest costs the same on both.
  router::save_cache(file, id, simulated_costs(g));
  RouterOptions options;
  options.cache_file = file;
  options.measure = false;
  router::RoutePlan plan = router::route(g, candidates, options);
  ASSERT_EQ(plan.candidates[0], cpu);
  EXPECT_TRUE(plan.cache_loaded);
  ASSERT_EQ(plan.decisions.size(), 4u);
  std::map<std::string, std::string> where;
  for (const auto& d : plan.decisions) {
    where[g.node(d.node).name] = d.backend;
    EXPECT_FALSE(d.reason.empty());
  }
  EXPECT_EQ(where["mm1"], "sim");
  EXPECT_EQ(where["softmax"], "cpu");  // only the host runs it
  EXPECT_FALSE(plan.graph_replay);
  // The plan's prediction is the brute-force optimum over the same costs: 4 nodes, 2 devices.
  double best = 1e30;
  for (int mask = 0; mask < 16; ++mask) {
    if (mask & 8) continue;  // softmax: host only
    double t = 0;
    const double bytes[] = {64 * 256 * 4.0, 64 * 256 * 4.0, 64 * 256 * 4.0, 64 * 10 * 4.0,
                            64 * 10 * 4.0};  // x, h, r, y, out
    int dev[4] = {mask & 1, mask >> 1 & 1, mask >> 2 & 1, 0};
    const double cpu_us[] = {2000, 20, 20, 20};
    for (int i = 0; i < 4; ++i) t += dev[i] ? 20 : cpu_us[i];
    int prev = 0;  // x on the host
    for (int i = 0; i < 4; ++i) {
      if (dev[i] != prev) t += 10 + bytes[i] * 1e-5;
      prev = dev[i];
    }
    best = std::min(best, t);
  }
  // A chain: nothing runs beside anything; the device waits for its first kernel's launch (3 us).
  EXPECT_NEAR(plan.kernel_us + plan.transfer_us, best, 1e-6);
  EXPECT_NEAR(plan.schedule_us, 3, 1e-6);
  EXPECT_NEAR(plan.predicted_us, best + 3, 1e-6);
}

// A device whose cache the weights outgrow reads them from memory on every run: its kernels are
// looked up as measured cold (cold_key), so the same samples place the big MatMul differently.
TEST(Router, ConstantsLargerThanTheDeviceCacheAreCostedCold) {
  Graph g = small_mlp(64, 256);  // w1 256 KiB, w2 10 KiB
  std::vector<int> nodes;
  int mm2 = -1;
  for (int n = 0; n < g.num_nodes(); ++n) {
    nodes.push_back(n);
    if (g.node(n).name == "mm2") mm2 = n;
  }
  SimulatedBackend sim;
  Backend* cpu = find_backend("cpu");
  EXPECT_FALSE(router::constants_stream(g, nodes, sim));  // no cache size known
  EXPECT_FALSE(router::constants_stream(g, nodes, *cpu));
  sim.cache_bytes_ = 1 << 20;
  EXPECT_FALSE(router::constants_stream(g, nodes, sim));
  sim.cache_bytes_ = 200 * 1024;
  EXPECT_TRUE(router::constants_stream(g, nodes, sim));
  EXPECT_FALSE(router::constants_stream(g, {mm2}, sim));  // mm2 alone reads 10 KiB

  const std::string file = test::temp_file("cold.tsv");
  router::CacheIdentity id{version(), router::device_identity({cpu, &sim})};
  // Warm as simulated_costs; cold, the big MatMul takes 5 ms on the device.
  router::CostModel model = simulated_costs(g);
  for (int n = 0; n < g.num_nodes(); ++n) {
    router::NodeSignature sig = router::signature_of(g, g.node(n));
    bool big = g.node(n).name == "mm1";
    model.add_kernel("sim", router::cold_key(sig.key),
                     {sig.op, sig.flops, sig.bytes, big ? 5000.0 : 20.0});
  }
  router::save_cache(file, id, model);
  RouterOptions options;
  options.cache_file = file;
  options.measure = false;
  auto mm1_place = [&] {
    router::RoutePlan plan = router::route(g, {cpu, &sim}, options);
    for (const auto& d : plan.decisions)
      if (g.node(d.node).name == "mm1") {
        EXPECT_EQ(d.source, "measured");
        return d.backend;
      }
    return std::string("none");
  };
  sim.cache_bytes_ = 1 << 20;  // everything stays in the cache: the warm samples
  EXPECT_EQ(mm1_place(), "sim");
  sim.cache_bytes_ = 200 * 1024;  // w1 streams: 5 ms there, against 2 ms on the host
  EXPECT_EQ(mm1_place(), "cpu");
}

// route() of `g` over the host and `sim`, from `model` saved as the cache file `name` (nothing
// measured).
router::RoutePlan route_on_costs(const Graph& g, Backend* cpu, SimulatedBackend& sim,
                                 const router::CostModel& model, const std::string& name) {
  const std::string file = test::temp_file(name);
  router::save_cache(file, {version(), router::device_identity({cpu, &sim})}, model);
  RouterOptions options;
  options.cache_file = file;
  options.measure = false;
  return router::route(g, {cpu, &sim}, options);
}

// Every node of `g` at `cpu_us` on the host and `sim_us` on the simulated device.
void cost_every_node(const Graph& g, double cpu_us, double sim_us, router::CostModel* model) {
  for (int n = 0; n < g.num_nodes(); ++n) {
    router::NodeSignature sig = router::signature_of(g, g.node(n));
    model->add_kernel("cpu", sig.key, {sig.op, sig.flops, sig.bytes, cpu_us});
    model->add_kernel("sim", sig.key, {sig.op, sig.flops, sig.bytes, sim_us});
  }
}

TEST(Router, AllOnTheDeviceIsReplayedWhenThatIsCheapest) {
  Graph g;
  Value* x = g.add_input("x", {1024, 1024});
  Value* h = g.add_op("Relu", {x}, {}, "r1");
  g.mark_output(g.add_op("Relu", {h}, {}, "r2"));
  SimulatedBackend sim;
  Backend* cpu = find_backend("cpu");
  router::CostModel model;
  model.set_link("sim", {10, 1e-6}, {10, 1e-6});
  model.set_launch("sim", {8, 1});
  cost_every_node(g, 500, 10, &model);
  router::RoutePlan plan = route_on_costs(g, cpu, sim, model, "replay.tsv");
  EXPECT_TRUE(plan.graph_replay);
  for (const auto& d : plan.decisions) EXPECT_EQ(d.backend, "sim");
  // Per node: (10 - 8) kernel + 1 launch; the input up and the output down.
  double bytes = 1024 * 1024 * 4.0;
  EXPECT_NEAR(plan.predicted_us, 2 * 3 + 2 * (10 + bytes * 1e-6), 1e-6);
}

// A link measured at several sizes: each copy's time is read off the curve (linear between two
// points, the first point's time below it, the last segment's slope past it), not off the line
// through its ends, in the cache as in the plan.
TEST(Router, CopiesAreCostedOnTheMeasuredLinkCurve) {
  router::Link up;
  up.points = {{4096, 10}, {262144, 40}, {4194304, 100}};
  EXPECT_DOUBLE_EQ(up.us(100), 10);
  EXPECT_DOUBLE_EQ(up.us(4096), 10);
  EXPECT_DOUBLE_EQ(up.us(133120), 25);  // halfway between the first two points
  EXPECT_DOUBLE_EQ(up.us(4194304), 100);
  EXPECT_DOUBLE_EQ(up.us(4194304 + 3932160), 160);  // the last segment's slope, one length on

  Graph g;
  Value* x = g.add_input("x", {256, 256});  // 262144 bytes
  Value* h = g.add_op("Relu", {x}, {}, "r1");
  g.mark_output(g.add_op("Relu", {h}, {}, "r2"));
  SimulatedBackend sim;
  Backend* cpu = find_backend("cpu");
  router::CostModel model;
  router::Link down;
  down.points = {{4096, 5}, {262144, 20}, {4194304, 50}};
  // The ends' line would put the input's copy at about 10 + 0.06 x 258 KB, 15.7 us.
  up.latency_us = 10;
  up.us_per_byte = 90.0 / (4194304 - 4096);
  model.set_link("sim", up, down);
  model.set_launch("sim", {8, 1});
  cost_every_node(g, 500, 10, &model);
  router::RoutePlan plan = route_on_costs(g, cpu, sim, model, "curve.tsv");
  EXPECT_TRUE(plan.graph_replay);
  // Per node: (10 - 8) kernel + 1 launch; the input up (40 us) and the output down (20 us).
  EXPECT_NEAR(plan.predicted_us, 2 * 3 + 40 + 20, 1e-6);
}

// Wide & Deep's shape: a large input a linear model reads once (wide) and a small one an MLP
// works on (deep). Copying the large one costs more than the host's pass over it, the MLP is 100x
// faster on the device: the device runs the deep part, enqueued first, while the host runs the
// wide part.
TEST(Router, SplitsAWideAndDeepModelAndOverlapsItsParts) {
  Graph g;
  Value* wide_in = g.add_input("wide_in", {64, 4096});
  Value* deep_in = g.add_input("deep_in", {64, 256});
  Value* ww = g.add_constant("ww", test::random_tensor({4096, 1}, 1));
  Value* w1 = g.add_constant("w1", test::random_tensor({256, 256}, 2));
  Value* w2 = g.add_constant("w2", test::random_tensor({256, 1}, 3));
  Value* wide = g.add_op("MatMul", {wide_in, ww}, {}, "wide");
  Value* h = g.add_op("MatMul", {deep_in, w1}, {}, "deep1");
  Value* deep = g.add_op("MatMul", {g.add_op("Relu", {h}, {}, "relu"), w2}, {}, "deep2");
  g.mark_output(g.add_op("Sigmoid", {g.add_op("Add", {wide, deep}, {}, "add")}, {}, "out"));
  SimulatedBackend sim;
  Backend* cpu = find_backend("cpu");
  router::CostModel model;
  model.set_link("sim", {10, 1e-3}, {10, 1e-3});  // 1 GB/s: the wide input takes 1 ms to copy
  model.set_launch("sim", {3, 0.5});
  const std::map<std::string, double> host_us = {{"wide", 300},  {"deep1", 2000}, {"relu", 20},
                                                 {"deep2", 200}, {"add", 1},      {"out", 1}};
  for (int n = 0; n < g.num_nodes(); ++n) {
    router::NodeSignature sig = router::signature_of(g, g.node(n));
    model.add_kernel("cpu", sig.key, {sig.op, sig.flops, sig.bytes, host_us.at(g.node(n).name)});
    model.add_kernel("sim", sig.key, {sig.op, sig.flops, sig.bytes, 20});
  }
  router::RoutePlan plan = route_on_costs(g, cpu, sim, model, "wide_deep.tsv");
  EXPECT_FALSE(plan.graph_replay);
  std::map<std::string, std::string> where;
  std::map<std::string, size_t> position;
  for (size_t k = 0; k < plan.order.size(); ++k) position[g.node(plan.order[k]).name] = k;
  for (const auto& d : plan.decisions) where[g.node(d.node).name] = d.backend;
  EXPECT_EQ(where["wide"], "cpu");
  EXPECT_EQ(where["deep1"], "sim");
  EXPECT_EQ(where["relu"], "sim");
  EXPECT_EQ(where["deep2"], "sim");
  ASSERT_EQ(plan.order.size(), 6u);
  EXPECT_GT(position["wide"], position["deep2"]);  // the device's part enqueued first
  // Serially: host 300 + 1 + 1, device 3 x 20, deep_in up (10 + 65.536), deep down (10 + 0.256).
  const double serial = 302 + 60 + 75.536 + 10.256;
  EXPECT_NEAR(plan.kernel_us + plan.transfer_us, serial, 1e-6);
  // Overlapped: deep_in up until 75.536, the device's part 78.536..138.536 (launched 3 us before
  // each kernel) while the host launches it (9 us) and runs wide (300 us) until 384.536; deep
  // down 10.256; add and out 2.
  EXPECT_NEAR(plan.predicted_us, 384.536 + 10.256 + 2, 1e-6);
  EXPECT_NEAR(plan.schedule_us, plan.predicted_us - serial, 1e-6);
}

TEST(Router, NeedsTheHostAmongItsCandidates) {
  Graph g;
  Value* x = g.add_input("x", {4, 4});
  g.mark_output(g.add_op("Softmax", {x}, {}, "lonely"));
  SimulatedBackend sim;
  RouterOptions options;
  options.measure = false;
  EXPECT_THROW(router::route(g, {&sim}, options), InvalidArgument);  // no host
}

// With only the CPU, auto places everything there with no copies, measures nothing, and gives
// the reference's outputs.
TEST(Router, AutoOnTheHostMatchesAReference) {
  Graph g = small_mlp(8, 32);
  const Tensor w1 = *g.find_value("w1")->data, w2 = *g.find_value("w2")->data;
  Runtime rt;
  CompileOptions options;
  options.backends = {"auto"};
  options.router.cache_file = test::temp_file("never_written.tsv");
  Executable* exe = g.compile(&rt, options);
  EXPECT_EQ(exe->summary().find("copy"), std::string::npos);
  EXPECT_EQ(exe->summary().find("@cuda"), std::string::npos);
  if (available_backends().size() == 1)  // nothing to choose: nothing measured or written
    EXPECT_FALSE(std::filesystem::exists(options.router.cache_file));
  Tensor x = test::random_tensor({8, 32}, 3);
  Tensor y = exe->execute({x})[0];
  // Reference: softmax(relu(x w1) w2), in double.
  const float* xp = x.data<float>();
  const float* a = w1.data<float>();
  const float* b = w2.data<float>();
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) {
    std::vector<double> r(32, 0), o(10, 0);
    for (int j = 0; j < 32; ++j) {
      for (int k = 0; k < 32; ++k) r[j] += double(xp[i * 32 + k]) * a[k * 32 + j];
      r[j] = std::max(r[j], 0.0);
    }
    double mx = -1e30, sum = 0;
    for (int j = 0; j < 10; ++j) {
      for (int k = 0; k < 32; ++k) o[j] += r[k] * b[k * 10 + j];
      mx = std::max(mx, o[j]);
    }
    for (int j = 0; j < 10; ++j) sum += std::exp(o[j] - mx);
    for (int j = 0; j < 10; ++j) want.push_back(std::exp(o[j] - mx) / sum);
  }
  test::expect_close(y, {8, 10}, want, 1e-5);
}

// Calibration on the host fills the cache; the second route reads it and measures nothing.
TEST(Router, CalibrationIsCachedAcrossRoutes) {
  Graph g = small_mlp(4, 16);
  const std::string file = test::temp_file("calibrated.tsv");
  std::filesystem::remove(file);
  RouterOptions options;
  options.cache_file = file;
  options.progress = false;
  std::vector<Backend*> cpu = {find_backend("cpu")};
  router::RoutePlan first = router::route(g, cpu, options, /*explain=*/true);
  EXPECT_EQ(first.calibration.measured, 4);
  EXPECT_FALSE(first.cache_loaded);
  EXPECT_TRUE(std::filesystem::exists(file));
  for (const auto& d : first.decisions) {
    EXPECT_EQ(d.backend, "cpu");
    EXPECT_EQ(d.source, "measured");
    EXPECT_GT(d.kernel_us[0], 0);
  }
  EXPECT_EQ(first.transfers, 0);
  router::RoutePlan second = router::route(g, cpu, options, true);
  EXPECT_TRUE(second.cache_loaded);
  EXPECT_EQ(second.calibration.measured, 0);
  EXPECT_EQ(second.calibration.cached, 4);
  EXPECT_DOUBLE_EQ(second.predicted_us, first.predicted_us);
  // A cache that cannot be written: measured and placed all the same, the reason kept.
  options.cache_file = "/proc/lumen_no_such_dir/tune.tsv";
  router::RoutePlan unsaved = router::route(g, cpu, options, true);
  EXPECT_EQ(unsaved.calibration.measured, 4);
  EXPECT_NE(unsaved.cache_error.find("/proc/lumen_no_such_dir"), std::string::npos);
  EXPECT_EQ(unsaved.decisions.size(), 4u);
}

}  // namespace
}  // namespace lumen
