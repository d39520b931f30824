// How the CPU backend's kernels reach AVX2 and AVX-512 in a library compiled for the x86-64-v2
// baseline (lumen/cpu_isa.h says which level is in use):
//
// - Hand-written SIMD code sits between LUMEN_AVX2_BEGIN (or LUMEN_AVX512_BEGIN) and
//   LUMEN_ISA_END, which compile the functions defined between them, lambdas included, for that
//   level. Only code that has checked cpu_isa() may call them. Include every header before the
//   region, so no inline function from elsewhere is compiled for the higher level.
// - Plain loops that the compiler vectorises run through isa_call, which calls the same functor
//   from a copy of the caller compiled for AVX2 when the CPU has it, so the loop inlined there is
//   vectorised 8 floats wide; otherwise the baseline copy runs.
//
// LUMEN_X86 is 1 on x86-64, where the regions and AVX2 copies exist; elsewhere isa_call calls
// the functor directly and the regions' code must be left out with #if LUMEN_X86.
#pragma once

#include "core/cpu_isa_level.h"
#include "lumen/cpu_isa.h"

#if defined(__x86_64__)
#define LUMEN_X86 1
// The features of x86-64-v3 and x86-64-v4, spelled out (clang has no "arch=" target).
#define LUMEN_TARGET_AVX2 __attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt")))
#define LUMEN_TARGET_AVX512                                                    \
  __attribute__((                                                              \
      target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt,avx512f,avx512bw," \
             "avx512dq,avx512vl,avx512cd")))
#if defined(__clang__)
#define LUMEN_AVX2_BEGIN \
  _Pragma(               \
      "clang attribute push(__attribute__((target(\"avx,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,\
popcnt\"))), apply_to = function)")
#define LUMEN_AVX512_BEGIN \
  _Pragma(                 \
      "clang attribute push(__attribute__((target(\"avx,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,\
popcnt,avx512f,avx512bw,avx512dq,avx512vl,avx512cd\"))), apply_to = function)")
#define LUMEN_ISA_END _Pragma("clang attribute pop")
#else
#define LUMEN_AVX2_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"arch=x86-64-v3\")")
#define LUMEN_AVX512_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"arch=x86-64-v4\")")
#define LUMEN_ISA_END _Pragma("GCC pop_options")
#endif
#else
#define LUMEN_X86 0
#define LUMEN_TARGET_AVX2
#define LUMEN_TARGET_AVX512
#define LUMEN_AVX2_BEGIN
#define LUMEN_AVX512_BEGIN
#define LUMEN_ISA_END
#endif

namespace lumen::cpu {

// cpu_isa(), read inline.
inline CpuIsa isa_level() {
  const int level = cpu_isa_level.load(std::memory_order_relaxed);
  return level >= 0 ? static_cast<CpuIsa>(level) : cpu_isa();
}
// True when the level in use is at least AVX2 (x86-64-v3).
inline bool has_avx2() {
  return isa_level() >= CpuIsa::kAvx2;
}
// True when the level in use is AVX-512 (x86-64-v4).
inline bool has_avx512() {
  return isa_level() >= CpuIsa::kAvx512;
}

#if LUMEN_X86
// flatten: f and everything it calls are inlined here, so they are compiled for AVX2 (without it
// GCC kept larger functors as calls into their baseline code: float Add ran 4 floats wide).
template <typename F, typename... Args>
LUMEN_TARGET_AVX2 __attribute__((flatten)) auto call_avx2(F& f, Args... args) {
  return f(args...);
}
#endif

// f(args...), from code compiled for AVX2 where the CPU has it (see the top of this file).
template <typename F, typename... Args>
inline auto isa_call(F& f, Args... args) {
#if LUMEN_X86
  if (has_avx2()) return call_avx2(f, args...);
#endif
  return f(args...);
}

}  // namespace lumen::cpu
