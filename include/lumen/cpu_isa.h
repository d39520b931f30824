// CpuIsa: the instruction-set level Lumen's own CPU kernels run at. One library serves every
// x86-64 CPU: it is compiled for the x86-64-v2 baseline, and the kernels that pay for it carry
// AVX2 and AVX-512 forms chosen once at start-up from the CPU's features. On other architectures
// (arm64) the level is always kBaseline.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lumen {

// Ordered: a higher level can run every lower level's code.
enum class CpuIsa {
  kBaseline,  // x86-64-v2 (SSE4.2) on x86-64; the compiler's default elsewhere
  kAvx2,      // x86-64-v3: AVX2, FMA, F16C
  kAvx512,    // x86-64-v4: AVX-512 F/BW/DQ/VL (Lumen's AVX2 kernels still run where it has none)
};

// The level in use: the detected level, lowered by set_cpu_isa_limit. Cheap (one atomic read).
CpuIsa cpu_isa();

// The highest level this CPU and operating system support (what cpu_isa() is unless limited).
CpuIsa cpu_isa_detected();

// For tests and benchmarks: runs Lumen's kernels at no more than `limit` (a limit above the
// detected level means the detected level). Returns the level now in use. Affects kernels built
// after the call; call it before compiling models, not while one runs.
CpuIsa set_cpu_isa_limit(CpuIsa limit);

// Where both Lumen's own CPU kernels and oneDNN's can run a node (the packed GEMM of constant-
// weight matrix products, the Winograd, im2col, grouped and depthwise convolutions), which one
// does. At AVX2 Lumen's, below it oneDNN's, whatever this says; at AVX-512 the faster of the two,
// timed per node when the kernel is built (kMeasure, the default), or for tests and benchmarks
// always one side. Affects kernels built after the call.
enum class CpuKernelChoice { kMeasure, kLumen, kOneDnn };
void set_cpu_kernel_choice(CpuKernelChoice choice);
CpuKernelChoice cpu_kernel_choice();

// Where measured choices (kMeasure) are kept between processes, so that a node is timed once per
// build of Lumen, CPU model, ISA level and thread count instead of in every process that compiles
// it (resnet18 at batch 32 on 2 threads: most of a 3 s compile). By default cpu_choices.tsv in the
// user's cache folder for Lumen ($XDG_CACHE_HOME/lumen, else ~/.cache/lumen); "" keeps them in
// this process only. Setting it forgets the choices this process made or read. A file that cannot
// be read or written only means timing again, never an error.
void set_cpu_kernel_choice_file(std::string file);
std::string cpu_kernel_choice_file();

// "baseline", "avx2" or "avx512".
std::string_view cpu_isa_name(CpuIsa isa);

// The level named by cpu_isa_name's spelling; nullopt for any other string.
std::optional<CpuIsa> parse_cpu_isa(std::string_view name);

}  // namespace lumen
