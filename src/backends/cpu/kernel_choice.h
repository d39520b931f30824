// Which implementation runs a CPU node that both Lumen's own kernels and oneDNN can run: the
// packed GEMM (constant-weight MatMul, Gemm, FusedMatMul) and the Winograd, im2col, grouped and
// depthwise convolutions against oneDNN's matmul and convolution primitives. On AVX2 machines
// Lumen's kernels (measured faster there, packed_gemm.h and conv.cc say where); below AVX2 on x86
// oneDNN; on AVX-512 machines, where oneDNN's AVX-512 kernels are strong too, and on arm64 (the
// packed GEMM's NEON form against whatever oneDNN build is there), the faster of the two on the
// node, timed when the kernel is built, once per distinct node in the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lumen/cpu_isa.h"
#include "lumen/graph.h"

namespace lumen::cpu {

// Which implementation a node runs on, and why: "avx2" or "forced", or the two times measured
// ("measured", or "measured earlier" where they come from the choice file).
struct KernelChoice {
  bool lumen = true;
  std::string why;
  double lumen_ms = -1.0, onednn_ms = -1.0;  // measured, where they were
};

// For a kernel's describe(): "NAME (why)" or "oneDNN (why)", or with times "oneDNN 0.063 ms, NAME
// 0.078 ms (measured)"; "" where there was nothing to choose.
std::string describe_choice(const KernelChoice& choice, const std::string& name);

// Whether Lumen's kernels are candidates at the CPU level in use (AVX2 or AVX-512, or arm64).
bool lumen_kernel_candidate();

// Whether a node that both can run builds both and keeps the faster by measurement
// (pick_lumen_kernel): at AVX-512, and on arm64, where oneDNN's float32 products may be its
// reference code (Debian's arm64 oneDNN 2.7 has jit kernels for SVE-512 only, so a NEON machine
// gets "gemm:ref").
bool kernel_choice_measured();

// At AVX2: Lumen's. At AVX-512 and on arm64 (kernel_choice_measured), as set_cpu_kernel_choice says
// (lumen/cpu_isa.h): Lumen's where `lumen` ran at least 5% faster than `onednn` (each one run of
// the node on the same inputs, made by `prepare`, which is called first and only when timing: first
// an untimed call each, then the fastest of interleaved rounds). Before every call `evict(side)`
// flushes that side's weights (side true: Lumen's) from the caches: in a model each layer's weights
// come from memory or a far cache, and timed on cache-warm weights Lumen's kernels (the Winograd
// forms' weights are 4 times larger) looked faster than they ran in the model (resnet50 and
// efficientnet_b0 on 2 Xeon threads: 14% and 10% slower than oneDNN alone). `key` names everything
// that changes their cost (op, shapes, attributes, whether the weights are flushed); the answer is
// kept per key, ISA level and thread count, so the layers of a model that repeat a node time it
// once, and in the choice file (set_cpu_kernel_choice_file), so later processes do not time it.
// For a plan that runs at many sizes (AnyShapeScope) Lumen's kernel, which runs at any size, is
// taken untimed, unless `onednn_any_size` says the oneDNN side runs at any size too.
KernelChoice pick_lumen_kernel(const std::string& key, const std::function<void()>& prepare,
                               const std::function<void(bool lumen)>& evict,
                               const std::function<void()>& lumen,
                               const std::function<void()>& onednn, bool onednn_any_size = false);

// A node's weights are flushed before each timed call (pick_lumen_kernel's `evict`) where they
// are more than this many bytes (as given) and the model's weights together outgrow the
// last-level cache (weights_stream_from_memory), as a run of it then reads them; otherwise they
// stay warm. Flushed small ones made timings of oneDNN's 1x1 convolutions twice what they took in
// the model (resnet50's 64 -> 256 channel layers on 16 Xeon threads: 0.20 against 0.10 ms), and
// flushed weights of a model that fits in the cache picked Lumen's GEMM for squeezenet1_1's
// classifier, slower in the model.
inline constexpr size_t kColdWeightBytes = size_t{1} << 20;

// Whether `graph`'s weights together outgrow the CPU's last-level cache.
bool weights_stream_from_memory(const Graph& graph);

// Flushes [data, data + bytes) from every level of the CPU's caches, so that the next read comes
// from memory (a no-op off x86, where no choice is timed).
void evict_from_caches(const void* data, size_t bytes);

// `count` random floats in [-1, 1) (the same each call): inputs for those timings.
std::vector<float> timing_data(int64_t count);

}  // namespace lumen::cpu
