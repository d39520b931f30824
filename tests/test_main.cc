// main() of the unit and op test programs: GoogleTest's, plus --lumen-backends=LIST (comma-
// separated, e.g. cuda,cpu), the backends run_op compiles for (tests/ops/op_test_util.h).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

int main(int argc, char** argv) {
  constexpr const char* kFlag = "--lumen-backends=";
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
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
