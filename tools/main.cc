// The `lumen` command line: --version, run, inspect, plan, tune, bench
// matmul|memory|fusion|lengths.
#include <cstdio>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "lumen/lumen.h"
#include "tools/commands.h"

namespace {

void usage() {
  std::puts(
      "usage: lumen [--cpu-isa baseline|avx2|avx512] [--cpu-kernels measure|lumen|onednn] "
      "<command> [args]\n"
      "  --cpu-isa LEVEL       run the CPU kernels at no more than LEVEL (for tests and "
      "benchmarks;\n"
      "                        default: the best this CPU has)\n"
      "  --cpu-kernels WHICH   at AVX-512, nodes both Lumen's kernels and oneDNN's can run take\n"
      "                        the faster as measured (default), or always one side (for "
      "benchmarks)\n"
      "  --version             print the version, the backends and the CPU kernels' level\n"
      "  bench matmul N        N x N float32 matmul on every backend: device-resident (kernel, "
      "GFLOP/s)\n"
      "                        and host-to-host (copies included, GB/s) median ms\n"
      "        [--runs R]      timed runs (default: as many as fit in about 2 s, at least 5)\n"
      "        [--precision float32|float32-strict|tf32|float16|bfloat16] [--device cpu,cuda]\n"
      "        [--threads N]\n"
      "  bench memory [MODEL]  planned arena vs no reuse, and the process's peak (default: the "
      "20-layer MLP)\n"
      "        [--shape NAME=64x1024] [--device cpu] [--no-optimize]\n"
      "  bench fusion          Conv+Relu as two kernels vs one FusedConv: steps and ms per run\n"
      "        [--device cpu,cuda] [--batch B] [--channels C] [--size S] [--runs R]\n"
      "  bench lengths MODEL   a [1, seq] ids model at many lengths: one session (shape families)\n"
      "                        vs a plan compiled per length; first call and median ms of each\n"
      "        [--count N] [--max-length M] [--lengths A,B] [--repeat R] [--device cpu|cuda] "
      "[--threads N]\n"
      "  run MODEL.onnx        run a model on given (--input NAME=FILE.npy) or random inputs\n"
      "        [--shape NAME=1x3x224x224] [--output-dir DIR] [--device cpu|cuda|cuda,cpu|auto] "
      "[--repeat "
      "N]\n"
      "        [--threads N]   CPU threads (default: every core)\n"
      "        [--no-optimize] run the graph as imported, without the optimizer passes\n"
      "        [--precision float32|float32-strict|tf32|float16|bfloat16]  float32-strict: no "
      "3xTF32\n"
      "                        on CUDA; tf32: CUDA matmuls and convolutions on TF32 tensor cores;\n"
      "                        float16/bfloat16: what runs on CUDA stores 16-bit floats\n"
      "        [--profile]     time every step: per op kind and the slowest nodes\n"
      "        [--trace FILE]  --profile, and write one run as a Chrome trace (Perfetto)\n"
      "  generate MODEL.onnx   token ids in, new ids out, from an ONNX decoder with a kv cache\n"
      "        --ids 464,3290,318 [--ids ...] [--batch B] [--max-new-tokens N] [--device D]\n"
      "        [--sample] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--eos ID]\n"
      "        [--max-length N] [--threads N] [--precision P] [--warmup]\n"
      "        [--memory-every N]  print resident and pool memory every N tokens\n"
      "  inspect MODEL.onnx    inputs, outputs, opset, parameters, FLOPs and op histogram\n"
      "        [--optimized]   optimize first, so --dot/--svg/--memory show the optimized graph\n"
      "        [--passes]      optimize and print op counts around each pass that changed "
      "something\n"
      "        [--dot FILE] [--svg FILE]  draw the graph (--svg renders it with Graphviz's dot)\n"
      "        [--memory]      compile and print the arena plan [--shape NAME=1x3x224x224]\n"
      "  plan MODEL.onnx       where the router puts each node, its predicted time on every "
      "backend, the copies and why\n"
      "        [--device auto|cuda,cpu] [--shape NAME=1x3x224x224] [--budget S] [--no-optimize]\n"
      "        [--measure]     compile with --device auto and compare the predicted with the "
      "measured run [--runs N]\n"
      "  tune MODEL.onnx       measure the model's kernels on every backend into the tune cache\n"
      "        [--shape NAME=1x3x224x224] [--budget S] [--no-optimize]");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() >= 2 && args[0] == "--cpu-isa") {
      const auto isa = lumen::parse_cpu_isa(args[1]);
      if (!isa)
        throw lumen::InvalidArgument("--cpu-isa: unknown level '" + args[1] +
                                     "' (baseline, avx2 or avx512)");
      lumen::set_cpu_isa_limit(*isa);
      args.erase(args.begin(), args.begin() + 2);
    }
    if (args.size() >= 2 && args[0] == "--cpu-kernels") {
      const std::string& which = args[1];
      if (which != "measure" && which != "lumen" && which != "onednn")
        throw lumen::InvalidArgument("--cpu-kernels: unknown choice '" + which +
                                     "' (measure, lumen or onednn)");
      lumen::set_cpu_kernel_choice(which == "lumen"    ? lumen::CpuKernelChoice::kLumen
                                   : which == "onednn" ? lumen::CpuKernelChoice::kOneDnn
                                                       : lumen::CpuKernelChoice::kMeasure);
      args.erase(args.begin(), args.begin() + 2);
    }
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
      usage();
      return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version" || args[0] == "version") {
      lumen::Runtime rt;
      std::string backends;
      for (const std::string& b : rt.backends()) backends += (backends.empty() ? "" : ", ") + b;
      std::printf("lumen %s (backends: %s)\n", lumen::version(), backends.c_str());
      std::printf("cpu kernels: %s (this CPU: %s)\n",
                  std::string(lumen::cpu_isa_name(lumen::cpu_isa())).c_str(),
                  std::string(lumen::cpu_isa_name(lumen::cpu_isa_detected())).c_str());
      for (const std::string& line : lumen::backend_plugins())
        std::printf("plugin %s\n", line.c_str());
      for (lumen::Backend* b : lumen::available_backends())
        if (b->name() != "cpu")
          std::printf("device %s: %s%s\n", b->name().c_str(), b->device_name().c_str(),
                      b->in_auto() ? "" : " (not among --device auto's candidates)");
      return 0;
    }
    if (args[0] == "generate") return lumen::cli::generate({args.begin() + 1, args.end()});
    if (args[0] == "run") return lumen::cli::run_model({args.begin() + 1, args.end()});
    if (args[0] == "plan") return lumen::cli::plan_model({args.begin() + 1, args.end()});
    if (args[0] == "tune") return lumen::cli::tune_model({args.begin() + 1, args.end()});
    if (args[0] == "inspect") return lumen::cli::inspect_model({args.begin() + 1, args.end()});
    if (args[0] == "bench" && args.size() >= 2) {
      std::vector<std::string> rest(args.begin() + 2, args.end());
      if (args[1] == "matmul") return lumen::cli::bench_matmul(rest);
      if (args[1] == "memory") return lumen::cli::bench_memory(rest);
      if (args[1] == "fusion") return lumen::cli::bench_fusion(rest);
      if (args[1] == "lengths") return lumen::cli::bench_lengths(rest);
    }
    std::fprintf(stderr, "lumen: unknown command '%s'\n", args[0].c_str());
    usage();
    return 2;
  } catch (const lumen::Error& e) {
    std::fprintf(stderr, "lumen: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lumen: internal error: %s\n", e.what());
    return 1;
  }
}
