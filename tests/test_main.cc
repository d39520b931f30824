// main() of the unit and op test programs: GoogleTest's, plus --lumen-backends=LIST (comma-
// separated, e.g. cuda,cpu), the backends run_op compiles for (tests/ops/op_test_util.h),
// --lumen-cpu-isa=LEVEL (baseline, avx2 or avx512: the CPU kernels run at no more than that level,
// as on a CPU without the higher ones; lumen/cpu_isa.h), and a backtrace on stderr when a test
// crashes (where no sanitizer handles the signal).
#include <execinfo.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "lumen/cpu_isa.h"
#include "ops/op_test_util.h"

namespace {

// Prints the frames (module and offset: `addr2line -f -C -e MODULE OFFSET` names them), then
// dies of the signal as it would have.
void print_backtrace(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  constexpr char kHead[] = "\nfatal signal in a test; backtrace:\n";
  (void)!write(STDERR_FILENO, kHead, sizeof kHead - 1);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void backtrace_on_crash() {
  for (int sig : {SIGSEGV, SIGBUS, SIGILL}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
      std::signal(sig, print_backtrace);
  }
}

}  // namespace

int main(int argc, char** argv) {
  backtrace_on_crash();
  constexpr const char* kFlag = "--lumen-backends=";
  constexpr const char* kIsaFlag = "--lumen-cpu-isa=";
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kIsaFlag, std::strlen(kIsaFlag)) == 0) {
      const auto isa = lumen::parse_cpu_isa(argv[i] + std::strlen(kIsaFlag));
      if (!isa) {
        std::fprintf(stderr, "unknown %s (baseline, avx2 or avx512)\n", argv[i]);
        return 2;
      }
      const lumen::CpuIsa use = lumen::set_cpu_isa_limit(*isa);
      std::fprintf(stderr, "CPU kernels at %s\n", std::string(lumen::cpu_isa_name(use)).c_str());
      continue;
    }
    if (std::strncmp(argv[i], kFlag, std::strlen(kFlag)) != 0) {
      argv[kept++] = argv[i];
      continue;
    }
    std::vector<std::string>& backends = lumen::test::run_op_backends();
    backends.clear();
    std::string list = argv[i] + std::strlen(kFlag);
    for (size_t start = 0; start <= list.size();) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      backends.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  argc = kept;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
