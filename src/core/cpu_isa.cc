// Detection of the CPU's instruction-set level (lumen/cpu_isa.h). libgcc's __builtin_cpu_supports
// reports a feature only where the operating system also saves its registers (XGETBV).
#include "lumen/cpu_isa.h"

#include <atomic>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "core/cpu_isa_level.h"

namespace lumen {
namespace {

#if defined(__x86_64__)
// F16C (CPUID leaf 1, ECX bit 29), which clang's __builtin_cpu_supports does not name. The OS
// saves the YMM registers it uses wherever __builtin_cpu_supports reports AVX2.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
#endif

CpuIsa detect() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c() &&
                  __builtin_cpu_supports("bmi2");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (v4) return CpuIsa::kAvx512;
  if (v3) return CpuIsa::kAvx2;
#endif
  return CpuIsa::kBaseline;
}

}  // namespace

std::atomic<int> cpu_isa_level{-1};

CpuIsa cpu_isa_detected() {
  static const CpuIsa detected = detect();
  return detected;
}

CpuIsa cpu_isa() {
  const int level = cpu_isa_level.load(std::memory_order_relaxed);
  if (level >= 0) return static_cast<CpuIsa>(level);
  const CpuIsa detected = cpu_isa_detected();
  int expected = -1;
  cpu_isa_level.compare_exchange_strong(expected, static_cast<int>(detected));
  return static_cast<CpuIsa>(cpu_isa_level.load(std::memory_order_relaxed));
}

CpuIsa set_cpu_isa_limit(CpuIsa limit) {
  const CpuIsa use = limit < cpu_isa_detected() ? limit : cpu_isa_detected();
  cpu_isa_level.store(static_cast<int>(use), std::memory_order_relaxed);
  return use;
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kBaseline:
      break;
  }
  return "baseline";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512})
    if (name == cpu_isa_name(isa)) return isa;
  return std::nullopt;
}

}  // namespace lumen
