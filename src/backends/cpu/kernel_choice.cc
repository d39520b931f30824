// The measured choice between Lumen's CPU kernels and oneDNN's (kernel_choice.h).
#include "backends/cpu/kernel_choice.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include <unistd.h>

#include "backends/cpu/isa.h"
#include "backends/kernel.h"
#include "core/host_info.h"

#if LUMEN_X86
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace lumen::cpu {
namespace {

std::atomic<CpuKernelChoice> forced{CpuKernelChoice::kMeasure};

// The measured choices of this process and those read from the choice file (pick_lumen_kernel),
// by key with the ISA level and thread count.
struct ChoiceStore {
  std::mutex mutex;
  std::map<std::string, KernelChoice> picked;
  std::string file = user_cache_file("cpu_choices.tsv");
  bool loaded = false;   // the file was read (or there is none to read)
  bool current = false;  // the file holds this build's header: lines are appended to it
};

ChoiceStore& store() {
  static ChoiceStore instance;
  return instance;
}

// Tabs and newlines would break the line format.
std::string clean(std::string text) {
  for (char& c : text)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return text;
}

// The choice file's first line: a choice holds for one build of Lumen on one CPU model.
std::string choice_file_header() {
  return "lumen-cpu-choices\t1\t" + clean(library_build_identity()) + "\t" +
         clean(cpu_model_name());
}

// Reads the choice file into s.picked, where it was written for this build and CPU; lines that do
// not parse (a write cut short) are skipped. Called with s.mutex held.
void load_choices(ChoiceStore& s) {
  s.loaded = true;
  if (s.file.empty()) return;
  std::ifstream in(s.file);
  std::string line;
  if (!in || !std::getline(in, line) || line != choice_file_header()) return;
  s.current = true;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::string field;
    std::istringstream fields(line);
    while (std::getline(fields, field, '\t')) f.push_back(field);
    if (f.size() != 4 || (f[1] != "lumen" && f[1] != "onednn")) continue;
    char* end1 = nullptr;
    char* end2 = nullptr;
    const double lumen_ms = std::strtod(f[2].c_str(), &end1);
    const double onednn_ms = std::strtod(f[3].c_str(), &end2);
    if (f[2].empty() || f[3].empty() || *end1 != '\0' || *end2 != '\0') continue;
    s.picked[f[0]] = {f[1] == "lumen", "measured earlier", lumen_ms, onednn_ms};
  }
}

// Adds one choice to the choice file (starting it afresh where it held another build's), so that
// later processes skip its timing. A file that cannot be written is left as it is: the choice is
// then timed again by the next process. Called with s.mutex held.
void save_choice(ChoiceStore& s, const std::string& key, const KernelChoice& choice) {
  if (s.file.empty()) return;
  if (!s.current) {  // a new file, perhaps in a new folder
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(s.file).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  }
  std::ofstream out(s.file, s.current ? std::ios::app : std::ios::trunc);
  if (!out) return;
  if (!s.current) out << choice_file_header() << '\n';
  s.current = true;
  char times[64];
  std::snprintf(times, sizeof times, "%.6g\t%.6g", choice.lumen_ms, choice.onednn_ms);
  // One write per line, so that processes appending at once do not interleave within a line.
  out << (clean(key) + "\t" + (choice.lumen ? "lumen" : "onednn") + "\t" + times + "\n")
      << std::flush;
}

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

void set_cpu_kernel_choice_file(std::string file) {
  cpu::ChoiceStore& s = cpu::store();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.file = std::move(file);
  s.picked.clear();
  s.loaded = s.current = false;
}

std::string cpu_kernel_choice_file() {
  cpu::ChoiceStore& s = cpu::store();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.file;
}

}  // namespace lumen

namespace lumen::cpu {

std::string describe_choice(const KernelChoice& choice, const std::string& name) {
  if (choice.why.empty()) return "";
  if (choice.lumen_ms < 0)
    return (choice.lumen ? name : std::string("oneDNN")) + " (" + choice.why + ")";
  char text[160];
  if (choice.lumen)
    std::snprintf(text, sizeof text, "%s %.4f ms, oneDNN %.4f ms (%s)", name.c_str(),
                  choice.lumen_ms, choice.onednn_ms, choice.why.c_str());
  else
    std::snprintf(text, sizeof text, "oneDNN %.4f ms, %s %.4f ms (%s)", choice.onednn_ms,
                  name.c_str(), choice.lumen_ms, choice.why.c_str());
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
                               const std::function<void()>& onednn, bool onednn_any_size) {
  if (!kernel_choice_measured()) return {true, "avx2"};
  if (forced.load() != CpuKernelChoice::kMeasure)
    return {forced.load() == CpuKernelChoice::kLumen, "forced"};
  if (building_for_any_shape() && !onednn_any_size) return {true, "runs at any size"};
  ChoiceStore& s = store();
  const std::string full_key = key + " isa " + std::string(cpu_isa_name(cpu_isa())) + " threads " +
                               std::to_string(omp_get_max_threads());
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.loaded) load_choices(s);
    if (auto it = s.picked.find(full_key); it != s.picked.end()) return it->second;
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
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.picked.emplace(full_key, choice).second) save_choice(s, full_key, choice);
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
