// The state behind lumen::cpu_isa() (lumen/cpu_isa.h), for code that checks the level per row or
// per chunk (backends/cpu/isa.h): an inline load, where a call to cpu_isa() crosses the PLT.
#pragma once

#include <atomic>

namespace lumen {

// The level cpu_isa() returns, as an int, or -1 before its first call. Written by cpu_isa() and
// set_cpu_isa_limit() only.
extern std::atomic<int> cpu_isa_level;

}  // namespace lumen
