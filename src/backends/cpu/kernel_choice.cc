// The measured choice between Lumen's CPU kernels and oneDNN's (kernel_choice.h).
#include "backends/cpu/kernel_choice.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>

#include <unistd.h>

#include "backends/cpu/isa.h"
#include "backends/kernel.h"

#if LUMEN_X86
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

std::atomic<CpuKernelChoice> forced{CpuKernelChoice::kMeasure};

// Seconds one call of f takes.
double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

}  // namespace lumen::cpu

namespace lumen {

void set_cpu_kernel_choice(CpuKernelChoice choice) {
  cpu::forced.store(choice);
}

CpuKernelChoice cpu_kernel_choice() {
  return cpu::forced.load();
}

}  // namespace lumen

namespace lumen::cpu {

std::string describe_choice(const KernelChoice& choice, const std::string& name) {
  if (choice.why.empty()) return "";
  if (choice.lumen_ms < 0)
    return (choice.lumen ? name : std::string("oneDNN")) + " (" + choice.why + ")";
  char text[160];
  if (choice.lumen)
    std::snprintf(text, sizeof text, "%s %.4f ms, oneDNN %.4f ms (measured)", name.c_str(),
                  choice.lumen_ms, choice.onednn_ms);
  else
    std::snprintf(text, sizeof text, "oneDNN %.4f ms, %s %.4f ms (measured)", choice.onednn_ms,
                  name.c_str(), choice.lumen_ms);
  return text;
}

bool kernel_choice_measured() {
#if defined(__aarch64__)
  return true;
#else
  return has_avx512();
#endif
}

bool lumen_kernel_candidate() {
  return has_avx2() || kernel_choice_measured();
}

KernelChoice pick_lumen_kernel(const std::string& key, const std::function<void()>& prepare,
                               const std::function<void(bool lumen)>& evict,
                               const std::function<void()>& lumen,
                               const std::function<void()>& onednn) {
  if (!kernel_choice_measured()) return {true, "avx2"};
  if (forced.load() != CpuKernelChoice::kMeasure)
    return {forced.load() == CpuKernelChoice::kLumen, "forced"};
  if (building_for_any_shape()) return {true, "runs at any size"};
  static std::mutex mutex;
  static std::map<std::string, KernelChoice> picked;
  const std::string full_key = key + " threads " + std::to_string(omp_get_max_threads());
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = picked.find(full_key); it != picked.end()) return it->second;
  }
  prepare();
  // A first call each (oneDNN's first execution sets up its kernels' state, Lumen's touches its
  // buffers), then interleaved rounds, the fastest of each; fewer rounds for nodes that take long.
  const auto cold = [&](bool side) {
    evict(side);
    return seconds_of(side ? lumen : onednn);
  };
  const double first = cold(true) + cold(false);
  const int rounds = first > 40e-3 ? 1 : first > 4e-3 ? 2 : 3;
  double t_lumen = 1e30, t_onednn = 1e30;
  for (int r = 0; r < rounds; ++r) {
    t_lumen = std::min(t_lumen, cold(true));
    t_onednn = std::min(t_onednn, cold(false));
  }
  // Lumen's only by a margin: timed alone, a kernel within a few percent of the other ran either
  // side of it in the model (BERT-base's products on 2 Xeon threads), so near ties keep oneDNN.
  constexpr double kMargin = 0.95;
  KernelChoice choice{t_lumen < kMargin * t_onednn, "measured", t_lumen * 1e3, t_onednn * 1e3};
  std::lock_guard<std::mutex> lock(mutex);
  picked.emplace(full_key, choice);
  return choice;
}

#if LUMEN_X86
namespace {

constexpr size_t kLine = 64;

// CLFLUSHOPT (CPUID leaf 7, EBX bit 23): flushes of different lines overlap, where CLFLUSH's are
// ordered one after another (resnet50's choices, 12 weight flushes per node, took 3 s to compile).
bool has_clflushopt() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  static const bool kHas =
      __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (ebx & (1u << 23)) != 0;
  return kHas;
}

__attribute__((target("clflushopt"))) void flush_lines_opt(const char* begin, const char* end) {
  for (const char* p = begin; p < end; p += kLine) _mm_clflushopt(const_cast<char*>(p));
}

}  // namespace
#endif

void evict_from_caches(const void* data, size_t bytes) {
#if LUMEN_X86
  // From the start of the line holding `data` to its end, line by line.
  const char* end = static_cast<const char*>(data) + bytes;
  const char* begin = static_cast<const char*>(data) - reinterpret_cast<uintptr_t>(data) % kLine;
  if (has_clflushopt())
    flush_lines_opt(begin, end);
  else
    for (const char* p = begin; p < end; p += kLine) _mm_clflush(p);
  _mm_mfence();
#else
  (void)data;
  (void)bytes;
#endif
}

bool weights_stream_from_memory(const Graph& graph) {
  size_t cache = 0;
  for (int level : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(level);
    if (bytes > 0) {
      cache = static_cast<size_t>(bytes);
      break;
    }
  }
  size_t weights = 0;
  for (int id = 0; id < graph.num_values(); ++id)
    if (graph.value(id).is_weight()) weights += graph.value(id).data->nbytes();
  return cache > 0 && weights > cache;
}

std::vector<float> timing_data(int64_t count) {
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(count, 1)));
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : out) v = dist(gen);
  return out;
}

}  // namespace lumen::cpu
