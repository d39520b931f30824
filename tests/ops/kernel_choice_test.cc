// The measured choice between Lumen's CPU kernels and oneDNN's (backends/cpu/kernel_choice.h)
// kept in the choice file (set_cpu_kernel_choice_file): a later process reads it instead of timing
// the node again; a file written for another build, lines cut short and an unwritable file only
// mean timing again.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/kernel_choice.h"
#include "lumen/cpu_isa.h"

namespace lumen {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines_of(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class KernelChoiceFile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::kernel_choice_measured())
      GTEST_SKIP() << "this CPU (below AVX-512, on x86) takes Lumen's kernels without timing";
    if (cpu_kernel_choice() != CpuKernelChoice::kMeasure)
      GTEST_SKIP() << "the choice is forced in this process";
    saved_ = cpu_kernel_choice_file();
    dir_ = fs::temp_directory_path() / ("lumen_kernel_choice_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    file_ = (dir_ / "sub" / "cpu_choices.tsv").string();  // the folder is created on first use
    set_cpu_kernel_choice_file(file_);
  }
  void TearDown() override {
    if (!dir_.empty()) {
      set_cpu_kernel_choice_file(saved_);
      fs::remove_all(dir_);
    }
  }

  // pick_lumen_kernel on `key` where Lumen's side takes `lumen_ms` and oneDNN's none; counts the
  // calls of either side in *calls.
  cpu::KernelChoice pick(const std::string& key, int lumen_ms, int* calls) {
    const auto nap = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
    return cpu::pick_lumen_kernel(
        key, [] {}, [](bool) {},
        [&] {
          ++*calls;
          nap(lumen_ms);
        },
        [&] {
          ++*calls;
          nap(lumen_ms == 0 ? 3 : 0);
        });
  }

  std::string saved_, file_;
  fs::path dir_;
};

TEST_F(KernelChoiceFile, ALaterProcessReadsTheChoiceInsteadOfTimingIt) {
  int calls = 0;
  const cpu::KernelChoice slow = pick("test node A", 3, &calls);
  EXPECT_GT(calls, 0);
  EXPECT_FALSE(slow.lumen);
  EXPECT_EQ(slow.why, "measured");
  const cpu::KernelChoice fast = pick("test node B", 0, &calls);
  EXPECT_TRUE(fast.lumen);
  std::vector<std::string> lines = lines_of(file_);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("lumen-cpu-choices\t1\t", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("test node A isa ", 0), 0u) << lines[1];

  // As a new process: the choices come from the file, nothing is timed.
  set_cpu_kernel_choice_file(file_);
  calls = 0;
  const cpu::KernelChoice again = pick("test node A", 0, &calls);
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(again.lumen);
  EXPECT_EQ(again.why, "measured earlier");
  EXPECT_NEAR(again.lumen_ms, slow.lumen_ms, 1e-3 * slow.lumen_ms);
  EXPECT_NEAR(again.onednn_ms, slow.onednn_ms, 1e-3 * slow.onednn_ms + 1e-6);
  EXPECT_TRUE(pick("test node B", 3, &calls).lumen);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(cpu::describe_choice(again, "Winograd").find("(measured earlier)") != std::string::npos,
            true);
}

TEST_F(KernelChoiceFile, LinesCutShortAreSkippedAndTheRestRead) {
  int calls = 0;
  pick("test node A", 3, &calls);
  {
    std::ofstream out(file_, std::ios::app);
    out << "test node C\tonednn\t1.5\n";             // a field missing
    out << "test node D\tneither\t1\t2\n";           // no such side
    out << "test node E\tlumen\tfast\t2\n";          // not a number
    out << "test node F isa whatever\tlumen\t1\t2";  // cut short before its newline
  }
  set_cpu_kernel_choice_file(file_);
  calls = 0;
  EXPECT_FALSE(pick("test node A", 0, &calls).lumen);
  EXPECT_EQ(calls, 0);
  for (const char* key : {"test node C", "test node D", "test node E"}) {
    calls = 0;
    const cpu::KernelChoice c = pick(key, 0, &calls);
    EXPECT_GT(calls, 0) << key;
    EXPECT_EQ(c.why, "measured") << key;
  }
}

TEST_F(KernelChoiceFile, AnotherBuildsFileIsStartedAfresh) {
  fs::create_directories(fs::path(file_).parent_path());
  {
    std::ofstream out(file_);
    out << "lumen-cpu-choices\t1\t/elsewhere/liblumen.so.0 1 2.3\tsome other CPU\n";
    out << "test node A isa avx512 threads 2\tlumen\t1\t2\n";
  }
  set_cpu_kernel_choice_file(file_);
  int calls = 0;
  EXPECT_FALSE(pick("test node A", 3, &calls).lumen);
  EXPECT_GT(calls, 0);
  const std::vector<std::string> lines = lines_of(file_);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].find("/elsewhere/"), std::string::npos);
  EXPECT_EQ(lines[1].find("\tonednn\t") != std::string::npos, true) << lines[1];
}

TEST_F(KernelChoiceFile, NoFileOrAnUnwritableOneOnlyMeansTimingAgain) {
  set_cpu_kernel_choice_file("");
  int calls = 0;
  EXPECT_FALSE(pick("test node A", 3, &calls).lumen);
  set_cpu_kernel_choice_file("");
  calls = 0;
  pick("test node A", 3, &calls);
  EXPECT_GT(calls, 0);
  EXPECT_FALSE(fs::exists(file_));

  // A folder where the file should be: nothing can be written, and nothing fails.
  fs::create_directories(file_);
  set_cpu_kernel_choice_file(file_);
  calls = 0;
  EXPECT_FALSE(pick("test node A", 3, &calls).lumen);
  EXPECT_GT(calls, 0);
}

}  // namespace
}  // namespace lumen
