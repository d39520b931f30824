// set_num_threads / num_threads: one process-wide count, applied per calling thread.
#include "runtime/threads.h"

#include <omp.h>

#include <atomic>
#include <string>

#include "lumen/error.h"
#include "lumen/threads.h"

namespace lumen {
namespace {

std::atomic<int> g_threads{0};
// Whether set_num_threads was ever called: until then each thread's own OpenMP setting (which a
// program may have chosen with omp_set_num_threads) stands.
std::atomic<bool> g_ever_set{false};

// OpenMP's team size before any setting: read once, at the first set_num_threads, before it
// changes anything.
int default_threads() {
  static const int kDefault = omp_get_max_threads();
  return kDefault;
}

}  // namespace

void set_num_threads(int n) {
  if (n < 0)
    throw InvalidArgument(
        "set_num_threads: the thread count must be 0 (the default) or more, got " +
        std::to_string(n));
  default_threads();
  g_threads.store(n);
  g_ever_set.store(true);
  apply_num_threads();
}

int num_threads() {
  const int n = g_threads.load();
  return n > 0 ? n : omp_get_max_threads();
}

void apply_num_threads() {
  if (!g_ever_set.load()) return;
  const int n = g_threads.load();
  const int want = n > 0 ? n : default_threads();
  if (omp_get_max_threads() != want) omp_set_num_threads(want);
}

}  // namespace lumen
