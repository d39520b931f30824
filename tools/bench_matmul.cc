// `lumen bench matmul N`: one large float32 MatMul through each backend, timed two ways: with its
// operands already where the backend computes (what the product itself costs) and from host memory
// to host memory (what a call on host arrays costs, copies included).
#include <cstdio>

#include "lumen/lumen.h"
#include "tools/bench_util.h"
#include "tools/commands.h"

namespace lumen::cli {
namespace {

struct MatmulArgs {
  int64_t n = 0;
  int64_t runs = 0;
  Precision precision = Precision::kFloat32;
  std::string devices;
};

MatmulArgs parse_args(const std::vector<std::string>& args) {
  if (args.empty()) throw InvalidArgument("bench matmul: give the matrix size N");
  MatmulArgs out;
  out.n = parse_count(args[0], "N");
  for (size_t i = 1; i < args.size(); ++i) {
    auto value = [&](const char* flag) -> const std::string& {
      if (i + 1 >= args.size())
        throw InvalidArgument(std::string("bench matmul: ") + flag + " needs a value");
      return args[++i];
    };
    if (args[i] == "--runs") {
      out.runs = parse_count(value("--runs"), "--runs");
    } else if (args[i] == "--precision") {
      out.precision = parse_precision(value("--precision"));
    } else if (args[i] == "--device") {
      out.devices = value("--device");
    } else if (args[i] == "--threads") {
      set_num_threads(static_cast<int>(parse_count(value("--threads"), "--threads")));
    } else {
      throw InvalidArgument("bench matmul: unknown argument '" + args[i] + "'");
    }
  }
  // Two operands and the result, float32: refuse what no machine holds rather than fail later.
  if (out.n > 65536) throw InvalidArgument("bench matmul: N must be at most 65536");
  return out;
}

void print_row(const std::string& backend, const char* timing, const Timing& t,
               const std::string& rate) {
  std::printf("%-8s %-16s %10.3f %10.3f %6zu  %s\n", backend.c_str(), timing, t.median_ms, t.min_ms,
              t.runs, rate.c_str());
}

std::string format(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c, d);
  return buf;
}

}  // namespace

int bench_matmul(const std::vector<std::string>& args) {
  MatmulArgs opt = parse_args(args);
  const int64_t n = opt.n;
  Runtime rt;
  std::vector<std::string> backends = parse_backends(opt.devices, rt);
  Tensor a = uniform_tensor({n, n}, 1.0f, 1);
  Tensor b = uniform_tensor({n, n}, 1.0f, 2);
  const double flop = 2.0 * static_cast<double>(n) * n * n;
  const double matrix_bytes = static_cast<double>(n) * n * sizeof(float);
  std::printf(
      "matmul %lld x %lld, float32 operands, precision %s (%.1f GFLOP per product), %d CPU "
      "threads, %s CPU kernels\n",
      static_cast<long long>(n), static_cast<long long>(n), precision_name(opt.precision),
      flop / 1e9, num_threads(), std::string(cpu_isa_name(cpu_isa())).c_str());
  std::printf(
      "device-resident: the input already on the backend's device, the kernels' time (a profiled "
      "run's steps);\nhost-to-host: execute() on a host array to a host result, copies "
      "included.\n");
  std::printf("%-8s %-16s %10s %10s %6s  %s\n", "backend", "timing", "median_ms", "min_ms", "runs",
              "rate");
  for (const std::string& backend : backends) {
    Graph graph;
    Value* x = graph.add_input("a", {n, n});
    Value* w = graph.add_constant("b", b);
    graph.mark_output(graph.add_op("MatMul", {x, w}));
    CompileOptions options{{backend}};
    options.precision = opt.precision;
    Executable* exe = graph.compile(&rt, options);
    const Device device = backend_device(backend);
    const Tensor a_resident = a.to(device);

    size_t steps = 0;
    Timing kernel = time_runs(
        [&] {
          RunProfile profile;
          exe->execute({a_resident}, &profile);
          steps = profile.steps.size();
          return steps_ms(profile);
        },
        opt.runs);
    std::string note = format("%.1f GFLOP/s", flop / (kernel.median_ms * 1e-3) / 1e9);
    if (steps != 1) note += format(" (%.0f steps: casts at the edges included)", steps);
    if (backend == "cpu" && opt.precision != Precision::kFloat32) note += " (float32: the CPU)";
    print_row(backend, "device-resident", kernel, note);

    Timing host = time_runs([&] { return wall_ms([&] { exe->execute({a}); }); }, opt.runs);
    if (device.type == DeviceType::kCPU) {
      print_row(backend, "host-to-host", host, "no copies: the CPU computes in host memory");
      continue;
    }
    // The copies alone, as a run makes them: the input in from pageable host memory, the result
    // (the same size) back out, each through the backend's pinned staging buffers.
    Timing in = time_runs([&] { return wall_ms([&] { (void)a.to(device); }); }, opt.runs);
    Timing out =
        time_runs([&] { return wall_ms([&] { (void)a_resident.to(Device::cpu()); }); }, opt.runs);
    std::string copies = format("copies alone: in %.3f ms (%.1f GB/s) + out %.3f ms (%.1f GB/s)",
                                in.median_ms, matrix_bytes / (in.median_ms * 1e-3) / 1e9,
                                out.median_ms, matrix_bytes / (out.median_ms * 1e-3) / 1e9);
    copies += format("; kernel + copies %.3f ms (pageable host memory, pinned staging)",
                     kernel.median_ms + in.median_ms + out.median_ms);
    print_row(backend, "host-to-host", host, copies);
  }
  return 0;
}

}  // namespace lumen::cli
