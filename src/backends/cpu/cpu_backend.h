// The CPU backend (oneDNN and lumen's own OpenMP kernels). Only backends/registry.cc includes this.
#pragma once

#include "backends/backend.h"

namespace lumen::cpu {

// The process-wide CPU backend.
Backend& cpu_backend();

}  // namespace lumen::cpu
