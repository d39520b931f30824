// What the CUDA test programs share: whether this machine has a CUDA device, and the skip that
// says so where it has none (CI machines have no GPU; the GPU machine runs these tests).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "lumen/lumen.h"

namespace lumen::test {

// Whether the runtime found a CUDA backend with a device on this machine.
inline bool have_cuda() {
  Runtime rt;
  for (const std::string& b : rt.backends())
    if (b == "cuda") return true;
  return false;
}

}  // namespace lumen::test

// Skips the current test, with the reason, on a machine without a CUDA device.
#define SKIP_WITHOUT_CUDA()        \
  if (!::lumen::test::have_cuda()) \
  GTEST_SKIP() << "no CUDA device on this machine: CUDA tests skipped"
